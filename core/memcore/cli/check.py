"""``memcore info --check``: SQLite's integrity check plus a dry load of every index.

Nothing is written: the store is opened read-only and each index is built from its
stored definition and loaded from its saved files, as an open would but checking every
block of every payload file however large (an open samples files over 256 MiB), without
rebuilding. Statuses: ``ok`` (loads), ``rebuild`` (files missing, behind the log or
damaged: the next open rebuilds it from the store), ``broken`` (it cannot be built: see
:class:`memcore.BrokenIndexError`; rebuild or drop it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..indexes._broken import describe_failure
from ..indexes._index import IndexContext, SpaceInfo
from ..indexes._handle import IndexHandle, generation_of
from ..indexes._vector_reader import VectorReader

__all__ = ["check_collection"]


def _index_status(store: Any, path: Path, name: str, definition: dict[str, Any], spaces: dict[str, SpaceInfo]) -> dict[str, Any]:
    from .._plugins._host import get_registry

    try:
        reg = get_registry().get("indexes", definition["kind"], location=f"indexes.{name}.kind")
        config = reg.parse_config(dict(definition["config"]), f"indexes.{name}")
        context = IndexContext(name=name, spaces=spaces, kind=definition["kind"], vectors=VectorReader(store, name))

        def make() -> Any:
            return reg.build(config, context)

        handle = IndexHandle(
            name,
            definition["kind"],
            config,
            make(),
            make,
            directory=path / "indexes" / name,
            full_check=True,
            generation=generation_of(definition),
        )
    except Exception as exc:  # noqa: BLE001 - reported, like the open reports it
        return {"status": "broken", "error": describe_failure(exc)}
    try:
        saved = handle.load()
    except Exception as exc:  # noqa: BLE001 - reported, like the open reports it
        return {"status": "broken", "error": describe_failure(exc)}
    finally:
        handle.close_index()
    if saved is None or saved < store.log_start() or saved > store.last_seq():
        why = f"saved files unusable ({handle.load_error})" if handle.load_error else "saved files missing or behind the log"
        return {"status": "rebuild", "error": f"{why}: rebuilt from the store on the next open"}
    return {"status": "ok"}


def check_collection(store: Any, path: Path) -> dict[str, Any]:
    """``{"integrity": [problems], "indexes": {name: {"status", "error"?}}, "ok": bool}``."""
    integrity = store.integrity_check()
    pinned = store.state_items("spaces")
    spaces = {n: SpaceInfo(n, int(p.get("dim", 0)), str(p.get("embedder", ""))) for n, p in pinned.items() if isinstance(p, dict)}
    indexes = {name: _index_status(store, path, name, definition, spaces) for name, definition in store.state_items("indexes").items()}
    ok = not integrity and all(entry["status"] != "broken" for entry in indexes.values())
    return {"integrity": integrity, "indexes": indexes, "ok": ok}
