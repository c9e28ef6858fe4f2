"""``memcore plugins``: every plugin with its version, hooks, registered names and load error."""

from __future__ import annotations

import click

from ._common import echo_json


@click.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of plugin reports.")
@click.option("--verbose", "-v", is_flag=True, help="Show the full traceback of each plugin that failed to load.")
def plugins(as_json: bool, verbose: bool) -> None:
    """List installed plugins: builtins first, then entry points (group "memcore").

    For each plugin: name, version, distribution, whether it is builtin, the hooks it
    implements, the names it registers per category, and its load error if it failed
    (a broken plugin is skipped as a whole; memcore and the other plugins keep working).
    MEMCORE_PLUGINS (allow-list) and MEMCORE_DISABLE_PLUGINS (deny-list) control loading.
    A failed plugin shows the file and line that raised; --verbose adds the traceback (also
    logged at debug level: MEMCORE_LOG=console MEMCORE_LOG_LEVEL=debug).
    """
    from .._plugins._host import plugin_infos

    infos = plugin_infos()
    if as_json:
        echo_json([info.to_dict() for info in infos])
        return
    if not infos:
        click.echo("No plugins loaded (check MEMCORE_PLUGINS / MEMCORE_DISABLE_PLUGINS).")
        return
    failed = [i for i in infos if i.error]
    for info in infos:
        origin = ", ".join(x for x in (info.distribution, "builtin" if info.builtin else None) if x)
        status = click.style("FAILED", fg="red", bold=True) if info.error else click.style("ok", fg="green")
        click.echo(f"{click.style(info.name, bold=True)} {info.version or '?'}" + (f" ({origin})" if origin else "") + f"  [{status}]")
        if info.error:
            click.secho(f"    error: {info.error}", fg="red")
            if info.where:
                click.echo(f"    at: {info.where}")
            if verbose and info.traceback:
                click.echo("    " + info.traceback.rstrip("\n").replace("\n", "\n    "))
            continue
        if info.registers:
            for category, names in info.registers.items():
                click.echo(f"    {category}: {', '.join(names)}")
        else:
            click.echo("    registers nothing")
        if info.hooks:
            click.echo(f"    hooks: {', '.join(info.hooks)}")
    loaded = len(infos) - len(failed)
    summary = f"{len(infos)} plugin(s): {loaded} loaded, {len(failed)} failed"
    click.echo()
    if failed:
        click.secho(summary + f" ({', '.join(i.name for i in failed)})", fg="red", err=False)
    else:
        click.echo(summary)
