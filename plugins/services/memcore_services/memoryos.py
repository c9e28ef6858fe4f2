"""``memoryos``: MemoryOS tiers (Kang et al. 2025; BAI-LAB/MemoryOS ``memoryos-pypi``).

- **STM** (index ``memoryos.stm``, kind ``fifo``): the last ``stm_capacity`` pages.
- **MTM** (index ``memoryos.mtm``, exact cosine): each page pushed out of the STM is first
  *chained* to the previously pushed page of the same session when the two are continuous
  (LLM step ``continuity``, fallback ``same_session``), and its chain's meta-summary is
  updated (``meta_info``, fallback ``keyword_meta``). Then the batch (one page per insert, as
  MemoryOS) is summarised into at most two themes (``multi_summary``, fallback
  ``central_page``) and joins the segment of its session with the best MemoryOS score
  ``cos(theme summary, segment summary) + keyword_weight * Jaccard(keywords)`` when it
  reaches ``segment_threshold``, else starts a segment (:mod:`.memoryos_segments`). A joined
  segment's summary and keywords are updated (``segment_summary``, fallback
  ``central_page``). A segment keeps its pages, the pages not analysed yet, visits,
  interaction length, last visit, summary, keywords and word counts.
- **Heat** ``a * visits + b * length + c * exp(-(now - last_visit) / tau_s)``, updated on
  access; ``now`` is the wall clock (MemoryOS) or, with ``clock = "event"``, the latest event
  time of the entries (:mod:`.memoryos_clock`). After every insert each segment with pages not analysed yet is *promoted* when
  its heat reaches ``heat_threshold`` (MemoryOS: 5), hottest first: the LLM rewrites the **user
  profile** (``profile``, fallback ``keyword_profile``) and extracts **user knowledge** and
  **assistant knowledge** (``knowledge``, fallback ``first_person_lines``); its pages are
  marked analysed and its visits and length reset, as MemoryOS does. The pages stay in MTM.
- **Capacity**: when the MTM holds more than ``mtm_capacity`` segments the coldest are
  summarised (``summary``, fallback ``keyword_summary``) into a ``segment_summary`` entry of
  the user knowledge store that lists their pages; the pages leave the MTM index but stay in
  the store. Nothing is dropped.
- **LTM** is three indexes: ``memoryos.profile`` (one profile record per scope),
  ``memoryos.user_knowledge`` and ``memoryos.assistant_knowledge``.
- **Retrieval**: STM pages (word overlap), MTM (the ``top_segments`` segments whose summary
  embedding -- or centroid, ``segment_search`` -- is closest to the query, then their pages by cosine, thresholds as MemoryOS), the profile and both
  knowledge stores; every segment that yielded a page counts a visit. ``chain=True`` adds
  each page's chain (previous/next page, meta-summary) to its result.

All state is in the store (namespace ``memoryos``: ``s:<n>`` segments, ``v:<n>`` their centroids,
``e:<n>`` their summary embeddings, ``t:<n>`` their summaries and keywords, ``p:<id>`` pages, ``c:<n>`` chains, ``clock``), read once per store sequence number (:class:`StateView`).

**Scopes.** Every verb takes ``scope=`` (bound by :class:`memcore.Service`), and a scope is a
memory of its own: its STM window (the last ``stm_capacity`` pages written in that scope:
another user's inserts never push a page out), segments, chains, heat, counters and clock
(the state namespace is kept per scope by the core, the in-process caches by
:class:`StateView` per scope too), its profile (id :func:`profile_id`; unscoped:
``memoryos-profile``) and knowledge (derived records carry the scope). ``retrieve`` sees
only the scope's records. ``forget(scope=...)`` (``Memory.delete(scope=...)``) removes all
of it in one commit.

**Writes by id.** A page moves STM -> MTM with ``Collection.move`` (one commit per run,
with its state: after a crash it is in exactly one tier). ``upsert`` inserts a new record as
a page through :meth:`MemoryOS.insert` (never into every index) and rewrites an existing one
in place; ``update`` keeps the page's tier (its stored vector follows the new text; the
summaries derived from it are kept as analysed); ``delete`` also takes the pages out of the
scope's segments and chains.

Opening a memory whose records are in no memoryos tier (written by another service) warns
(:class:`ForeignRecordsWarning`, event ``memoryos.foreign_records``): ``retrieve`` reads only
the tiers; ``report()["outside_tiers"]`` counts such records.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections import Counter
from typing import Any, Literal, Mapping, Sequence, cast

import numpy as np
from memcore.plugin import Collection, ComponentConfig, DuplicateIdError, NotFoundError, Pipeline, Record, Scope, Service, ServiceProblem, get_logger
from pydantic import Field, field_validator

from . import memoryos_check
from .common import HeatWeights, heat, hit_result, lexical, record_result, top, unit
from .memoryos_clock import EventClock
from .memoryos_ltm import (
    Fact,
    Page,
    ask_continuity,
    ask_knowledge,
    ask_meta_info,
    ask_profile,
    ask_summary,
    content_words,
    date_of,
    first_person_lines,
    keyword_meta,
    keyword_profile,
    keyword_summary,
    pages_of,
    same_session,
    speaker_words,
    speakers_of,
)
from .memoryos_segments import Theme, ask_multi_summary, ask_segment_summary, central_theme, segment_score
from .memoryos_state import StateView

__all__ = ["MemoryOSConfig", "MemoryOS", "keyword_summary", "profile_id", "ForeignRecordsWarning"]

log = get_logger("memcore.services.memoryos")

NS = "memoryos"
STM, MTM = "memoryos.stm", "memoryos.mtm"
PROFILE, USER_KB, ASSISTANT_KB = "memoryos.profile", "memoryos.user_knowledge", "memoryos.assistant_knowledge"
LTM = {"profile": PROFILE, "user_knowledge": USER_KB, "assistant_knowledge": ASSISTANT_KB}
PROFILE_ID = "memoryos-profile"
"""The id of the user profile of an unscoped memory (a scope's own: :func:`profile_id`)."""
TIERS = ("stm", "mtm", *LTM)
_KEEP_WORDS = 40


class MemoryOSConfig(ComponentConfig):
    """Settings of ``memoryos`` (defaults: the MemoryOS pypi package, REFERENCES §1)."""

    kind: str = "memoryos"
    stm_capacity: int = Field(10, ge=1, description="Pages in the short-term queue.")
    mtm_capacity: int = Field(200, ge=1, description="Segments in the mid-term memory before the coldest are summarised into LTM.")
    segment_threshold: float = Field(
        0.6, ge=-1, le=2, description="Score (summary cosine + keyword_weight x keyword Jaccard) a page batch needs to join a segment of its session."
    )
    keyword_weight: float = Field(1.0, ge=0, description="Weight of the keyword Jaccard overlap in the segment score (MemoryOS: 1).")
    segment_search: Literal["summary", "centroid"] = Field(
        "summary",
        description="Segment vector the retrieval's segment stage compares the query with: the summary's embedding (MemoryOS) or the pages' centroid.",
    )
    clock: Literal["wall", "event"] = Field("wall", description="Clock of heat recency: wall-clock time (MemoryOS) or the latest event time of the entries.")
    time_keys: list[str] = Field(
        default_factory=lambda: ["timestamp", "date_time"],
        min_length=1,
        description="Metadata keys read (first present) as an entry's event time (clock = 'event').",
    )
    heat_threshold: float | None = Field(5.0, ge=0, description="Heat at which a segment's new pages are promoted to LTM (None: never).")
    continuity: bool = Field(True, description="Chain consecutive pages of a session (continuity + meta_info steps).")
    top_segments: int = Field(5, ge=1, description="Segments searched per query.")
    segment_min_sim: float = Field(0.1, ge=-1, le=1, description="Cosine a segment needs to be searched.")
    page_min_sim: float = Field(0.1, ge=-1, le=1, description="Cosine a page of a searched segment needs to be returned.")
    knowledge_k: int = Field(20, ge=1, description="Entries read from each knowledge store per query.")
    knowledge_min_sim: float = Field(0.01, ge=-1, le=1, description="Cosine a knowledge entry needs to be returned.")
    heat: HeatWeights = Field(default_factory=HeatWeights, description="Heat weights a, b, c and tau_s.")
    space: str = Field("default", description="Embedding space of pages and LTM entries.")
    session_key: str = Field("session", description="Metadata key of the session (segments and chains never span two sessions).")
    weights: dict[str, float] = Field(default_factory=lambda: {t: 1.0 for t in TIERS}, description=f"Score multiplier per tier ({', '.join(TIERS)}).")
    llm: str | None = Field("default", description="LLM of the LLM steps (undeclared 'default': the named fallbacks).")

    @field_validator("weights")
    @classmethod
    def _known_tiers(cls, value: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(value) - set(TIERS))
        if unknown:
            raise ValueError(f"unknown tier(s) {unknown} in weights; tiers: {list(TIERS)}")
        return value


def profile_id(scope: Scope | None) -> str:
    """The id of the LTM user profile of ``scope``: :data:`PROFILE_ID` unscoped (memories
    written before scopes keep theirs), else :data:`PROFILE_ID` + a digest of the scope."""
    fields = _scope_fields(scope)
    if not fields:
        return PROFILE_ID
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()[:24]
    return f"{PROFILE_ID}-{digest}"


def _scope_fields(scope: Scope | None) -> dict[str, Any]:
    """A scope as a dict ({} for none or an empty one)."""
    return scope.as_dict() if scope is not None else {}


class ForeignRecordsWarning(UserWarning):
    """The memory holds records that are in no ``memoryos`` tier (written by another
    service): ``retrieve`` cannot return them."""


def _centroid_key(segment: str) -> str:
    return "v:" + segment[2:]


def _summary_key(segment: str) -> str:
    return "e:" + segment[2:]


def _topic_key(segment: str) -> str:
    return "t:" + segment[2:]


def _top_words(counts: Counter[str], n: int = _KEEP_WORDS) -> dict[str, int]:
    return dict(counts.most_common(n))


class MemoryOS(EventClock, Service):
    """STM queue -> MTM segments (chains, heat) -> LTM profile and knowledge stores."""

    config: MemoryOSConfig
    uses_pipeline = False

    capacity_limited = True  # the MTM thresholds (segment_min_sim, page_min_sim) may leave a page unreturned

    def __init__(self, config: MemoryOSConfig, collection: Collection, pipeline: Pipeline | None):
        super().__init__(config, collection, pipeline)
        self.state = StateView(collection, NS)
        self._warn_foreign()

    @property
    def _page_vectors(self) -> dict[str, np.ndarray]:
        """Unit vectors of the bound scope's pages, by id (a per-scope cache: :meth:`StateView.scratch`)."""
        vectors: dict[str, np.ndarray] = self.state.scratch("page_vectors")
        return vectors

    def _warn_foreign(self) -> None:
        """Say so when the memory holds records but none is in a memoryos tier: they were
        written by another service, and ``retrieve`` (which reads its tiers) returns nothing."""
        total = self.collection.count()
        if not total or any(self.collection.count(index=index) for index in (STM, MTM, *LTM.values())):
            return
        message = (
            f"memoryos: this memory holds {total} record(s) but none is in a memoryos tier (written by another service?); "
            "retrieve() reads only its tiers and will not return them. Insert the texts through the memoryos service "
            "(Memory.insert, one per turn, in order) into a new memory to build its tiers."
        )
        log.warning("memoryos.foreign_records", records=total, hint="insert the texts through the memoryos service into a new memory")
        warnings.warn(message, ForeignRecordsWarning, stacklevel=2)

    @classmethod
    def required_indexes(cls, config: ComponentConfig) -> dict[str, dict[str, Any]]:
        """``memoryos.stm`` (fifo); ``memoryos.mtm`` and the three LTM stores (exact cosine).

        The fifo's ``capacity`` (``stm_capacity``, kept as memories were built with it) is
        never used to evict: the service moves pages out of each scope's own window itself
        (``Collection.evict`` would count every scope's pages against one capacity)."""
        own = cast(MemoryOSConfig, config)  # memcore validates a service's settings with its registered model
        vec = {"kind": "exact", "space": own.space, "metric": "cosine"}
        return {STM: {"kind": "fifo", "capacity": own.stm_capacity}, MTM: dict(vec), **{name: dict(vec) for name in LTM.values()}}

    # -- insert --------------------------------------------------------------------------

    def insert(self, text: str, vector: Any = None, metadata: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
        """Add a page to the STM; the batch pushed out joins an MTM segment; hot segments are promoted, cold ones summarised.

        Keywords: ``id``, ``vectors`` ({space: vector}), ``links`` (and ``scope``, bound by
        the base class: the page, what is derived from it and the state belong to it)."""
        self.reject_unknown("insert", kwargs, ("id", "vectors", "links"))
        changes = self._clock_change(metadata)  # an unreadable event time is refused before anything is written
        same = {"text": text, "metadata": dict(metadata or {}), **kwargs}
        rid = self.collection.ids_of([same])[0]
        if self._placed(rid):  # an idempotent retry: the page is already in a tier, nothing moves
            self.collection.insert([same], indexes=[])  # DuplicateIdError for other content under that id; else writes nothing
            return rid
        vectors = dict(kwargs.pop("vectors", None) or {})
        if vector is not None:
            vectors[self.config.space] = vector
        if self.config.space not in vectors and isinstance(text, str) and self.config.space in self.collection.spaces:
            vectors[self.config.space] = self.collection.spaces[self.config.space].embed_documents([text])[0]  # needed when it reaches MTM
        item: dict[str, Any] = {"text": text, "metadata": dict(metadata or {}), "vectors": vectors, **kwargs}
        self._resume()
        rid = self.state.write(changes, lambda state: self.collection.insert([item], indexes=[STM], state=state))[0]
        stm = self._window()
        over = stm[: max(0, len(stm) - self.config.stm_capacity)]  # the oldest: pages enter the STM in insertion order
        if over:  # each run moves STM -> MTM in one commit (Collection.move): a crash leaves it in the STM, moved by the next insert
            self._to_mtm(over, STM)
        self._enforce_mtm()
        self._promote_hot()
        return rid

    def _placed(self, rid: str) -> bool:
        """True when record ``rid`` of the bound scope is already a page: in the STM, or
        with a tier in the state (MTM, or summarised into LTM)."""
        if self.collection.get_many([rid])[0] is None:
            return False
        if (self.state.get(f"p:{rid}") or {}).get("tier"):
            return True
        return STM in self.collection.store.memberships([rid]).get(rid, ())  # visible: checked above

    # -- STM -> MTM: chains, batch summary, segment assignment ----------------------------

    def _window(self) -> list[str]:
        """The bound scope's STM window, oldest first: the STM pages written in exactly this
        scope (reads are narrowed to the scope by the core; a narrower scope's pages, which
        have their own state, stay in their own window)."""
        stm = self.collection.ids(index=STM)
        if len(stm) <= self.config.stm_capacity:
            return stm
        own = _scope_fields(self.scope)
        return [r.id for r in self.collection.get_many(stm) if r is not None and _scope_fields(r.scope) == own]

    def _resume(self) -> None:
        """Place the pages of a batch that left the STM but never reached the MTM, listed
        under ``pending`` (a crash between the two commits of a version before
        ``Collection.move``; today a batch moves in one commit and never writes ``pending``)."""
        pending = [p for p in self.state.get("pending") or [] if not (self.state.get(f"p:{p}") or {}).get("tier")]
        if pending:
            self._to_mtm(pending, None)
        elif self.state.get("pending"):
            self.state.write({"pending": None})

    def _vector(self, page: str, text: str) -> np.ndarray:
        if page not in self._page_vectors:
            vecs, present = self.collection.vectors([page], self.config.space)
            # a page stored without a vector (by an older version): embed it here, the MTM insert stores it
            vec = vecs[0] if present[0] else self.collection.spaces[self.config.space].embed_documents([text])[0]
            self._page_vectors[page] = unit(vec)
        return self._page_vectors[page]

    def _page_matrix(self, pages: list[str]) -> np.ndarray:
        missing = [p for p in pages if p not in self._page_vectors]
        if missing:
            vecs, _ = self.collection.vectors(missing, self.config.space)
            for p, v in zip(missing, vecs):
                self._page_vectors[p] = unit(v)
        return np.stack([self._page_vectors[p] for p in pages]) if pages else np.zeros((0, 0), np.float32)

    def _chain(self, page: Page, changes: dict[str, Any]) -> None:
        """Chain ``page`` to the previously moved page of its session: its links go to
        ``changes["p:<id>"]``. Reads ``changes`` (this batch's pending writes) before the state."""

        def get(key: str, default: Any = None) -> Any:
            return changes[key] if key in changes else self.state.get(key, default)

        prev_id = get("last_page")
        prev_rec = self.collection.get_many([prev_id])[0] if prev_id else None
        prev = Page(prev_rec.id, prev_rec.text, dict(prev_rec.metadata or {})) if prev_rec is not None else None
        prev_state = get(f"p:{prev_id}") if prev_id else None
        key = self.config.session_key
        continuous = False
        if prev is not None and prev_state and prev_state.get("chain") and same_session(prev, page, key):
            continuous = self.run_llm_step("continuity", lambda llm: ask_continuity(llm, prev, page), lambda: same_session(prev, page, key), "same_session")
        if continuous and prev_state:  # continuous only when prev_state holds a chain
            chain_key = prev_state["chain"]
            chain = dict(get(chain_key) or {})
            changes[f"p:{prev_id}"] = {**prev_state, "next": page.id}
        else:
            n = int(get("next_chain", 0)) + 1
            changes["next_chain"] = n
            chain_key, chain = f"c:{n}", {"session": page.metadata.get(key), "date": page.metadata.get("date_time") or date_of(page), "words": {}, "pages": 0}
        words = Counter(chain.get("words") or {})
        words.update(content_words(page.text))
        speakers = list(dict.fromkeys([*(chain.get("speakers") or []), *speakers_of(page)]))
        meta = self.run_llm_step(
            "meta_info",
            lambda llm: ask_meta_info(llm, chain.get("meta"), page),
            lambda: keyword_meta(words, speakers, chain.get("date")),
            "keyword_meta",
        )
        changes[chain_key] = {**chain, "meta": meta, "words": _top_words(words), "speakers": speakers, "pages": int(chain.get("pages", 0)) + 1}
        changes["last_page"] = page.id
        changes[f"p:{page.id}"] = {"chain": chain_key, "prev": prev_id if continuous else None, "next": None}

    def _to_mtm(self, page_ids: list[str], source: str | None) -> None:
        """Move a batch pushed out of the STM (``source``; None: pages in no index, resumed
        from ``pending``) to MTM, in runs of consecutive pages of one session (one page per
        insert once the STM is full): chain each page, then the run is summarised
        (``multi_summary``) and joins the best-scoring segment of its session or starts one
        -- one store commit per run, which moves its pages and writes the state."""
        key = self.config.session_key
        runs: list[list[Page]] = []
        for p in pages_of(self.collection.get_many(page_ids)):
            if runs and runs[-1][0].metadata.get(key) == p.metadata.get(key):
                runs[-1].append(p)
            else:
                runs.append([p])
        for run in runs:
            changes: dict[str, Any] = {}
            if self.config.continuity:
                for p in run:
                    self._chain(p, changes)
            self._assign(run[0].metadata.get(key), run, changes, source)

    def _theme_vector(self, theme: Theme) -> np.ndarray:
        """A summary's embedding: its page's vector when it is a page's text, else embedded."""
        if theme.page is not None and theme.page in self._page_vectors:
            return self._page_vectors[theme.page]
        return unit(self.collection.spaces[self.config.space].embed_documents([theme.content])[0])

    def _summary_vector(self, key: str) -> np.ndarray:
        """Segment ``key``'s summary embedding (a segment written by an older version has
        none: its centroid stands in)."""
        return unit(self.state.get(_summary_key(key)) or self._centroid(key))

    def _assign(self, session: Any, group: list[Page], changes: dict[str, Any], source: str | None) -> None:
        ids = [p.id for p in group]
        vecs = np.stack([self._vector(p.id, p.text) for p in group])
        themes = self.run_llm_step("multi_summary", lambda llm: ask_multi_summary(llm, group), lambda: [central_theme(group, vecs)], "central_page")
        theme_vecs = [self._theme_vector(t) for t in themes]
        segments = self.state.prefixed("s:")
        best, best_theme, best_score = None, 0, float("-inf")
        for key, seg in segments.items():
            if seg.get("session") != session:
                continue
            sv, keywords = self._summary_vector(key), self.topic(key).get("keywords") or []
            for i, (theme, tv) in enumerate(zip(themes, theme_vecs)):
                score = segment_score(tv, theme.keywords, sv, keywords, self.config.keyword_weight)
                if score > best_score:  # the first best wins, as MemoryOS
                    best, best_theme, best_score = key, i, score
        at = self._batch_time(group)
        batch_words = Counter(w for p in group for w in content_words(p.text))
        if best is None or best_score < self.config.segment_threshold:
            n = int(self.state.get("next_segment", 0)) + 1
            best = f"s:{n}"
            summary, summary_vec = themes[0], theme_vecs[0]
            if len(themes) > 1:  # one segment per batch (the data is stored once): both themes describe it
                summary = Theme(" ".join(t.content for t in themes), list(dict.fromkeys(k for t in themes for k in t.keywords)))
                summary_vec = self._theme_vector(summary)
            seg = {"pages": ids, "fresh": ids, "visits": 0, "length": len(ids), "last": at, "session": session, "promotions": 0}
            topic = {"summary": summary.content, "keywords": summary.keywords, "words": _top_words(batch_words)}
            changes["next_segment"] = n
            changes[_centroid_key(best)] = unit(vecs.mean(axis=0)).tolist()
        else:
            old = segments[best]
            count = len(old["pages"])
            centroid = unit((np.asarray(self._centroid(best)) * count + vecs.sum(axis=0)) / (count + len(ids)))
            old_topic = self.topic(best)
            words = Counter(old_topic.get("words") or {})
            words.update(batch_words)
            all_ids = [*old["pages"], *ids]
            new = themes[best_theme]
            summary = self.run_llm_step(
                "segment_summary",
                lambda llm: ask_segment_summary(llm, str(old_topic.get("summary") or ""), old_topic.get("keywords") or [], new),
                lambda: self._central_summary(all_ids, centroid, words),
                "central_page",
            )
            summary_vec = self._theme_vector(summary)
            changes[_centroid_key(best)] = centroid.tolist()
            seg = {**old, "pages": all_ids, "fresh": [*old.get("fresh", []), *ids], "length": old["length"] + len(ids), "last": at}
            topic = {"summary": summary.content, "keywords": summary.keywords, "words": _top_words(words)}
            changes["joins"] = int(self.state.get("joins", 0)) + 1
        changes[best] = seg
        changes[_topic_key(best)] = topic
        changes[_summary_key(best)] = summary_vec.tolist()
        for pid in ids:
            changes[f"p:{pid}"] = {**(changes.get(f"p:{pid}") or {}), "tier": "mtm", "segment": best}
        if source is None:  # resumed from "pending" (pages in no index)
            changes["pending"] = [p for p in self.state.get("pending") or [] if p not in ids] or None
            self.state.write(changes, lambda state: self.collection.insert_to_index(MTM, ids, state=state))
        else:
            self.state.write(changes, lambda state: self.collection.move(ids, source, MTM, state=state))

    def _central_summary(self, ids: list[str], centroid: np.ndarray, words: Counter[str]) -> Theme:
        """Fallback ``central_page`` of a segment: its page closest to the centroid, its top words."""
        matrix = self._page_matrix(ids)
        pid = ids[int(np.argmax(matrix @ centroid))]
        record = self.collection.get(pid)
        return central_theme([Page(record.id, record.text, dict(record.metadata or {}))], matrix[:0], words)

    def topic(self, key: str) -> dict[str, Any]:
        """Segment ``key``'s ``summary``, ``keywords`` and ``words`` (content word counts), kept
        apart from its counters so that a visit does not rewrite them ({} for a segment
        written by an older version)."""
        return dict(self.state.get(_topic_key(key)) or {})

    def _centroid(self, key: str) -> Any:
        """The centroid of segment ``key`` (kept apart from the segment's counters, so that a
        visit does not rewrite it)."""
        return self.state.get(_centroid_key(key))

    def _heat(self, seg: Mapping[str, Any], at: float) -> float:
        return heat(self.config.heat, seg.get("visits", 0), seg.get("length", 0), seg.get("last", 0.0), at)

    # -- heat promotion: MTM -> profile and knowledge ------------------------------------

    def _promote_hot(self) -> None:
        """Promote every segment with pages not analysed yet whose heat reaches
        ``heat_threshold``, hottest first (MemoryOS checks the top of its heap after each
        insert; a hot segment already analysed does not hold back the others here)."""
        if self.config.heat_threshold is None:
            return
        at = self._now()
        # MemoryOS compares the heat it stored at the last update (recency 1 then); the few
        # milliseconds since cost ~1e-8 of recency here, hence the tolerance
        floor = self.config.heat_threshold - 1e-6
        segments = self.state.prefixed("s:")
        hot = sorted((s for s, seg in segments.items() if seg.get("fresh") and self._heat(seg, at) >= floor), key=lambda s: (-self._heat(segments[s], at), s))
        for key in hot:
            self._promote(key, self.state.get(key))

    def _promote(self, key: str, seg: Mapping[str, Any]) -> None:
        pages = pages_of(self.collection.get_many(list(seg["fresh"])))
        pid = profile_id(self.scope)
        old = self.collection.get_many([pid])[0]
        counts = {s: Counter(w) for s, w in (self.state.get("profile_words") or {}).items()}
        for speaker, words in speaker_words(pages).items():
            counts.setdefault(speaker, Counter()).update(words)
        profile = self.run_llm_step(
            "profile", lambda llm: ask_profile(llm, old.text if old else None, pages), lambda: keyword_profile(counts), "keyword_profile"
        )
        facts = self.run_llm_step("knowledge", lambda llm: ask_knowledge(llm, pages), lambda: first_person_lines(pages), "first_person_lines")
        by_page = {p.id: p for p in pages}

        def insert_facts(items: list[dict[str, Any]], index: str) -> None:
            self.state.write({}, lambda state: self.collection.insert(items, indexes=[index], state=state))

        for store, index in (("user", USER_KB), ("assistant", ASSISTANT_KB)):
            items = [{"text": f.text, "metadata": self._fact_metadata(f, by_page[f.page], store, key)} for f in facts if f.store == store]
            if items:
                insert_facts(items, index)
        reset = {**seg, "fresh": [], "visits": 0, "length": 0, "last": self._now(), "promotions": int(seg.get("promotions", 0)) + 1}
        changes = {key: reset, "profile_words": {s: _top_words(c) for s, c in counts.items()}, "promotions": int(self.state.get("promotions", 0)) + 1}
        if profile is None or (old is not None and profile == old.text):  # the LLM's reply was too short: keep the profile
            self.state.write(changes)
            return
        updates = int((old.metadata or {}).get("updates", 0)) + 1 if old else 1
        record = {"id": pid, "text": profile, "metadata": {"memoryos": "profile", "kind": "profile", "updates": updates}}
        self.state.write(changes, lambda state: self.collection.upsert([record], indexes=[PROFILE], state=state))

    @staticmethod
    def _fact_metadata(fact: Fact, page: Page, store: str, segment: str) -> dict[str, Any]:
        """The page's metadata (session, date...) with the fact's own turns and speaker."""
        meta = {**page.metadata, "dia_ids": fact.dia_ids, "memoryos": f"{store}_knowledge", "kind": "fact", "pages": [page.id], "segment": segment}
        if fact.speaker:
            meta["speaker"] = fact.speaker
        elif len(speakers_of(page)) > 1:
            meta.pop("speaker", None)  # the page's first speaker need not be the fact's
        return meta

    # -- capacity: the coldest segments are summarised into user knowledge ---------------

    def _enforce_mtm(self) -> None:
        segments = self.state.prefixed("s:")
        over = len(segments) - self.config.mtm_capacity
        if over <= 0:
            return
        at = self._now()
        for key in sorted(segments, key=lambda s: (self._heat(segments[s], at), s))[:over]:
            self._summarise(key, segments[key])

    def _summarise(self, key: str, seg: Mapping[str, Any]) -> None:
        pages = pages_of(self.collection.get_many(list(seg["pages"])))
        texts = [p.text for p in pages]
        vecs = self._page_matrix([p.id for p in pages])
        summary = self.run_llm_step("summary", lambda llm: ask_summary(llm, pages), lambda: keyword_summary(texts, vecs), "keyword_summary")
        dia_ids = list(dict.fromkeys(d for p in pages for d in p.dia_ids))
        ids = list(seg["pages"])
        meta: dict[str, Any] = {"memoryos": "user_knowledge", "kind": "segment_summary", "pages": ids, "segment": key}
        if seg.get("session") is not None:
            meta[self.config.session_key] = seg["session"]
        if dia_ids:
            meta["dia_ids"] = dia_ids
        item = {"text": summary, "metadata": meta}
        sid = self.collection.ids_of([item])[0]
        in_mtm = set(self.collection.ids(index=MTM))
        changes: dict[str, Any] = {
            key: None,
            _centroid_key(key): None,
            _summary_key(key): None,
            _topic_key(key): None,
            "evicted": int(self.state.get("evicted", 0)) + 1,
        }
        for p in ids:
            changes[f"p:{p}"] = {**(self.state.get(f"p:{p}") or {}), "tier": "ltm", "summarised": sid}
        leaving = [p for p in ids if p in in_mtm]  # (a page already out of the MTM is a check() problem, not a reason to fail)
        # ONE commit: the summary enters the user knowledge store as its pages leave the MTM,
        # with the state, so that a crash never lists a page in two summaries
        self.state.write(changes, lambda state: self.collection.insert([item], indexes=[USER_KB], state=state, remove_from={MTM: leaving}))
        for p in ids:
            self._page_vectors.pop(p, None)  # no longer searched

    # -- retrieve ------------------------------------------------------------------------

    def _centroid_matrix(self, segments: Mapping[str, Any]) -> tuple[list[str], np.ndarray]:
        """The bound scope's segment keys and their search vectors (cached per scope until
        its segments or their sizes change)."""
        cache = self.state.scratch("segment_matrix")
        signature = tuple((k, len(s["pages"])) for k, s in segments.items())
        if cache.get("signature") != signature:
            keys = list(segments)
            vector = self._summary_vector if self.config.segment_search == "summary" else (lambda k: unit(self._centroid(k)))
            matrix = np.stack([vector(k) for k in keys]) if keys else np.zeros((0, 0), np.float32)
            cache.update(signature=signature, keys=keys, matrix=matrix)
        return cache["keys"], cache["matrix"]

    def _mtm(self, qv: np.ndarray, where: Mapping[str, Any] | None, k: int, chain: bool) -> list[dict[str, Any]]:
        segments = self.state.prefixed("s:")
        if not segments:
            return []
        keys, matrix = self._centroid_matrix(segments)
        sims = matrix @ qv
        allowed: set[str] | None = None
        if where:  # only segments holding a matching page compete
            allowed = set(self.collection.ids(index=MTM, where=dict(where)))
            sims = np.where([any(p in allowed for p in segments[key]["pages"]) for key in keys], sims, -np.inf)
        order = [i for i in np.argsort(-sims, kind="stable")[: self.config.top_segments] if sims[i] >= self.config.segment_min_sim]
        owner = {p: keys[i] for i in order for p in segments[keys[i]]["pages"] if allowed is None or p in allowed}
        if not owner:
            return []
        pages = list(owner)
        scores = self._page_matrix(pages) @ qv
        hits = sorted(((float(s), p) for s, p in zip(scores, pages) if s >= self.config.page_min_sim), key=lambda h: (-h[0], h[1]))
        visited = {owner[p] for _, p in hits}
        if visited:
            at = self._now()
            self.state.write({s: {**segments[s], "visits": segments[s].get("visits", 0) + 1, "last": at} for s in sorted(visited)})
        w = self.config.weights.get("mtm", 1.0)
        hits = hits[:k]
        out = []
        for (score, _), record in zip(hits, self.collection.get_many([p for _, p in hits])):
            if record is not None:
                out.append(self._with_chain(record_result(record, w * score), chain))
        return out

    def _with_chain(self, result: dict[str, Any], chain: bool) -> dict[str, Any]:
        if not chain:
            return result
        page = self.state.get(f"p:{result['id']}") or {}
        meta = (self.state.get(page["chain"]) or {}).get("meta") if page.get("chain") else None
        return {**result, "chain": {"prev": page.get("prev"), "next": page.get("next"), "meta": meta} if page else None}

    def retrieve(
        self, query: str | None = None, vector: Any = None, where: Mapping[str, Any] | None = None, k: int = 10, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """STM recent + MTM (segments, then pages) + profile + knowledge; visits the segments that answered.

        ``chain=True`` adds ``"chain": {"prev", "next", "meta"}`` to each page result (None
        for a page not chained yet or an LTM entry).
        """
        self.reject_unknown("retrieve", kwargs, ("chain",))
        chain = bool(kwargs.get("chain", False))
        q = self.make_query(query, vector, where, k, self.config.space)
        w = self.config.weights
        results: list[dict[str, Any]] = []
        stm_ids = self.collection.ids(index=STM, where=dict(where) if where else None)
        stm = [r for r in self.collection.get_many(stm_ids) if r is not None]
        for i, r in enumerate(stm):  # word overlap, newest first on ties
            results.append(self._with_chain(record_result(r, w.get("stm", 1.0) * (lexical(query, r.text) + (i + 1) / (1000.0 * (len(stm) + 1)))), chain))
        qv = unit(self.collection.query_vector(q, self.config.space))
        results += self._mtm(qv, where, max(k, 1), chain)
        for tier, index in LTM.items():
            if not self.collection.count(index=index):
                continue
            for h in self.collection.retrieve(q, index=index, k=1 if tier == "profile" else self.config.knowledge_k):
                if h.score >= self.config.knowledge_min_sim:
                    found = {**hit_result(h), "score": w.get(tier, 1.0) * float(h.score)}
                    results.append({**found, "chain": None} if chain else found)
        return top(results, k)

    # -- consistency: check and repair ------------------------------------------------------

    def check(self) -> list[ServiceProblem]:
        """Inconsistencies between the state and the tiers, every scope (:mod:`.memoryos_check`)."""
        return memoryos_check.check(self)

    def repair(self) -> list[ServiceProblem]:
        """Fix what :meth:`check` finds (:mod:`.memoryos_check`); returns the problems fixed."""
        try:
            return memoryos_check.repair(self)
        finally:
            self.state.clear()

    # -- writes by id: upsert, update, delete, forget --------------------------------------

    def upsert(self, items: Any) -> list[str]:
        """Items in order: one whose id names an existing record of the caller's scope
        replaces it in place (:meth:`update`'s rules: it keeps its tier); a new one is
        inserted as a page through the tiers (:meth:`insert`, never into every index)."""
        out = []
        for item in [items] if isinstance(items, (str, Mapping, Record)) else list(items):
            rid = item.id if isinstance(item, Record) else item.get("id") if isinstance(item, Mapping) else None
            if rid is not None and self.collection.get_many([rid])[0] is not None:
                out += self.collection.upsert([item])
                self.state.discard("page_vectors", [rid])
            else:
                try:
                    out += self.insert_many([item])
                except DuplicateIdError:  # the id is another scope's record: unknown here
                    raise NotFoundError(f"no record {rid!r} in this scope; nothing was written") from None
        return out

    def update(self, id: str, **fields: Any) -> Record:
        """Change ``text``, ``metadata`` (``merge_metadata``) or ``vectors`` of one record of
        the caller's scope. A page keeps its tier, segment and chain; its stored vector follows
        a new text (the MTM index with it) and the cached one is dropped. What was derived
        from the page before (segment summary and centroid, chain meta-summary, facts,
        profile) is kept as it was analysed, as MemoryOS never retracts what it learnt."""
        record = super().update(id, **fields)
        self.state.discard("page_vectors", [id])
        return record

    def delete(self, ids: Sequence[str] | str) -> int:
        """Delete records by id (NotFoundError for one the caller's scope does not hold) and,
        in the same commit, every mention of a deleted page in the scope's state: its segment
        (a segment left without pages goes), its chain links (its neighbours are linked),
        ``last_page`` and ``pending``. Derived records (facts, summaries, the profile) stay:
        ``forget(scope=...)`` removes a whole scope."""
        ids = [ids] if isinstance(ids, str) else list(dict.fromkeys(ids))
        changes = self._without_pages(ids)
        try:
            return int(self.state.write(changes, lambda state: self.collection.delete(ids, state=state)))
        finally:
            self.state.discard("page_vectors", ids)

    def _without_pages(self, ids: Sequence[str]) -> dict[str, Any]:
        """State changes that take the pages ``ids`` out of the bound scope's segments and chains."""
        changes: dict[str, Any] = {}

        def get(key: str) -> Any:
            return changes[key] if key in changes else self.state.get(key)

        gone = set(ids)
        for pid in ids:
            page = get(f"p:{pid}")
            if not page:
                continue
            changes[f"p:{pid}"] = None
            for side, other in (("prev", "next"), ("next", "prev")):  # link the neighbours around the page
                neighbour = page.get(side)
                if neighbour and get(f"p:{neighbour}"):
                    changes[f"p:{neighbour}"] = {**get(f"p:{neighbour}"), other: page.get(other)}
            if get("last_page") == pid:
                changes["last_page"] = page.get("prev")
            key = page.get("segment")
            seg = get(key) if key and page.get("tier") == "mtm" else None
            if seg:
                pages = [p for p in seg["pages"] if p not in gone]
                if pages:
                    changes[key] = {**seg, "pages": pages, "fresh": [p for p in seg.get("fresh", []) if p not in gone]}
                else:
                    changes.update({key: None, _centroid_key(key): None, _summary_key(key): None, _topic_key(key): None})
        pending = self.state.get("pending")
        if pending and gone & set(pending):
            changes["pending"] = [p for p in pending if p not in gone] or None
        return changes

    def forget(self) -> dict[str, Any]:
        """Forget the bound scope (``forget(scope={...})``): its pages, the summaries, facts
        and profile derived from them (they carry its scope) and its state, in one commit
        (:meth:`memcore.Collection.forget`); the in-process caches are dropped."""
        try:
            return super().forget()
        finally:
            self.state.clear()

    def report(self, scope: Any = None) -> dict[str, Any]:
        """Pages per tier, segments, chains, LTM entries per store, promotions, pages
        summarised -- of ``scope`` (the records it covers, its own state; default: the bound
        scope, else all records and the unscoped state). ``outside_tiers`` counts records in
        no memoryos tier (written by another service: ``retrieve`` cannot return them)."""
        with self.collection.scoped(scope):
            state = self.state.items()
            tiers = {"stm": self.collection.count(index=STM), "mtm": self.collection.count(index=MTM)}
            tiers.update({tier: self.collection.count(index=index) for tier, index in LTM.items()})
            summarised = sum(1 for k, v in state.items() if k.startswith("p:") and v and v.get("tier") == "ltm")
            return {
                **tiers,
                "segments": sum(1 for k in state if k.startswith("s:")),
                "chains": sum(1 for k in state if k.startswith("c:")),
                "promotions": int(state.get("promotions", 0)),
                "summarised_pages": summarised,
                "evicted_segments": int(state.get("evicted", 0)),
                "segment_joins": int(state.get("joins", 0)),
                "outside_tiers": max(0, self.collection.count() - sum(tiers.values()) - summarised),
                "state_reads": self.state.reads,
            }
