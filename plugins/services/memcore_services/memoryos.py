"""``memoryos``: MemoryOS-style tiers (Kang et al. 2025; BAI-LAB/MemoryOS).

- **STM**: a fifo queue of pages (index ``memoryos.stm``, kind ``fifo``, ``stm_capacity``).
- **MTM**: pages pushed out of the STM join the vector index ``memoryos.mtm`` and a
  *segment*: the most similar segment of the same session (cosine of the page to the
  segment's centroid >= ``segment_threshold``) or a new one. A segment keeps its pages,
  centroid, visits, interaction length (pages) and last visit in the store.
- **Heat**: ``heat = a * visits + b * length + c * exp(-(now - last_visit) / tau_s)``
  (``[service.heat]``). When the MTM holds more than ``mtm_capacity`` segments, the coldest
  are summarised -- by the LLM named ``llm`` or the fallback ``keyword_summary`` (its most
  frequent content words and its most central page) -- into an **LTM** knowledge entry
  (index ``memoryos.ltm``) that lists the pages (and their ``dia_ids``); the pages leave the
  MTM index but stay in the store (``summarised`` in their page state). Nothing is dropped.
- **Retrieval** reads the STM (word overlap, recency), the MTM (the ``top_segments``
  segments closest to the query, then their pages by cosine), and the LTM, and counts a visit
  (and updates the last visit) of every segment that yielded a page.

Data is stored once; tiers are index memberships; all state is in the store (namespace
``memoryos``): pages ``p:<id>`` -> segment or summary, segments ``s:<n>``.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Mapping

import numpy as np
from memcore import ComponentConfig, Service
from pydantic import Field

from .common import HeatWeights, heat, hit_result, lexical, now, record_result, top, unit

__all__ = ["MemoryOSConfig", "MemoryOS"]

NS = "memoryos"
STM, MTM, LTM = "memoryos.stm", "memoryos.mtm", "memoryos.ltm"
_STOP = set(
    "the a an and or but to of in on at for with is are was were be been i you he she it we they my your our his her "
    "their me him them this that so just really very what do did does have has had not no yes oh too also can will would "
    "about from as by if then than there here how when where why who which all any some more most like get got".split()
)
SUMMARY_PROMPT = "Summarise the following conversation pages in one or two sentences, keeping names, dates and facts.\n\n{pages}\n\nSummary:"


class MemoryOSConfig(ComponentConfig):
    """Settings of ``memoryos`` (defaults: the MemoryOS pypi package, REFERENCES §1)."""

    kind: str = "memoryos"
    stm_capacity: int = Field(10, ge=1, description="Pages in the short-term queue.")
    mtm_capacity: int = Field(200, ge=1, description="Segments in the mid-term memory before the coldest are summarised into LTM.")
    segment_threshold: float = Field(0.6, ge=-1, le=1, description="Cosine of a page to a segment centroid needed to join it.")
    top_segments: int = Field(5, ge=1, description="Segments searched per query.")
    heat: HeatWeights = Field(default_factory=HeatWeights, description="Heat weights a, b, c and tau_s.")
    space: str = Field("default", description="Embedding space of pages and summaries.")
    session_key: str = Field("session", description="Metadata key of the session (segments never span two sessions).")
    weights: dict[str, float] = Field(default_factory=lambda: {"stm": 1.0, "mtm": 1.0, "ltm": 1.0}, description="Score multiplier per tier.")
    llm: str | None = Field("default", description="LLM of the summaries (undeclared 'default': the keyword_summary fallback).")


def keyword_summary(texts: list[str], vectors: np.ndarray) -> str:
    """Fallback summary: the most frequent content words, then the most central page."""
    words = Counter(w for t in texts for w in re.findall(r"[a-z][a-z']+", t.lower()) if w not in _STOP and len(w) > 2)
    keywords = ", ".join(w for w, _ in words.most_common(8))
    centre = unit(vectors.mean(axis=0)) if len(vectors) else None
    best = int(np.argmax(vectors @ centre)) if centre is not None else 0
    return f"Topics: {keywords}. {texts[best]}" if texts else f"Topics: {keywords}."


class MemoryOS(Service):
    """STM queue -> MTM segments with heat -> LTM summaries."""

    uses_pipeline = False

    @classmethod
    def required_indexes(cls, config: MemoryOSConfig) -> dict[str, dict[str, Any]]:
        """``memoryos.stm`` (fifo), ``memoryos.mtm`` and ``memoryos.ltm`` (exact cosine)."""
        vec = {"kind": "exact", "space": config.space, "metric": "cosine"}
        return {STM: {"kind": "fifo", "capacity": config.stm_capacity}, MTM: dict(vec), LTM: dict(vec)}

    # -- insert --------------------------------------------------------------------------

    def insert(self, text: str, vector: Any = None, metadata: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
        """Add a page to the STM; pages pushed out move to MTM segments; cold segments go to LTM."""
        item: dict[str, Any] = {"text": text, "metadata": dict(metadata or {}), **kwargs}
        if vector is not None:
            item["vectors"] = {self.config.space: vector}
        rid = self.collection.insert([item], indexes=[STM])[0]
        evicted = self.collection.evict(STM)
        for page in evicted:
            self._to_mtm(page)
        self._enforce_mtm()
        return rid

    def _segments(self) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.collection.state_items(NS).items() if k.startswith("s:")}

    def _to_mtm(self, page: str) -> None:
        self.collection.insert_to_index(MTM, [page])
        record = self.collection.get(page)
        vecs, present = self.collection.vectors([page], self.config.space)
        v = unit(vecs[0])
        session = (record.metadata or {}).get(self.config.session_key)
        best, best_sim = None, self.config.segment_threshold
        for key, seg in self._segments().items():
            if seg.get("session") != session:
                continue
            sim = float(unit(seg["centroid"]) @ v)
            if sim >= best_sim:
                best, best_sim = key, sim
        at = now()
        if best is None:
            n = int(self.collection.get_state(NS, "next_segment", 0)) + 1
            best = f"s:{n}"
            seg = {"pages": [page], "centroid": v.tolist(), "visits": 0, "length": 1, "last": at, "session": session}
            changes = {(NS, "next_segment"): n}
        else:
            seg = dict(self._segments()[best])
            count = len(seg["pages"])
            seg["centroid"] = unit((np.asarray(seg["centroid"]) * count + v) / (count + 1)).tolist()
            seg["pages"] = [*seg["pages"], page]
            seg["length"] = seg["length"] + 1
            seg["last"] = at
            changes = {}
        changes[(NS, best)] = seg
        changes[(NS, f"p:{page}")] = {"tier": "mtm", "segment": best}
        self.collection.set_state(changes)

    def _heat(self, seg: Mapping[str, Any], at: float) -> float:
        return heat(self.config.heat, seg.get("visits", 0), seg.get("length", 0), seg.get("last", 0.0), at)

    def _enforce_mtm(self) -> None:
        segments = self._segments()
        over = len(segments) - self.config.mtm_capacity
        if over <= 0:
            return
        at = now()
        for key in sorted(segments, key=lambda s: (self._heat(segments[s], at), s))[:over]:
            self._summarise(key, segments[key])

    def _summarise(self, key: str, seg: Mapping[str, Any]) -> None:
        pages = list(seg["pages"])
        records = [r for r in self.collection.get_many(pages) if r is not None]
        texts = [r.text for r in records]
        vecs, _ = self.collection.vectors([r.id for r in records], self.config.space)
        summary = self.run_llm_step(
            "summary",
            lambda llm: llm.complete(SUMMARY_PROMPT.format(pages="\n".join(texts))).strip() or keyword_summary(texts, np.asarray(vecs)),
            lambda: keyword_summary(texts, np.asarray(vecs)),
            "keyword_summary",
        )
        dia_ids = list(dict.fromkeys(d for r in records for d in ((r.metadata or {}).get("dia_ids") or [])))
        meta = {"memoryos": "ltm_summary", "pages": pages}
        if dia_ids:
            meta["dia_ids"] = dia_ids
        sid = self.collection.insert([{"text": summary, "metadata": meta}], indexes=[LTM])[0]
        self.collection.remove_from_index(MTM, pages, state={(NS, key): None, **{(NS, f"p:{p}"): {"tier": "ltm", "summarised": sid} for p in pages}})

    # -- retrieve ------------------------------------------------------------------------

    def retrieve(
        self, query: str | None = None, vector: Any = None, metadata: Mapping[str, Any] | None = None, k: int = 10, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """STM recent + MTM (segments, then pages) + LTM; visits the segments that answered."""
        q = self.make_query(query, vector, metadata, k, self.config.space)
        w = self.config.weights
        results: list[dict[str, Any]] = []
        stm_ids = self.collection.ids(index=STM, where=dict(metadata) if metadata else None)
        stm = [r for r in self.collection.get_many(stm_ids) if r is not None]
        for i, r in enumerate(stm):  # word overlap, newest first on ties
            results.append(record_result(r, w.get("stm", 1.0) * (lexical(query, r.text) + (i + 1) / (1000.0 * (len(stm) + 1)))))
        visited: set[str] = set()
        if self.collection.count(index=MTM):
            qv = unit(self.collection.query_vector(q, self.config.space))
            segments = self._segments()
            ranked = sorted(segments, key=lambda s: -float(unit(segments[s]["centroid"]) @ qv))[: self.config.top_segments]
            allowed = {p: s for s in ranked for p in segments[s]["pages"]}
            for h in self.collection.retrieve(q, index=MTM, k=max(k, 1) * 3):
                if h.id in allowed:
                    results.append({**hit_result(h), "score": w.get("mtm", 1.0) * float(h.score)})
                    visited.add(allowed[h.id])
            if visited:
                at = now()
                self.collection.set_state({(NS, s): {**segments[s], "visits": segments[s].get("visits", 0) + 1, "last": at} for s in visited})
        if self.collection.count(index=LTM):
            for h in self.collection.retrieve(q, index=LTM, k=k):
                results.append({**hit_result(h), "score": w.get("ltm", 1.0) * float(h.score)})
        return top(results, k)

    def report(self) -> dict[str, Any]:
        """Pages in STM and MTM, segments, LTM entries, pages summarised."""
        state = self.collection.state_items(NS)
        return {
            "stm": self.collection.count(index=STM),
            "mtm": self.collection.count(index=MTM),
            "ltm": self.collection.count(index=LTM),
            "segments": sum(1 for k in state if k.startswith("s:")),
            "summarised_pages": sum(1 for k, v in state.items() if k.startswith("p:") and v and v.get("tier") == "ltm"),
        }
