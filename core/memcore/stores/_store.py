"""The Store interface: the source of truth of a collection.

A store keeps records (with their vectors per space and links), index membership,
component state (index definitions, service state) and an operation log with sequence
numbers, so any index can be rebuilt from the store or caught up after a crash.

All writes go through :meth:`Store.apply` with a :class:`WriteBatch`, which is atomic:
all in or all out.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Literal, Mapping, Sequence

import numpy as np

from ..errors import ConfigError, CorruptError
from ..model._document import DocumentFilter, document_matches
from ..model._filters import Filter
from ..model._record_batch import RecordBatch
from ..model._record import Record, Scope

__all__ = ["Store", "WriteBatch", "Applied", "AddedOps", "Op", "OpKind", "LogRead", "LogTail", "Version", "VersionOp", "INDEX_DEFINITIONS"]

_TEXT_CHUNK = 1000
"""How many texts the generic text filter reads per call of :meth:`Store.texts`."""

OpKind = Literal["add", "remove", "update"]

INDEX_DEFINITIONS = "indexes"
"""The state namespace of the index definitions (key: the index name, value: its kind,
config and generation). A write of one of its keys, or a dropped index, changes what
:attr:`LogTail.definitions` reports."""
VersionOp = Literal["insert", "update", "delete"]


@dataclass(frozen=True, slots=True)
class Version:
    """One version of one record, as :meth:`Store.history` keeps it.

    ``op`` is ``insert`` (the record was new: an insert, or an upsert of a new id),
    ``update`` (its text, metadata or scope changed: an update, or an upsert of a stored id)
    or ``delete`` (``text`` and ``metadata`` are then None); ``seq`` is the store sequence
    number of the write, ``at`` its time (seconds since the epoch), ``scope`` the record's
    scope at that version."""

    seq: int
    record_id: str
    op: VersionOp
    text: str | None
    metadata: dict[str, Any] | None
    scope: Scope | None
    at: float


@dataclass(frozen=True, slots=True)
class Op:
    """One logged change of one index: ``record_id`` was added to, removed from or updated in ``index``."""

    seq: int
    index: str
    record_id: str
    op: OpKind


@dataclass
class WriteBatch:
    """Changes applied atomically by :meth:`Store.apply`.

    - ``upserts``: records written whole (text, metadata, scope, vectors, links);
    - ``deletes``: record ids removed with their vectors, memberships and every link to or
      from them;
    - ``add_membership`` / ``remove_membership``: index name -> record ids;
    - ``state``: ``(namespace, key) -> JSON value`` (``None`` deletes the key);
    - ``drop_indexes``: indexes whose membership and log are removed entirely;
    - ``forget_scopes``: scopes whose record history (:meth:`Store.history`) is erased: every
      version whose scope one of them covers, the deletes of this batch included.
    """

    upserts: list[Record] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)
    add_membership: dict[str, list[str]] = field(default_factory=dict)
    remove_membership: dict[str, list[str]] = field(default_factory=dict)
    state: dict[tuple[str, str], Any] = field(default_factory=dict)
    drop_indexes: list[str] = field(default_factory=list)
    forget_scopes: list[Scope] = field(default_factory=list)

    def changes_definitions(self) -> bool:
        """True when the batch writes or deletes an index definition (a key of the state
        namespace :data:`INDEX_DEFINITIONS`) or drops an index: a store reporting
        :attr:`LogTail.definitions` notes the batch's sequence number as the last such one."""
        return bool(self.drop_indexes) or any(namespace == INDEX_DEFINITIONS for namespace, _ in self.state)

    def is_empty(self) -> bool:
        """True when the batch changes nothing."""
        return not (self.upserts or self.deletes or self.add_membership or self.remove_membership or self.state or self.drop_indexes or self.forget_scopes)


@dataclass(frozen=True)
class Applied:
    """What :meth:`Store.apply` did: the new sequence number and the index ops it logged."""

    seq: int
    ops: tuple[Op, ...] = ()

    @property
    def adds(self) -> Mapping[str, Sequence[str]] | None:
        """The ops as ``{index: ids}`` when they are only adds, each id once per index, in
        order (what a store that knows it without building the ops says; None: read ``ops``)."""
        return None


class AddedOps(Applied):
    """An :class:`Applied` whose ops are, per index, an ``add`` of each of its ids (each
    once, in order): the :class:`Op` objects, one per record and index, are built only
    when ``ops`` is read (a write path reading :attr:`adds` never builds them)."""

    def __init__(self, seq: int, adds: Mapping[str, Sequence[str]]):
        object.__setattr__(self, "seq", seq)
        self.__dict__["added"] = adds

    @property
    def ops(self) -> tuple[Op, ...]:
        """The ops, built on first read (the same as :class:`Applied` holds)."""
        made: tuple[Op, ...] | None = self.__dict__.get("made")
        if made is None:
            made = self.__dict__["made"] = make_ops(self.seq, ((index, rid, "add") for index, rids in self.adds.items() for rid in rids))
        return made

    @property
    def adds(self) -> Mapping[str, Sequence[str]]:
        """The ids added, per index, in order."""
        adds: Mapping[str, Sequence[str]] = self.__dict__["added"]
        return adds

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Applied) and (self.seq, self.ops) == (other.seq, other.ops)

    def __hash__(self) -> int:
        return hash((self.seq, self.ops))


@dataclass(frozen=True)
class LogRead:
    """One consistent read of the log for one index: where it starts, the last sequence
    number and the index's ops above a given number, all from the same snapshot."""

    start: int
    last: int
    ops: list[Op]


@dataclass(frozen=True)
class LogTail:
    """What :meth:`Store.read_tail` read for several indexes at once: each index's
    :class:`LogRead`, and the records their ``add`` and ``update`` ops name."""

    logs: dict[str, LogRead]
    records: dict[str, Record] = field(default_factory=dict)
    """Records (with their vectors) the ops add or update, read with the logs or after them
    (never an older version): what the index handles apply without reading them again. A
    record named by an op but absent here is read by the handle (:meth:`Store.get`); an op
    later than the version read here is applied at the next catch-up."""
    definitions: int | None = None
    """The sequence number of the last batch that changed an index definition
    (:meth:`WriteBatch.changes_definitions`: an index created, dropped, re-created or
    redefined), read in the same snapshot as the logs (0: none yet); None when the store does
    not say. A process that finds a number other than the one it last saw reloads the
    definitions (:meth:`state_items` of :data:`INDEX_DEFINITIONS`) before applying the logs:
    an index another process dropped, created or re-created under the same name is followed,
    never caught up from the log of another index. For a store that says None, it reads the
    definitions at every catch-up."""


TAIL_RECORDS_MAX = 1000
"""Most records :meth:`Store.read_tail` reads along with the log (a catch-up after small
writes); a longer tail reads none, and each index handle reads its own."""


class Store(ABC):
    """Where the records of one collection live. Implementations: SQLite, in-memory, ..."""

    read_only: bool = False

    shared: bool = False
    """True when other processes may write to this store while it is open (a database
    server): the collection then catches its in-process indexes up from the op log before
    each search and around its own writes, as a read-only store's collection does."""

    # -- writes --------------------------------------------------------------------------

    @abstractmethod
    def apply(self, batch: WriteBatch) -> Applied:
        """Apply a batch atomically and log one op per (index, record) it changes.

        Logged ops: ``add`` when a record joins an index, ``remove`` when it leaves (or is
        deleted), ``update`` when a member record is rewritten or loses a link because its
        link target was deleted. Ids in ``add_membership`` must exist after the batch.
        """

    # -- reads ---------------------------------------------------------------------------

    @abstractmethod
    def get(self, ids: Sequence[str], *, with_vectors: bool = True) -> list[Record | None]:
        """Records by id, in the order asked (``None`` for unknown ids)."""

    def get_batch(self, ids: Sequence[str]) -> RecordBatch:
        """The records of ``ids`` (without vectors) as found now, built when first asked for.

        What a retrieval attaches to its hits (:attr:`Hit.record <memcore.Hit.record>` builds
        each on first access). The default reads them whole with :meth:`get`; a store that can
        hand over a snapshot of its rows overrides it (:class:`memcore.model._record_batch.RecordBatch`)."""
        return RecordBatch.of_records(self.get(ids, with_vectors=False))

    def texts(self, ids: Sequence[str]) -> list[str | None]:
        """The text of each record, in the order asked (``None`` for unknown ids).

        What rerank-like stages read for every candidate of every query: stores override it
        with a lighter read than :meth:`get` (no metadata, links, or copies)."""
        return [None if r is None else r.text for r in self.get(ids, with_vectors=False)]

    @abstractmethod
    def ids(
        self,
        *,
        where: Filter | None = None,
        scope: Scope | None = None,
        index: str | None = None,
        limit: int | None = None,
    ) -> list[str]:
        """Ids of the records matching a parsed filter, a scope and index membership, in insertion order."""

    @abstractmethod
    def count(self, *, where: Filter | None = None, scope: Scope | None = None, index: str | None = None) -> int:
        """How many records match."""

    def allowed_ids(self, *, where: Filter | None = None, where_document: DocumentFilter | None = None, scope: Scope | None = None) -> list[str]:
        """The ids of the records a filtered search may return, in no particular order
        (what a collection resolves a query's filter and scope to: a set). This default is
        :meth:`find_ids`; a store that reads them faster unordered overrides it."""
        if where_document is None:
            return self.ids(where=where, scope=scope)
        return self.find_ids(where=where, where_document=where_document, scope=scope)

    def allowed_rows(
        self, space: str, seq: int, *, where: Filter | None = None, where_document: DocumentFilter | None = None, scope: Scope | None = None
    ) -> "np.ndarray | None":
        """The rows in ``space``'s memory-mapped vector file (of a store that keeps one and
        hands it to indexes) of the records :meth:`allowed_ids` gives, unsorted, read while the store is at sequence ``seq``;
        None when it cannot say (this default: a store without such files, or one that moved on).
        An index over the file's rows turns them into its positions without reading an id."""
        return None

    def saved_rows(
        self, space: str, seq: int, *, where: Filter | None = None, where_document: DocumentFilter | None = None, scope: Scope | None = None
    ) -> "np.ndarray | None":
        """What :meth:`allowed_rows` gives, only when the store has it at hand without
        resolving the filter (rows it kept for this very filter at sequence ``seq``); None
        otherwise (this default). An index deciding how to answer a filter's first query asks it."""
        return None

    def allowed_among(
        self,
        ids: Sequence[str],
        seq: int,
        *,
        where: Filter | None = None,
        where_document: DocumentFilter | None = None,
        scope: Scope | None = None,
    ) -> "list[str] | None":
        """The ids among ``ids`` (a few search candidates) that :meth:`allowed_ids` would give,
        read while the store is at sequence ``seq``, without listing every match; None when
        it cannot say (this default, or a store that moved on): the caller resolves the whole
        set instead."""
        return None

    def find_ids(
        self,
        *,
        where: Filter | None = None,
        where_document: DocumentFilter | None = None,
        scope: Scope | None = None,
        index: str | None = None,
        offset: int = 0,
        limit: int | None = None,
    ) -> list[str]:
        """:meth:`ids` with a text filter on the record text and a page (``offset``, ``limit``),
        in insertion order (the order of :meth:`ids`, stable between calls).

        This generic path works for every store: it reads :meth:`ids` and, with a text
        filter, the texts of those ids (:meth:`texts`, in chunks) and keeps the matching ones,
        stopping once the page is full. A store that compiles text filters natively (the
        SQLite and in-memory stores) overrides it."""
        if where_document is None:
            found = self.ids(where=where, scope=scope, index=index, limit=None if limit is None else offset + limit)
            return found[offset:] if limit is None else found[offset : offset + limit]
        candidates = self.ids(where=where, scope=scope, index=index)
        wanted = None if limit is None else offset + limit
        kept: list[str] = []
        for start in range(0, len(candidates), _TEXT_CHUNK):
            chunk = candidates[start : start + _TEXT_CHUNK]
            kept.extend(rid for rid, text in zip(chunk, self.texts(chunk)) if text is not None and document_matches(where_document, text))
            if wanted is not None and len(kept) >= wanted:
                break
        return kept[offset:] if wanted is None else kept[offset:wanted]

    def find_count(
        self, *, where: Filter | None = None, where_document: DocumentFilter | None = None, scope: Scope | None = None, index: str | None = None
    ) -> int:
        """:meth:`count` with a text filter on the record text (generic: :meth:`find_ids`)."""
        if where_document is None:
            return self.count(where=where, scope=scope, index=index)
        return len(self.find_ids(where=where, where_document=where_document, scope=scope, index=index))

    @abstractmethod
    def memberships(self, ids: Sequence[str]) -> dict[str, set[str]]:
        """For each known id, the names of the indexes it belongs to."""

    @abstractmethod
    def vectors(self, ids: Sequence[str], space: str) -> tuple[np.ndarray, np.ndarray]:
        """Stored vectors of one space: ``(matrix, present)`` where ``present[i]`` is False
        when ``ids[i]`` has no vector in that space (its row is zeros)."""

    def missing_vectors(self, ids: Sequence[str], space: str) -> list[str]:
        """The ids among ``ids`` (in their order) that have no stored vector in ``space``,
        unknown ids included. This default reads the vectors (:meth:`vectors`); a store that
        can answer without sending them (a database server) overrides it."""
        if not ids:
            return []
        _, present = self.vectors(ids, space)
        return [rid for rid, here in zip(ids, present) if not here]

    def vectors_into(self, ids: Sequence[str], space: str, out: np.ndarray) -> np.ndarray:
        """:meth:`vectors` written into ``out`` (float32, ``(len(ids), dim)``, C-contiguous),
        e.g. a vector index's own storage, so large reads need no second matrix; returns
        ``present``. Rows of absent ids are zeroed. Raises :class:`~memcore.errors.CorruptError`
        when the stored vectors are of another dimension than ``out``'s. This default copies
        from :meth:`vectors`; the SQLite store writes each blob into ``out`` directly."""
        matrix, present = self.vectors(ids, space)
        if present.any() and matrix.shape[1] != out.shape[1]:
            raise CorruptError(f"the store keeps {matrix.shape[1]}-d vectors in space {space!r}, {out.shape[1]} expected")
        out[~present] = 0.0
        if present.any():
            out[present] = matrix[present]
        return present

    def iter_records(self, *, index: str | None = None, batch_size: int = 1000) -> Iterator[list[Record]]:
        """All records (of one index), in insertion order, in batches."""
        ids = self.ids(index=index)
        for start in range(0, len(ids), batch_size):
            chunk = self.get(ids[start : start + batch_size])
            yield [r for r in chunk if r is not None]

    # -- log and state -------------------------------------------------------------------

    @abstractmethod
    def last_seq(self) -> int:
        """The sequence number of the last applied batch (0 for an empty store)."""

    @abstractmethod
    def ops_since(self, seq: int, index: str) -> list[Op]:
        """The logged ops of one index with a sequence number above ``seq``, in order."""

    @abstractmethod
    def prune_log(self, upto: int) -> None:
        """Forget ops with sequence numbers ``<= upto`` (every index of this process is saved
        past them). A store shared between processes may keep them longer, for the indexes of
        the other processes to catch up from (the postgres store's ``log_retention_s``)."""

    def read_log(self, seq: int, index: str) -> LogRead:
        """:meth:`log_start`, :meth:`last_seq` and :meth:`ops_since` as one consistent read.

        Stores shared between processes override it with one read transaction: a writer
        pruning the log between the reads would otherwise make a reader skip ops forever.
        """
        return LogRead(self.log_start(), self.last_seq(), self.ops_since(seq, index))

    def read_tail(self, since: Mapping[str, int]) -> LogTail:
        """The ops logged for each index of ``since`` above its sequence number (a
        :class:`LogRead` each, as :meth:`read_log` gives it), with the records they add or
        update: the catch-up of a process whose indexes follow other processes' writes,
        before each of its searches.

        With an empty ``since`` it answers :attr:`LogTail.definitions` alone (how a process
        checks the index definitions before naming an index it does not know).

        This default reads each index's log (:meth:`read_log`) and no records, and reports
        no :attr:`~LogTail.definitions` (None). Stores shared between processes override it
        with fewer statements: one read of the log for every index, the number of the last
        definition change and the records in the same round trip, and a cheap answer when
        nothing changed since their last call (what every search of such a process asks first)."""
        return LogTail({name: self.read_log(seq, name) for name, seq in since.items()})

    @abstractmethod
    def log_start(self) -> int:
        """The log is complete above this sequence number (it was pruned up to it)."""

    @abstractmethod
    def get_state(self, namespace: str, key: str, default: Any = None) -> Any:
        """One JSON value of component state."""

    @abstractmethod
    def state_items(self, namespace: str) -> dict[str, Any]:
        """All keys of a state namespace."""

    keeps_history: bool = False
    """Whether :meth:`history` answers (the SQLite and in-memory stores keep every version)."""

    def history(self, record_id: str) -> list[Version]:
        """Every kept version of one record, oldest first (empty for an id never written).

        A store keeping history logs a version when a write inserts a record, changes its
        text, metadata or scope, or deletes it (vectors, links and index membership alone
        are not versions). Deleting a record erases the texts and metadata of its versions
        (they become None: what was deleted leaves the store) and logs a ``delete``; a
        batch's ``forget_scopes`` erase every version they cover. The index op log's
        pruning does not touch it. The default keeps none: it raises ConfigError."""
        raise ConfigError(f"{type(self).__name__} keeps no record history (use the sqlite or memory store)")

    def history_ids(self) -> list[str]:
        """The ids of every record with a kept version (deleted records' included), in the
        order of their first version: with :meth:`history`, how a copy of the store
        (``memcore migrate``) reads all of it. The default keeps none: it raises ConfigError."""
        raise ConfigError(f"{type(self).__name__} keeps no record history (use the sqlite or memory store)")

    def import_history(self, versions: Sequence[Version]) -> None:
        """Make the kept versions of each record named in ``versions`` exactly these, in this
        order (their ``seq`` and ``at`` as given): the history read from another store, written
        after its records were copied (``memcore migrate``). Versions of other records are not
        touched. The latest version of a live record must be the record as stored (what the
        copy wrote). The default keeps none: it raises ConfigError."""
        raise ConfigError(f"{type(self).__name__} keeps no record history (use the sqlite or memory store)")

    def state_namespaces(self) -> list[str]:
        """Every state namespace that holds a key (forgetting a scope drops the scope's own).

        A store that cannot list them cannot forget a scope's state: implement it."""
        raise NotImplementedError(f"{type(self).__name__} does not list its state namespaces")

    # -- lifecycle -----------------------------------------------------------------------

    def size_bytes(self) -> int:
        """On-disk size (0 for memory stores)."""
        return 0

    @abstractmethod
    def close(self) -> None:
        """Release files and locks. Idempotent."""


def plan_ops(batch: WriteBatch, memberships: dict[str, set[str]], link_sources: set[str]) -> list[tuple[str, str, OpKind]]:
    """The ``(index, record_id, op)`` entries a batch logs, shared by every store.

    ``memberships`` holds each involved id's indexes before the batch; ``link_sources``
    are the ids of records that link to a record deleted by this batch. In order: removes
    of deleted records, updates of records that lost a link, updates of rewritten members,
    then the batch's membership removes and adds; an op is logged once, and never for an
    index the batch drops.
    """
    state = {rid: set(ixs) for rid, ixs in memberships.items()}
    dropped = set(batch.drop_indexes)
    ops: list[tuple[str, str, OpKind]] = []
    seen: set[tuple[str, str, str]] = set()  # only removes and updates can repeat: adds are checked against ``state``

    def emit(index: str, rid: str, op: OpKind) -> None:
        if index not in dropped and (index, rid, op) not in seen:
            seen.add((index, rid, op))
            ops.append((index, rid, op))

    deleted = set(batch.deletes)
    for rid in batch.deletes:
        for index in sorted(state.get(rid, ())):
            emit(index, rid, "remove")
        state[rid] = set()
    for rid in sorted(link_sources - deleted):
        for index in sorted(state.get(rid, ())):
            emit(index, rid, "update")
    get = state.get
    for record in batch.upserts:
        indexes = get(record.id)
        if indexes:
            for index in sorted(indexes):
                emit(index, record.id, "update")
    for index, ids in batch.remove_membership.items():
        for rid in ids:
            if index in state.get(rid, ()):
                state[rid].discard(index)
                emit(index, rid, "remove")
    append = ops.append
    for index, ids in batch.add_membership.items():
        logged = index not in dropped
        for rid in ids:
            indexes = get(rid)
            if indexes is None:
                state[rid] = {index}
            elif index in indexes:
                continue
            else:
                indexes.add(index)
            if logged:
                append((index, rid, "add"))
    return ops


_NEW = object.__new__
_SETTERS = tuple(Op.__dict__[name].__set__ for name in ("seq", "index", "record_id", "op"))


def make_ops(seq: int, planned: Iterable[tuple[str, str, OpKind]]) -> tuple[Op, ...]:
    """``Op(seq, index, record_id, op)`` for each planned entry, built through the slots
    directly (a frozen dataclass' ``__init__`` costs twice as much; one Op per record written)."""
    set_seq, set_index, set_record, set_op = _SETTERS
    out = []
    for index, rid, op in planned:
        entry = _NEW(Op)
        set_seq(entry, seq)
        set_index(entry, index)
        set_record(entry, rid)
        set_op(entry, op)
        out.append(entry)
    return tuple(out)


def involved_ids(batch: WriteBatch) -> set[str]:
    """Every record id a batch touches directly."""
    ids = set(batch.deletes) | {r.id for r in batch.upserts}
    for group in (batch.add_membership, batch.remove_membership):
        for rids in group.values():
            ids.update(rids)
    return ids
