"""``memcore service check|repair``: the consistency of a memory's service state on disk.

Both open the memory at ``--path`` with the settings of ``--config`` (they name the
service). ``check`` reads only; ``repair`` fixes what ``check`` finds
(:meth:`memcore.Memory.repair_service`). Exit status 1 when problems are found (``check``)
or remain after the repair (``repair``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ._common import config_option, echo_json, load_cli_settings, open_memory, path_option, require_collection

CONFIG = config_option("Settings file (TOML/YAML) declaring the memory: it names the service whose state is checked.")
PATH = path_option("Collection directory (it must exist).", required=True)
JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def _echo_problems(problems: list[dict[str, Any]], indent: str = "  ") -> None:
    for problem in problems:
        click.echo(f"{indent}{problem['kind']}: {problem['message']}" + (f" [scope {problem['scope']}]" if problem["scope"] else ""))


@click.group("service")
def service_group() -> None:
    """Check or repair the state a memory's service keeps beside its records.

    \b
      memcore service check  --path ./mem --config memcore.toml
      memcore service repair --path ./mem --config memcore.toml --json
    """


@service_group.command("check")
@CONFIG
@PATH
@JSON
def check_cmd(config: Path | None, path: Path, as_json: bool) -> None:
    """List the inconsistencies between the service's state and its records (reads only);
    exit status 1 when there are any."""
    settings = load_cli_settings(config, read_only=True)
    require_collection(settings, path)
    with open_memory(config, path, read_only=True) as memory:
        problems = [p.as_dict() for p in memory.check_service()]
    kind = dict(settings.service).get("kind", "default")
    if as_json:
        echo_json({"service": kind, "ok": not problems, "problems": problems})
    else:
        click.echo(f"service {kind}: {'ok' if not problems else f'{len(problems)} problem(s); fix with `memcore service repair`'}")
        _echo_problems(problems)
    if problems:
        raise SystemExit(1)


@service_group.command("repair")
@CONFIG
@PATH
@JSON
def repair_cmd(config: Path | None, path: Path, as_json: bool) -> None:
    """Fix the inconsistencies ``memcore service check`` reports (Memory.repair_service);
    running it again is harmless. Exit status 1 when problems remain."""
    settings = load_cli_settings(config)
    require_collection(settings, path)
    with open_memory(config, path, must_exist=True) as memory:
        result = memory.repair_service()
    repaired = [p.as_dict() for p in result["repaired"]]
    remaining = [p.as_dict() for p in result["problems"]]
    kind = dict(settings.service).get("kind", "default")
    if as_json:
        echo_json({"service": kind, "ok": not remaining, "repaired": repaired, "problems": remaining})
    else:
        click.echo(f"service {kind}: repaired {len(repaired)} problem(s)" + (f"; {len(remaining)} remain" if remaining else "; consistent now"))
        _echo_problems(repaired)
        if remaining:
            click.echo("  remaining:")
            _echo_problems(remaining, "    ")
    if remaining:
        raise SystemExit(1)
