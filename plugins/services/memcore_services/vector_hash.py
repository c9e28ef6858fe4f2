"""``vector_hash``: TiM-style memory of "thoughts" in an LSH index.

With ``extract = true`` (default) ``insert(text)`` stores the text once (no index), extracts
(subject, relation, object) triples from it -- the LLM named by ``llm`` with the prompt and
robust parser of :mod:`memcore.llms._triples`, or the rule-based fallback ``rule_svo`` --
refactors each triple to a sentence and stores each sentence as a record in the ``lsh``
index, embedded, with the source's metadata (its ``dia_ids``...) plus ``source`` (the
stored text's id) and ``triple``. A text without any triple goes to the index itself, so
nothing is dropped. With ``extract = false`` the text (already a thought, e.g. the
``to_refactor`` adapter of the LoCoMo pipeline) is stored and hashed as is, with the
caller's vector if given.

``retrieve`` ranks by LSH similarity (the ``lsh`` index's candidates re-scored by cosine).

``distill`` (optional, :mod:`.distill`): TiM's post-thinking. After each new thought is
stored, the thoughts sharing its buckets are distilled by an LLM step (insert merged facts,
forget redundant thoughts) or its fallback ``merge_near_duplicates``; a thought that leaves
hands its ``dia_ids``/``source`` and its text to one that stays. ``report()`` counts the
operations.

**Per scope.** Everything an ``insert`` writes -- the source text, its thoughts, the merged
facts of a distillation -- is written inside the call, so the core stamps the caller's
scope on each (``insert(..., scope={"user_id": "alice"})``); distillation groups are read
from the bound scope's thoughts only, and the counts are kept per scope. ``retrieve``
searches the caller's thoughts only.

**Writes around the thoughts.** ``upsert`` is refused (a new text becomes thoughts only
through ``insert``). ``update`` may change a record's metadata; with ``extract`` its text
or vectors are refused (the thoughts derived from a source text would no longer match it:
delete it and insert the new text).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, cast

from memcore.plugin import ComponentConfig, Record, Service, ValidationError
from memcore.plugin import TRIPLE_FALLBACK, parse_triples, refactor_triple, rule_triples, triple_prompt
from pydantic import Field

from .common import hit_result
from .distill import DISTILL_FALLBACK, DistillConfig, Plan, Thought, distill_prompt, fallback_plan, merged_metadata, parse_plan
from .granularity import shared_metadata

__all__ = ["VectorHashConfig", "VectorHashMemory"]

INDEX = "vector_hash.lsh"
STATE = "vector_hash"
SOURCES = "vector_hash.sources"
"""State namespace: source id -> how many thoughts its insert wrote (so a retry of the
same text, an idempotent insert, extracts nothing again)."""
COUNTS = ("inserted", "merged", "forgotten", "runs")
INSERT_KEYWORDS = ("id", "links", "vectors")
"""What ``insert`` accepts besides text, vector and metadata (``scope`` is bound by the base class)."""
_SPEAKER = re.compile(r"^\s*(?:\([^)]*\))?\s*([A-Z][\w .'-]{0,40}):\s+(.*)$")


class VectorHashConfig(ComponentConfig):
    """Settings of ``vector_hash``."""

    kind: str = "vector_hash"
    space: str = Field("default", description="Embedding space of the thoughts.")
    bits: int = Field(10, ge=1, le=64, description="LSH bits per table.")
    tables: int = Field(16, ge=1, le=64, description="LSH tables.")
    extract: bool = Field(True, description="Extract triples from inserted text (false: the text is a thought already).")
    max_triples: int = Field(10, ge=1, le=50, description="Triples kept per inserted text.")
    llm: str | None = Field("default", description="LLM of the triple extraction and distillation (undeclared 'default': the fallbacks).")
    distill: DistillConfig | None = Field(None, description="TiM's post-thinking over each new thought's buckets (None: off).")


class VectorHashMemory(Service):
    """Thoughts (triple sentences) hashed by LSH."""

    config: VectorHashConfig
    uses_pipeline = False
    capacity_limited = True  # results are thoughts (with extract, not the inserted texts); distillation forgets some
    read_only_verbs = frozenset({"retrieve"})  # retrieve searches the thoughts and writes nothing

    @classmethod
    def required_indexes(cls, config: ComponentConfig) -> dict[str, dict[str, Any]]:
        """One ``lsh`` index over the configured space."""
        own = cast(VectorHashConfig, config)  # memcore validates a service's settings with its registered model
        return {INDEX: {"kind": "lsh", "space": own.space, "bits": own.bits, "tables": own.tables}}

    def insert(self, text: str, vector: Any = None, metadata: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
        """Store one text (``id``, ``links``, ``vectors`` as keywords); with ``extract`` its triples'
        sentences go to the LSH index."""
        self.reject_unknown("insert", kwargs, INSERT_KEYWORDS)
        kwargs = {k: v for k, v in kwargs.items() if v is not None}
        meta = dict(metadata or {})
        if not self.config.extract:
            item: dict[str, Any] = {"text": text, "metadata": meta, **kwargs}
            if vector is not None:
                item["vectors"] = {self.config.space: vector}
            rid = self.collection.ids_of([item])[0]
            if self.collection.get_many([rid])[0] is not None:  # an idempotent retry: the same thought, not distilled again
                self.collection.insert([item], indexes=[])  # DuplicateIdError for other content under that id; else writes nothing
                return rid
            rid = self.collection.insert([item], indexes=[INDEX])[0]
            self._distill([rid])
            return rid
        source_item = {"text": text, "metadata": meta, **kwargs}
        source = self.collection.ids_of([source_item])[0]
        if self.collection.get_state(SOURCES, source) is not None and self.collection.get_many([source])[0] is not None:
            self.collection.insert([source_item], indexes=[])  # an idempotent retry: its thoughts were written, nothing is extracted again
            return source
        turns = []
        for line in text.splitlines() or [text]:
            m = _SPEAKER.match(line)
            speaker = m.group(1).strip() if m else str(meta.get("speaker") or "someone")
            turns.append((speaker, m.group(2) if m else line))
        n = self.config.max_triples
        triples = self.run_llm_step(
            "triple_extraction",
            lambda llm: parse_triples(llm.complete(triple_prompt(text)), n, text),
            lambda: [t for speaker, said in turns for t in rule_triples(speaker, said, n)][:n],
            TRIPLE_FALLBACK,
        )
        source = self.collection.insert([source_item], indexes=[])[0]
        thoughts = [{"text": refactor_triple(t), "metadata": {**meta, "source": source, "triple": list(t)}} for t in triples if refactor_triple(t)]
        if not thoughts:  # nothing extracted: the text itself is the thought
            thoughts = [{"text": text, "metadata": {**meta, "source": source}}]
        # the thoughts and the mark "this source is done" in one commit (a retry then extracts nothing)
        self._distill(self.collection.insert(thoughts, indexes=[INDEX], state={(SOURCES, source): len(thoughts)}))
        return source

    def retrieve(
        self, query: str | None = None, vector: Any = None, where: Mapping[str, Any] | None = None, k: int = 10, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """The thoughts most similar to the query (text embedded, or the given vector)."""
        self.reject_unknown("retrieve", kwargs)
        q = self.make_query(query, vector, where, k, self.config.space)
        return [hit_result(h) for h in self.collection.retrieve(q, index=INDEX)]

    def upsert(self, items: Any) -> list[str]:
        """Refused: a text becomes thoughts through ``insert``."""
        raise ValidationError("vector_hash does not upsert: use insert() (a text becomes thoughts) and update(id, metadata=...) to change metadata")

    def update(self, id: str, **fields: Any) -> Record:
        """Change a record (``text``, ``metadata``, ``merge_metadata``, ``vectors``); with
        ``extract`` only its metadata (a text change would leave its thoughts stale)."""
        self.reject_unknown("update", fields, ("text", "metadata", "merge_metadata", "vectors"))
        if self.config.extract and (fields.get("text") is not None or fields.get("vectors") is not None):
            raise ValidationError(
                "vector_hash (extract = true) cannot change a text or its vectors: its thoughts derive from it; delete() it and insert() the new text"
            )
        return self.collection.update(id, **fields)

    # -- distillation (TiM post-thinking) -------------------------------------------------------

    def report(self) -> dict[str, int]:
        """``{"thoughts": n, "inserted": n, "merged": n, "forgotten": n, "runs": n}`` (distillation counts)."""
        state = self.collection.state_items(STATE)
        return {"thoughts": self.collection.count(index=INDEX), **{key: int(state.get(key, 0)) for key in COUNTS}}

    def _distill(self, ids: list[str]) -> None:
        """Distil each new thought (in order) with the thoughts of its buckets."""
        if self.config.distill is None:
            return
        for rid in dict.fromkeys(ids):
            if self.collection.get_many([rid])[0] is not None:  # an earlier distillation may have merged it
                self._distill_one(rid)

    def _group(self, record: Record) -> list[Thought]:
        cfg = self.config.distill
        assert cfg is not None
        vector = (record.vectors or {}).get(self.config.space)
        q = self.make_query(None if vector is not None else record.text, vector, None, cfg.neighbours + 1, self.config.space)
        hits = self.collection.retrieve(q, index=INDEX)
        out = []
        for h in hits:
            if h.id != record.id and h.record is not None and h.score >= cfg.similarity:
                out.append(Thought(h.id, h.record.text, dict(h.record.metadata), float(h.score)))
        return out[: cfg.neighbours]

    def _distill_one(self, rid: str) -> None:
        cfg = self.config.distill
        assert cfg is not None
        record = self.collection.get(rid)
        neighbours = self._group(record)
        if len(neighbours) < cfg.min_neighbours:
            return
        new = Thought(record.id, record.text, dict(record.metadata))
        group = [*neighbours, new]
        plan, keeper = self.run_llm_step(
            "distillation",
            lambda llm: (parse_plan(llm.complete(distill_prompt(group)), group), None),
            lambda: fallback_plan(new, neighbours, cfg.merge_threshold),
            DISTILL_FALLBACK,
        )
        self._apply(plan, keeper, group, new)

    def _apply(self, plan: Plan, keeper: str | None, group: list[Thought], new: Thought) -> None:
        """Carry out a plan: inserts and keeper updates first, deletions last (a crash leaves a
        duplicate, never a loss)."""
        cfg = self.config.distill
        assert cfg is not None
        counts = {key: int(v) for key, v in self.collection.state_items(STATE).items() if key in COUNTS}
        counts["runs"] = counts.get("runs", 0) + 1
        by_id = {t.id: t for t in group}
        leaving = [by_id[i] for i in plan.delete]
        if plan.insert:
            sources = leaving or group  # merged facts stand for what they replace, else for the whole group
            base = shared_metadata([t.metadata for t in sources])
            base = {k: v for k, v in base.items() if k not in cfg.provenance and k not in ("merged_from", "triple")}
            facts = [{"text": text, "metadata": merged_metadata(base, sources, cfg.provenance, texts=bool(leaving))} for text in plan.insert]
            self.collection.insert(facts, indexes=[INDEX])
            counts["inserted"] = counts.get("inserted", 0) + len(facts)
            counts["merged"] = counts.get("merged", 0) + len(leaving)
        elif leaving:
            if keeper is None:  # the LLM forgot thoughts: the new one, else the closest remaining, keeps them
                staying = [t for t in group if t.id not in plan.delete]
                keeper = new.id if new.id not in plan.delete else max(staying, key=lambda t: t.score).id
            kept = self.collection.get(keeper)
            self.collection.update(keeper, metadata=merged_metadata(kept.metadata, leaving, cfg.provenance))
            key = "merged" if plan.delete == [new.id] else "forgotten"
            counts[key] = counts.get(key, 0) + len(leaving)
        state = {(STATE, key): value for key, value in counts.items()}
        if plan.delete:
            self.collection.delete(plan.delete, state=state)
        else:
            self.collection.set_state(state)
