"""``memcore.Memory``: a built memory and its everyday API.

What a Chroma collection user reaches for, without going through ``.collection``:
``insert`` (one item or many), ``get``, ``update``, ``upsert``, ``delete`` (ids, a
``where`` filter and/or a scope), ``count``, plus ``retrieve`` (the service's unified
interface) and ``query`` (the pipeline, hits with provenance).

Every method has explicit keyword arguments: a keyword a method does not know is a
``TypeError`` from Python itself, never silently dropped. The only open door is
``insert``/``retrieve``'s ``**options``, handed to the service, whose own signature (or
:meth:`memcore.Service.reject_unknown`) refuses what it does not know.

Every write goes through the service (its policy decides what goes where), and every verb
takes a ``scope``: the core binds it for the call, so no read returns, counts or reveals
another scope's records and a record of another scope is unknown (``NotFoundError``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..errors import ConfigError, NotFoundError, ValidationError
from ..collection._input import coerce_ids
from ..llms._llm import LLMs
from ..model._query import Hit
from ..model._record import Record, Scope
from ..services._service import where_from_options

if TYPE_CHECKING:
    from ..collection._collection import Collection
    from ..retrieval._pipeline import Pipeline
    from ..services._service import Service
    from ..settings import MemcoreSettings

__all__ = ["Memory"]

ScopeLike = Scope | Mapping[str, Any] | None


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

    def delete(self, ids: str | Sequence[str] | None = None, *, where: Mapping[str, Any] | None = None, scope: ScopeLike = None) -> int:
        """Delete records by id, by a ``where`` filter and/or within a scope; returns how many.

        Ids outside ``scope`` (or unknown) raise NotFoundError and nothing is deleted; with
        ``where`` (and/or ``scope``) alone, every matching record in the scope goes. At least
        one of ``ids``, ``where`` or ``scope`` is required (nothing is deleted by accident).
        The service deletes them (:meth:`memcore.Service.delete`), so that what it derived
        from them (``hybrid``'s windows) changes in the same atomic write. A scope alone
        forgets the scope (:meth:`forget`): its records, what was derived from them and its
        service state.
        """
        if ids is None and where is None and scope is None:
            raise ValidationError("delete needs ids, a where filter or a scope (to empty the memory: delete(where={}))")
        if ids is None and where is None:
            return int(self.forget(scope)["records"])
        with self.collection.scoped(scope):
            if ids is not None:
                wanted = coerce_ids(ids)
                if where is not None:
                    targets = set(self.collection.ids(where=where))
                    wanted = [i for i in wanted if i in targets]
                    if not wanted:
                        return 0
                return self.service.delete(wanted)
            matching = self.collection.ids(where=where)
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
        self, ids: str | Sequence[str] | None = None, *, where: Mapping[str, Any] | None = None, scope: ScopeLike = None, limit: int | None = None
    ) -> Record | list[Record]:
        """One record by id (NotFoundError when absent), records by ids (in order), or the
        records matching ``where`` / ``scope`` (insertion order, at most ``limit``)."""
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise ValidationError(f"limit must be a non-negative int, not {limit!r}")
        if isinstance(ids, str):
            found = self.get([ids], where=where, scope=scope)
            return found[0]  # type: ignore[index]
        with self.collection.scoped(scope):
            return self._get(ids, where, limit)

    def _get(self, ids: Sequence[str] | None, where: Mapping[str, Any] | None, limit: int | None) -> list[Record]:
        """:meth:`get` once its scope is bound (the collection hides other scopes' records)."""
        if ids is None:
            wanted = self.collection.ids(where=where)
        else:
            wanted = list(ids)
            if where is not None:
                allowed = set(self.collection.ids(where=where))
                outside = [i for i in wanted if i not in allowed]
                if outside:
                    raise NotFoundError(f"no record(s) {outside[:5]} matching this where filter")
        if limit is not None:
            wanted = wanted[:limit]
        records = self.collection.get_many(wanted)
        missing = [i for i, r in zip(wanted, records) if r is None]
        if missing:
            raise NotFoundError(f"no record(s) {missing[:5]}{' in this scope' if self.collection.bound_scope else ''}")
        return records  # type: ignore[return-value]

    def count(self, *, where: Mapping[str, Any] | None = None, scope: ScopeLike = None, index: str | None = None) -> int:
        """Number of records (matching ``where``, in ``scope``, in one ``index``)."""
        return self.collection.count(where=where, scope=scope, index=index)

    def retrieve(
        self, query: str | None = None, vector: Any = None, where: Mapping[str, Any] | None = None, k: int = 10, **options: Any
    ) -> list[dict[str, Any]]:
        """Recall through the service: ``[{"id", "text", "score", "metadata"}]``.

        ``where`` is a metadata filter (as for :meth:`get`, :meth:`count`, :meth:`query`;
        ``metadata=``, its former name, works with a DeprecationWarning); ``options``
        (e.g. ``scope``) go to the service, which rejects keywords it does not know.
        """
        where = where_from_options(where, options)
        return self.service.retrieve(query, vector=vector, where=where, k=k, **options)

    def query(self, text: str, *, k: int = 10, where: Mapping[str, Any] | None = None, index: str | None = None, scope: ScopeLike = None) -> list[Hit]:
        """Run the declared pipeline (or one index) and return hits with provenance."""
        with self.collection.scoped(scope):
            if index is not None:
                return self.collection.retrieve(text, index=index, k=k, where=where)
            if self.pipeline_error is not None:
                raise self._pipeline_unusable(self.pipeline_error)
            return self.pipeline.run(self.collection, text, k=k, where=where)

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
