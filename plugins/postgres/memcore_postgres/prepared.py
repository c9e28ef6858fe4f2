"""A batch's statement parameters, computed in the client before its transaction opens.

Everything that does not depend on what the database holds (the columns of every upserted
record, its vectors per space, its links, the state rows) is built once here, outside the
transaction and outside any retry of it: the transaction's time, and with it the time its
row locks are held, is spent in the server.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Sequence

from memcore.plugin import Record, WriteBatch, involved_ids

from .filters import metadata_json

__all__ = ["PreparedBatch", "RECORD_COLUMNS"]

RECORD_COLUMNS = ("id", "text", "metadata", "user_id", "agent_id", "run_id", "created_at", "updated_at")
"""The columns of ``records`` a batch writes, in the order of :attr:`PreparedBatch.rows`."""


def _scope_part(name: str) -> Callable[[Record], Any]:
    def get(r: Record) -> Any:
        return None if r.scope is None else getattr(r.scope, name)

    return get


_COLUMN: dict[str, Callable[[Record], Any]] = {
    "id": lambda r: r.id,
    "text": lambda r: r.text,
    "metadata": lambda r: metadata_json(r.metadata),
    "user_id": _scope_part("user_id"),
    "agent_id": _scope_part("agent_id"),
    "run_id": _scope_part("run_id"),
    "created_at": lambda r: r.created_at,
    "updated_at": lambda r: r.updated_at,
}
"""How each column of ``records`` is read from a :class:`Record`."""


class PreparedBatch:
    """The parts of a :class:`WriteBatch` as statement parameters.

    - ``deletes``: the deleted ids, once each, in order;
    - ``involved``: every id the batch touches directly (locked before it is read);
    - ``upserts``: the last occurrence of each upserted id, in order of first occurrence;
    - ``columns``: one list per :data:`RECORD_COLUMNS` entry, aligned with ``upserts`` (a
      repeated id keeps its first occurrence's ``created_at``);
    - ``vectors``: space -> (ids, vectors);
    - ``links``: the links of the upserted records as four columns;
    - ``targets``: link targets the batch does not upsert (they must exist: locked and checked);
    - ``state``: ``(namespace, key, JSON text or None)``.
    """

    def __init__(self, batch: WriteBatch):
        self.batch = batch
        self.deletes: list[str] = list(dict.fromkeys(batch.deletes))
        last = {r.id: r for r in batch.upserts}  # a repeated id ends as its last occurrence
        self.upserts: list[Record] = list(last.values())
        self.involved: list[str] = sorted(involved_ids(batch))
        created: dict[str, float] = {}
        if len(last) != len(batch.upserts):
            for r in reversed(batch.upserts):
                created[r.id] = r.created_at
        self.columns: tuple[list[Any], ...] = tuple(
            [created[r.id] for r in self.upserts] if name == "created_at" and created else list(map(_COLUMN[name], self.upserts)) for name in RECORD_COLUMNS
        )
        self.vectors: dict[str, tuple[list[str], list[Any]]] = {}
        for r in self.upserts:
            for space, vector in r.vectors.items():
                ids, values = self.vectors.setdefault(space, ([], []))
                ids.append(r.id)
                values.append(vector)
        links = [(r.id, link.target, link.relation, float(link.weight)) for r in self.upserts for link in r.links]
        self.links: tuple[list[Any], ...] = tuple(list(column) for column in zip(*links)) if links else ()
        self.targets: list[str] = sorted({link.target for r in self.upserts for link in r.links} - last.keys())
        self.state: list[tuple[str, str, str | None]] = [(ns, key, None if value is None else json.dumps(value)) for (ns, key), value in batch.state.items()]

    def split(self, stored: dict[str, Any]) -> tuple[list[int], list[int]]:
        """Positions in ``upserts`` of the records the store holds (rewritten in place) and of the new ones."""
        old = [i for i, r in enumerate(self.upserts) if r.id in stored]
        if not old:
            return [], list(range(len(self.upserts)))
        held = set(old)
        return old, [i for i in range(len(self.upserts)) if i not in held]

    def column_rows(self, positions: Sequence[int], names: Sequence[str]) -> tuple[list[Any], ...]:
        """The columns ``names`` of the upserts at ``positions`` (what ``unnest`` takes)."""
        every = len(positions) == len(self.upserts)
        out = []
        for name in names:
            column = self.columns[RECORD_COLUMNS.index(name)]
            out.append(column if every else [column[i] for i in positions])
        return tuple(out)
