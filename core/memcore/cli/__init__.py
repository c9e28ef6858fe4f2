"""The ``memcore`` command line: ``plugins``, ``ingest``, ``query``, ``forget``, ``info``, ``demo``, ``eval``,
``index``, ``service``, ``migrate``, and the record verbs ``get``, ``count``, ``delete``, ``history``.

Every command has ``--help``. Machine output with ``--json`` (stdout holds exactly one
JSON document); progress bars and notes go to stderr. A :class:`memcore.MemcoreError`
(bad settings, unknown component, bad input, locked collection...) is printed as
``Error: <message>`` on stderr with exit code 2, without a traceback.

Run it as ``memcore ...`` (console script) or ``python -m memcore.cli ...``.
"""

from __future__ import annotations

import os
from typing import Any

import click

from ..errors import MemcoreError
from ._common import CliError

__all__ = ["main"]


class MemcoreGroup(click.Group):
    """A click group that reports memcore errors as ``Error: ...`` (exit 2) instead of a traceback.

    OS errors (a file that cannot be read, a directory in the way) are reported the same
    way with exit code 1.
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MemcoreError as exc:
            raise CliError(str(exc)) from None
        except OSError as exc:  # unreadable file, directory in the way...: a message, exit 1
            raise click.ClickException(str(exc)) from None

    def list_commands(self, ctx: click.Context) -> list[str]:
        # help lists commands in the order a new user needs them, not alphabetically
        self._add_plugin_commands()
        return list(self.commands)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            self._add_plugin_commands()
        return super().get_command(ctx, cmd_name)

    _plugin_commands_added = False

    def _add_plugin_commands(self) -> None:
        """Call every plugin's ``register_commands(cli)`` once (see memcore.hookspecs)."""
        if self._plugin_commands_added:
            return
        self._plugin_commands_added = True
        from .plugin_commands import add_plugin_commands

        add_plugin_commands(self)


def _version() -> str:
    from .. import __version__

    return __version__


@click.group(cls=MemcoreGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(_version(), "--version", "-V", prog_name="memcore")
@click.option(
    "--log",
    "log_mode",
    type=click.Choice(["json", "console", "off"], case_sensitive=False),
    default=None,
    help="Show memcore's structured log events on stderr (sets MEMCORE_LOG). Default: $MEMCORE_LOG, else off.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default=None,
    help="Minimum level of the events shown (sets MEMCORE_LOG_LEVEL; default info).",
)
def main(log_mode: str | None, log_level: str | None) -> None:
    """memcore: plugin-based memory and retrieval for LLM agents and RAG.

    \b
    Typical session:
      memcore plugins                                   # what is installed
      memcore demo                                      # the defaults on a sample conversation
      memcore ingest --config memcore.toml --path ./mem data.jsonl
      memcore query  --config memcore.toml --path ./mem "where did Alice travel?"
      memcore forget --path ./mem --scope user_id=bob
      memcore info   --path ./mem
      memcore eval beir --data ./scifact --split test --config memcore.toml
    """
    from .._util.log import configure_logging

    if log_mode is not None:
        os.environ["MEMCORE_LOG"] = log_mode.lower()
    if log_level is not None:
        os.environ["MEMCORE_LOG_LEVEL"] = log_level.lower()
    if log_mode is not None or log_level is not None:
        configure_logging(log_mode.lower() if log_mode else None, log_level)


from .plugins_cmd import plugins  # noqa: E402
from .demo import demo  # noqa: E402
from .ingest import ingest  # noqa: E402
from .query import query  # noqa: E402
from .forget import forget  # noqa: E402
from .info import info  # noqa: E402
from .eval_cmd import eval_group  # noqa: E402
from .index_cmd import index_group  # noqa: E402
from .records import count, delete, get, history  # noqa: E402
from .service_cmd import service_group  # noqa: E402
from .migrate import migrate  # noqa: E402

main.add_command(plugins)
main.add_command(demo)
main.add_command(ingest)
main.add_command(query)
main.add_command(forget)
main.add_command(info)
main.add_command(index_group)
main.add_command(eval_group)
main.add_command(get)
main.add_command(count)
main.add_command(delete)
main.add_command(history)
main.add_command(service_group)
main.add_command(migrate)
