"""The read path of a collection: :class:`CollectionReader`, what stages and services read through.

A request is checked once, by :meth:`CollectionReader.request`, into a :class:`Query` that
every layer below trusts (:attr:`Query.checked`): its ``k``, its vectors (finite, of a
declared space, of its dimension), its ``where`` filter (parsed and kept on the query), its
scope (narrowed with the bound one). :meth:`CollectionReader.search_index` then only embeds
what the index needs, resolves the filter and scope to allowed ids, and searches.

The reader has no write and no raw access (no ``store``, no ``index(name)``): those are the
:class:`memcore.Collection`'s. A collection builds its reader once (``collection.reader``).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, ContextManager, Mapping, Sequence

from ..embedders._embedder import Space, query_vector
from ..errors import NotFoundError, ValidationError
from ..indexes._allowed import AllowedIds, AllowedRows
from ..indexes._vector import VectorIndex
from ..model._binding import narrow
from ..model._checks import check_page, validate_k
from ..model._document import DocumentFilter, document_key, parse_where_document
from ..model._filters import Filter, filter_key, parse_filter
from ..model._query import Hit, attach_batch, rank_hits
from ..model._query import Query
from ..model._record import Record, Scope
from ..stores._store import Version
from ._base import CollectionBase, CollectionState
from ._bindings import CallBindings
from ._input import coerce_ids, coerce_records

__all__ = ["CollectionReader"]


def _batches(index: Any) -> bool:
    """Whether ``index`` searches a batch of queries for real (a vector index with its own
    ``_search_batch``), rather than one after the other."""
    own = getattr(type(index), "_search_batch", None)
    return isinstance(index, VectorIndex) and own is not VectorIndex._search_batch


class CollectionReader(CallBindings):
    """The read path of a collection: searches and reads, no writes (what stages get).

    ``CollectionReader(collection)`` reads the same state as ``collection`` (so does
    ``collection.reader``, built once with the collection).
    """

    def __init__(self, source: "CollectionState | CollectionBase") -> None:
        super().__init__(source if isinstance(source, CollectionState) else source._state)
        self.reader: CollectionReader = self
        """This reader (a :class:`memcore.Collection` holds its own, built once)."""

    @property
    def spaces(self) -> Mapping[str, Space]:
        """The embedding spaces by name (read-only)."""
        return MappingProxyType(self._spaces)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._state.path or 'in memory'})"

    # -- the request ---------------------------------------------------------------------

    def request(
        self,
        query: Query | str | Mapping[str, Any] | None,
        *,
        k: int | None = None,
        where: Mapping[str, Any] | None = None,
        scope: Scope | Mapping[str, Any] | None = None,
        vectors: Mapping[str, Any] | None = None,
        extras: Mapping[str, Any] | None = None,
        where_document: Mapping[str, Any] | None = None,
    ) -> Query:
        """The one check of a request: a :class:`Query` every layer below trusts.

        ``query`` is a text (``None``: vectors or extras only), a dict of Query fields or a
        Query; the keywords override its fields. Checked here, once: ``k``; each vector
        (finite, of a declared space, of its dimension); ``where`` and ``where_document``
        (parsed, kept on the query); the scope (narrowed with the one bound on the collection: never wider).
        A query this reader already checked, without overrides, is returned as it is.
        """
        if (
            type(query) is Query
            and query._checked_by is self._state
            and k is None
            and where is None
            and scope is None
            and vectors is None
            and extras is None
            and where_document is None
        ):
            return query
        overrides: dict[str, Any] = {
            n: v for n, v in (("k", k), ("where", where), ("vectors", vectors), ("extras", extras), ("where_document", where_document)) if v is not None
        }
        if type(query) is str or (query is None and (vectors or extras)):  # a text: one Query built with the overrides
            q = Query(text=query, **overrides)
        elif isinstance(query, Query):
            q = query.evolve(**overrides) if overrides else query
        else:
            q = Query.coerce({**query, **overrides} if isinstance(query, Mapping) else query)  # type: ignore[arg-type]  # raises for anything else
        validate_k(q.k)
        if q.vectors:
            spaces = self._spaces
            for space, vector in q.vectors.items():  # caller-given vectors: declared space, right dimension
                declared = spaces.get(space)
                if declared is None:
                    raise ValidationError(f"the query has a vector for undeclared space {space!r}; spaces: {sorted(spaces)}")
                declared.check_query_vector(vector)
        q.parsed_where()  # a bad filter fails here, before any search; parsed once per query
        q.parsed_where_document()
        wanted = q.scope if scope is None else scope if type(scope) is Scope else Scope.coerce(scope)
        bound = self._scope.get()
        narrowed = wanted if bound is None else bound if wanted is None or wanted is bound else narrow(bound, wanted)
        if narrowed is not q.scope:
            if q is query and narrowed != q.scope:  # never change the caller's query: one copy, rescoped
                return self._rescoped(q, narrowed)
            q.scope = narrowed
        q._checked_by = self._state
        return q

    def _rescoped(self, query: Query, scope: Scope | None) -> Query:
        """A copy of the checked ``query`` with a narrower ``scope`` (its filter not parsed again)."""
        q = query.evolve(scope=scope)
        q._parsed_where = query._parsed_where
        q._parsed_document = query._parsed_document
        q._checked_by = self._state
        return q

    make_query = request
    """The former name of :meth:`request` (kept for one release)."""

    def scoped(self, scope: Scope | Mapping[str, Any] | None) -> ContextManager[Scope | None]:
        """Bind ``scope`` for what runs inside the ``with`` block (this thread or task): every
        read sees only its records, writes stamp it on new records and keep component state
        per scope (see :mod:`memcore.model._binding`). ``None`` binds nothing new."""
        return self._binding.bind(scope)

    def _embedded_ahead(self, query: Query, name: str) -> None:
        """Embed ``query``'s text in the spaces index ``name`` searches that it has no vector
        for yet, outside the lock (an embedder may take milliseconds per text; called by
        several threads at once, as :meth:`embedded_queries` does). Only a hint: an index
        not open yet, or one replaced meanwhile, is left to the search, which embeds under
        the lock whatever is still missing (and raises what it raised before)."""
        handle = self._indexes.get(name)  # read without the lock: a dict lookup, the handle may be stale
        if handle is None or handle.error is not None or self._state.closed:
            return
        spaces = self._spaces
        for space in handle.index.requires.spaces:
            if space not in query.vectors and space in spaces:
                self._prepared(query, space)
                if space not in query.vectors and query.text and query.text.strip():
                    query_vector(spaces, query, space)

    def _prepared(self, query: Query, space: str) -> None:
        """Give ``query`` its vector of ``space`` from :meth:`embedded_queries` when one was embedded ahead."""
        ahead = self._state.query_vectors.get()
        if ahead and query.text is not None and space not in query.vectors:
            vector = ahead.get((space, query.text))
            if vector is not None:
                query.vectors[space] = vector

    @property
    def bound_scope(self) -> Scope | None:
        """The scope the current call is bound to (None: unrestricted)."""
        return self._scope.get()

    def outside_scope(self, ids: Sequence[str]) -> list[str]:
        """The ids among ``ids`` the bound scope does not see (none when unbound): what a
        stage or service that holds ids from elsewhere (links, its own state) must drop."""
        return self._invisible(ids)

    # -- searches ------------------------------------------------------------------------

    def retrieve(
        self,
        query: Query | str | Mapping[str, Any],
        *,
        index: str | None = None,
        k: int | None = None,
        where: Mapping[str, Any] | None = None,
        scope: Scope | Mapping[str, Any] | None = None,
        with_records: bool = True,
        where_document: Mapping[str, Any] | None = None,
    ) -> list[Hit]:
        """The best ``k`` hits of one index for a query (text, vectors or a :class:`Query`).

        ``where`` and ``where_document`` restrict the candidates before the search (k hits
        come back when k records match), they are not applied to the hits afterwards."""
        with self._lock:
            self._check_open()
            q = self.request(query, k=k, where=where, scope=scope, where_document=where_document)
            handle = self._handle(index) if index is not None else self._only_index()
            hits = self.search_index(handle.name, q, q.k)
            return self.attach_records(hits) if with_records else hits

    def search_index(self, name: str, query: Query, k: int, *, list_name: str | None = None) -> list[Hit]:
        """Embed what the index needs, resolve filters to ``allowed``, and search.

        ``query`` is trusted when this reader checked it (:meth:`request`), else checked
        here. Each hit's provenance is its rank and score in this list (named ``list_name``,
        default the index name).

        The query's text is embedded for the index's spaces before the collection's lock is
        taken (:meth:`_embedded_ahead`), so that one search's embedding does not hold up the
        others' searches and writes.
        """
        if query.text and query._checked_by is self._state:  # a checked query: its errors were raised by request()
            self._embedded_ahead(query, name)
        with self._lock:
            handle = self._indexes.get(name)  # the usual case without a call: open, known, fresh, usable
            if handle is None or handle.stale or handle.error is not None or self._state.closed:
                handle = self._handle(name)  # closed, unknown, stale or broken: the full lookup says so
            if (self._store.read_only or self._store.shared) and not handle.index.reads_store:  # pipelines search through here: readers catch up first
                self._catch_up(handle)
                if self._indexes.get(name) is not handle:  # another process dropped or re-created it
                    handle = self._handle(name)
            if type(k) is not int or k <= 0:  # the depth a stage asks for: the common case without a call
                validate_k(k)
            if query._checked_by is not self._state:
                query = self.request(query)
            else:
                bound = self._scope.get()
                if bound is not None and bound is not query.scope:  # bound after the check: narrowed, never widened
                    scope = narrow(bound, query.scope)
                    if scope != query.scope:
                        query = self._rescoped(query, scope)
            index = handle.index
            requires = index.requires
            if requires.text and not query.extras and not (query.text and query.text.strip()):
                raise ValidationError("this index searches text: the query text is empty")
            for space in requires.spaces:
                if space not in query.vectors:
                    self._prepared(query, space)
                    query_vector(self._spaces, query, space)  # embedded once, kept on the query
            index.validate_query(query)
            if (
                query.where is None and query.scope is None and query.where_document is None and self._state.text_filter.get() is None
            ):  # no filter, no scope: nothing to resolve
                allowed = None
            elif index.applies_filters and query.where_document is None and self._state.text_filter.get() is None:
                allowed = None  # the index runs the query's where and scope in its own search
            else:  # an index over the store's rows, caught up to the store: the set as rows, lazily
                allowed = self._allowed(query, rows_at=handle.applied_seq if index.takes_store_rows else None)
                if isinstance(allowed, AllowedIds) and not allowed:
                    return []
            hits = index.search(query, k, allowed)
            rank_hits(hits, list_name or name, name)  # each hit's rank and score here (its Contribution built on first read), its index when it names none
            return hits

    def search_index_many(self, name: str, queries: Sequence[Query], k: int, *, list_name: str | None = None) -> list[list[Hit]]:
        """:meth:`search_index` of each query, in one batch when they can share it: one
        index :meth:`~memcore.plugin.Index.search_batch` call (a vector index scores every
        query in one matrix product) and one resolution of the filter and scope.

        The queries share it when they have the same ``where``, ``where_document`` and
        scope, no extras (query modes) and the index batches for real (a vector index's own
        ``_search_batch``); otherwise, and for one query, each is searched alone. Either way
        each list is the one :meth:`search_index` gives that query (the scores of a batched
        product may differ from a single one in the last float32 bits)."""
        if len(queries) < 2:
            return [self.search_index(name, q, k, list_name=list_name) for q in queries]
        with self._lock:
            handle = self._indexes.get(name)
            if handle is None or handle.stale or handle.error is not None or self._state.closed:
                handle = self._handle(name)
            if (self._store.read_only or self._store.shared) and not handle.index.reads_store:
                self._catch_up(handle)
                if self._indexes.get(name) is not handle:  # another process dropped or re-created it
                    handle = self._handle(name)
            validate_k(k)
            checked = [self._narrowed(q) for q in queries]
            index = handle.index
            first = checked[0]
            if not _batches(index) or any(
                q.extras or q.where != first.where or q.where_document != first.where_document or q.scope != first.scope for q in checked
            ):
                return [self.search_index(name, q, k, list_name=list_name) for q in checked]
            requires = index.requires
            for query in checked:
                if requires.text and not (query.text and query.text.strip()):
                    raise ValidationError("this index searches text: the query text is empty")
                for space in requires.spaces:
                    if space not in query.vectors:
                        self._prepared(query, space)
                        query_vector(self._spaces, query, space)
                index.validate_query(query)
            if first.where is None and first.scope is None and first.where_document is None and self._state.text_filter.get() is None:
                allowed = None
            elif index.applies_filters and first.where_document is None and self._state.text_filter.get() is None:
                allowed = None
            else:
                allowed = self._allowed(first, rows_at=handle.applied_seq if index.takes_store_rows else None)
                if isinstance(allowed, AllowedIds) and not allowed:
                    return [[] for _ in checked]
            lists = index.search_batch(checked, k, allowed)
            for hits in lists:
                rank_hits(hits, list_name or name, name)
            return lists

    def _narrowed(self, query: Query) -> Query:
        """``query`` checked by this reader, its scope narrowed with the bound one (as :meth:`search_index` does)."""
        if query._checked_by is not self._state:
            return self.request(query)
        bound = self._scope.get()
        if bound is not None and bound is not query.scope:
            scope = narrow(bound, query.scope)
            if scope != query.scope:
                return self._rescoped(query, scope)
        return query

    def build_fusion(self, fusion: str | Mapping[str, Any] | Any) -> Any:
        """A fusion strategy (a :class:`memcore.plugin.Fusion`) from a registered name or a
        config dict; anything else is taken to be a fusion already."""
        if not isinstance(fusion, (str, Mapping)):
            return fusion
        data = {"kind": fusion} if isinstance(fusion, str) else dict(fusion)
        kind = data.pop("kind", None)
        reg = self._state.registry.get("fusions", str(kind), location="fusion")
        return reg.build(reg.parse_config(data, "fusion"))

    def query_vector(self, query: Query, space: str) -> Any:
        """The query's vector in ``space`` (embedded once and cached on the query)."""
        self._prepared(query, space)
        return query_vector(self._spaces, query, space)

    def _allowed(self, query: Query, index: str | None = None, *, rows_at: int | None = None) -> AllowedIds | AllowedRows | None:
        """The ids the query's filter and scope allow, resolved once per store sequence and
        shared by every index (see :mod:`memcore.indexes._allowed`); None when the query has neither.
        ``rows_at``: the store sequence an index over the store's rows is caught up to; when it
        is the store's present one, an :class:`AllowedRows` (the store resolves it as rows)."""
        where = query.parsed_where()
        scope = query.scope if query.scope is not None and not query.scope.is_empty() else None
        document = self._text_filter(query.parsed_where_document())
        if where is None and scope is None and document is None:
            return None
        key: tuple[Any, ...] = (filter_key(where), tuple(scope.as_dict().items()) if scope is not None else ())
        if document is not None:
            key = (*key, document_key(document))
        store = self._store
        seq = store.last_seq()  # once: the set's state, and the index's when rows are handed over
        resolve_rows = (lambda space, at: store.allowed_rows(space, at, where=where, where_document=document, scope=scope)) if rows_at == seq else None
        among = (lambda ids, at: store.allowed_among(ids, at, where=where, where_document=document, scope=scope)) if rows_at == seq else None
        saved = (lambda space, at: store.saved_rows(space, at, where=where, where_document=document, scope=scope)) if rows_at == seq else None
        return self._allowed_sets.get(seq, key, lambda: self._resolve_allowed(where, scope, document), where, scope, document, resolve_rows, among, saved)

    def _resolve_allowed(self, where: Filter | None, scope: Scope | None, document: DocumentFilter | None = None) -> list[str]:
        # Ids the index does not hold are harmless in ``allowed`` (an index returns only ids it
        # holds), so the store skips the membership join: measured at 100k records it was the
        # costlier half of the query, and it can only shrink a set whose size is paid in SQL anyway.
        return self._store.allowed_ids(where=where, where_document=document, scope=scope)

    # -- reads ---------------------------------------------------------------------------

    def list_indexes(self) -> list[dict[str, Any]]:
        """Each index: name, kind, config, size, score name and requirements."""
        with self._lock:
            self._sync()
            sizes = {name: self._size(name) for name in list(self._indexes)}  # an index that cannot count is reported broken
            return [
                {
                    "name": h.name,
                    "kind": h.kind,
                    "config": h.config.model_dump(mode="json"),
                    "size": sizes[h.name],
                    "score": h.index.score_name,
                    "requires": {"spaces": list(h.index.requires.spaces), "text": h.index.requires.text, "links": h.index.requires.links},
                    "status": "ok" if h.error is None else "broken",
                    **({"error": h.error} if h.error is not None else {}),
                }
                for h in self._indexes.values()
            ]

    def cosine_space(self, index: str) -> str | None:
        """The dense space whose exact cosine similarity the hits of ``index`` carry as their
        score (:attr:`memcore.plugin.Index.cosine_space`); None for another score, a broken
        index or no index of that name."""
        handle = self._indexes.get(index)
        return handle.index.cosine_space if handle is not None and handle.error is None else None

    def has_index(self, name: str) -> bool:
        """True when an index of that name exists."""
        return name in self._indexes

    def get(self, id: str) -> Record:
        """One record (NotFoundError when absent); several ids: :meth:`get_many`."""
        if not isinstance(id, str):
            raise ValidationError(f"get takes one record id (a string), not a {type(id).__name__}; get_many takes several")
        return self._get_many([id])[0]

    def ids_of(self, items: Any) -> list[str]:
        """The ids :meth:`insert` gives ``items`` (one or a list: texts, dicts, Records),
        checked as ``insert`` checks them, without writing: an item without ``id`` gets the
        hash of its text, metadata and (bound) scope, so a service can tell an idempotent
        retry (identical content: the same id, already stored) before it places anything."""
        return [r.id for r in coerce_records(items, self._binding.effective(None), self._spaces)]

    def get_many(self, ids: Sequence[str]) -> list[Record | None]:
        """Records by id in order, None for unknown ids."""
        with self._lock:
            self._check_open()
            found = self._store.get(coerce_ids(ids))
            if self._scope.get() is None:
                return found
            return [r if r is not None and self._binding.covers(r) else None for r in found]

    def records(self, ids: Sequence[str]) -> list[Record | None]:
        """Records by id in order, without their vectors; None for unknown ids and ids the
        bound scope does not see."""
        got = self._store.get(ids, with_vectors=False)
        hidden = self._invisible(ids) if self._scope.get() is not None else None
        if hidden:  # ids a stage found elsewhere (links...) that the caller's scope does not see
            hidden_set = set(hidden)
            return [None if r is not None and r.id in hidden_set else r for r in got]
        return list(got)

    def texts(self, ids: Sequence[str]) -> list[str | None]:
        """The stored texts of ``ids`` in order; None for unknown ids and ids the bound scope
        does not see (lighter than :meth:`records`)."""
        texts = self._store.texts(ids)
        hidden = self._invisible(ids) if self._scope.get() is not None else None
        if hidden:
            hidden_set = set(hidden)
            return [None if rid in hidden_set else text for rid, text in zip(ids, texts)]
        return list(texts)

    def count(
        self,
        *,
        index: str | None = None,
        where: Mapping[str, Any] | None = None,
        scope: Scope | Mapping[str, Any] | None = None,
        where_document: Mapping[str, Any] | None = None,
    ) -> int:
        """Number of records (in one index, matching a filter, a text filter and scope)."""
        parsed, document = parse_filter(where), self._text_filter(parse_where_document(where_document))
        with self._lock:
            self._check_open()
            if index is not None:
                self._handle(index)
            effective = self._binding.effective(scope)
            if document is None:
                return self._store.count(where=parsed, scope=effective, index=index)
            return self._store.find_count(where=parsed, where_document=document, scope=effective, index=index)

    def ids(
        self,
        *,
        index: str | None = None,
        where: Mapping[str, Any] | None = None,
        scope: Scope | Mapping[str, Any] | None = None,
        where_document: Mapping[str, Any] | None = None,
        offset: int = 0,
        limit: int | None = None,
    ) -> list[str]:
        """Ids in insertion order (in one index, matching a filter, a text filter and scope),
        ``limit`` of them from position ``offset`` (a page; insertion order is stable, so
        consecutive pages neither repeat nor skip a record while nothing is written)."""
        check_page(offset, limit)
        parsed, document = parse_filter(where), self._text_filter(parse_where_document(where_document))
        with self._lock:
            self._check_open()
            if index is not None:
                self._handle(index)
            effective = self._binding.effective(scope)
            if document is None and not offset and limit is None:
                return self._store.ids(where=parsed, scope=effective, index=index)
            return self._store.find_ids(where=parsed, where_document=document, scope=effective, index=index, offset=offset, limit=limit)

    def history(self, id: str) -> list[Version]:
        """Every kept version of record ``id``, oldest first (see :meth:`memcore.plugin.Store.history`),
        deleted records included. With a bound scope only the versions it covers; an id with
        none (unknown, or of another scope) is a NotFoundError, the same either way."""
        if not isinstance(id, str) or not id:
            raise ValidationError(f"a record id is a non-empty string, not {id!r}")
        with self._lock:
            self._check_open()
            versions = self._store.history(id)
        bound = self._scope.get()
        if bound is not None:
            versions = [v for v in versions if bound.covers(v.scope)]
        if not versions:
            raise NotFoundError(f"no record {id!r} and no history of it{' in this scope' if bound is not None else ''}")
        return versions

    def attach_records(self, hits: list[Hit]) -> list[Hit]:
        """Attach each hit's record (without vectors); hits whose record vanished are dropped.

        The records are read now and each is built on first access of ``hit.record`` (see
        :mod:`memcore.model._record_batch`)."""
        if self._scope.get() is not None:
            hidden = set(self._invisible([h.id for h in hits]))
            hits = [h for h in hits if h.id not in hidden] if hidden else hits
        return attach_batch(hits, self._store.get_batch([h.id for h in hits]))

    def attach_records_many(self, lists: Sequence[list[Hit]]) -> list[list[Hit]]:
        """:meth:`attach_records` of each list, with one store read for the hits of all."""
        wanted = list(dict.fromkeys(h.id for hits in lists for h in hits))
        if self._scope.get() is not None:
            hidden = set(self._invisible(wanted))
            if hidden:
                lists = [[h for h in hits if h.id not in hidden] for hits in lists]
                wanted = [i for i in wanted if i not in hidden]
        batch = self._store.get_batch(wanted)
        return [attach_batch(hits, batch) for hits in lists]

    def vectors(self, ids: Sequence[str], space: str) -> tuple[Any, Any]:
        """Stored vectors of ``ids`` in ``space``: ``(matrix, present mask)`` (records outside
        the bound scope are absent: zero rows, mask False)."""
        ids = list(ids)
        matrix, present = self._store.vectors(ids, space)
        hidden = set(self._invisible(ids))
        if hidden:
            for row, rid in enumerate(ids):
                if rid in hidden:
                    matrix[row] = 0
                    present[row] = False
        return matrix, present
