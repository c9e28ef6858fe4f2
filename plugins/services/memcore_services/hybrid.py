"""``hybrid``: several indexes + fusion (+ optional MMR / rerank) -- a declared pipeline
behind the service interface.

The service declares its indexes under the ``hybrid.`` prefix (``indexes = {dense = {kind
= "exact", space = "default"}, bm25 = {kind = "bm25"}}`` becomes ``hybrid.dense`` and
``hybrid.bm25``) and runs its own ``pipeline`` (a preset name, a preset with overrides, or a
stage list; recall stages name the indexes without the prefix). ``insert`` puts every
entry in every index; ``retrieve`` runs the pipeline.

``windows`` (optional, :mod:`.granularity`): a second granularity. Each inserted entry also
makes a window record of it and the entries before it in the same group (session), kept in
the window indexes (``hybrid.window.<name>``); the pipeline recalls them like any index
(``index = "window.dense"``) and an ``expand`` stage turns window hits into their member
entries before the fusion. Results are always entries: a window left unexpanded at the
end is replaced by its members.

``speaker_boost`` (optional): when the query names a speaker found in the entries'
``speaker`` metadata, those entries' scores are multiplied by ``1 + speaker_boost`` before
the final cut -- speaker-aware retrieval for dialog memories.

**Per scope.** Entries and windows are written inside the caller's call, so the core stamps
its scope on both (``insert(..., scope={"user_id": "alice"})``); each scope has its own
window groups (their tails are state, kept per scope by the core) and ``retrieve`` sees
only the caller's entries and windows. ``delete`` by id or filter rebuilds the windows of
the deleted entries in the same commit; forgetting a scope (``delete(scope=...)`` alone)
removes its entries, windows and group tails together.

**Upsert and update.** Without ``windows``, ``upsert`` writes to the entry indexes (a new
entry goes where ``insert`` puts it) and ``update`` changes an entry in place. With
``windows`` both are refused (a window holds copies of its members' texts and metadata):
delete the entry and insert it again.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any, Mapping, cast

from memcore.plugin import Collection, ComponentConfig, LLMs, NotFoundError, Pipeline, Record, Service, ValidationError
from pydantic import Field

from .common import hit_result
from .granularity import GRANULARITY, MEMBERS, WindowsConfig, window_record

__all__ = ["HybridConfig", "HybridService", "PREFIX", "WINDOW_PREFIX"]

PREFIX = "hybrid."
WINDOW_PREFIX = PREFIX + "window."
STATE = "hybrid.windows"
"""State namespace (kept per scope by the core): group (its metadata value, as JSON) -> the
ids of its last ``size - 1`` entries."""
INSERT_KEYWORDS = ("id", "links", "vectors")
"""What ``insert`` accepts besides text, vector and metadata (``scope`` is bound by the base class)."""
DEFAULT_INDEXES = {
    "dense": {"kind": "exact", "space": "default", "metric": "cosine"},
    "bm25": {"kind": "bm25", "stopwords": "en", "stemmer": "english"},
}
DEFAULT_PIPELINE: list[dict[str, Any]] = [
    {"kind": "recall", "index": "dense", "over_fetch": 2.0},
    {"kind": "recall", "index": "bm25", "over_fetch": 2.0},
    {"kind": "fuse", "fusion": {"kind": "rrf", "k": 10.0}},
    {"kind": "rerank", "keyword_weight": 0.3},
    {"kind": "limit"},
]


PipelineSpec = str | list[dict[str, Any]] | dict[str, Any]
"""A pipeline in settings: a preset name, ``{preset = ..., overrides = {...}}`` or a list of stages."""


class HybridConfig(ComponentConfig):
    """Settings of ``hybrid``."""

    kind: str = "hybrid"
    indexes: dict[str, dict[str, Any]] = Field(
        default_factory=lambda: copy.deepcopy(DEFAULT_INDEXES), description="Indexes (name -> {kind, options}), created as hybrid.<name>."
    )
    pipeline: PipelineSpec = Field(
        default_factory=lambda: copy.deepcopy(DEFAULT_PIPELINE), description="The retrieval pipeline over those indexes (names without the prefix)."
    )
    space: str | None = Field(None, description="Space of a bare vector argument (default: the only space).")
    speaker_boost: float = Field(0.0, ge=0, le=10, description="Boost of entries whose 'speaker' the query names (0: off).")
    llm: str | None = Field("default", description="LLM handed to the pipeline's LLM stages (llm_rerank).")
    windows: WindowsConfig | None = Field(None, description="A second granularity: a window of consecutive entries per entry (None: off).")


def _group_key(value: Any) -> str:
    """The state key of a window group: its metadata value (the scope is the state's
    namespace; the leading ``""`` keeps the keys of memories written before that)."""
    return json.dumps(["", value], default=str)


def _prefixed(entries: PipelineSpec) -> PipelineSpec:
    """The pipeline spec with recall stages' ``index`` names prefixed."""
    if isinstance(entries, list):
        out = []
        for e in entries:
            e = dict(e)
            if e.get("kind") == "recall" and isinstance(e.get("index"), str) and not e["index"].startswith(PREFIX):
                e["index"] = PREFIX + e["index"]
            out.append(e)
        return out
    if isinstance(entries, dict):
        spec = dict(entries)
        overrides = {}
        for name, opts in (spec.get("overrides") or {}).items():
            opts = dict(opts)
            if isinstance(opts.get("index"), str) and not opts["index"].startswith(PREFIX):
                opts["index"] = PREFIX + opts["index"]
            overrides[name] = opts
        spec["overrides"] = overrides
        return spec
    return entries


class HybridService(Service):
    """Every entry in every declared index; retrieval through the service's own pipeline."""

    config: HybridConfig
    uses_pipeline = False
    read_only_verbs = frozenset({"retrieve"})  # retrieve runs the pipeline and writes nothing

    def __init__(self, config: HybridConfig, collection: Collection, pipeline: Pipeline | None):
        super().__init__(config, collection, pipeline)
        self.own = Pipeline.from_config(_prefixed(config.pipeline), collection.registry, "service.pipeline")
        self.own.check(collection)

    @classmethod
    def required_indexes(cls, config: ComponentConfig) -> dict[str, dict[str, Any]]:
        """The configured indexes, under ``hybrid.`` (window indexes under ``hybrid.window.``)."""
        own = cast(HybridConfig, config)  # memcore validates a service's settings with its registered model
        out = {PREFIX + name: dict(entry) for name, entry in own.indexes.items()}
        if own.windows is not None:
            out.update({WINDOW_PREFIX + name: dict(entry) for name, entry in own.windows.indexes.items()})
        return out

    def entry_indexes(self) -> list[str]:
        """The indexes holding entries (not windows)."""
        return [PREFIX + name for name in self.config.indexes]

    def bind_llms(self, llms: LLMs) -> None:
        """Hand the LLMs to the service's own pipeline too."""
        super().bind_llms(llms)
        self.own.bind_llms(llms)

    def insert(self, text: str, vector: Any = None, metadata: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
        """Insert one entry into every entry index (``id``, ``links``, ``vectors`` as keywords),
        and its window into the window indexes when ``windows`` is on."""
        self.reject_unknown("insert", kwargs, INSERT_KEYWORDS)
        item: dict[str, Any] = {"text": text, "metadata": dict(metadata or {}), **{k: v for k, v in kwargs.items() if v is not None}}
        if vector is not None:
            item["vectors"] = {**item.get("vectors", {}), self.vector_space(self.config.space): vector}
        windows = self.config.windows
        if windows is None:
            return self.collection.insert([item], indexes=self.entry_indexes())[0]
        rid = self.collection.ids_of([item])[0]
        if all(r is not None for r in self.collection.get_many([rid, f"{rid}#window"])):  # an idempotent retry: entry and window are there
            self.collection.insert([item], indexes=self.entry_indexes())  # DuplicateIdError for other content under that id
            return rid
        group = _group_key(item["metadata"].get(windows.group) if windows.group else None)
        before = [str(i) for i in self.collection.get_state(STATE, group, [])]
        rid = self.collection.insert([item], indexes=self.entry_indexes())[0]
        before = [i for i in before if i != rid]
        records = [r for r in self.collection.get_many([*before, rid]) if r is not None]
        field = windows.text_field
        window = window_record([(r.id, str(r.metadata.get(field) or r.text) if field else r.text, r.metadata) for r in records])
        window["id"] = f"{rid}#window"  # the binding gives it the entry's scope
        # the window and the group's new tail are written together (after the entry itself)
        tail = [*before, rid][-(windows.size - 1) :]
        self.collection.insert([window], indexes=[WINDOW_PREFIX + name for name in windows.indexes], state={(STATE, group): tail})
        return rid

    def delete(self, ids: list[str]) -> int:
        """Delete entries; with ``windows``, in the same atomic write (one per scope of the
        deleted entries), the windows of the deleted entries go, every other window holding
        one is rebuilt from its remaining members, and the deleted entries leave their
        group's tail (so no later window takes them in). A deleted entry's text is then in
        no index. ``scope=`` is bound by the base class and never reaches this method."""
        if self.config.windows is None:
            return self.collection.delete(ids)
        found = self.collection.get_many(list(dict.fromkeys(ids)))
        missing = [i for i, r in zip(dict.fromkeys(ids), found) if r is None]
        if missing:
            raise NotFoundError(f"no record(s) {missing[:5]}; nothing was deleted")
        by_scope: dict[str, tuple[dict[str, str] | None, list[Record]]] = {}
        for r in found:
            assert r is not None
            entry_scope = r.scope.as_dict() if r.scope is not None and not r.scope.is_empty() else None
            by_scope.setdefault(json.dumps(entry_scope, sort_keys=True, default=str), (entry_scope, []))[1].append(r)
        for entry_scope, records in by_scope.values():
            with self.collection.scoped(entry_scope):  # the group tails are the entries' scope's state
                self._delete_windowed(records)
        return len(ids)

    def _delete_windowed(self, records: list[Record]) -> None:
        """:meth:`delete` of entries of the bound scope, in one commit."""
        windows = self.config.windows
        assert windows is not None
        gone = {r.id for r in records}
        groups: dict[str, Any] = {}  # group key -> group value
        for r in records:
            value = r.metadata.get(windows.group) if windows.group else None
            groups.setdefault(_group_key(value), value)
        drop, rebuilt = [], []
        for window in self._windows_holding(gone, groups):
            members = [str(m) for m in window.metadata.get(MEMBERS, [])]
            rest = [m for m in members if m not in gone]
            if (window.id.endswith("#window") and window.id[: -len("#window")] in gone) or not rest:
                drop.append(window.id)
                continue
            kept = [r for r in self.collection.get_many(rest) if r is not None]
            field = windows.text_field
            record = window_record([(r.id, str(r.metadata.get(field) or r.text) if field else r.text, r.metadata) for r in kept])
            record.update({"id": window.id, "scope": window.scope})
            rebuilt.append(record)
        state = {}
        for key in groups:
            tail = [str(i) for i in self.collection.get_state(STATE, key, [])]
            if gone & set(tail):
                state[(STATE, key)] = [i for i in tail if i not in gone]
        extra = [d for d in drop if d not in gone]
        self.collection.delete([*gone, *extra], state=state or None, replace=rebuilt or None)

    def _windows_holding(self, ids: set[str], groups: Mapping[str, Any]) -> list[Record]:
        """The window records whose members include one of ``ids`` (read by group value
        when windows are grouped: a window never spans two groups)."""
        group = self.config.windows.group if self.config.windows is not None else None
        where: dict[str, Any] = {GRANULARITY: "window"}
        values = list(groups.values())
        if group and values and all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in values):
            where[group] = {"$in": list(dict.fromkeys(values))}
        candidates = self.collection.get_many(self.collection.ids(where=where))
        return [w for w in candidates if w is not None and ids & {str(m) for m in w.metadata.get(MEMBERS, [])}]

    def retrieve(
        self, query: str | None = None, vector: Any = None, where: Mapping[str, Any] | None = None, k: int = 10, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """Run the pipeline; returns ``[{"id", "text", "score", "metadata"}]``."""
        self.reject_unknown("retrieve", kwargs)
        depth = 2 * k if self.config.speaker_boost else k  # room for boosted entries to move up
        q = self.make_query(query, vector, where, depth, self.config.space, scope=self.scope)
        hits = self.own.run(self.collection, q)
        results = [r for r in self._entries([hit_result(h) for h in hits]) if r["text"] is not None]  # a deleted window member
        if self.config.speaker_boost and query:
            named = {w for w in re.findall(r"[A-Z][a-z]+", query)}
            for r in results:
                if str((r["metadata"] or {}).get("speaker", "")) in named:
                    r["score"] *= 1.0 + self.config.speaker_boost
            results.sort(key=lambda r: -r["score"])
        return results[:k]

    def upsert(self, items: Any) -> list[str]:
        """Insert new entries into the entry indexes and replace existing ones (refused with
        ``windows``: the windows hold copies of their members)."""
        self._no_windows("upsert")
        return self.collection.upsert(items, indexes=self.entry_indexes())

    def update(self, id: str, **fields: Any) -> Record:
        """Change one entry in place (refused with ``windows``: the windows hold copies of their members)."""
        self.reject_unknown("update", fields, ("text", "metadata", "merge_metadata", "vectors"))
        self._no_windows("update")
        return self.collection.update(id, **fields)

    def _no_windows(self, verb: str) -> None:
        if self.config.windows is not None:
            raise ValidationError(f"hybrid with windows cannot {verb}: windows hold copies of their members' texts; delete() the entry and insert() it again")

    def _entries(self, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Window results (a pipeline without ``expand``) replaced by their member entries."""
        if not any((r["metadata"] or {}).get(GRANULARITY) == "window" for r in results):
            return results
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        for r in results:
            meta = r["metadata"] or {}
            ids = [str(i) for i in meta.get(MEMBERS, [])] if meta.get(GRANULARITY) == "window" else [r["id"]]
            fresh = [i for i in ids if i not in seen]
            seen.update(fresh)
            if meta.get(GRANULARITY) != "window":
                if fresh:
                    out.append(r)
                continue
            for record in self.collection.get_many(fresh):
                if record is not None:
                    out.append({"id": record.id, "text": record.text, "score": r["score"], "metadata": dict(record.metadata)})
        return out
