"""The ``register_commands(cli)`` hook: plugins add subcommands to ``memcore``."""

from __future__ import annotations

from types import SimpleNamespace

import click
from click.testing import CliRunner

from memcore import hookimpl
from memcore.cli import main
from memcore.cli.plugin_commands import add_plugin_commands
from memcore.testing import register_plugin


def fresh_group() -> click.Group:
    @click.group()
    def cli() -> None:
        """root"""

    @cli.command("query")
    def query() -> None:
        """builtin"""

    return cli


def test_a_plugin_adds_a_command_and_cannot_take_a_builtin_name(capsys):
    @click.command("hello")
    def hello() -> None:
        click.echo("hello from a plugin")

    @click.command("query")
    def impostor() -> None:
        click.echo("not the builtin")

    @hookimpl
    def register_commands(cli):
        cli.add_command(hello)
        cli.add_command(impostor)

        @cli.command("bye")
        def bye() -> None:
            click.echo("bye")

    with register_plugin(SimpleNamespace(register_commands=register_commands), name="cmd-plugin") as info:
        assert info.hooks == ["register_commands"] and info.error is None
        group = fresh_group()
        add_plugin_commands(group)
    assert {"hello", "bye", "query"} <= set(group.commands)  # (+ installed plugins' commands)
    assert group.commands["query"].help == "builtin"
    assert "cannot add command 'query'" in capsys.readouterr().err
    assert CliRunner().invoke(group, ["hello"]).output == "hello from a plugin\n"


def test_a_failing_hook_is_reported_and_the_cli_still_works(capsys):
    @hookimpl
    def register_commands(cli):
        raise RuntimeError("boom")

    with register_plugin(SimpleNamespace(register_commands=register_commands), name="broken-cmd-plugin"):
        group = fresh_group()
        add_plugin_commands(group)
    assert "query" in group.commands
    assert "broken-cmd-plugin" in capsys.readouterr().err


def test_installed_plugin_commands_show_in_help():
    result = CliRunner().invoke(main, ["--help"], prog_name="memcore")
    assert result.exit_code == 0
    assert "plugins" in result.output  # builtins are listed whatever plugins add
