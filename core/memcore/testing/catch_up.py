"""Catching up with another process's writes: the steps and the check, for every store a
second process can open at once (the SQLite store read-only, the postgres store).

Each step: the other collection searches (its indexes current), the writer commits one kind
of change, and the other's next search must show it -- hits, scores and the records
attached -- as a collection opened after the write does::

    from memcore.testing.catch_up import CATCH_UP_STEPS, check_step_seen

    @pytest.mark.parametrize("step", range(len(CATCH_UP_STEPS)))
    def test_each_write_is_seen(writer, other, open_fresh, step):
        check_step_seen(writer, other, open_fresh, step)

The writer's index is named ``vec``, over the space :data:`SPACE` of :data:`DIM` dimensions.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..collection._collection import Collection
from ..model._query import Query

__all__ = ["DIM", "SPACE", "CATCH_UP_STEPS", "unit", "record", "view", "check_step_seen"]

DIM = 8
SPACE = "dense"


def unit(seed: int) -> np.ndarray:
    """A unit vector of :data:`DIM` dimensions, the same for the same seed."""
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def record(i: int, **extra: Any) -> dict[str, Any]:
    """Record ``r<i>``, its vector :func:`unit` of ``i``."""
    return {"id": f"r{i}", "text": f"record {i}", "vectors": {SPACE: unit(i)}, "metadata": {"i": i}, **extra}


def view(col: Collection, q: np.ndarray, k: int = 5) -> list[tuple[str, float, str, dict[str, Any], list[str], Any]]:
    """What a search of index ``vec`` shows: ids, scores and the attached records' fields."""
    shown = []
    for h in col.retrieve(Query(vectors={SPACE: q}, k=k), index="vec"):
        r = h.record
        assert r is not None, h.id
        shown.append((h.id, round(h.score, 5), r.text, r.metadata, [link.target for link in r.links], r.scope))
    return shown


CATCH_UP_STEPS: list[tuple[str, Callable[[Collection], Any], np.ndarray]] = [
    ("insert", lambda w: w.insert([record(50)]), unit(50)),
    ("vector update", lambda w: w.update("r3", vectors={SPACE: unit(999)}), unit(999)),
    ("old vector gone", lambda w: None, unit(3)),
    ("metadata update", lambda w: w.update("r4", metadata={"i": 4, "changed": True}), unit(4)),
    ("text update", lambda w: w.update("r5", text="rewritten", vectors={SPACE: unit(5)}), unit(5)),
    ("link", lambda w: w.link("r6", "r7"), unit(6)),
    ("delete", lambda w: w.delete("r8"), unit(8)),
    ("forget a scope", lambda w: w.forget({"user_id": "bob"}), unit(102)),
    ("several batches", lambda w: [w.insert([record(60 + j)]) for j in range(3)], unit(61)),
    ("prune past the other", lambda w: _insert_and_flush(w, record(70)), unit(70)),
]
"""``(name, write, query)``: one kind of change each, and a query whose hits show it. The
writer starts with records 0-39 and 100-104 (scope ``{"user_id": "bob"}``)."""


def _insert_and_flush(writer: Collection, item: dict[str, Any]) -> None:
    writer.insert([item])
    writer.flush()  # prunes the log as far as the writer's indexes applied (a store may keep more)


def check_step_seen(writer: Collection, other: Collection, open_fresh: Callable[[], Collection], step: int) -> None:
    """Run the steps before ``step`` (each seen once by ``other``), then check that ``other``'s
    next search after step ``step`` shows what a collection opened afresh shows."""
    for _, write, q in CATCH_UP_STEPS[:step]:
        view(other, q)
        write(writer)
    name, write, q = CATCH_UP_STEPS[step]
    assert view(other, q) == view(writer, q)  # primed: current before the write
    write(writer)
    seen = view(other, q)
    fresh = open_fresh()
    try:
        assert seen == view(fresh, q) == view(writer, q), name
    finally:
        fresh.close()
