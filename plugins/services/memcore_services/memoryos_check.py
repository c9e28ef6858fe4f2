"""``memoryos``'s consistency check and repair (``Service.check`` / ``Service.repair``).

What "consistent" means, per scope (its state namespace and the records of exactly that
scope):

- every page a segment ``s:<n>`` lists exists, is in the MTM index, is listed by no other
  segment, and its page state ``p:<id>`` says ``tier = "mtm"``, ``segment = s:<n>``; a
  segment has pages and a centroid ``v:<n>`` (and, when present, a summary embedding
  ``e:<n>``) of the space's dimension; its ``fresh`` pages
  are among its pages; no ``v:``/``e:``/``t:`` key outlives its segment;
- every MTM page is listed by a segment; no page is in the STM and the MTM at once; no
  page (a record with a page state) is in no tier at all;
- the counters ``next_segment`` / ``next_chain`` are at least the highest segment / chain
  number (else the next segment overwrites one);
- no page is listed by two ``segment_summary`` records, and no page a summary lists is
  still in the MTM (an eviction interrupted between its two commits by a version before
  evictions were one commit);
- no page state names a record that does not exist.

:func:`repair` rebuilds what the records say: summaries keep their first claim on a page
(a later summary left without pages goes), an interrupted eviction is finished (its pages
leave the MTM and their segments), segments keep the pages that are in the MTM and not
claimed by an earlier segment (an emptied segment goes, a changed one gets its centroid
recomputed), MTM pages of no segment (and pages of no tier, put back in the MTM) join a new
segment of their session, the STM copy of
a page also in the MTM goes, stale page states go and the counters move up. No record is
deleted except a summary whose pages all belong to an earlier summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from memcore.plugin import Record, Scope, ServiceProblem

from .common import unit

if TYPE_CHECKING:
    from .memoryos import MemoryOS

__all__ = ["check", "repair"]


def _number(key: str) -> int:
    try:
        return int(key.split(":", 1)[1])
    except (IndexError, ValueError):
        return 0


def _fields(scope: Scope | None) -> dict[str, Any]:
    return scope.as_dict() if scope is not None else {}


@dataclass
class _Plan:
    """What :func:`repair` writes for one scope."""

    problems: list[ServiceProblem] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    leave_stm: list[str] = field(default_factory=list)
    leave_mtm: list[str] = field(default_factory=list)
    join_mtm: list[str] = field(default_factory=list)
    summaries: dict[str, list[str]] = field(default_factory=dict)
    """summary id -> the pages it keeps (an empty list: the summary goes)."""

    def add(self, scope: Scope | None, kind: str, message: str, ids: list[str]) -> None:
        self.problems.append(ServiceProblem(kind, message, scope, tuple(ids)))


def _scopes(service: "MemoryOS") -> list[Scope | None]:
    """Every scope with memoryos state or records in a memoryos index (unbound read)."""
    from .memoryos import MTM, NS, STM, USER_KB

    out: dict[str, Scope | None] = {"{}": None}
    for scope in service.state_scopes(NS):
        out[repr(sorted(_fields(scope).items()))] = scope
    collection = service.collection
    with collection.scoped(None):
        ids = list(dict.fromkeys(i for index in (STM, MTM, USER_KB) for i in collection.ids(index=index)))
        for record in collection.records(ids):
            if record is not None and record.scope is not None and not record.scope.is_empty():
                out.setdefault(repr(sorted(_fields(record.scope).items())), record.scope)
    return [out["{}"], *(s for k, s in out.items() if k != "{}")]


def _own(records: list[Record | None], scope: Scope | None) -> list[Record]:
    """The records of exactly ``scope`` (a narrower scope's records have their own state)."""
    own = _fields(scope)
    return [r for r in records if r is not None and _fields(r.scope) == own]


def _audit(service: "MemoryOS", scope: Scope | None) -> _Plan:
    """The problems of the bound scope ``scope`` and the changes that fix them."""
    from .memoryos import MTM, STM, USER_KB, _centroid_key, _summary_key, _topic_key

    plan = _Plan()
    collection = service.collection
    state = dict(service.state.items())
    mtm = [r.id for r in _own(collection.records(collection.ids(index=MTM)), scope)]
    stm = {r.id for r in _own(collection.records(collection.ids(index=STM)), scope)}
    in_mtm = set(mtm)
    pages = {k[2:]: v for k, v in state.items() if k.startswith("p:") and isinstance(v, dict)}
    known = {r.id for r in _own(collection.records(list(pages)), scope)} if pages else set()

    # summaries: the first claim on a page wins; an interrupted eviction is finished
    summaries = [r for r in _own(collection.records(collection.ids(index=USER_KB)), scope) if (r.metadata or {}).get("kind") == "segment_summary"]
    summaries.sort(key=lambda r: (r.created_at, r.id))
    summarised: dict[str, str] = {}
    for record in summaries:
        listed = [str(p) for p in (record.metadata or {}).get("pages") or []]
        keep = [p for p in listed if p not in summarised]
        if len(keep) < len(listed):
            twice = [p for p in listed if p in summarised]
            plan.add(scope, "page_in_two_summaries", f"segment summary {record.id} lists page(s) already in another summary", twice)
            plan.summaries[record.id] = keep
        for p in keep:
            summarised[p] = record.id
    unfinished = [p for p in summarised if p in in_mtm]
    if unfinished:
        plan.add(scope, "summarised_page_still_in_mtm", "page(s) of a segment summary are still in the MTM (an unfinished eviction)", unfinished)
        plan.leave_mtm = unfinished
        in_mtm -= set(unfinished)

    # segments: pages that exist, are in the MTM and were not claimed by an earlier segment
    segments = {k: v for k, v in state.items() if k.startswith("s:") and isinstance(v, dict)}
    claimed: dict[str, str] = {}
    for key in sorted(segments, key=_number):
        seg = segments[key]
        listed = [str(p) for p in seg.get("pages") or []]
        keep = []
        for p in listed:
            if p in claimed:
                plan.add(scope, "page_in_two_segments", f"segment {key} lists page {p}, which segment {claimed[p]} lists too", [p])
            elif p in summarised and p not in unfinished:
                plan.add(scope, "segment_lists_summarised_page", f"segment {key} lists page {p}, summarised into LTM", [p])
            elif p not in in_mtm and p not in unfinished:
                plan.add(scope, "segment_lists_page_not_in_mtm", f"segment {key} lists page {p}, which is not in the MTM index", [p])
            elif p in in_mtm:
                keep.append(p)
                claimed[p] = key
        centroid = state.get(_centroid_key(key))
        dim = collection.spaces[service.config.space].dim if service.config.space in collection.spaces else None
        bad_centroid = not isinstance(centroid, list) or (dim is not None and len(centroid) != dim)
        if bad_centroid and keep:
            plan.add(scope, "segment_without_centroid", f"segment {key} has no usable centroid", [key])
        summary_vec = state.get(_summary_key(key))
        if keep and summary_vec is not None and (not isinstance(summary_vec, list) or (dim is not None and len(summary_vec) != dim)):
            plan.add(scope, "segment_summary_vector_unusable", f"segment {key} has a summary embedding of the wrong shape", [key])
            plan.state[_summary_key(key)] = None  # the centroid stands in (as for a segment of an older version)
        fresh = [str(p) for p in seg.get("fresh") or []]
        if any(p not in keep for p in fresh) and keep == listed:
            plan.add(scope, "fresh_page_not_in_segment", f"segment {key} has fresh page(s) it does not list", [p for p in fresh if p not in keep])
        if not keep:
            if listed:
                plan.add(scope, "empty_segment", f"segment {key} is left without pages", [key])
            else:
                plan.add(scope, "empty_segment", f"segment {key} lists no page", [key])
            plan.state.update({key: None, _centroid_key(key): None, _summary_key(key): None, _topic_key(key): None})
            continue
        if keep != listed or bad_centroid or any(p not in keep for p in fresh):
            changed = {**seg, "pages": keep, "fresh": [p for p in fresh if p in keep]}
            plan.state[key] = changed
            if keep != listed or bad_centroid:
                plan.state[_centroid_key(key)] = _centroid(service, keep)

    # orphan segment keys, counters
    for key in state:
        if key[:2] in ("v:", "e:", "t:") and f"s:{key[2:]}" not in segments:
            plan.add(scope, "orphan_segment_key", f"state key {key} belongs to no segment", [key])
            plan.state[key] = None
    top_segment = max((_number(k) for k in segments), default=0)
    if int(state.get("next_segment", 0) or 0) < top_segment:
        plan.add(scope, "segment_counter_behind", f"next_segment {state.get('next_segment', 0)} < segment s:{top_segment}", ["next_segment"])
        plan.state["next_segment"] = top_segment
    top_chain = max((_number(k) for k in state if k.startswith("c:")), default=0)
    if int(state.get("next_chain", 0) or 0) < top_chain:
        plan.add(scope, "chain_counter_behind", f"next_chain {state.get('next_chain', 0)} < chain c:{top_chain}", ["next_chain"])
        plan.state["next_chain"] = top_chain

    # MTM pages of no segment, and pages that left the STM but reached no tier, join a new segment of their session
    orphans = [p for p in mtm if p in in_mtm and p not in claimed]
    if orphans:
        plan.add(scope, "mtm_page_in_no_segment", "MTM page(s) listed by no segment (never retrieved nor summarised)", orphans)
    lost = [p for p in pages if p in known and p not in stm and p not in in_mtm and p not in summarised and p not in unfinished]
    if lost:
        plan.add(scope, "page_in_no_tier", "page(s) in no tier: not in the STM, the MTM or a summary (never retrieved)", lost)
        plan.join_mtm = lost
    if orphans or lost:
        _new_segments(service, [*orphans, *lost], max(top_segment, int(state.get("next_segment", 0) or 0)), plan)
        claimed.update({p: str(plan.state[f"p:{p}"]["segment"]) for p in [*orphans, *lost]})

    # the STM copy of a page in the MTM; page states that disagree with the tiers
    both = sorted(stm & set(claimed))
    if both:
        plan.add(scope, "page_in_two_tiers", "page(s) in the STM and the MTM at once", both)
        plan.leave_stm = both
    for pid, page in pages.items():
        if pid not in known:
            plan.add(scope, "page_state_of_missing_record", f"page state p:{pid} names no record", [pid])
            plan.state[f"p:{pid}"] = None
        elif pid in claimed and f"p:{pid}" not in plan.state and (page.get("tier") != "mtm" or page.get("segment") != claimed[pid]):
            plan.add(
                scope, "page_state_mismatch", f"page {pid} is in segment {claimed[pid]} but its state says {page.get('tier')}/{page.get('segment')}", [pid]
            )
            plan.state[f"p:{pid}"] = {**page, "tier": "mtm", "segment": claimed[pid]}
        elif pid in summarised and (page.get("tier") != "ltm" or page.get("summarised") != summarised[pid]):
            plan.add(scope, "page_state_mismatch", f"page {pid} is summarised by {summarised[pid]} but its state says {page.get('tier')}", [pid])
            plan.state[f"p:{pid}"] = {**page, "tier": "ltm", "summarised": summarised[pid]}
        elif pid not in claimed and pid not in summarised and page.get("tier") in ("mtm", "ltm"):
            plan.add(scope, "page_state_mismatch", f"page {pid} is in no segment and no summary but its state says {page.get('tier')}", [pid])
            plan.state[f"p:{pid}"] = {k: v for k, v in page.items() if k not in ("tier", "segment", "summarised")}
    return plan


def _centroid(service: "MemoryOS", pages: list[str]) -> list[float]:
    """The unit mean of the pages' stored vectors (of the service's space)."""
    vecs, present = service.collection.vectors(pages, service.config.space)
    rows = [np.asarray(v, np.float32) for v, ok in zip(vecs, present) if ok]
    if not rows:
        records = service.collection.get_many(pages)
        rows = list(service.collection.spaces[service.config.space].embed_documents([r.text for r in records if r is not None]))
    return [float(x) for x in unit(np.mean(np.stack(rows), axis=0))]


def _new_segments(service: "MemoryOS", orphans: list[str], last: int, plan: _Plan) -> None:
    """Put MTM pages of no segment into new segments, one per session."""
    from .memoryos import _centroid_key, _summary_key, _topic_key

    by_session: dict[str, tuple[Any, list[str]]] = {}
    for record in service.collection.records(orphans):
        if record is not None:
            session = (record.metadata or {}).get(service.config.session_key)
            by_session.setdefault(repr(session), (session, []))[1].append(record.id)
    at = service._now()
    for session, ids in by_session.values():
        last += 1
        key = f"s:{last}"
        centroid = _centroid(service, ids)
        plan.state[key] = {"pages": ids, "fresh": ids, "visits": 0, "length": len(ids), "last": at, "session": session, "promotions": 0}
        plan.state[_centroid_key(key)] = centroid
        plan.state[_summary_key(key)] = centroid
        plan.state[_topic_key(key)] = {"summary": "", "keywords": [], "words": {}}
        for pid in ids:
            plan.state[f"p:{pid}"] = {**(service.state.get(f"p:{pid}") or {}), "tier": "mtm", "segment": key}
    plan.state["next_segment"] = last


def check(service: "MemoryOS") -> list[ServiceProblem]:
    """Every scope's problems (reads only)."""
    problems: list[ServiceProblem] = []
    for scope in _scopes(service):
        with service.collection.scoped(scope):
            problems += _audit(service, scope).problems
    return problems


def repair(service: "MemoryOS") -> list[ServiceProblem]:
    """Fix every scope's problems; returns them. Per scope: the summaries, then one commit
    for the MTM/STM memberships with the state (segments, pages, counters)."""
    from .memoryos import MTM, STM

    fixed: list[ServiceProblem] = []
    collection = service.collection
    for scope in _scopes(service):
        with collection.scoped(scope):
            plan = _audit(service, scope)
            if not plan.problems:
                continue
            gone = [sid for sid, keep in plan.summaries.items() if not keep]
            for sid, keep in plan.summaries.items():
                if keep:
                    collection.update(sid, metadata={"pages": keep}, merge_metadata=True)
            if gone:
                collection.delete(gone)
            state = {(service.state.namespace, k): v for k, v in plan.state.items()}
            if plan.leave_mtm:
                collection.remove_from_index(MTM, plan.leave_mtm)
            if plan.join_mtm:
                collection.insert_to_index(MTM, plan.join_mtm)
            if plan.leave_stm:
                collection.remove_from_index(STM, plan.leave_stm, state=state)
            elif state:
                collection.set_state(state)
            service.state.clear()
            fixed += plan.problems
    return fixed
