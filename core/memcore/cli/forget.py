"""``memcore forget``: forget one scope (a user, an agent, a run) of a memory on disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ._common import config_option, echo_json, load_cli_settings, open_memory, path_option, require_collection, scope_option


@click.command("forget")
@config_option()
@path_option("Collection directory (it must exist).", required=True)
@scope_option("The scope to forget: user_id=bob (repeatable to narrow: --scope user_id=bob --scope run_id=r1), or a JSON object.", required=True)
@click.option("--json", "as_json", is_flag=True, help='Print what was removed as JSON: {"scope", "records", "indexes", "state_keys"}.')
def forget(config: Path | None, path: Path, scope: dict[str, Any], as_json: bool) -> None:
    """Forget everything of a scope: its records, the records the service derived from
    them, their entries in every index and the scope's service state, in one commit.

    Calls Memory.forget through the declared service, then closes the memory, after which
    no file under --path holds the forgotten texts. A scope covers the narrower ones:
    --scope user_id=bob also forgets bob's runs.

    \b
    Examples:
      memcore forget --path ./mem --scope user_id=bob
      memcore forget --path ./mem -c memcore.toml --scope user_id=bob --scope run_id=r1 --json
    """
    require_collection(load_cli_settings(config), path)
    with open_memory(config, path) as memory:
        removed = memory.forget(scope)
    report = {"scope": scope, **removed}
    if as_json:
        echo_json(report)
        return
    click.echo(f"Forgot {json.dumps(scope, ensure_ascii=False)}: {removed['records']} record(s), {removed['state_keys']} state key(s).")
    for name, count in removed["indexes"].items():
        click.echo(f"  {name}: {count} entr{'y' if count == 1 else 'ies'}")
