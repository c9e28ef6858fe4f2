"""A sample memory for migration tests (``memcore migrate``) and a snapshot of everything a store holds.

:func:`build_migration_memory` writes a memory with two spaces (one record in three gets its
second vector from the embedder), several scopes, links pointing forward and backward, an update, a delete and
service state; :func:`store_snapshot` reads back every record (vectors as bytes), index
membership, state and history of a store, comparable between two stores whatever their
kind; :func:`search_results` runs the same vector searches on a memory's two indexes. Used by
``tests/test_cli_migrate.py`` and the PostgreSQL round trip of memcore-postgres.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..api._open import open as open_memory
from ..model._query import Query
from ..model._record import Link, Record, Scope
from ..stores._store import Store

__all__ = ["MIGRATION_SETTINGS", "build_migration_memory", "store_snapshot", "search_results"]

MIGRATION_SETTINGS: dict[str, Any] = {
    "spaces": {"v": {"dim": 8}, "w": {"dim": 8, "embedder": {"kind": "hashing", "dim": 8}}},
    "indexes": {"dense": {"kind": "exact", "space": "v"}, "small": {"kind": "exact", "space": "w", "metric": "l2"}},
    "pipeline": [{"kind": "recall", "index": "dense"}, {"kind": "limit"}],
}
"""Settings of the sample memory: two spaces (v: caller vectors; w: caller vectors or
the hashing embedder's), an exact index on each."""


def build_migration_memory(path: Path, n: int = 23, settings: dict[str, Any] | None = None) -> None:
    """Write the sample memory at ``path``: ``n`` records in two spaces (one in three gets
    its second vector from the embedder) and six scopes, links forward and backward, an
    update (``r3``), a delete (``r7``) and service state in two namespaces."""
    if n < 8:
        raise ValueError("the sample memory has at least 8 records (r3 is updated, r7 deleted)")
    rng = np.random.default_rng(7)
    records = []
    for i in range(n):
        vectors = {"v": rng.standard_normal(8).astype(np.float32)}
        if i % 3:
            vectors["w"] = rng.standard_normal(8).astype(np.float32)
        links: tuple[Link, ...] = (Link(f"r{i + 5}", "next", 0.5),) if i + 5 < n else ()
        links += (Link("r0", "first"),) if i > 0 and i % 4 == 0 else ()
        scope = Scope(user_id=f"u{i % 3}", agent_id="a" if i % 2 else None)
        records.append(Record(f"r{i}", f"text number {i}", {"n": i, "tag": "ab"[i % 2], "deep": {"x": [i, 1.5]}}, vectors, links, scope))
    with open_memory(settings or MIGRATION_SETTINGS, path=path) as m:
        m.collection.insert(records)
        m.collection.update("r3", text="text three, changed", metadata={"n": 3, "changed": True}, vectors=records[3].vectors)
        m.collection.delete("r7")
        m.collection.set_state({("svc", "counter"): {"a": 1, "b": [1, 2]}, ("svc@scope:x", "k"): "v"})


def store_snapshot(store: Store, *, history: bool = True) -> dict[str, Any]:
    """Everything a store says about its memory, comparable between two stores: records
    (vectors as bytes), membership, state (the settings document without its store entry,
    which differs by design) and, with ``history``, every kept version."""
    ids = store.ids()
    records = {}
    for r in store.get(ids):
        assert r is not None
        records[r.id] = (
            r.text,
            r.metadata,
            r.scope or Scope(),
            r.created_at,
            r.updated_at,
            sorted((link.target, link.relation, link.weight) for link in r.links),
            {space: np.asarray(v, dtype=np.float32).tobytes() for space, v in r.vectors.items()},
        )
    state = {ns: store.state_items(ns) for ns in store.state_namespaces()}
    document = state.get("memory", {}).get("settings")
    if document is not None:
        state["memory"] = {**state["memory"], "settings": {k: v for k, v in document.items() if k not in ("store", "omitted")}}
    out = {"ids": ids, "records": records, "members": {k: sorted(v) for k, v in store.memberships(ids).items()}, "state": state}
    if history:
        out["history"] = {rid: store.history(rid) for rid in store.history_ids()}
    return out


def search_results(memory: Any) -> list[list[tuple[str, float]]]:
    """Ten vector searches (five per index) on a memory of the sample settings: ``[(id, score)]`` each."""
    rng = np.random.default_rng(3)
    out = []
    for _ in range(5):
        for index, dim, space in (("dense", 8, "v"), ("small", 8, "w")):
            hits = memory.collection.search_index(index, Query(vectors={space: rng.standard_normal(dim).astype(np.float32)}), 10)
            out.append([(h.id, round(h.score, 5)) for h in hits])
    return out
