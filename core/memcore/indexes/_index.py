"""The Index interface: one contract for every kind of index (vector, text, queue, graph...).

An index holds ids and whatever it needs to search them; the records themselves live in
the store. The Collection fills the embedding spaces an index ``requires`` before calling
``add`` or ``search``, and resolves ``where`` filters and scopes to the ``allowed`` id set.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Collection as AbstractSet, Mapping, Sequence

from ._query_modes import query_mode
from ..model._query import Hit
from ..model._query import Query
from ..model._record import Record

if TYPE_CHECKING:  # pragma: no cover
    from ..llms._llm import LLMs
    from ._vector_reader import VectorReader

__all__ = ["Index", "IndexContext", "Requirements", "SpaceInfo"]


@dataclass(frozen=True)
class Requirements:
    """What an index needs from each record and query.

    ``spaces``: embedding spaces whose vectors must be filled; ``text``: needs the text;
    ``links``: needs ``record.links`` (and is refreshed when links change).
    """

    spaces: tuple[str, ...] = ()
    text: bool = False
    links: bool = False


@dataclass(frozen=True)
class SpaceInfo:
    """An embedding space as the collection declares it: its dimension and embedder."""

    name: str
    dim: int
    embedder: str


@dataclass(frozen=True)
class IndexContext:
    """What an index factory receives besides its config.

    - ``name``: the index's name in the collection (``[indexes.<name>]``);
    - ``spaces``: the declared embedding spaces (dimension, embedder), see :meth:`space`;
    - ``kind``: the registered kind it is built as -- the key of its query modes in
      ``Query.extras`` (:attr:`Index.mode_key`, read by :meth:`Index.mode`), so one query
      can carry the modes of several indexes. Empty when an index is built by hand (the
      key is then the config's ``kind``);
    - ``vectors``: a :class:`~memcore.VectorReader` over the collection's store, so that
      ``save`` may leave out the vectors the store already keeps and ``load`` reads them
      back (see docs/plugins/hooks/register_indexes.md, "Vectors stored once"). None when the index is
      built by hand: then it must save its own copy.
    - ``directory``: the folder the index owns in its collection (``<collection>/indexes/<name>``,
      the folder ``save``/``load`` receive), or None (an in-memory collection, an index built
      by hand). It may not exist yet. An index whose data is written as it changes (an
      embedded database) may keep it there from its first write instead of copying it at its
      first save; it must create nothing there before its first ``add`` (memcore sets aside
      files it finds in the folder of a new index), and top-level files written outside
      ``save`` are not covered by the checksums of ``index.json`` (use a subfolder).
    - ``read_only``: the collection is opened read-only (a reader process beside a writer):
      the index must write nothing in ``directory`` (a rebuild stays in memory);
    - ``llms``: the memory's declared LLMs (:class:`~memcore.LLMs`, built on first use), for
      an index with an LLM step (the graph index's ``llm`` entity extraction): resolve the
      one the config names with ``llms.resolve(name, location)``. None when the index is
      built by hand (its LLM steps then run their fallbacks).
    """

    name: str
    spaces: dict[str, SpaceInfo] = field(default_factory=dict)
    kind: str = ""
    vectors: "VectorReader | None" = field(default=None, compare=False, repr=False)
    directory: Path | None = None
    llms: "LLMs | None" = field(default=None, compare=False, repr=False)
    read_only: bool = False

    def space(self, name: str) -> SpaceInfo:
        """The declared space ``name`` (ConfigError if the settings do not declare it)."""
        from ..errors import ConfigError

        try:
            return self.spaces[name]
        except KeyError:
            raise ConfigError(
                f"index {self.name!r} needs embedding space {name!r}, which is not declared; declared: {sorted(self.spaces) or '(none)'}",
                location=f"indexes.{self.name}",
            ) from None


class Index(ABC):
    """Base class of every index. Subclasses implement the abstract methods.

    Contract (checked by :class:`memcore.testing.IndexContract`):

    - ``add(records)`` adds records (re-adding a present id replaces it);
    - ``remove(ids)`` removes ids and ignores those it does not hold;
    - ``search(query, k, allowed)`` returns at most ``k`` hits, best first, scores higher
      is better, only ids in ``allowed`` when it is given;
    - ``save(dir)``/``load(dir)`` persist to a directory the index owns, atomically; they
      write and read only the index's payload: the core wraps it with ``index.json`` (kind,
      config, format version, a checksum per file), an atomic save and ``.previous``
      recovery, so ``load`` checks what its files mean, not their header (the helpers
      ``read_json_object``, ``read_npy``, ``npy_bytes``, ``write_npz``, ``read_npz``);
    - ``len(index)`` is the number of ids held.
    """

    #: human-readable name of the score (e.g. "cosine similarity")
    score_name: str = "score"
    #: (low, high) bounds of converted scores; None where unbounded
    score_range: tuple[float | None, float | None] = (None, None)
    #: the dense space whose cosine similarity (query vs stored vector, exactly) each hit of
    #: ``search`` carries as its score; None when the score is anything else (another
    #: metric, an approximation of the vectors such as PQ codes). The ``relevance`` stage
    #: then takes those scores instead of reading the hits' vectors back from the store.
    cosine_space: str | None = None
    #: bump when the on-disk format changes; a saved index of another version is rebuilt
    #: (the core checks it against ``index.json`` before calling ``load``)
    format_version: int = 1
    #: older format versions ``load`` still reads (it migrates them; the next save writes
    #: ``format_version``), accepted by the core's check besides ``format_version``
    readable_versions: ClassVar[tuple[int, ...]] = ()
    #: True when every ``add``/``remove`` is durable on its own, before any ``save`` (an
    #: embedded database that persists each write, such as Chroma's ``PersistentClient``):
    #: after a crash the loaded index may already hold records added since its last save, so
    #: the catch-up from the store's log removes every id whose last logged op is a removal
    #: instead of cancelling "add X, remove X" (which would leave X in the index for good)
    durable_writes: ClassVar[bool] = False
    #: True when ``search`` applies the query's ``where`` filter (``query.parsed_where()``) and
    #: ``query.scope`` itself, in the same request as its ranking (an index inside the store's
    #: database, such as ``pgvector``): the collection then does not resolve them to
    #: ``allowed`` ids first and passes ``allowed=None`` -- unless the query also has a text
    #: filter (``where_document``, a bound text filter), whose ids it still resolves and passes
    applies_filters: ClassVar[bool] = False
    #: True when the index keeps no data of its own and every ``search`` reads the store's
    #: current data (an index inside the store's database, such as ``pgvector``): it is never
    #: behind the store, so a collection on a shared store does not read the op log to catch
    #: it up before each search, and applies its own writes to it directly
    reads_store: ClassVar[bool] = False
    #: True when the index can take an :class:`~memcore.indexes._allowed.AllowedRows` as
    #: ``allowed`` (its vectors are rows of the store's vector file, such as ``exact`` over the
    #: SQLite store): the collection then passes a filter's matches as file rows the store
    #: resolves without reading their ids, when the index is caught up to the store's state
    takes_store_rows: ClassVar[bool] = False

    requires: Requirements = Requirements()

    #: the index's name in its collection (``IndexContext.name``); set by :meth:`__init__`
    name: str = ""
    #: the key of this index's query modes in ``Query.extras``: the kind it is registered as
    #: (``IndexContext.kind``, else its config's ``kind``); set by :meth:`__init__`
    mode_key: str = ""

    def __init__(self, config: Any, context: IndexContext) -> None:
        """Keep what every index takes from its context: :attr:`name` and :attr:`mode_key`.

        Subclasses call ``super().__init__(config, context)`` first; ``config`` is only read
        for its ``kind`` (the mode key of an index built by hand, without a registered kind).
        """
        self.name = context.name
        self.mode_key = context.kind or str(getattr(config, "kind", "") or "")

    def mode(self, query: Query, model: Any, *, defaults: Mapping[str, Any] | None = None, label: str | None = None) -> Any:
        """This index's query mode: ``query.extras[self.mode_key]`` validated by ``model``,
        parsed once per query (``validate_query`` and ``search`` share it).

        The arguments and errors are those of :func:`memcore.query_mode`: None when the
        entry is absent (with ``defaults``: the default mode), :class:`ValidationError`
        naming ``extras.<key>.<field>`` when malformed. The parsed mode is kept on the query
        under (key, model): an index passes the same ``defaults`` for a model every time.
        """
        extras = query.extras
        if not extras and defaults is None:  # the common case: no modes at all
            return None
        memo = query._modes
        slot = (self.mode_key, id(model))
        if memo is not None and slot in memo:
            return memo[slot]
        parsed = query_mode(extras, self.mode_key, model, self.name, defaults=defaults, label=label)
        if memo is None:
            memo = query._modes = {}
        memo[slot] = parsed
        return parsed

    def validate(self, records: Sequence[Record]) -> None:
        """Raise a ValidationError for records this index cannot take (before the store commits)."""

    def validate_query(self, query: Query) -> None:
        """Raise a ValidationError for a query this index cannot run (bad extras...)."""

    @abstractmethod
    def add(self, records: Sequence[Record]) -> None:
        """Add (or replace) records."""

    @abstractmethod
    def remove(self, ids: Sequence[str]) -> None:
        """Remove ids; unknown ids are ignored."""

    @abstractmethod
    def search(self, query: Query, k: int, allowed: AbstractSet[str] | None = None) -> list[Hit]:
        """The best ``k`` hits for ``query`` among ``allowed`` ids (all when None)."""

    def search_batch(self, queries: Sequence[Query], k: int, allowed: AbstractSet[str] | None = None) -> list[list[Hit]]:
        """Several queries at once; the default is a loop, vector indexes do real batches."""
        return [self.search(q, k, allowed) for q in queries]

    @abstractmethod
    def __len__(self) -> int:
        """Number of ids held."""

    @abstractmethod
    def save(self, directory: Path) -> None:
        """Write the index into ``directory`` (created by the caller), atomically per file."""

    @abstractmethod
    def load(self, directory: Path) -> None:
        """Replace this index's contents with what ``save`` wrote; CorruptError if unreadable."""

    def overflow(self) -> list[str]:
        """Ids this index holds beyond its capacity, oldest first (``[]`` for unbounded indexes).

        The index never drops them by itself: :meth:`Collection.evict` takes them out and
        hands them to the caller.
        """
        return []

    def stats(self) -> dict[str, Any]:
        """Kind-specific numbers for ``memcore info`` (size, parameters...)."""
        return {"size": len(self)}

    def close(self) -> None:
        """Release what this instance holds (clients, open files); the default does nothing.

        Called once when the collection lets go of the instance: when the collection closes
        (after its last save), after ``drop_index`` deleted the index folder, and when a
        rebuild, a redefinition or a failed load replaces it. An index that keeps data outside
        its folder (a collection on a database server) deletes there what no save in its
        folder names, so an index that was never saved leaves nothing behind. Errors are
        logged (``index.close_failed``), never raised.
        """
