"""Memory services: policy over one collection (Service : Collection = 1 : 1).

A service decides what is inserted where, what migrates and what is forgotten. It offers
the unified interface (docs/architecture.md §2):

- ``insert(text, vector=None, metadata=None) -> id``
- ``retrieve(query=None, vector=None, where=None, k=10) -> [{"id", "text", "score", "metadata"}]``
  where ``where`` is a metadata filter, as for every other verb (``Collection.retrieve``,
  ``count``, ``ids``, the CLI's ``--where``). ``metadata=``, its former name, still works
  with a DeprecationWarning: the base class maps it to ``where=`` before the service runs.

Indexes a service needs are declared by ``required_indexes(config)`` on its class, named
under its own prefix (``memoryos.stm``); :func:`memcore.open` creates the missing ones.
Service state lives in the store (``WriteBatch.state``), never only in Python objects.

**Scopes are enforced for the service, not by it.** Every public verb of a service
(``insert``, ``insert_many``, ``insert_columns``, ``retrieve``, ``delete``, ``upsert``, ``update``, ``forget``)
takes a ``scope=`` keyword that the base class binds on the collection for the call (see
:mod:`memcore.model._binding`) before the service's own code runs: the service's reads see
only that scope's records, what it writes (derived records included) carries the scope,
and its component state is kept per scope. A service never sees ``scope`` in its keyword
arguments; :attr:`Service.scope` tells it the bound scope when it needs it (e.g. to name a
per-user record).

**Concurrent callers are serialised for the service, not by it.** Every public verb
(:data:`SERIALISED_VERBS`: the scoped verbs plus ``check``, ``repair`` and ``close``) runs
under the service's one re-entrant lock (:attr:`Service.write_lock`), which the base class
takes before the service's own code runs: a service's read-modify-write of its state (read
a counter, a tier, a segment, then commit) is one critical section, whichever thread calls
it. A verb the service declares in :attr:`Service.read_only_verbs` (it only reads) runs
without the lock, beside the others. Third-party services get this by subclassing.

**Consistency.** :meth:`Service.check` returns the inconsistencies between the service's
state and its records (:class:`~._problems.ServiceProblem`), :meth:`Service.repair` fixes
them; both default to "nothing to check". ``memcore.open`` never calls them, so a memory
whose service state is inconsistent opens, and is reported and repaired on demand; a verb
that fails with a raw (non-memcore) error on inconsistent state raises a
:class:`~memcore.CorruptError` naming the problems and the repair instead.

The builtin ``default`` service (:class:`DefaultService`: no policy, retrieval is the
pipeline) lives here too, at the end.
"""

from __future__ import annotations

import functools
import threading
import warnings
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, TypeVar

from pydantic import Field

from ..collection._columns import columns_as_items
from ..errors import ConfigError, CorruptError, MemcoreError, ValidationError
from ..llms._llm import LLM, LLMs, StepCounter, run_llm_step
from ..model._query import Hit
from ..model._query import Query
from ..model._binding import namespace_scope, state_namespace
from ..model._record import Record, Scope
from .._plugins._registry import ComponentConfig
from ._problems import ServiceProblem

if TYPE_CHECKING:
    from ..collection._collection import Collection
    from ..retrieval._pipeline import Pipeline

__all__ = [
    "Service",
    "ServiceProblem",
    "hit_to_dict",
    "SCOPED_VERBS",
    "SERIALISED_VERBS",
    "where_from_options",
    "DefaultService",
    "DefaultServiceConfig",
]

T = TypeVar("T")

SCOPED_VERBS = ("insert", "insert_many", "insert_columns", "retrieve", "delete", "upsert", "update", "forget")
"""The service verbs whose ``scope=`` keyword the base class binds on the collection."""

SERIALISED_VERBS = (*SCOPED_VERBS, "check", "repair", "close")
"""The service verbs the base class runs under the service's lock (unless the service lists
them in :attr:`Service.read_only_verbs`)."""

_LOCK_GUARD = threading.Lock()  # creates each service's lock once, whichever thread asks first


def _service_lock(service: "Service") -> threading.RLock:
    """``service``'s re-entrant lock (made on first use, so a subclass that does not call
    ``Service.__init__`` is serialised too)."""
    lock: threading.RLock | None = service.__dict__.get("_memcore_lock")
    if lock is None:
        with _LOCK_GUARD:
            lock = service.__dict__.setdefault("_memcore_lock", threading.RLock())
    return lock


def _serialised(verb: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a service verb: it runs under the service's lock unless the service declares it
    read-only (:attr:`Service.read_only_verbs`)."""
    if getattr(method, "__memcore_serialised__", False):
        return method

    @functools.wraps(method)
    def call(self: "Service", *args: Any, **kwargs: Any) -> Any:
        try:
            if verb in type(self).read_only_verbs:
                return method(self, *args, **kwargs)
            with _service_lock(self):
                return method(self, *args, **kwargs)
        except MemcoreError:
            raise
        except Exception as exc:
            if verb in ("check", "repair", "close"):
                raise
            _raise_if_inconsistent(self, verb, exc)
            raise

    call.__memcore_serialised__ = True  # type: ignore[attr-defined]
    return call


def _raise_if_inconsistent(service: "Service", verb: str, exc: Exception) -> None:
    """A verb failed with a raw (non-memcore) error: when the service's state is
    inconsistent, say so with a typed :class:`CorruptError` naming the repair."""
    try:
        problems = service.check()
    except Exception:  # noqa: BLE001 - the original error is the one to report
        return
    if problems:
        shown = "; ".join(str(p) for p in problems[:3])
        raise CorruptError(
            f"{type(service).__name__}.{verb} failed ({type(exc).__name__}: {exc}) on inconsistent service state, "
            f"{len(problems)} problem(s): {shown}; repair it with Memory.repair_service() or `memcore service repair`"
        ) from exc


def _binds_scope(method: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a service verb: its ``scope=`` keyword is bound on the collection for the call."""
    if getattr(method, "__memcore_binds_scope__", False):
        return method

    @functools.wraps(method)
    def call(self: "Service", *args: Any, scope: Any = None, **kwargs: Any) -> Any:
        if scope is None:  # nothing new to bind: binding None keeps what is bound
            return method(self, *args, **kwargs)
        with self.collection.scoped(scope):
            return method(self, *args, **kwargs)

    call.__memcore_binds_scope__ = True  # type: ignore[attr-defined]
    return call


def where_from_options(where: Any, options: dict[str, Any], *, stacklevel: int = 2) -> Any:
    """The filter of a retrieve: ``where``, or a caller's ``metadata=`` (its deprecated name,
    popped from ``options``) with a DeprecationWarning; both given is a ValidationError."""
    if "metadata" not in options:
        return where
    metadata = options.pop("metadata")
    if where is not None and metadata is not None:
        raise ValidationError("retrieve got both where= and metadata= (the former name of where=); give where= only")
    warnings.warn("retrieve(metadata=...) is deprecated: the filter is where=, as for every other verb", DeprecationWarning, stacklevel=stacklevel + 1)
    return metadata if where is None else where


def _maps_metadata(method: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a service's ``retrieve``: a caller's ``metadata=`` (the filter's former name)
    reaches it as ``where=``, with a DeprecationWarning."""
    if getattr(method, "__memcore_maps_metadata__", False):
        return method

    @functools.wraps(method)
    def call(self: "Service", *args: Any, **kwargs: Any) -> Any:
        if "metadata" in kwargs:
            kwargs["where"] = where_from_options(kwargs.get("where"), kwargs, stacklevel=2)
        return method(self, *args, **kwargs)

    call.__memcore_maps_metadata__ = True  # type: ignore[attr-defined]
    return call


def hit_to_dict(hit: Hit) -> dict[str, Any]:
    """The unified result shape: id, text, score, metadata."""
    record = hit.record
    return {
        "id": hit.id,
        "text": record.text if record else None,
        "score": hit.score,
        "metadata": record.metadata if record else {},
    }


class Service(ABC):
    """Base class of memory services.

    ``uses_pipeline`` (class attribute, default True): False for a service that retrieves
    without the memory's declared pipeline; :func:`memcore.open` then does not refuse a
    pipeline that cannot run on the service's indexes (``Memory.query`` raises its error).
    """

    uses_pipeline: bool = True

    capacity_limited: bool = False
    """True for a service that may not return an item it accepted, even with a large ``k``
    (a window, tier capacities, similarity thresholds): the contract suite then checks that
    what it returns belongs to the caller's scope, not that everything comes back."""

    read_only_verbs: frozenset[str] = frozenset()
    """Verbs of this service that only read (no state change, no write) and so may run
    beside its other calls, without :attr:`write_lock` (e.g. ``{"retrieve"}`` for a service
    whose retrieve counts no visits). Every other verb of :data:`SERIALISED_VERBS` runs
    under the lock. A subclass that overrides a verb without declaring ``read_only_verbs``
    itself loses the inherited promise for that verb."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for verb in SCOPED_VERBS:
            method = cls.__dict__.get(verb)
            if callable(method):
                setattr(cls, verb, _binds_scope(method))
        for verb in SERIALISED_VERBS:
            method = cls.__dict__.get(verb)
            if callable(method):
                setattr(cls, verb, _serialised(verb, method))
        if callable(cls.__dict__.get("retrieve")):  # outermost: its warning points at the caller
            cls.retrieve = _maps_metadata(cls.__dict__["retrieve"])  # type: ignore[method-assign]
        if "read_only_verbs" not in cls.__dict__:  # an inherited promise does not cover a verb this class rewrites
            rewritten = {verb for verb in cls.read_only_verbs if verb in cls.__dict__}
            if rewritten:
                cls.read_only_verbs = frozenset(cls.read_only_verbs - rewritten)
        unknown = set(cls.read_only_verbs) - set(SERIALISED_VERBS)
        if unknown:
            raise TypeError(f"{cls.__name__}.read_only_verbs names {sorted(unknown)}, which are not service verbs {list(SERIALISED_VERBS)}")

    def __init__(self, config: ComponentConfig, collection: "Collection", pipeline: "Pipeline | None"):
        self.config = config
        self.collection = collection
        self.pipeline = pipeline
        self.llms: LLMs = LLMs()
        self.llm_steps = StepCounter()

    def bind_llms(self, llms: LLMs) -> None:
        """Receive the memory's declared LLMs (:func:`memcore.open` calls it after building
        the service; a config field ``llm`` names the one the service uses)."""
        self.llms = llms
        self.llm(check=True)

    def llm(self, check: bool = False) -> LLM | None:
        """The LLM named by the config's ``llm`` field (None: the fallbacks run)."""
        name = getattr(self.config, "llm", None)
        return self.llms.resolve(name, "service.llm")

    def run_llm_step(self, step: str, call: Callable[[LLM], T], fallback: Callable[[], T], fallback_name: str) -> T:
        """Run one LLM step with the service's LLM (or its fallback) and count which ran."""
        value, report = run_llm_step(step, self.llm(), call, fallback, fallback_name)
        self.llm_steps.add(report)
        return value

    def llm_report(self) -> dict[str, Any]:
        """Which path each LLM step took so far: ``{"model": ..., "steps": {step: {"llm": n, "fallback:<name>": n}},
        "fallback_reasons": {step: {reason: n}}}`` (reasons: ``no_llm``, ``llm_error``, ``invalid_reply``)."""
        models = sorted(self.llm_steps.models)
        return {
            "model": models[0] if len(models) == 1 else (models or None),
            "steps": self.llm_steps.to_dict(),
            "fallback_reasons": self.llm_steps.reasons_dict(),
        }

    @classmethod
    def required_indexes(cls, config: ComponentConfig) -> dict[str, dict[str, Any]]:
        """Indexes this service needs: ``{name: {"kind": ..., **options}}``."""
        return {}

    @abstractmethod
    def insert(self, text: str, vector: Any = None, metadata: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
        """Remember one item; returns its id."""

    @abstractmethod
    def retrieve(
        self, query: str | None = None, vector: Any = None, where: Mapping[str, Any] | None = None, k: int = 10, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """Recall items for a query text and/or vector, filtered by ``where`` (a metadata filter).

        A caller's ``metadata=`` (the former name of ``where=``) arrives here as ``where``."""

    def retrieve_many(
        self, queries: Sequence[str | None], vectors: Sequence[Any] | None = None, where: Mapping[str, Any] | None = None, k: int = 10, **kwargs: Any
    ) -> list[list[dict[str, Any]]]:
        """:meth:`retrieve` of each query (a text, or None) with its vector (``vectors[i]``,
        or None), in order: what :meth:`memcore.Memory.retrieve_many` calls. ``kwargs``
        (``scope``...) go to each retrieve.

        The default is that loop; a service that can answer a batch at once overrides it
        (the ``default`` service runs its pipeline once for the batch, :meth:`memcore.Pipeline.run_many`)
        and must give the same lists and raise the error the loop would."""
        rows = vectors if vectors is not None else [None] * len(queries)
        return [self.retrieve(text, vector=vector, where=where, k=k, **kwargs) for text, vector in zip(queries, rows)]

    def insert_many(self, items: list[Any]) -> list[str]:
        """Remember many items (texts, dicts with ``text``, :class:`Record` objects); returns their ids.

        The default calls :meth:`insert` once per item; services that can write a batch in
        one transaction override it.
        """
        ids = []
        for item in items:
            if isinstance(item, str):
                ids.append(self.insert(item))
            elif isinstance(item, Record):
                ids.append(self.insert(item.text, metadata=item.metadata, id=item.id, vectors=item.vectors or None, links=item.links or None, scope=item.scope))
            elif isinstance(item, Mapping):
                fields = dict(item)
                if "text" not in fields:
                    raise ValidationError("a record needs a 'text'")
                ids.append(self.insert(fields.pop("text"), metadata=fields.pop("metadata", None), **fields))
            else:
                raise ValidationError(f"cannot insert a {type(item).__name__}; give texts, dicts or Records")
        return ids

    def insert_columns(self, texts: Any, *, ids: Any = None, metadata: Any = None, vectors: Any = None) -> list[str]:
        """Remember a batch given as columns (what :meth:`memcore.Memory.insert_columns`
        calls): ``texts``, ``ids`` (None: from the content), ``metadata`` (``{field:
        values}``), ``vectors`` (``{space: (n, dim) matrix}``), one value per record in each;
        returns the ids.

        The default makes one dict per record and calls :meth:`insert_many` (so a service's
        policy applies as to any batch); a service that writes the batch as it comes
        overrides it (the ``default`` service: :meth:`memcore.Collection.insert_columns`).
        """
        return self.insert_many(columns_as_items(texts, ids, metadata, vectors))

    def delete(self, ids: list[str]) -> int:
        """Forget records (what :meth:`memcore.Memory.delete` calls); returns how many.

        The default deletes them from the collection. A service that derives records from
        others (``hybrid``'s windows) overrides it to rebuild those in the same atomic batch.
        Unknown ids (or ids outside the bound scope: ``delete(ids, scope=...)``) raise
        :class:`memcore.NotFoundError` and nothing changes.
        """
        return self.collection.delete(ids)

    def upsert(self, items: Any) -> list[str]:
        """Insert new records and replace existing ones with the same id; returns the ids.

        The default writes to the collection (new records go to every index). A service
        that places records by a policy (tiers, windows) overrides it or refuses it.
        """
        return self.collection.upsert(items)

    def update(self, id: str, **fields: Any) -> Record:
        """Change fields (``text``, ``metadata``, ``merge_metadata``, ``vectors``) of one
        record of the caller's scope; returns it. The default rewrites it in the collection,
        keeping its index memberships."""
        self.reject_unknown("update", fields, ("text", "metadata", "merge_metadata", "vectors"))
        return self.collection.update(id, **fields)

    def forget(self) -> dict[str, Any]:
        """Forget the bound scope (``forget(scope={...})``): its records, what was derived
        from them and its service state, in one commit; returns what went by kind.

        The default is :meth:`memcore.Collection.forget`, complete for every service that
        keeps its derived records and state through the collection (they carry the scope)."""
        bound = self.scope
        if bound is None:
            raise ValidationError("forget needs a scope, e.g. forget(scope={'user_id': 'bob'})")
        return self.collection.forget(bound)

    @property
    def scope(self) -> Scope | None:
        """The scope the current call is bound to (None: unrestricted)."""
        return self.collection.bound_scope

    @staticmethod
    def reject_unknown(method: str, options: Mapping[str, Any], known: tuple[str, ...] = ()) -> None:
        """Raise ValidationError naming keyword arguments ``method`` does not know (never drop them)."""
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise ValidationError(f"{method}() got unknown keyword argument(s) {unknown}; it accepts {sorted(known) or 'no extra keywords'}")

    def close(self) -> None:
        """Release what the service holds (the collection is closed by its owner)."""

    @property
    def write_lock(self) -> threading.RLock:
        """The re-entrant lock the base class holds around each state-changing verb (see
        :data:`SERIALISED_VERBS`). Hold it (``with self.write_lock:``) in a public method of
        your own that changes the service's state, so that it does not interleave with them."""
        return _service_lock(self)

    # -- consistency: check and repair ----------------------------------------------------

    def check(self) -> list[ServiceProblem]:
        """The inconsistencies between the service's state and its records, every scope
        (a crash of an older version, a bug, a hand edit of the store). The default checks
        nothing: a service that keeps state beside its records overrides it. Reads only."""
        return []

    def repair(self) -> list[ServiceProblem]:
        """Fix what :meth:`check` finds, in as few commits as the service can (each one
        consistent on its own, so an interrupted repair is finished by running it again);
        returns the problems it fixed. Never deletes a record the caller stored. The
        default fixes nothing."""
        return []

    def state_scopes(self, namespace: str) -> list[Scope | None]:
        """The scopes holding state in ``namespace`` (None: the unscoped state), for a
        :meth:`check` that visits each scope's state (bind one with
        ``self.collection.scoped(scope)``)."""
        out: dict[str, Scope | None] = {}
        for stored in self.collection.store.state_namespaces():
            if stored == namespace:
                out.setdefault("", None)
            elif stored.startswith(namespace + "@"):
                scope = namespace_scope(stored)
                if scope is not None and stored == state_namespace(namespace, scope):
                    out.setdefault(stored, scope)
        return list(out.values())

    # helpers for subclasses -------------------------------------------------------------

    def vector_space(self, explicit: str | None = None) -> str:
        """The space a bare ``vector`` argument belongs to: ``explicit`` or the only space."""
        if explicit:
            return explicit
        spaces = list(self.collection.spaces)
        if len(spaces) != 1:
            raise ValidationError(f"say which space the vector belongs to (service 'space' option); spaces: {spaces}")
        return spaces[0]

    def make_query(
        self,
        query: str | None,
        vector: Any,
        where: Mapping[str, Any] | None = None,
        k: int = 10,
        space: str | None = None,
        scope: Any = None,
        extras: Mapping[str, Any] | None = None,
        **deprecated: Any,
    ) -> Query:
        """The one Query of a retrieve, from the unified arguments, checked once by the
        collection (:meth:`memcore.plugin.CollectionReader.request`: k, the vector's space and
        dimension, the filter, the scope narrowed with the bound one); ``Pipeline.run`` and
        the searches below trust it. Give ``scope`` and ``extras`` here rather than to
        ``Pipeline.run``/``Collection.retrieve`` or ``Query.evolve``, each of which builds a
        second query to add them. ``metadata=``, the former name of ``where``, works with a
        DeprecationWarning."""
        where = where_from_options(where, deprecated)
        self.reject_unknown("make_query", deprecated)
        if query is None and vector is None:
            raise ValidationError("retrieve needs a query text or a vector")
        vectors = {self.vector_space(space): vector} if vector is not None else None
        return self.collection.request(query, k=k, where=dict(where) if where else None, scope=scope, vectors=vectors, extras=dict(extras) if extras else None)


for _verb in SCOPED_VERBS:
    setattr(Service, _verb, _binds_scope(getattr(Service, _verb)))
for _verb in SERIALISED_VERBS:
    setattr(Service, _verb, _serialised(_verb, getattr(Service, _verb)))
Service.retrieve = _maps_metadata(Service.retrieve)  # type: ignore[method-assign]


# -- the builtin default service ------------------------------------------------------------


class DefaultServiceConfig(ComponentConfig):
    """Settings of the ``default`` service."""

    kind: str = "default"
    indexes: list[str] | None = Field(None, description="Indexes new items go to (default: all).")
    space: str | None = Field(None, description="Space of a bare vector argument (default: the only space).")


class DefaultService(Service):
    """No policy: every item goes to the configured indexes; retrieval is the pipeline."""

    config: DefaultServiceConfig
    read_only_verbs = frozenset({"retrieve"})  # retrieve runs the pipeline and writes nothing

    def insert(self, text: str, vector: Any = None, metadata: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
        """Insert one item (``id``, ``links``, ``vectors`` may be passed as keywords; ``scope``
        is bound by the base class)."""
        self.reject_unknown("insert", kwargs, ("id", "links", "vectors"))
        item: dict[str, Any] = {"text": text, "metadata": dict(metadata or {}), **{k: v for k, v in kwargs.items() if v is not None}}
        if vector is not None:
            space = self.vector_space(self.config.space)
            if space in item.get("vectors", {}):
                raise ValidationError(f"the vector of space {space!r} is given twice (vector= and vectors=)")
            item["vectors"] = {**item.get("vectors", {}), space: vector}
        return self.collection.insert([item], indexes=self.config.indexes)[0]

    def insert_many(self, items: list[Any]) -> list[str]:
        """Insert many items in one transaction (texts, dicts, Records); returns their ids."""
        return self.collection.insert(items, indexes=self.config.indexes)

    def insert_columns(self, texts: Any, *, ids: Any = None, metadata: Any = None, vectors: Any = None) -> list[str]:
        """Insert a batch given as columns in one transaction, without a dict per record
        (:meth:`memcore.Collection.insert_columns`); ``vectors`` may also be one matrix: the
        vectors of the service's space (``space``, or the only one)."""
        if vectors is not None and not isinstance(vectors, Mapping):
            vectors = {self.vector_space(self.config.space): vectors}
        return self.collection.insert_columns(texts, ids=ids, metadata=metadata, vectors=vectors, indexes=self.config.indexes)

    def retrieve(
        self, query: str | None = None, vector: Any = None, where: Mapping[str, Any] | None = None, k: int = 10, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """Run the pipeline; returns ``[{"id", "text", "score", "metadata"}]``."""
        if self.pipeline is None:
            raise ConfigError("no pipeline is configured", location="pipeline")
        self.reject_unknown("retrieve", kwargs)
        q = self.make_query(query, vector, where, k, self.config.space, scope=self.scope)
        return [hit_to_dict(h) for h in self.pipeline.run(self.collection, q)]

    def retrieve_many(
        self, queries: Sequence[str | None], vectors: Sequence[Any] | None = None, where: Mapping[str, Any] | None = None, k: int = 10, **kwargs: Any
    ) -> list[list[dict[str, Any]]]:
        """:meth:`retrieve` of each query, the pipeline run once for the batch
        (:meth:`memcore.Pipeline.run_many`: one index search and one record read for all).
        A subclass that rewrites :meth:`retrieve` but not this gets the loop of its retrieve."""
        if _owner(type(self), "retrieve_many") is not DefaultService or _owner(type(self), "retrieve") is not DefaultService or len(queries) < 2:
            return super().retrieve_many(queries, vectors, where, k, **kwargs)
        if self.pipeline is None:
            raise ConfigError("no pipeline is configured", location="pipeline")
        scope = kwargs.pop("scope", None)
        if "metadata" in kwargs:
            where = where_from_options(where, kwargs)
        self.reject_unknown("retrieve", kwargs)
        rows = vectors if vectors is not None else [None] * len(queries)
        with self.collection.scoped(scope):
            try:
                made = [self.make_query(text, vector, where, k, self.config.space, scope=self.scope) for text, vector in zip(queries, rows)]
            except MemcoreError:  # the error of the first query that fails, as the loop raises it
                return super().retrieve_many(queries, vectors, where, k, **kwargs)
            return [[hit_to_dict(h) for h in hits] for hits in self.pipeline.run_many(self.collection, made)]


def _owner(cls: type, name: str) -> type:
    """The class of ``cls``'s MRO that defines ``name``."""
    return next(k for k in cls.__mro__ if name in vars(k))
