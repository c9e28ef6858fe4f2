"""The catch-up read of the SQLite store: the log tail of several indexes in one statement.

A process that does not write a memory (a reader, ``read_only``) catches its indexes up
from the op log before each search (:meth:`memcore.Store.read_tail`). Most searches find
nothing new, so the store answers that first from ``PRAGMA data_version`` alone: SQLite
changes the value a connection reads whenever another connection committed since that
connection last read it, so an unchanged value means the log, the records and the vector
files are exactly as the last tail read found them (:class:`TailMark`). Otherwise one
statement reads the log start, the last sequence number, the sequence number of the last
change of an index definition (``meta`` key ``definitions_seq``, written by the batch that
made it; absent in a file no such batch wrote since: 0) and the ops of every asked index
(one snapshot: a prune between them cannot open a gap).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Mapping

from ._sqlite_schema import unpack_ops
from ._store import LogRead, Op, TAIL_RECORDS_MAX

__all__ = ["TailMark", "data_version", "read_logs", "wanted_ids"]


@dataclass(frozen=True)
class TailMark:
    """What the last full tail read found: the connection's ``data_version`` taken before
    it (so the read is at least that recent), the log start, the last sequence number and
    that of the last change of an index definition."""

    version: int
    start: int
    last: int
    definitions: int

    def answers(self, version: int, since: Mapping[str, int]) -> bool:
        """Whether nothing can be new for ``since``: no commit since the mark and every
        index at its last sequence number."""
        return version == self.version and all(seq >= self.last for seq in since.values())

    def logs(self, since: Mapping[str, int]) -> dict[str, LogRead]:
        """The empty reads of ``since`` at this mark."""
        return {name: LogRead(self.start, self.last, []) for name in since}


def data_version(db: sqlite3.Connection) -> int:
    """``PRAGMA data_version`` of ``db``: it changes when another connection commits."""
    row = db.execute("PRAGMA data_version").fetchone()
    return int(row[0])


def read_logs(db: sqlite3.Connection, since: Mapping[str, int]) -> tuple[dict[str, LogRead], int, int, int]:
    """The log of each index of ``since`` above its sequence number, with the log start, the
    last sequence number and that of the last change of an index definition, from one
    statement (one snapshot): ``(logs, start, last, definitions)``."""
    names = list(since)
    marks = ",".join("?" * len(names))
    rows = db.execute(
        "SELECT (SELECT value FROM meta WHERE key='log_start'), (SELECT value FROM meta WHERE key='seq'), "
        "(SELECT value FROM meta WHERE key='definitions_seq'), o.index_name, o.seq, o.ops "
        f"FROM (SELECT 1) LEFT JOIN oplog o ON o.index_name IN ({marks}) AND o.seq > ? ORDER BY o.n",
        [*names, min(since.values(), default=0)],
    ).fetchall()
    start, last, definitions = (int(value) if value is not None else 0 for value in rows[0][:3])
    ops: dict[str, list[Op]] = {name: [] for name in names}
    for _, _, _, index, seq, packed in rows:
        if index is None or seq <= since[index]:
            continue
        ops[index].extend(Op(seq, index, rid, op) for rid, op in unpack_ops(packed))  # type: ignore[arg-type]
    return {name: LogRead(start, last, ops[name]) for name in names}, start, last, definitions


def wanted_ids(logs: Mapping[str, LogRead], since: Mapping[str, int]) -> list[str]:
    """The ids the logs add or update, in order of first appearance: the records a catch-up
    reads along with the log; none when they are more than :data:`TAIL_RECORDS_MAX` or an
    index must be rebuilt (the log was pruned past it)."""
    wanted: dict[str, None] = {}
    for name, read in logs.items():
        if since[name] < read.start:
            return []
        for op in read.ops:
            if op.op != "remove":
                wanted[op.record_id] = None
    return list(wanted) if len(wanted) <= TAIL_RECORDS_MAX else []
