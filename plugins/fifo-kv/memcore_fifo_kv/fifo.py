"""The ``fifo`` index: records in arrival order, for short-term memory (a window of recent turns).

Every ``add`` gives each record the next **sequence number** (1, 2, 3, ... in call order
and, within a batch, batch order). Re-adding a held id is a new arrival: it gets a new
number and moves to the tail (the newest end); a repeated id in one batch takes the
number of its last occurrence. ``remove`` drops ids wherever they are.

Reads are query modes under ``Query.extras["fifo"]`` (other keys of ``extras`` are
ignored): ``{"fifo": {"mode": "newest"}}`` (the default) and ``{"fifo": {"mode": "oldest"}}``,
each returning up to ``k`` ids. Scores: ``newest`` scores a hit
with its sequence number, ``oldest`` with minus it, so higher is always better;
``Hit.raw`` is the sequence number. With ``order = "created_at"`` the queue is ordered
by ``Record.created_at`` instead (ties by sequence number) and that time is the score
(``newest``: created_at, ``oldest``: -created_at).

``capacity`` bounds the queue without dropping anything by itself: :meth:`FifoIndex.overflow`
lists the ids beyond it, oldest first, and ``Collection.evict(index)`` takes them out and
returns them (the records stay in the store, for a service to move elsewhere). Nothing
saved depends on it: ``capacity`` is a search-time option, changed on reopen without a
rebuild.

Persistence: one JSON file, ``fifo.json``, written atomically: the ids in queue order with
their sequence numbers (and creation times), and the next sequence number.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, ClassVar, Collection as AbstractSet, Literal, Sequence

from pydantic import Field

from memcore.plugin import (
    atomic_write_json,
    read_json_object,
    ComponentConfig,
    CorruptError,
    Hit,
    Index,
    IndexContext,
    NotFoundError,
    Query,
    Record,
    Requirements,
    validate_k,
    ValidationError,
)

from .ordered import OrderedIds
from .query_modes import ModeModel

__all__ = ["FifoIndex", "FifoIndexConfig", "FifoQuery"]

FILE = "fifo.json"


class FifoIndexConfig(ComponentConfig):
    """Settings of the ``fifo`` index (``[indexes.<name>] kind = "fifo"``)."""

    search_time: ClassVar[frozenset[str]] = frozenset({"capacity"})

    kind: str = "fifo"
    capacity: int | None = Field(None, ge=1, description="Ids beyond this many are reported by overflow() for Collection.evict(); None: unbounded.")
    order: Literal["arrival", "created_at"] = Field(
        "arrival",
        description="arrival: the order of add() calls (re-adding moves to the tail); created_at: the records' creation time (kept by updates and rebuilds).",
    )


class FifoQuery(ModeModel):
    """``Query.extras["fifo"]`` of a fifo index: ``{"mode": "newest"}`` (default) or ``{"mode": "oldest"}``."""

    mode: Literal["newest", "oldest"] = "newest"

    @property
    def newest_first(self) -> bool:
        """True when the newest ids come first."""
        return self.mode == "newest"


_DEFAULT_MODE = {"mode": "newest"}


class FifoIndex(Index):
    """An arrival-ordered queue of ids with an optional capacity (see the module docstring)."""

    format_version = 1
    requires = Requirements()
    score_range = (None, None)

    def __init__(self, config: FifoIndexConfig, context: IndexContext):
        super().__init__(config, context)
        self.config = config
        self.capacity = config.capacity
        self.by_created = config.order == "created_at"
        self.score_name = (
            "creation time (newest: created_at, oldest: -created_at)" if self.by_created else "arrival sequence number (newest: seq, oldest: -seq)"
        )
        self._queue = OrderedIds()  # key: seq, or (created_at, seq)
        self._next_seq = 1

    # -- validation -------------------------------------------------------------------

    def validate(self, records: Sequence[Record]) -> None:
        for record in records:
            if not isinstance(record.id, str) or not record.id:
                raise ValidationError(f"index {self.name!r} (fifo): record ids must be non-empty strings, got {record.id!r}")
            if self.by_created:
                created = record.created_at
                if isinstance(created, bool) or not isinstance(created, (int, float)) or not math.isfinite(created):
                    raise ValidationError(f"index {self.name!r} (fifo, order = created_at): record {record.id!r} has no finite created_at ({created!r})")

    def validate_query(self, query: Query) -> None:
        self._mode(query)

    def _mode(self, query: Query) -> FifoQuery:
        mode: FifoQuery = self.mode(query, FifoQuery, defaults=_DEFAULT_MODE)
        return mode

    # -- writing ----------------------------------------------------------------------

    def add(self, records: Sequence[Record]) -> None:
        if not records:
            return
        self.validate(records)
        pairs = []
        for record in records:  # a repeated id: the later pair (and sequence number) wins
            seq = self._next_seq
            self._next_seq += 1
            pairs.append((record.id, (float(record.created_at), seq) if self.by_created else seq))
        self._queue.put(pairs)

    def remove(self, ids: Sequence[str]) -> None:
        self._queue.discard(ids)

    # -- reading ----------------------------------------------------------------------

    def search(self, query: Query, k: int, allowed: AbstractSet[str] | None = None) -> list[Hit]:
        mode = self._mode(query)
        k = validate_k(k)
        selected = self._queue.select(k, descending=mode.newest_first, allowed=allowed)
        sign, name = (1.0 if mode.newest_first else -1.0), self.name
        if self.by_created:  # key (created_at, seq): the score is the creation time
            return [Hit(rid, sign * key[0], key[0], name) for _, key, rid in selected]
        return [Hit(rid, sign * key, float(key), name) for _, key, rid in selected]

    def newest(self, n: int, allowed: AbstractSet[str] | None = None) -> list[str]:
        """The ``n`` most recent ids, newest first (only ids in ``allowed`` when given)."""
        return self._ids(n, True, allowed)

    def oldest(self, n: int, allowed: AbstractSet[str] | None = None) -> list[str]:
        """The ``n`` earliest ids, oldest first (only ids in ``allowed`` when given)."""
        return self._ids(n, False, allowed)

    def _ids(self, n: int, newest_first: bool, allowed: AbstractSet[str] | None) -> list[str]:
        if isinstance(n, int) and not isinstance(n, bool) and n == 0:
            return []
        n = validate_k(n)
        return [rid for _, _, rid in self._queue.select(n, descending=newest_first, allowed=allowed)]

    def sequence(self, rid: str) -> int:
        """The sequence number of a held id (its arrival); NotFoundError when absent."""
        try:
            key = self._queue.key_of(rid)
        except KeyError:
            raise NotFoundError(f"index {self.name!r} (fifo) does not hold {rid!r}") from None
        seq: int = key[1] if self.by_created else key  # key: seq, or (created_at, seq)
        return seq

    def __contains__(self, rid: object) -> bool:
        return rid in self._queue

    def __len__(self) -> int:
        return len(self._queue)

    def overflow(self) -> list[str]:
        """Ids beyond ``capacity``, oldest first (``[]`` when unbounded or within capacity)."""
        if self.capacity is None or len(self._queue) <= self.capacity:
            return []
        return self.oldest(len(self._queue) - self.capacity)

    def stats(self) -> dict[str, Any]:
        return {
            "size": len(self._queue),
            "capacity": self.capacity,
            "overflow": max(0, len(self._queue) - self.capacity) if self.capacity is not None else 0,
            "order": self.config.order,
            "next_seq": self._next_seq,
        }

    # -- persistence ------------------------------------------------------------------

    def save(self, directory: Path) -> None:
        entries = self._queue.entries()
        doc: dict[str, Any] = {
            "kind": "fifo",
            "format_version": self.format_version,
            "order": self.config.order,
            "next_seq": self._next_seq,
            "ids": [rid for _, rid in entries],
        }
        if self.by_created:
            doc["created_at"] = [key[0] for key, _ in entries]
            doc["seqs"] = [key[1] for key, _ in entries]
        else:
            doc["seqs"] = [key for key, _ in entries]
        atomic_write_json(Path(directory) / FILE, doc)

    def load(self, directory: Path) -> None:
        where = f"fifo index {self.name!r} in {directory}"
        doc = read_json_object(Path(directory) / FILE, where)  # kind, order, format version: checked by the core (index.json)
        try:
            queue, next_seq = self._parse(doc)
        except (ValueError, TypeError, KeyError) as exc:
            raise CorruptError(f"{where}: malformed {FILE}: {exc}") from None
        self._queue = queue
        self._next_seq = next_seq

    def _parse(self, doc: dict[str, Any]) -> tuple[OrderedIds, int]:
        ids, seqs, next_seq = doc["ids"], doc["seqs"], doc["next_seq"]
        if not (isinstance(ids, list) and isinstance(seqs, list) and len(ids) == len(seqs)):
            raise ValueError("ids and seqs must be lists of the same length")
        if not all(isinstance(i, str) and i for i in ids):
            raise ValueError("ids must be non-empty strings")
        if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in seqs):
            raise ValueError("sequence numbers must be positive integers")
        if not isinstance(next_seq, int) or isinstance(next_seq, bool) or next_seq <= max(seqs, default=0):
            raise ValueError("next_seq must be above every saved sequence number")
        if len(set(seqs)) != len(seqs):
            raise ValueError("a sequence number appears twice")
        if self.by_created:
            created = doc["created_at"]
            if not (isinstance(created, list) and len(created) == len(ids)):
                raise ValueError("created_at must be a list as long as ids")
            if not all(isinstance(c, (int, float)) and not isinstance(c, bool) and math.isfinite(c) for c in created):
                raise ValueError("created_at values must be finite numbers")
            keys: list[Any] = [(float(c), s) for c, s in zip(created, seqs)]
        else:
            keys = list(seqs)
        queue = OrderedIds()
        queue.load(list(zip(keys, ids)))  # ValueError unless strictly ascending with unique ids
        return queue, next_seq
