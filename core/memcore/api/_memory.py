"""``memcore.Memory``: a built memory and its everyday API.

What a Chroma collection or mem0 user reaches for, without going through ``.collection``:
``insert`` (one item or many), ``get`` (by ids, or a page of matches: ``offset``/``limit``),
``update``, ``upsert``, ``delete`` (ids, a ``where`` filter, a ``where_document`` text filter
and/or a scope), ``count``, ``history`` (every version of one record), plus ``retrieve`` (the
service's unified interface), ``retrieve_many`` (a batch of queries) and ``query`` (the
pipeline, hits with provenance).

Every method has explicit keyword arguments: a keyword a method does not know is a
``TypeError`` from Python itself, never silently dropped. The only open door is
``insert``/``retrieve``'s ``**options``, handed to the service, whose own signature (or
:meth:`memcore.Service.reject_unknown`) refuses what it does not know.

Every write goes through the service (its policy decides what goes where), and every verb
takes a ``scope``: the core binds it for the call, so no read returns, counts or reveals
another scope's records and a record of another scope is unknown (``NotFoundError``).
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..errors import ConfigError, NotFoundError, ValidationError
from ..collection._input import coerce_ids
from ..llms._llm import LLMs
from ..model._checks import check_page, validate_k, validate_min_score
from ..model._document import parse_where_document
from ..model._filters import parse_filter
from ..model._query import Hit, Query
from ..model._record import Record, Scope
from ..services._service import where_from_options

if TYPE_CHECKING:
    from ..collection._collection import Collection
    from ..retrieval._pipeline import Pipeline
    from ..services._problems import ServiceProblem
    from ..services._service import Service
    from ..settings import MemcoreSettings

__all__ = ["Memory", "MAX_BATCH_QUERIES", "check_queries", "check_batch"]

MAX_BATCH_QUERIES = 10_000
"""Most queries (texts or vectors) one :meth:`Memory.retrieve_many` call takes."""

ScopeLike = Scope | Mapping[str, Any] | None


def check_queries(queries: Any) -> list[str]:
    """The query texts of a batch: a non-empty list or tuple of at most
    :data:`MAX_BATCH_QUERIES` strings, each checked as a query text (ValidationError otherwise)."""
    if isinstance(queries, str) or not isinstance(queries, (list, tuple)):
        raise ValidationError(f"queries must be a list of query texts, not {type(queries).__name__}")
    if not queries:
        raise ValidationError("queries is empty: give at least one query text")
    if len(queries) > MAX_BATCH_QUERIES:
        raise ValidationError(f"at most {MAX_BATCH_QUERIES} queries in one call, got {len(queries)}")
    for position, text in enumerate(queries):
        if not isinstance(text, str) or not text.strip():
            raise ValidationError(f"query {position} must be a non-empty text, got {text!r}"[:200])
        Query(text=text)  # length and Unicode, as retrieve checks them
    return list(queries)


def check_batch(queries: Any, vectors: Any) -> tuple[list[str | None], list[Any] | None]:
    """The queries of a batch as ``(texts, vectors)``, one entry each per query: texts
    (:func:`check_queries`; all None when only vectors are given) and vectors (None when
    only texts are given; a list of vectors or an ``(n, dim)`` matrix, each checked by the
    search as :meth:`Memory.retrieve`'s ``vector=``). ValidationError when neither is given,
    for an empty or too long batch, or when both are given with different lengths."""
    if vectors is None:
        if queries is None:
            raise ValidationError("retrieve_many needs queries (texts) or vectors")
        return list(check_queries(queries)), None
    if isinstance(vectors, (str, bytes, Mapping)) or not hasattr(vectors, "__len__") or not hasattr(vectors, "__getitem__"):
        raise ValidationError(f"vectors must be a list of query vectors or an (n, dim) matrix, not {type(vectors).__name__}")
    if getattr(vectors, "ndim", 2) != 2:
        raise ValidationError(f"vectors must be a list of query vectors or an (n, dim) matrix, got {getattr(vectors, 'ndim', None)} dimension(s)")
    rows = list(vectors)
    if not rows:
        raise ValidationError("vectors is empty: give at least one query vector")
    if len(rows) > MAX_BATCH_QUERIES:
        raise ValidationError(f"at most {MAX_BATCH_QUERIES} queries in one call, got {len(rows)}")
    if queries is None:
        return [None] * len(rows), rows
    texts = check_queries(queries)
    if len(texts) != len(rows):
        raise ValidationError(f"{len(texts)} queries and {len(rows)} vectors: give one vector per query text")
    return list(texts), rows


def _single(items: Any) -> bool:
    return isinstance(items, (str, Mapping, Record))


class Memory:
    """A built memory: ``.collection``, ``.pipeline``, ``.service``, ``.llms`` and the everyday API."""

    def __init__(self, settings: "MemcoreSettings", collection: "Collection", pipeline: "Pipeline", service: "Service", llms: LLMs | None = None):
        self.settings = settings
        self.collection = collection
        self.pipeline = pipeline
        self.service = service
        self.llms = llms if llms is not None else LLMs()
        self.pipeline_error: Exception | None = None
        """Why the declared pipeline cannot run here (set only for services that do not use it,
        see ``Service.uses_pipeline``); :meth:`query` without ``index`` raises it."""
        self.hints: tuple[str, ...] = ()
        """One-line hints for the user from opening this memory (e.g. how to install MiniLM
        when a new memory got the lexical ``hashing`` embedder); the CLI prints them."""

    # -- writes --------------------------------------------------------------------------

    def insert(
        self,
        items: str | Mapping[str, Any] | Record | Sequence[str | Mapping[str, Any] | Record],
        vector: Any = None,
        metadata: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> str | list[str]:
        """Remember one item (returns its id) or many (a list or tuple: returns their ids).

        An item is a text, a dict (``text`` plus optional ``id``, ``metadata``,
        ``vectors`` = {space: vector}, ``links``, ``scope``) or a :class:`Record`. For one
        text, ``vector`` (the only space's vector) and ``metadata`` may be given beside it;
        ``options`` (e.g. ``id``, ``scope``) go to the service, which rejects unknown ones.
        Items go through the service's policy (which indexes, tiers...).
        """
        if isinstance(items, str):
            return self.service.insert(items, vector=vector, metadata=metadata, **options)
        if isinstance(items, Record):
            if vector is not None or metadata is not None or options:
                raise ValidationError("a Record carries its own id, vectors and metadata; do not pass them beside it")
            return self.service.insert_many([items])[0]
        if isinstance(items, Mapping):
            fields = dict(items)
            if "text" not in fields:
                raise ValidationError("a record needs a 'text'")
            text = fields.pop("text")
            for key, value in (("metadata", metadata), *options.items()):
                if value is not None and key in fields:
                    raise ValidationError(f"{key!r} is given twice: inside the item and as an argument")
            item_metadata = fields.pop("metadata", None) if metadata is None else metadata
            return self.service.insert(text, vector=vector, metadata=item_metadata, **{**fields, **options})
        if not isinstance(items, (list, tuple)):
            raise ValidationError(f"insert takes a text, a dict, a Record or a list of them, not a {type(items).__name__}")
        if vector is not None or metadata is not None or options:
            raise ValidationError("with many items, give each its own vectors/metadata/id inside its dict: insert([{'text': ..., 'metadata': ...}, ...])")
        return self.service.insert_many(list(items))

    def insert_columns(
        self,
        texts: Sequence[str],
        *,
        ids: Sequence[str] | None = None,
        metadata: Mapping[str, Sequence[Any]] | None = None,
        vectors: Any = None,
        scope: ScopeLike = None,
    ) -> list[str]:
        """Remember a batch given as columns, one value per record in each; returns the ids.

        ``texts``: the texts; ``ids``: the ids (None: derived from the content);
        ``metadata``: ``{field: values}`` (a list or 1-d numpy array per field);
        ``vectors``: ``{space: (n, dim) matrix}``, or one matrix for the only space (None:
        embedded from the texts). The records are checked as :meth:`insert` checks them
        (the same typed errors; nothing is written on bad input) and written in one atomic
        batch, without a dict per record: the fast way to load many records. Through the
        service (:meth:`memcore.Service.insert_columns`), with ``scope`` bound.
        """
        with self.collection.scoped(scope):
            return self.service.insert_columns(texts, ids=ids, metadata=metadata, vectors=vectors)

    def upsert(self, items: str | Mapping[str, Any] | Record | Sequence[str | Mapping[str, Any] | Record], *, scope: ScopeLike = None) -> str | list[str]:
        """Insert new records and replace existing ones (same id); returns the id(s).

        Through the service (:meth:`memcore.Service.upsert`): by default a replaced record
        keeps its index memberships and new records go to every index; a service with its
        own placement policy places them or refuses. A record of another scope is unknown.
        """
        with self.collection.scoped(scope):
            ids = self.service.upsert(items)
        return ids[0] if _single(items) else ids

    def update(
        self,
        id: str,
        *,
        text: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        merge_metadata: bool = False,
        vectors: Mapping[str, Any] | None = None,
        scope: ScopeLike = None,
    ) -> Record:
        """Change fields of one existing record (NotFoundError when absent or outside
        ``scope``); returns it. Through the service (:meth:`memcore.Service.update`).

        ``metadata`` replaces the metadata, or is merged into it with ``merge_metadata``.
        """
        return self.service.update(id, text=text, metadata=metadata, merge_metadata=merge_metadata, vectors=vectors, scope=scope)

    def delete(
        self,
        ids: str | Sequence[str] | None = None,
        *,
        where: Mapping[str, Any] | None = None,
        scope: ScopeLike = None,
        where_document: Mapping[str, Any] | None = None,
    ) -> int:
        """Delete records by id, by a ``where`` filter, a ``where_document`` text filter
        (``{"$contains": "..."}``) and/or within a scope; returns how many.

        Ids outside ``scope`` (or unknown) raise NotFoundError and nothing is deleted; with
        filters (and/or ``scope``) alone, every matching record in the scope goes. At least
        one of ``ids``, ``where``, ``where_document`` or ``scope`` is required (nothing is
        deleted by accident); a malformed filter is a FilterError and deletes nothing.
        The service deletes them (:meth:`memcore.Service.delete`), so that what it derived
        from them (``hybrid``'s windows) changes in the same atomic write. A scope alone
        forgets the scope (:meth:`forget`): its records, what was derived from them and its
        service state.
        """
        if ids is None and where is None and where_document is None and scope is None:
            raise ValidationError("delete needs ids, a where filter or a scope, or a where_document filter (to empty the memory: delete(where={}))")
        parse_filter(where)
        parse_where_document(where_document)
        if ids is None and where is None and where_document is None:
            return int(self.forget(scope)["records"])
        filtered = where is not None or where_document is not None
        with self.collection.scoped(scope):
            if ids is not None:
                wanted = coerce_ids(ids)
                if filtered:
                    targets = set(self.collection.ids(where=where, where_document=where_document))
                    wanted = [i for i in wanted if i in targets]
                    if not wanted:
                        return 0
                return self.service.delete(wanted)
            matching = self.collection.ids(where=where, where_document=where_document)
            return self.service.delete(matching) if matching else 0

    def forget(self, scope: ScopeLike) -> dict[str, Any]:
        """Forget everything of ``scope`` (e.g. ``{"user_id": "bob"}``) in one commit: its
        records, what services derived from them, their index entries and the scope's
        service state (:meth:`memcore.Service.forget`). Returns what went, by kind:
        ``{"records": n, "indexes": {index: n}, "state_keys": n}``. After :meth:`close`, no
        file of the memory holds the forgotten texts."""
        wanted = Scope.coerce(scope)
        if wanted is None or wanted.is_empty():
            raise ValidationError("forget needs a non-empty scope, e.g. {'user_id': 'bob'}")
        with self.collection.scoped(wanted):
            return self.service.forget()

    # -- reads ---------------------------------------------------------------------------

    def get(
        self,
        ids: str | Sequence[str] | None = None,
        *,
        where: Mapping[str, Any] | None = None,
        scope: ScopeLike = None,
        limit: int | None = None,
        offset: int = 0,
        where_document: Mapping[str, Any] | None = None,
    ) -> Record | list[Record]:
        """One record by id (NotFoundError when absent), records by ids (in order), or the
        records matching ``where`` / ``where_document`` / ``scope``.

        Without ids the records come in insertion order (the order they were first written;
        an update keeps a record's place), ``limit`` of them from position ``offset``: a
        stable order, so ``offset=0, 10, 20...`` pages through every match once while
        nothing is written. With ids, the filters must hold for each (NotFoundError naming
        those they do not) and ``offset``/``limit`` page the ids given."""
        check_page(offset, limit)
        parse_filter(where)
        parse_where_document(where_document)
        if isinstance(ids, str):
            found = self.get([ids], where=where, scope=scope, where_document=where_document)
            return found[0]  # type: ignore[index]
        with self.collection.scoped(scope):
            return self._get(ids, where, where_document, offset, limit)

    def _get(
        self, ids: Sequence[str] | None, where: Mapping[str, Any] | None, where_document: Mapping[str, Any] | None, offset: int, limit: int | None
    ) -> list[Record]:
        """:meth:`get` once its scope is bound (the collection hides other scopes' records)."""
        if ids is None:
            wanted = self.collection.ids(where=where, where_document=where_document, offset=offset, limit=limit)
        else:
            wanted = coerce_ids(ids)
            if where is not None or where_document is not None:
                allowed = set(self.collection.ids(where=where, where_document=where_document))
                outside = [i for i in wanted if i not in allowed]
                if outside:
                    which = "this where filter" if where_document is None else "this where_document filter" if where is None else "these filters"
                    raise NotFoundError(f"no record(s) {outside[:5]} matching {which}")
            wanted = wanted[offset:] if limit is None else wanted[offset : offset + limit]
        records = self.collection.get_many(wanted)
        missing = [i for i, r in zip(wanted, records) if r is None]
        if missing:
            raise NotFoundError(f"no record(s) {missing[:5]}{' in this scope' if self.collection.bound_scope else ''}")
        return records  # type: ignore[return-value]

    def count(
        self, *, where: Mapping[str, Any] | None = None, scope: ScopeLike = None, index: str | None = None, where_document: Mapping[str, Any] | None = None
    ) -> int:
        """Number of records (matching ``where`` and ``where_document``, in ``scope``, in one ``index``)."""
        return self.collection.count(where=where, scope=scope, index=index, where_document=where_document)

    def history(self, id: str, *, scope: ScopeLike = None) -> list[dict[str, Any]]:
        """Every version of one memory, oldest first, as mem0's ``history``: each a dict
        ``{"id", "seq", "op", "text", "metadata", "scope", "at"}`` where ``op`` is
        ``insert`` (new record: insert, or upsert of a new id), ``update`` (its text, metadata
        or scope changed: update, or upsert of a stored id) or ``delete`` (``text`` and
        ``metadata`` None), ``seq`` the store's sequence number of that write and ``at`` its
        time (seconds since the epoch). A deleted record keeps its versions with their texts
        and metadata erased (None); forgetting a scope erases its versions entirely. An id without history, or of another scope than ``scope``, is a
        NotFoundError (the same error: nothing tells them apart). The store must keep
        history (the sqlite and memory stores do; ConfigError otherwise)."""
        with self.collection.scoped(scope):
            versions = self.collection.history(id)
        return [
            {
                "id": v.record_id,
                "seq": v.seq,
                "op": v.op,
                "text": v.text,
                "metadata": v.metadata,
                "scope": None if v.scope is None else v.scope.as_dict(),
                "at": v.at,
            }
            for v in versions
        ]

    def retrieve(
        self,
        query: str | None = None,
        vector: Any = None,
        where: Mapping[str, Any] | None = None,
        k: int = 10,
        *,
        where_document: Mapping[str, Any] | None = None,
        min_score: float | None = None,
        **options: Any,
    ) -> list[dict[str, Any]]:
        """Recall through the service: ``[{"id", "text", "score", "metadata"}]``.

        ``where`` is a metadata filter (as for :meth:`get`, :meth:`count`, :meth:`query`;
        ``metadata=``, its former name, works with a DeprecationWarning); ``where_document``
        a text filter on the record text (``{"$contains": "..."}``). Both restrict the
        candidates before the ``k`` best are chosen (k hits when k records match), in every
        service (the text filter is bound on the collection for the call). ``options``
        (e.g. ``scope``) go to the service, which rejects keywords it does not know.
        ``min_score`` drops the results scoring below it (at most ``k`` remain; see
        docs/guides/scores.md for what the presets' scores mean and the thresholds measured);
        it must be a finite number (:class:`ValidationError`, checked before the service runs).
        """
        cut = validate_min_score(min_score)
        where = where_from_options(where, options)
        if where_document is None:  # the common call: nothing to bind
            results = self.service.retrieve(query, vector=vector, where=where, k=k, **options)
        else:
            with self.collection.text_filtered(where_document):
                results = self.service.retrieve(query, vector=vector, where=where, k=k, **options)
        return results if cut is None else [r for r in results if float(r["score"]) >= cut]

    def retrieve_many(
        self,
        queries: Sequence[str] | None = None,
        *,
        vectors: Any = None,
        k: int = 10,
        where: Mapping[str, Any] | None = None,
        where_document: Mapping[str, Any] | None = None,
        min_score: float | None = None,
        **options: Any,
    ) -> list[list[dict[str, Any]]]:
        """:meth:`retrieve` for several queries in one call: one result list per query, in
        the order given, the same as a loop of :meth:`retrieve`.

        The queries are texts (``queries``), vectors (``vectors``: a list of vectors or an
        ``(n, dim)`` matrix, each the vector of :meth:`retrieve`'s ``vector=``), or both
        (query ``i`` is ``queries[i]`` with ``vectors[i]``). Texts are embedded in one
        embedder batch per space. With the ``default`` service, the pipeline runs once for
        the batch (:meth:`memcore.Pipeline.run_many`): its recall searches the index for all
        the queries at once (a vector index: one matrix product) and the hits' records are
        read in one store read; other services answer each query in turn. ``queries``,
        ``vectors``, ``k``, ``where``, ``where_document`` and ``min_score`` are checked before
        anything runs (at most :data:`MAX_BATCH_QUERIES` queries); an error is the one the
        loop of :meth:`retrieve` would raise first."""
        texts, rows = check_batch(queries, vectors)
        validate_k(k)
        cut = validate_min_score(min_score)
        where = where_from_options(where, options)
        parse_filter(where)
        Scope.coerce(options.get("scope"))
        ahead = self.collection.embedded_queries(texts) if rows is None else nullcontext()  # type: ignore[arg-type]  # with vectors given, each query embeds what it lacks
        with self.collection.text_filtered(where_document), ahead:
            answers = self.service.retrieve_many(texts, rows, where=where, k=k, **options)
        return answers if cut is None else [[r for r in results if float(r["score"]) >= cut] for results in answers]

    def query(
        self,
        text: str,
        *,
        k: int = 10,
        where: Mapping[str, Any] | None = None,
        index: str | None = None,
        scope: ScopeLike = None,
        where_document: Mapping[str, Any] | None = None,
        min_score: float | None = None,
    ) -> list[Hit]:
        """Run the declared pipeline (or one index) and return hits with provenance;
        ``where`` and ``where_document`` restrict the candidates before the ``k`` best;
        ``min_score`` drops the hits scoring below it (as in :meth:`retrieve`)."""
        cut = validate_min_score(min_score)
        with self.collection.scoped(scope), self.collection.text_filtered(where_document):
            if index is not None:
                hits = self.collection.retrieve(text, index=index, k=k, where=where)
            elif self.pipeline_error is not None:
                raise self._pipeline_unusable(self.pipeline_error)
            else:
                hits = self.pipeline.run(self.collection, text, k=k, where=where)
        return hits if cut is None else [h for h in hits if h.score >= cut]

    # -- the service's consistency -----------------------------------------------------

    def check_service(self) -> list["ServiceProblem"]:
        """The inconsistencies between the service's state and its records, in every scope
        (:meth:`memcore.Service.check`; ``memcore info --check --config F`` prints them).
        Reads only; an empty list means consistent (or a service that checks nothing)."""
        return list(self.service.check())

    def repair_service(self) -> dict[str, Any]:
        """Fix what :meth:`check_service` finds (:meth:`memcore.Service.repair`; ``memcore
        service repair``): returns ``{"repaired": [problems fixed], "problems": [what a check
        still finds afterwards]}``. Running it again is harmless."""
        repaired = list(self.service.repair())
        return {"repaired": repaired, "problems": self.check_service()}

    def _pipeline_unusable(self, error: Exception) -> ConfigError:
        """Why :meth:`query` cannot run the pipeline here, and which verb to use instead."""
        kind = getattr(getattr(self.service, "config", None), "kind", type(self.service).__name__)
        indexes = sorted(i["name"] for i in self.collection.list_indexes())
        exc = ConfigError(
            f"Memory.query runs the declared pipeline, which the {kind!r} service does not use: ask the service with "
            f"memory.retrieve(text, k=...) (what `memcore query` does for this memory), or search one index with "
            f"memory.query(text, index=NAME) (indexes: {', '.join(indexes) or '(none)'}). The pipeline cannot run here: {error}",
            location="pipeline",
        )
        exc.__cause__ = error
        return exc

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Close the service, the collection (indexes are saved) and the LLMs."""
        try:
            self.service.close()
        finally:
            try:
                self.collection.close()
            finally:
                self.llms.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __len__(self) -> int:
        return self.count()
