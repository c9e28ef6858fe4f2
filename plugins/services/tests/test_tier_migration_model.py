"""Model-based test of tier migration (hypothesis state machine): under random inserts,
retrieves and close/reopen, no item is ever lost across STM -> MTM -> LTM -- every inserted
item is in exactly one tier, or (memoryos) listed by the segment summary that replaced it, or
(hierarchical with forget = "delete") counted as forgotten -- and the tier sizes respect
the capacities."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import memcore
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from memcore.testing import examples

WORDS = ["alice", "bob", "cat", "bank", "violin", "bread", "garden", "tuesday", "zurich", "pixel", "report", "dog"]
text = st.lists(st.sampled_from(WORDS), min_size=2, max_size=6).map(" ".join)


class TierMachine(RuleBasedStateMachine):
    service: dict = {}

    def __init__(self):
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="tiers-"))
        self.memory = self.open()
        self.inserted: set[str] = set()
        self.n = 0

    def open(self) -> memcore.Memory:
        return memcore.open({"indexes": {}, "service": self.service}, path=self.dir)

    @rule(t=text, session=st.integers(1, 3), day=st.integers(0, 30))
    def insert(self, t, session, day):
        self.n += 1
        self.inserted.add(self.memory.insert(f"{t} #{self.n}", metadata={"session": session, "timestamp": day * 86400}))

    @precondition(lambda self: self.inserted)
    @rule(q=text, k=st.integers(1, 8))
    def retrieve(self, q, k):
        results = self.memory.retrieve(q, k=k)
        assert len(results) <= k

    @rule()
    def reopen(self):
        self.memory.close()
        self.memory = self.open()

    def teardown(self):
        self.memory.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class HierarchicalMachine(TierMachine):
    service = {"kind": "hierarchical", "layout": "three_tier", "capacities": {"stm": 2, "mtm": 3, "ltm": 4}, "forget": "delete", "migration": "heat"}

    @invariant()
    def nothing_lost(self):
        c = self.memory.collection
        tiers = {t: set(c.ids(index=f"hierarchical.{t}")) for t in ("stm", "mtm", "ltm")}
        assert len(tiers["stm"]) <= 2 and len(tiers["mtm"]) <= 3 and len(tiers["ltm"]) <= 4
        assert not (tiers["stm"] & tiers["mtm"]) and not (tiers["mtm"] & tiers["ltm"]) and not (tiers["stm"] & tiers["ltm"])
        held = tiers["stm"] | tiers["mtm"] | tiers["ltm"]
        assert held <= self.inserted
        assert len(self.inserted) - len(held) == self.memory.service.report()["forgotten"]


class MemoryOSMachine(TierMachine):
    """STM -> MTM (chains; segments by summary + keyword score, their summaries kept up to date) -> heat promotion (profile, user and assistant knowledge:
    derived copies, the pages stay in MTM) and capacity eviction (segment summaries in user
    knowledge that list the pages they replace)."""

    service = {"kind": "memoryos", "stm_capacity": 2, "mtm_capacity": 2, "segment_threshold": 0.5, "heat_threshold": 3.0}

    @rule(t=text, session=st.integers(1, 3), day=st.integers(0, 30))
    def insert(self, t, session, day):
        super().insert(t, session, day)
        # after an insert no segment with pages not analysed yet is at the heat threshold
        service = self.memory.service
        at = time.time() if service.config.clock == "wall" else float(service.state.get("clock", 0.0))
        assert all(service._heat(s, at) < 3.0 - 1e-6 for s in service.state.prefixed("s:").values() if s["fresh"])

    @invariant()
    def nothing_lost(self):
        c = self.memory.collection
        stm, mtm = set(c.ids(index="memoryos.stm")), set(c.ids(index="memoryos.mtm"))
        user = [c.get(i) for i in c.ids(index="memoryos.user_knowledge")]
        assistant = [c.get(i) for i in c.ids(index="memoryos.assistant_knowledge")]
        profile = c.ids(index="memoryos.profile")
        summaries = [r for r in user if r.metadata["kind"] == "segment_summary"]
        facts = [r for r in user + assistant if r.metadata["kind"] == "fact"]
        assert len(summaries) + len(facts) == len(user) + len(assistant)
        summarised = [p for s in summaries for p in s.metadata["pages"]]
        assert len(stm) <= 2 and not (stm & mtm)
        assert len(summarised) == len(set(summarised)) and not (set(summarised) & (stm | mtm))
        assert stm | mtm | set(summarised) == self.inserted  # every page in exactly one tier
        derived = {r.id for r in user + assistant} | set(profile)
        assert not (derived & self.inserted) and len(profile) <= 1
        state = c.state_items("memoryos")
        segments = {k: v for k, v in state.items() if k.startswith("s:")}
        assert len(segments) <= 2
        assert {p for s in segments.values() for p in s["pages"]} == mtm
        assert all(set(s["fresh"]) <= set(s["pages"]) for s in segments.values())
        fresh = {p for s in segments.values() for p in s["fresh"]}
        assert {p for f in facts for p in f.metadata["pages"]} <= self.inserted - stm - fresh  # facts come from analysed pages
        assert (state.get("promotions", 0) > 0) == bool(profile)
        pages = {k[2:]: v for k, v in state.items() if k.startswith("p:")}
        assert set(pages) == mtm | set(summarised)
        for pid, p in pages.items():  # chains are doubly linked, within a session
            if p["next"]:
                assert pages[p["next"]]["prev"] == pid and pages[p["next"]]["chain"] == p["chain"]
            if p["prev"]:
                assert pages[p["prev"]]["next"] == pid
        # segment assignment: every segment has its summary (fallback: the text of one of its
        # pages), keywords (its top words), centroid and summary vector; nothing else is left over
        texts = {i: c.get(i).text for s in segments.values() for i in s["pages"]}
        for key, seg in segments.items():
            assert seg["summary"] in {texts[i] for i in seg["pages"]} and seg["keywords"] == list(seg["words"])[: len(seg["keywords"])]
            assert len(state["v:" + key[2:]]) == len(state["e:" + key[2:]])
        assert {k[2:] for k in state if k[:2] in ("v:", "e:")} == {k[2:] for k in segments}
        assert state.get("evicted", 0) == len(summaries) and "pending" not in state  # no batch left half-moved  # each evicted segment left exactly one summary
        if self.memory.service.config.clock == "event":  # the clock is the latest event time seen
            assert state.get("clock", 0) == max((c.get(i).metadata["timestamp"] for i in self.inserted), default=0)
        assert self.memory.service.state.items() == state  # the cached view equals the store


class MemoryOSEventClockMachine(MemoryOSMachine):
    """The same, with heat recency on the entries' event times (``clock = "event"``, one day)."""

    service = {**MemoryOSMachine.service, "clock": "event", "heat": {"tau_s": 86400.0}}


SETTINGS = settings(max_examples=examples(12), stateful_step_count=14, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TestHierarchicalMigration = HierarchicalMachine.TestCase
TestHierarchicalMigration.settings = SETTINGS
TestMemoryOSMigration = MemoryOSMachine.TestCase
TestMemoryOSMigration.settings = SETTINGS
TestMemoryOSEventClockMigration = MemoryOSEventClockMachine.TestCase
TestMemoryOSEventClockMigration.settings = SETTINGS
