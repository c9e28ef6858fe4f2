"""Shared pieces of the ``memcore`` commands: errors, JSON output, progress bars, opening.

Conventions every command follows:

- results go to stdout (``--json``: one JSON document and nothing else), progress bars and
  notes to stderr;
- a :class:`memcore.MemcoreError` becomes ``Error: <message>`` on stderr and exit code 2
  (the same code click uses for usage errors), never a traceback.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar

import click

from ..errors import ConfigError, NotFoundError

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

EXIT_ERROR = 2
"""Exit code of a MemcoreError (bad config, bad input, locked collection...)."""


class CliError(click.ClickException):
    """An error shown as ``Error: <message>`` on stderr, exit code 2."""

    exit_code = EXIT_ERROR


class JsonParam(click.ParamType):  # type: ignore[type-arg]  # generic only since click 8.2; click>=8.1 is supported
    """A JSON object given on the command line (``--where '{"speaker": "Alice"}'``)."""

    name = "JSON"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, Mapping):
            return dict(value)
        try:
            data = json.loads(value)
        except json.JSONDecodeError as exc:
            self.fail(f"not valid JSON ({exc.msg} at column {exc.colno}): {value!r}", param, ctx)
        except RecursionError:
            self.fail("JSON nested too deeply", param, ctx)
        if not isinstance(data, dict):
            self.fail(f"expected a JSON object ({{...}}), got {type(data).__name__}: {value!r}", param, ctx)
        return data


JSON_OBJECT = JsonParam()

SCOPE_FIELDS = ("user_id", "agent_id", "run_id")


class ScopeParam(click.ParamType):  # type: ignore[type-arg]  # generic only since click 8.2
    """One scope field ``user_id=alice`` (repeatable), or a whole scope as JSON (``'{"user_id": "alice"}'``)."""

    name = "KEY=VALUE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, Mapping):
            return dict(value)
        if value.lstrip().startswith("{"):
            return JSON_OBJECT.convert(value, param, ctx)
        key, sep, field_value = value.partition("=")
        key = key.strip()
        if not sep or not key or not field_value:
            self.fail(f"expected KEY=VALUE with KEY one of {', '.join(SCOPE_FIELDS)} (e.g. user_id=alice), got {value!r}", param, ctx)
        return {key: field_value}


def merge_scope(ctx: click.Context, param: click.Parameter, values: tuple[dict[str, Any], ...]) -> dict[str, Any] | None:
    """The repeated ``--scope`` values as one scope dict (None when none was given)."""
    if not values:
        return None
    merged: dict[str, Any] = {}
    for part in values:
        for key, value in part.items():
            if key not in SCOPE_FIELDS:
                raise click.BadParameter(f"unknown scope field {key!r}; use {', '.join(SCOPE_FIELDS)}", ctx=ctx, param=param)
            if merged.setdefault(key, value) != value:
                raise click.BadParameter(f"{key} is given twice ({merged[key]!r} and {value!r})", ctx=ctx, param=param)
    return merged


def scope_option(help: str, *, required: bool = False) -> Callable[[F], F]:
    """The ``--scope KEY=VALUE`` option (repeatable; a JSON object is accepted too)."""
    return click.option("--scope", "scope", type=ScopeParam(), multiple=True, required=required, callback=merge_scope, metavar="KEY=VALUE", help=help)


def echo_json(data: Any) -> None:
    """Print one JSON document to stdout."""
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=_json_default))


def _json_default(value: Any) -> Any:
    try:
        import numpy as np

        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, np.ndarray):
            return value.tolist()
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def note(message: str) -> None:
    """A human note on stderr (never mixed into --json output)."""
    click.echo(message, err=True)


def progress(items: Sequence[T], label: str, *, batch: int) -> Iterator[Sequence[T]]:
    """Yield ``items`` in batches of ``batch`` while drawing a progress bar on stderr."""
    with click.progressbar(length=len(items), label=label, file=sys.stderr, show_pos=True) as bar:
        for start in range(0, len(items), batch):
            chunk = items[start : start + batch]
            yield chunk
            bar.update(len(chunk))


def shorten(text: str, width: int) -> str:
    """One line of at most ``width`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(1, width - 1)] + "…"


def human_bytes(n: int | None) -> str:
    """1536 -> '1.5 KiB'."""
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


def dir_bytes(path: Path) -> int:
    """Bytes of every file under ``path`` (0 when absent)."""
    if not path.exists():
        return 0
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def load_cli_settings(config: str | os.PathLike[str] | None, *, read_only: bool = False) -> Any:
    """Settings from ``--config`` (or the environment and defaults), optionally read-only.

    ``read_only`` sets ``read_only = true`` on stores that have the option (SQLite), so
    reading commands never take the writer lock.
    """
    from .._plugins._host import get_registry
    from ..settings import load_settings

    settings = load_settings(config)
    if read_only:
        store = dict(settings.store)
        kind = store.get("kind")
        reg = get_registry().entries["stores"].get(kind) if isinstance(kind, str) else None
        if reg is not None and "read_only" in reg.config_model.model_fields:
            store["read_only"] = True
            settings = settings.model_copy(update={"store": store})
    return settings


def directory_settings(path: str | os.PathLike[str] | None) -> Any:
    """The environment and defaults, with the store the memory directory ``path`` names
    (``store.json``: a memory on another store than the default)."""
    from ..api._store_file import read_store_entry
    from ..settings import load_settings

    named = read_store_entry(Path(path)) if path is not None else None
    return load_cli_settings(None) if named is None else load_settings(None, base={"store": named[0]})


def require_collection(settings: Any, path: str | os.PathLike[str] | None) -> None:
    """For a file-backed (SQLite) store: fail clearly when ``path`` holds no collection yet."""
    store = dict(settings.store)
    if store.get("kind") != "sqlite":
        return
    directory = path if path is not None else settings.path
    if directory is None:
        raise ConfigError(
            "the sqlite store keeps a memory in a directory: give it with --path DIR "
            "(the directory `memcore ingest --path DIR` wrote), or set `path` in the settings file",
            location="store",
        )
    file = Path(directory) / store.get("filename", "store.sqlite3")
    if not file.is_file():
        raise NotFoundError(f"no memcore collection at {directory} (no {file.name}); create one with `memcore ingest` first")


@contextlib.contextmanager
def progress_bar(label: str, total: int) -> Iterator[Any]:
    """A click progress bar on stderr; yields its ``update(n)`` (the CLI's progress reporter)."""
    with click.progressbar(length=total, label=label, file=sys.stderr, show_pos=True) as bar:
        yield bar.update


def open_settings(settings: Any, path: str | os.PathLike[str] | None, **overrides: Any) -> Any:
    """``memcore.open`` with progress bars on stderr for long work (filling a new index...);
    the hints of opening (the hashing fallback at creation) are printed on stderr.

    ``settings`` None: the memory's own stored settings (a new memory: the defaults), with
    ``overrides`` over them."""
    from ..api import _open as api
    from .._util.progress import use_progress

    with use_progress(progress_bar), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the hints: printed below, once
        memory = api.open(settings, path=path, **overrides)
    for hint in memory.hints:
        note(hint)
    return memory


def _read_only_override(path: str | os.PathLike[str] | None) -> dict[str, Any]:
    """``store.read_only = true`` for a memory opened with its stored settings, when the
    store kind (the one its directory names, else the environment's and defaults') has the option."""
    from .._plugins._host import get_registry

    kind = dict(directory_settings(path).store).get("kind")
    reg = get_registry().entries["stores"].get(kind) if isinstance(kind, str) else None
    return {"store": {"read_only": True}} if reg is not None and "read_only" in reg.config_model.model_fields else {}


def open_memory(config: str | os.PathLike[str] | None, path: str | os.PathLike[str] | None, *, read_only: bool = False, must_exist: bool | None = None) -> Any:
    """``memcore.open`` for a command (read-only for the reading commands).

    Without ``config`` the memory at ``path`` opens with the settings it keeps about
    itself (``--path`` alone is enough); a new memory gets the defaults.
    ``must_exist`` (default: ``read_only``): a directory without a collection is an error
    instead of a new, empty memory.
    """
    from .._plugins._host import get_registry
    from ..api._check import check_settings

    exists = read_only if must_exist is None else must_exist
    if config is None:
        if exists:
            base = directory_settings(path)
            try:
                require_collection(base, path)
            except NotFoundError:
                check_settings(base, get_registry())  # a bad environment is reported before a missing collection
                raise
        return open_settings(None, path, **(_read_only_override(path) if read_only else {}))
    settings = load_cli_settings(config, read_only=read_only)
    if exists:
        check_settings(settings, get_registry())  # a bad config is reported before a missing collection
        require_collection(settings, path)
    return open_settings(settings, path)


def stored_settings(path: str | os.PathLike[str] | None) -> dict[str, Any] | None:
    """The settings the memory at ``path`` keeps about itself (None: none, or no memory)."""
    from .._plugins._host import get_registry
    from ..api._stored import peek

    if path is None:
        return None
    stored = peek(directory_settings(path), get_registry(), Path(path))
    return stored.settings if stored is not None else None


def declared_service(config: str | os.PathLike[str] | None, path: str | os.PathLike[str] | None = None) -> str:
    """The kind of service the settings declare (``default`` unless they name another);
    without ``config``, the one the memory at ``path`` was made with."""
    if config is None:
        service = (stored_settings(path) or {}).get("service")
        if isinstance(service, Mapping) and isinstance(service.get("kind"), str):
            return str(service["kind"])
    return str(dict(load_cli_settings(config).service).get("kind", "default"))


DEFAULT_CONFIG_HELP = "Settings file (TOML/YAML) declaring the memory. Default: MEMCORE_* environment and the built-in defaults."


def config_option(help: str = DEFAULT_CONFIG_HELP, *, required: bool = False, exists: bool = False) -> Callable[[F], F]:
    """The ``--config/-c`` option every command that reads settings shares (a TOML/YAML file)."""
    return click.option("--config", "-c", "config", type=click.Path(exists=exists, dir_okay=False, path_type=Path), required=required, default=None, help=help)


def path_option(help: str, *, required: bool = False) -> Callable[[F], F]:
    """The ``--path/-p`` collection-directory option every command over a memory shares."""
    # no explicit default: click 8.3 skips the required check of an option given default=None
    return click.option("--path", "-p", "path", type=click.Path(file_okay=False, path_type=Path), required=required, help=help)
