"""Retrieval pipelines: a declared chain of stages over a context that keeps every list.

Recall stages each add a ranked list (named after their index); a fuse stage merges lists
through a fusion strategy; rerank / diversity / filter / threshold / limit stages reshape
the working list. Every hit keeps ``provenance`` so it can explain its score.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from .errors import ConfigError, ValidationError
from .records import Hit, Query, Record
from .registry import ComponentConfig, Registry

if TYPE_CHECKING:
    from .collection import Collection

__all__ = ["Stage", "Pipeline", "PipelineContext", "PRESETS"]


class PipelineContext:
    """What stages read and write: the query, every ranked list by name, the working list."""

    def __init__(self, collection: "Collection", query: Query):
        self.collection = collection
        self.query = query
        self.lists: dict[str, list[Hit]] = {}
        self.current: list[Hit] = []
        self.trace: list[dict[str, Any]] = []
        self._records: dict[str, Record] = {}

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

    def records(self, ids: Sequence[str]) -> list[Record | None]:
        """Stored records (without vectors), cached for the run."""
        missing = [i for i in ids if i not in self._records]
        if missing:
            for rec in self.collection.store.get(missing, with_vectors=False):
                if rec is not None:
                    self._records[rec.id] = rec
        return [self._records.get(i) for i in ids]


class Stage(ABC):
    """One step of a pipeline. ``name`` is set from settings (or the stage kind)."""

    name: str = ""

    @abstractmethod
    def run(self, ctx: PipelineContext) -> None:
        """Read and update ``ctx`` (add lists, replace ``ctx.current``)."""

    def check(self, collection: "Collection") -> None:
        """Raise ConfigError when the stage cannot run on this collection (unknown index...)."""


PRESETS: dict[str, list[dict[str, Any]]] = {
    "basic": [{"kind": "recall", "over_fetch": 2.0}, {"kind": "limit"}],
}
"""Named stage lists that settings can select with ``pipeline = "<name>"``."""


class Pipeline:
    """An ordered list of stages; :meth:`run` returns the final hits."""

    def __init__(self, stages: Sequence[Stage]):
        self.stages = list(stages)

    @classmethod
    def from_config(cls, entries: str | Sequence[Mapping[str, Any]], registry: Registry, location: str = "pipeline") -> "Pipeline":
        """Build from settings: a preset name or a list of ``{kind = ..., ...}`` entries."""
        if isinstance(entries, str):
            try:
                entries = PRESETS[entries]
            except KeyError:
                raise ConfigError(f"unknown preset {entries!r}; presets: {sorted(PRESETS)}", location=location) from None
        stages = []
        for i, entry in enumerate(entries):
            loc = f"{location}[{i}]"
            if not isinstance(entry, Mapping) or "kind" not in entry:
                raise ConfigError("each stage needs a 'kind'", location=loc)
            data = dict(entry)
            kind = data.pop("kind")
            reg = registry.get("stages", kind, location=f"{loc}.kind")
            stage = reg.factory(reg.parse_config(data, loc))
            if not isinstance(stage, Stage):
                raise ConfigError(f"stage kind {kind!r} built a {type(stage).__name__}, not a memcore.Stage", location=loc)
            stage.name = getattr(stage, "name", "") or kind
            stages.append(stage)
        return cls(stages)

    def check(self, collection: "Collection") -> None:
        """Check every stage against the collection (indexes exist, spaces declared...)."""
        if not self.stages:
            raise ConfigError("the pipeline has no stages", location="pipeline")
        for stage in self.stages:
            stage.check(collection)

    def run_context(self, collection: "Collection", query: Query) -> PipelineContext:
        """Run every stage and return the context (all lists, trace, final list)."""
        ctx = PipelineContext(collection, query)
        for stage in self.stages:
            started = time.perf_counter()
            before = len(ctx.current)
            stage.run(ctx)
            ctx.trace.append({"stage": stage.name, "in": before, "out": len(ctx.current), "seconds": time.perf_counter() - started})
        return ctx

    def run(self, collection: "Collection", query: Query | str | Mapping[str, Any], *, k: int | None = None, where: Any = None, scope: Any = None, with_records: bool = True) -> list[Hit]:
        """Retrieve: run the stages, cut to ``k``, attach records."""
        q = collection.make_query(query, k=k, where=where, scope=scope)
        if q.text is not None and not q.text.strip() and not q.vectors and not q.extras:
            raise ValidationError("the query is empty")
        hits = self.run_context(collection, q).current[: q.k]
        return collection.attach_records(hits) if with_records else hits
