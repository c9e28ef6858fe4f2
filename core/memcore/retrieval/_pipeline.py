"""Retrieval pipelines: a declared chain of stages over a context that keeps every list.

Recall stages each add a ranked list (named after their index); a fuse stage merges lists
through a fusion strategy; rerank / diversity / filter / threshold / limit stages reshape
the working list. Every hit keeps ``provenance`` so it can explain its score.
"""

from __future__ import annotations

import copy
import inspect
import re
import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..errors import ConfigError, MemcoreError, UnknownComponentError, ValidationError
from ..collection._reads import CollectionReader
from .._util.merge import merge_layers
from ..model._query import Hit
from ..model._query import Query
from ..model._record import Record
from .._plugins._registry import Registry

if TYPE_CHECKING:
    from ..collection._collection import Collection
    from ..llms._llm import LLMs

__all__ = ["Stage", "Pipeline", "PipelineContext", "PRESETS"]


class PipelineContext:
    """What stages read and write: the query, every ranked list by name, the working list.

    ``trace`` has one entry per stage run (name, hits in/out, seconds, and the stage's
    ``notes`` when it left some); ``notes`` maps a stage name to what that stage reported
    about its run (which path it took, a fallback and why...), see :meth:`note`.
    """

    def __init__(self, collection: "Collection | CollectionReader", query: Query, *, with_records: bool = False):
        self.collection = collection.reader
        """What the stages may touch of the collection: its reader (built once per collection)."""
        self.query = query
        self.with_records = with_records
        """The run ends by attaching records: :meth:`texts` then reads whole records, so the
        attachment reuses that one read."""
        self.lists: dict[str, list[Hit]] = {}
        self.current: list[Hit] = []
        self.trace: list[dict[str, Any]] = []
        self.notes: dict[str, dict[str, Any]] = {}
        self._records: dict[str, Record] = {}
        self._texts: dict[str, str] = {}

    def note(self, stage: str, **facts: Any) -> None:
        """Record JSON-safe facts about the run of the stage named ``stage`` (merged into
        ``notes[stage]`` and copied into that stage's trace entry)."""
        self.notes.setdefault(stage, {}).update(facts)

    def add_list(self, name: str, hits: list[Hit], *, make_current: bool = True) -> None:
        """Record a ranked list under ``name`` (unique) and, by default, make it the working list."""
        if name in self.lists:
            raise ConfigError(f"two pipeline stages produce a list named {name!r}; give one a 'name'")
        self.lists[name] = hits
        if make_current:
            self.current = hits

    def vectors(self, ids: Sequence[str], space: str) -> tuple[Any, Any]:
        """Stored vectors of ``ids`` in ``space``: ``(matrix, present mask)``, batched."""
        return self.collection.vectors(ids, space)

    def query_vector(self, space: str) -> Any:
        """The query's vector in ``space``, embedded once per pipeline run."""
        return self.collection.query_vector(self.query, space)

    def texts(self, ids: Sequence[str]) -> list[str | None]:
        """The stored texts of ``ids`` (``None`` for unknown ids), cached for the run; lighter
        than :meth:`records` when a stage needs nothing else."""
        missing = [i for i in ids if i not in self._texts]
        if missing and self.with_records:  # the records are read anyway: one read for both
            self.records(missing)
        elif missing:
            for rid, text in zip(missing, self.collection.texts(missing)):
                if text is not None:
                    self._texts[rid] = text
        return [self._texts.get(i) for i in ids]

    def records(self, ids: Sequence[str]) -> list[Record | None]:
        """Stored records (without vectors), cached for the run."""
        cached = self._records
        first = not cached  # the common case (records read once, at the end of the run): no cache to consult
        missing = ids if first else [i for i in ids if i not in cached]
        if missing:
            got = self.collection.records(missing)
            for rec in got:
                if rec is not None:
                    cached[rec.id] = rec
                    self._texts[rec.id] = rec.text
            if first and len(cached) == len(got):  # no repeated or unknown id: the store's list is the answer
                return got
        return [cached.get(i) for i in ids]


def _snake(name: str) -> str:
    """``MetadataFilter`` -> ``metadata_filter``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


class Stage(ABC):
    """One step of a pipeline.

    ``name`` (the stage's entry in the trace, ``ctx.notes`` and the list it may add) is the
    one given by the stage itself or by settings; when none was given it is the kind of the
    stage's ``config`` (a :class:`ComponentConfig`), else the class name in snake case, so a
    stage built directly (``Limit(LimitConfig())``) has a usable name too.
    """

    _name: str = ""

    @property
    def name(self) -> str:
        """The stage's name: given, else its config's kind, else its class name in snake case."""
        if self._name:
            return self._name
        kind = getattr(getattr(self, "config", None), "kind", None)
        return kind if isinstance(kind, str) and kind else _snake(type(self).__name__)

    @name.setter
    def name(self, value: str | None) -> None:
        self._name = value or ""

    def _has_given_name(self) -> bool:
        """Whether the name was given (set, or a class attribute overriding the property)."""
        return bool(self._name) or inspect.getattr_static(type(self), "name") is not Stage.__dict__["name"]

    @abstractmethod
    def run(self, ctx: PipelineContext) -> None:
        """Read and update ``ctx`` (add lists, replace ``ctx.current``)."""

    def check(self, collection: CollectionReader) -> None:
        """Raise :class:`ConfigError` when the stage cannot run on this collection.

        Called once when the memory is built (:meth:`Pipeline.check`), before any query.
        It may: read ``collection`` (a :class:`CollectionReader`, read-only: its indexes,
        spaces, records), resolve and remember defaults (the index to search when the
        settings name none, a fusion built once), and raise ``ConfigError`` naming what is
        wrong. It must not write to the collection, embed, or call a model or the network;
        ``run`` must still work when ``check`` was not called (a pipeline built by hand).
        """

    def bind_llms(self, llms: "LLMs") -> None:
        """Receive the memory's declared LLMs (stages with an LLM step resolve theirs here)."""

    def run_many(self, contexts: Sequence[PipelineContext]) -> None:
        """:meth:`run` on each context (one per query of a batch: :meth:`Pipeline.run_many`);
        a stage that can do the work of several queries at once overrides it (the builtin
        ``recall``: one batched index search). Each context must end as :meth:`run` would
        leave it. A subclass that overrides :meth:`run` but not ``run_many`` gets this loop."""
        for ctx in contexts:
            self.run(ctx)

    # -- shortcuts: a pipeline may skip building a context ------------------------------------

    def alone(self, collection: CollectionReader, query: Query) -> list[Hit] | None:
        """The list :meth:`run` would leave as ``ctx.current`` when this stage is the first
        one, computed without a :class:`PipelineContext`; ``None`` (the default): the stage
        needs the context.

        :meth:`Pipeline.run` calls it when this stage is first and every later stage is a
        :meth:`cut`; then nothing else of the run (the context, its lists, the trace) is
        seen, so the answer must be exactly what ``run`` would leave (the builtin ``recall``
        answers its index's list). A subclass that overrides :meth:`run` but not ``alone``
        is never run this way (its ``run`` could do more).
        """
        return None

    def cut(self, query: Query) -> int | None:
        """How many of the working list's first hits this stage keeps, when that is all it
        does (the builtin ``limit``); ``None`` (the default): it does something else.

        Used with :meth:`alone` (and under the same rule for subclasses overriding :meth:`run`).
        """
        return None


PRESETS: dict[str, list[dict[str, Any]]] = {
    "basic": [
        {"kind": "recall", "over_fetch": 2.0},
        {"kind": "rerank", "keyword_weight": 0.5},
        {"kind": "limit"},
        {"kind": "relevance"},
    ],
    "advanced": [
        {"kind": "recall", "index": "vector", "over_fetch": 2.0},
        {"kind": "recall", "index": "bm25", "over_fetch": 2.0},
        {"kind": "fuse", "fusion": {"kind": "rrf", "k": 10.0}},
        {"kind": "rerank", "keyword_weight": 0.3},
        {"kind": "limit"},
        {"kind": "relevance"},
    ],
    "semantic": [
        {"kind": "recall", "index": "vector", "over_fetch": 3.0},
        {"kind": "intent"},
        {"kind": "rerank", "keyword_weight": 0.5},
        {"kind": "mmr", "lambda": 0.7, "relevance": "score", "if_installed": True},
        {"kind": "limit"},
        {"kind": "relevance"},
    ],
}
"""Named stage lists that settings select with ``pipeline = "<name>"``, or with
``pipeline = {preset = "<name>", overrides = {<stage> = {...}}}`` to change some stages.

- ``basic``: recall on the only index (else the one named ``vector``) -> rerank -> limit -> relevance;
- ``advanced``: recall ``vector`` + recall ``bm25`` -> fuse (RRF) -> rerank -> limit -> relevance;
- ``semantic``: recall ``vector`` -> intent -> rerank -> mmr (memcore-mmr) -> limit -> relevance;
  without memcore-mmr the mmr stage is left out (``if_installed``), the rest runs unchanged.

Every preset ends with ``relevance``: it keeps the order the stages before it chose and
replaces the score by one comparable across queries (the query-hit cosine similarity in the
dense space, smoothed to fall with the rank; see :mod:`memcore.retrieval._relevance`); the
per-query rescaled score stays in each hit's provenance. ``overrides = {relevance = false}``
gives the rescaled scores back as the final ones.

The core presets name no plugin's stage except with ``if_installed = true``, which any
stage entry may carry: the stage is skipped (and listed in ``Pipeline.skipped``) when no
installed plugin registers its kind. ``advanced`` fuses with ``rrf`` (memcore-rrf) a ``bm25``
index (memcore-fifo-kv): without those plugins it fails with the ``pip install`` hint.

The options were chosen on two data sets (BEIR SciFact train, LoCoMo dev; see
docs/concepts.md): RRF ``k = 10`` rather than the usual 60, and a keyword-overlap rerank
(the share of the query's content words in the record) added to the min-max normalised
score -- 0.5 after a single retriever, 0.3 after the hybrid fusion, which already has BM25.
"""

PIPELINE_SPEC_KEYS = ("preset", "overrides")
"""The keys of the table form of the ``pipeline`` setting."""


def stage_addresses(entry: Mapping[str, Any]) -> tuple[str | None, str | None, str]:
    """How an override can address a stage entry: its ``name``, its ``index`` (recall
    stages), its ``kind`` -- most specific first."""
    name, index = entry.get("name"), entry.get("index")
    return (name if isinstance(name, str) else None, index if isinstance(index, str) else None, str(entry.get("kind")))


def apply_overrides(entries: Sequence[Mapping[str, Any]], overrides: Mapping[str, Any], location: str) -> list[dict[str, Any]]:
    """The stage entries with ``overrides`` applied.

    Each key addresses one stage by its ``name``, else its ``index``, else its ``kind`` (the
    first of these that some stage has is used, and must match exactly one stage). A table
    is deep-merged into the entry (a nested table whose ``kind`` changes is replaced whole);
    ``false`` removes the stage.
    """
    out: list[dict[str, Any] | None] = [dict(e) for e in entries]
    for key, change in overrides.items():
        loc = f"{location}.overrides.{key}"
        matched: list[int] = []
        for tier in range(3):
            matched = [i for i, e in enumerate(out) if e is not None and stage_addresses(e)[tier] == key]
            if matched:
                break
        if not matched:
            known = sorted({a for e in out if e is not None for a in stage_addresses(e) if a})
            raise ConfigError(f"no stage of the preset is addressed by {key!r}; use one of {known}", location=loc)
        if len(matched) > 1:
            names = [a[1] or a[0] for a in (stage_addresses(e) for e in (out[i] for i in matched) if e is not None)]
            raise ConfigError(f"{key!r} addresses {len(matched)} stages; address one by its index or name: {names}", location=loc)
        i = matched[0]
        if change is False:
            out[i] = None
        elif isinstance(change, Mapping):
            if "kind" in change and change["kind"] != out[i]["kind"]:  # type: ignore[index]
                out[i] = dict(change)
            else:
                out[i] = merge_layers(out[i], change)  # type: ignore[arg-type]
        else:
            raise ConfigError(f"an override is a table of stage options, or false to remove the stage; got {change!r}", location=loc)
    return [e for e in out if e is not None]


class Pipeline:
    """An ordered list of stages; :meth:`run` returns the final hits."""

    def __init__(self, stages: Sequence[Stage], *, preset: str | None = None, skipped: Sequence[str] = ()):
        self.stages = list(stages)
        self.preset = preset
        self.skipped = list(skipped)
        """Kinds of the ``if_installed`` stages left out because no plugin registers them."""

    @classmethod
    def from_config(cls, entries: str | Sequence[Mapping[str, Any]] | Mapping[str, Any], registry: Registry, location: str = "pipeline") -> "Pipeline":
        """Build from settings: a preset name, ``{preset = ..., overrides = {...}}`` (see
        :func:`apply_overrides`), or a list of ``{kind = ..., ...}`` entries."""
        preset = None
        if isinstance(entries, Mapping):
            unknown = sorted(set(entries) - set(PIPELINE_SPEC_KEYS))
            if unknown or "preset" not in entries:
                raise ConfigError(f"a pipeline table has the keys 'preset' (required) and 'overrides'; got {sorted(entries)}", location=location)
            preset, overrides = entries["preset"], entries.get("overrides") or {}
            if not isinstance(overrides, Mapping):
                raise ConfigError("overrides must be a table: stage -> options", location=f"{location}.overrides")
            entries = apply_overrides(cls._preset(preset, location), overrides, location)
        elif isinstance(entries, str):
            preset, entries = entries, cls._preset(entries, location)
        stages = []
        skipped = []
        for i, entry in enumerate(entries):
            loc = f"{location}[{i}]"
            if not isinstance(entry, Mapping) or "kind" not in entry:
                raise ConfigError("each stage needs a 'kind'", location=loc)
            data = dict(entry)
            kind = data.pop("kind")
            if_installed = data.pop("if_installed", False)
            if not isinstance(if_installed, bool):
                raise ConfigError(f"if_installed must be true or false, got {if_installed!r}", location=f"{loc}.if_installed")
            if if_installed and kind not in registry.names("stages"):
                skipped.append(str(kind))
                continue
            reg = registry.get("stages", kind, location=f"{loc}.kind")
            stage = reg.build(reg.parse_config(data, loc))
            if not isinstance(stage, Stage):
                raise ConfigError(f"stage kind {kind!r} built a {type(stage).__name__}, not a memcore.Stage", location=loc)
            if not stage._has_given_name():
                stage.name = kind  # the registered kind, even when the stage keeps no config
            stages.append(stage)
        return cls(stages, preset=preset, skipped=skipped)

    @staticmethod
    def _preset(name: Any, location: str) -> list[dict[str, Any]]:
        try:
            return copy.deepcopy(PRESETS[name])
        except (KeyError, TypeError):
            raise ConfigError(f"unknown preset {name!r}; presets: {sorted(PRESETS)}", location=location) from None

    def check(self, collection: "Collection | CollectionReader") -> None:
        """Check every stage against the collection (indexes exist, spaces declared...)."""
        if not self.stages:
            raise ConfigError("the pipeline has no stages", location="pipeline")
        view = collection.reader
        for stage in self.stages:
            try:
                stage.check(view)
            except UnknownComponentError:
                raise  # a kind no plugin registers (rrf without memcore-rrf): its install hint, as it is
            except ConfigError as exc:
                if self.preset is None:
                    raise
                wanted = sorted({e["index"] for e in PRESETS.get(self.preset, []) if "index" in e})
                searched = f"its recall stages search the indexes {wanted}" if wanted else "its recall stage searches the only index (else 'vector')"
                raise ConfigError(
                    f"{exc} (pipeline preset {self.preset!r}: {searched}; declare them, or adapt a stage with "
                    f'pipeline = {{preset = "{self.preset}", overrides = {{<stage> = {{index = "<your index>"}}}}}})'
                ) from None

    def bind_llms(self, llms: "LLMs") -> None:
        """Hand the memory's declared LLMs to every stage (:meth:`Stage.bind_llms`)."""
        for stage in self.stages:
            stage.bind_llms(llms)

    def run_context(self, collection: "Collection", query: Query, *, with_records: bool = False) -> PipelineContext:
        """Run every stage and return the context (all lists, trace, final list)."""
        ctx = PipelineContext(collection, query, with_records=with_records)
        clock = time.perf_counter
        for stage in self.stages:
            started = clock()
            before = len(ctx.current)
            stage.run(ctx)
            name = stage.name  # a property: read once per stage
            entry = {"stage": name, "in": before, "out": len(ctx.current), "seconds": clock() - started}
            if name in ctx.notes:
                entry["notes"] = dict(ctx.notes[name])
            ctx.trace.append(entry)
        return ctx

    def run(
        self,
        collection: "Collection",
        query: Query | str | Mapping[str, Any],
        *,
        k: int | None = None,
        where: Any = None,
        scope: Any = None,
        with_records: bool = True,
    ) -> list[Hit]:
        """Retrieve: run the stages, cut to ``k``, attach records."""
        q = collection.request(query, k=k, where=where, scope=scope)  # a query the collection checked is returned as it is
        if q.scope is None:  # nothing new to bind: binding None keeps what is bound
            return self._run(collection, q, with_records)
        with collection.scoped(q.scope):  # every read of the run, stages included, sees only the query's scope
            return self._run(collection, q, with_records)

    def _run(self, collection: "Collection", q: Query, with_records: bool) -> list[Hit]:
        """:meth:`run` with the query built and its scope bound."""
        if q.text is not None and not q.text.strip() and not q.vectors and not q.extras:
            raise ValidationError("the query is empty")
        hits = self._alone(collection, q) if type(self).run_context is Pipeline.run_context else None
        if hits is not None:  # a stage answering alone, maybe cut by the later stages: no context needed
            hits = hits[: q.k]
            return collection.attach_records(hits) if with_records else hits
        ctx = self.run_context(collection, q, with_records=with_records)
        hits = ctx.current[: q.k]
        if not with_records:
            return hits
        if not ctx._records:  # no stage read records: read them now, each built when first asked for
            return collection.attach_records(hits)
        return _with_records(ctx, hits)

    def run_many(self, collection: "Collection", queries: Sequence[Query], *, with_records: bool = True) -> list[list[Hit]]:
        """:meth:`run` of each query, in order, the queries run together: each stage runs
        once for all of them (:meth:`Stage.run_many`: the builtin ``recall`` searches its
        index once for the batch) and the hits' records are read in one store read.

        Each list is the one :meth:`run` gives its query (the scores of a batched vector
        search may differ in the last float32 bits). Queries of different scopes, a pipeline
        class overriding how a run goes, or a single query run one by one; an error is the
        one :meth:`run` of the queries in order would raise (a failed batch is run again one
        by one to find it: a pipeline only reads)."""
        checked = [collection.request(q) for q in queries]
        cls = type(self)
        if (
            len(checked) < 2
            or cls.run is not Pipeline.run
            or cls._run is not Pipeline._run
            or cls.run_context is not Pipeline.run_context
            or any(q.scope != checked[0].scope for q in checked)
        ):
            return [self.run(collection, q, with_records=with_records) for q in checked]
        try:
            with collection.scoped(checked[0].scope):
                return self._run_many(collection, checked, with_records)
        except MemcoreError:
            return [self.run(collection, q, with_records=with_records) for q in checked]  # the error of the first query that fails

    def _run_many(self, collection: "Collection", queries: list[Query], with_records: bool) -> list[list[Hit]]:
        """:meth:`run_many` with the queries checked and their one scope bound."""
        for q in queries:
            if q.text is not None and not q.text.strip() and not q.vectors and not q.extras:
                raise ValidationError("the query is empty")
        contexts = [PipelineContext(collection, q, with_records=with_records) for q in queries]
        clock = time.perf_counter
        share = 1.0 / len(contexts)
        for stage in self.stages:
            started = clock()
            before = [len(ctx.current) for ctx in contexts]
            if _trusted(type(stage), "run_many"):
                stage.run_many(contexts)
            else:
                for ctx in contexts:
                    stage.run(ctx)
            name, seconds = stage.name, (clock() - started) * share  # each query's share of the stage's time
            for ctx, n in zip(contexts, before):
                entry = {"stage": name, "in": n, "out": len(ctx.current), "seconds": seconds}
                if name in ctx.notes:
                    entry["notes"] = dict(ctx.notes[name])
                ctx.trace.append(entry)
        lists = [ctx.current[: ctx.query.k] for ctx in contexts]
        if not with_records:
            return lists
        unread = [i for i, ctx in enumerate(contexts) if not ctx._records]  # no stage read records: one read for all of them
        attached = collection.reader.attach_records_many([lists[i] for i in unread]) if unread else []
        out = list(lists)
        for i, hits in zip(unread, attached):
            out[i] = hits
        for i, ctx in enumerate(contexts):
            if ctx._records:
                out[i] = _with_records(ctx, lists[i])
        return out

    def _alone(self, collection: "Collection", q: Query) -> list[Hit] | None:
        """The answer of a first stage that runs :meth:`Stage.alone` with only cuts after it
        (:meth:`Stage.cut`), else None (the stages run over a context)."""
        stages = self.stages
        if not stages or not _trusted(type(stages[0]), "alone"):
            return None
        keep = []
        for stage in stages[1:]:
            n = stage.cut(q) if _trusted(type(stage), "cut") else None
            if n is None:
                return None
            keep.append(n)
        hits = stages[0].alone(collection.reader, q)
        if hits is not None:
            for n in keep:
                hits = hits[:n]
        return hits


def _with_records(ctx: PipelineContext, hits: list[Hit]) -> list[Hit]:
    """``hits`` with the records the run's stages read (``ctx.records``: read once, shared
    with them); a record deleted meanwhile drops its hit, as ``attach_records`` does."""
    out = []
    for hit, record in zip(hits, ctx.records([h.id for h in hits])):
        if record is not None:
            hit.record = record
            out.append(hit)
    return out


_TRUSTED: dict[tuple[type, str], bool] = {}


def _trusted(cls: type, shortcut: str) -> bool:
    """Whether a stage class's ``shortcut`` (:meth:`Stage.alone` or :meth:`Stage.cut`) may
    stand for its :meth:`Stage.run`: the class defining the shortcut is not the base
    :class:`Stage` and is the class defining ``run`` or a subclass of it (a subclass that
    overrides ``run`` alone takes the context path). Decided once per class."""
    key = (cls, shortcut)
    found = _TRUSTED.get(key)
    if found is None:
        owner = next(k for k in cls.__mro__ if shortcut in vars(k))
        runner = next(k for k in cls.__mro__ if "run" in vars(k))
        found = _TRUSTED[key] = owner is not Stage and issubclass(owner, runner)
    return found
