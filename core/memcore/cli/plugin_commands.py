"""Subcommands from plugins: the ``register_commands(cli)`` hook, called once per CLI run.

Each plugin's hook implementation gets a view of the root group that refuses names
already taken (builtin commands or another plugin's); a plugin whose hook raises is
reported on stderr and skipped, like a broken plugin anywhere else in memcore.
"""

from __future__ import annotations

from typing import Any

import click

from .._util.log import get_logger

__all__ = ["add_plugin_commands"]

log = get_logger("memcore.cli")


class _Registrar:
    """What a plugin's ``register_commands`` sees as ``cli``: add_command / command / group."""

    def __init__(self, group: click.Group, plugin: str):
        self._group = group
        self._plugin = plugin

    def add_command(self, command: click.Command, name: str | None = None) -> None:
        name = name or command.name
        if name in self._group.commands:
            click.echo(f"memcore: plugin {self._plugin!r} cannot add command {name!r}: the name is taken", err=True)
            log.warning("plugin.command_refused", plugin=self._plugin, command=name)
            return
        self._group.add_command(command, name)

    def command(self, *args: Any, **kwargs: Any) -> Any:
        def decorator(f: Any) -> click.Command:
            cmd: click.Command = click.command(*args, **kwargs)(f)
            self.add_command(cmd)
            return cmd

        return decorator

    def group(self, *args: Any, **kwargs: Any) -> Any:
        def decorator(f: Any) -> click.Group:
            grp: click.Group = click.group(*args, **kwargs)(f)
            self.add_command(grp)
            return grp

        return decorator


def add_plugin_commands(group: click.Group) -> None:
    """Let every loaded plugin add its subcommands to ``group``."""
    from .._plugins._host import get_host

    host = get_host()
    for impl in host.pm.hook.register_commands.get_hookimpls():
        try:
            host.hook_of(impl.plugin, "register_commands")(cli=_Registrar(group, impl.plugin_name))  # through pluggy
        except Exception as exc:  # noqa: BLE001 - one broken plugin never breaks the CLI
            click.echo(f"memcore: plugin {impl.plugin_name!r} failed to add its commands: {type(exc).__name__}: {exc}", err=True)
            log.warning("plugin.commands_failed", plugin=impl.plugin_name, error=f"{type(exc).__name__}: {exc}")
