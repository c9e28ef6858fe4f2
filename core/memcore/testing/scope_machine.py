"""The scope-isolation state machine that :class:`memcore.testing.ServiceContract` runs.

A hypothesis :class:`~hypothesis.stateful.RuleBasedStateMachine` drives one memory opened by
the contract's ``open_memory`` fixture through random inserts, retrieves, deletes by id,
forgets and reopens in three scopes — ``alice``, ``bob`` and ``alice/r1`` (alice's run
``r1``, a narrower scope that ``alice`` covers) — against a model: ``{id: (scope, text,
metadata)}`` of the items inserted and not yet deleted.

Checked after every step, for every service: what a scope sees (``get``, ``retrieve``)
is its own items (an item of alice's run is alice's too), never another scope's nor a
deleted one; right after ``forget`` (or ``delete(scope=...)``) the scope and every
narrower one count 0 records and retrieve nothing of what they had; an id
another scope owns is unknown (``NotFoundError``) and nothing changes. For a service that
is not ``capacity_limited``, also completeness: every item of the model is there, and is
found by its exact text among the first ``exact_match_k`` results in its own scope.

Texts are a word unique to the item followed by words of a small shared vocabulary, so
queries share words with other scopes' items; a rule re-inserts one scope's exact text and
metadata in a disjoint scope (which must get a record of its own and leave the first alone).
"""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from ..api._open import Memory
from ..errors import NotFoundError
from .data import unique_word
from .hypothesis_profiles import examples

__all__ = ["SCOPES", "ScopeMachine", "run_scope_machine", "covers"]

SCOPES: dict[str, dict[str, str]] = {
    "alice": {"user_id": "alice"},
    "bob": {"user_id": "bob"},
    "alice/r1": {"user_id": "alice", "run_id": "r1"},
}
"""The scopes the machine writes in, by name."""

NAMES = sorted(SCOPES)
VOCABULARY = ("tea", "coffee", "zurich", "lisbon", "cat", "dog", "violin", "garden", "budget", "meeting", "bread", "train")
RESULT_KEYS = {"id", "text", "score", "metadata"}

words = st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=4)
metadatas: st.SearchStrategy[dict[str, Any]] = st.one_of(
    st.just({}), st.fixed_dictionaries({"topic": st.sampled_from(["work", "pets", "hobby"]), "n": st.integers(0, 9)})
)

Item = tuple[str, str, dict[str, Any]]
"""(scope name, text, metadata) of one inserted item."""


def covers(outer: str, inner: str) -> bool:
    """True when scope ``outer`` sees the items of scope ``inner`` (``alice`` covers ``alice/r1``)."""
    return all(SCOPES[inner].get(key) == value for key, value in SCOPES[outer].items())


class ScopeMachine(RuleBasedStateMachine):
    """One memory in three scopes against a per-item model (see the module docstring).

    :func:`run_scope_machine` runs a subclass that sets ``open_memory`` (a staticmethod:
    ``open_memory(path) -> Memory``) and ``exact_match_k``."""

    open_memory: Callable[[Path], Memory]
    exact_match_k: int = 3

    def __init__(self) -> None:
        super().__init__()
        self.path = Path(tempfile.mkdtemp(prefix="memcore-scopes-")) / "memory"
        self.memory = self.open()
        self.limited = bool(getattr(self.memory.service, "capacity_limited", False))
        self.items: dict[str, Item] = {}
        """The live items in insertion order: rules draw from this order, never from the ids'
        order (a service may derive ids from the time, and a replayed example must draw the same)."""
        self.ever: dict[str, str] = {}
        """Every id ever inserted -> the scope it was inserted in."""
        self.serial = 0

    def open(self) -> Memory:
        memory = self.open_memory(self.path)
        assert isinstance(memory, Memory), f"open_memory returned a {type(memory).__name__}, not a memcore.Memory"
        return memory

    def teardown(self) -> None:
        try:
            self.memory.close()
        finally:
            shutil.rmtree(self.path.parent, ignore_errors=True)

    # -- helpers ---------------------------------------------------------------------------

    def visible(self, scope: str) -> dict[str, Item]:
        """The model's items ``scope`` sees."""
        return {rid: item for rid, item in self.items.items() if covers(scope, item[0])}

    def observed(self) -> tuple[int, list[tuple[str, str, Any]]]:
        """Everything stored, unscoped: to check that a refused call changed nothing."""
        records = self.memory.collection.get_many(self.memory.collection.ids())
        return self.memory.collection.count(), sorted((r.id, r.text, r.metadata) for r in records if r is not None)

    def inserted(self, rid: Any, scope: str, text: str, metadata: dict[str, Any]) -> None:
        assert isinstance(rid, str) and rid, f"insert returned {rid!r}, not one id"
        assert rid not in self.items, f"inserting {text!r} in {scope} returned the id of the live item {self.items[rid]}"
        self.items[rid] = (scope, text, dict(metadata))
        self.ever[rid] = scope

    def check_retrieved(self, results: Any, scope: str, k: int) -> list[str]:
        """Results for ``scope``: the unified shape, and only the scope's own live items."""
        assert isinstance(results, list) and len(results) <= k, f"{len(results)} results for k={k}"
        own = self.visible(scope)
        for item in results:
            assert isinstance(item, dict) and set(item) == RESULT_KEYS, f"result {item!r} lacks/has extra keys"
            rid = item["id"]
            if rid not in own:
                owner = self.ever.get(rid)
                what = "a deleted item" if owner and covers(scope, owner) else f"an item of scope {owner!r}" if owner else "an unknown id"
                pytest.fail(f"retrieve for scope {scope} returned {what}: {item!r}")
            assert (item["text"], item["metadata"]) == own[rid][1:], f"{item!r} is not as inserted: {own[rid]}"
            assert isinstance(item["score"], (int, float)) and math.isfinite(item["score"])
        ids = [item["id"] for item in results]
        assert len(ids) == len(set(ids)), f"duplicate ids {ids}"
        return ids

    # -- rules -------------------------------------------------------------------------------

    @rule(scope=st.sampled_from(NAMES), text_words=words, metadata=metadatas)
    def insert(self, scope: str, text_words: list[str], metadata: dict[str, Any]) -> None:
        text = " ".join([unique_word(self.serial), *text_words])
        self.serial += 1
        self.inserted(self.memory.insert(text, metadata=metadata, scope=SCOPES[scope]), scope, text, metadata)

    @precondition(lambda self: self.items)
    @rule(data=st.data(), scope=st.sampled_from(NAMES))
    def insert_same_text_in_another_scope(self, data: st.DataObject, scope: str) -> None:
        rid = data.draw(st.sampled_from(list(self.items)), label="source")
        owner, text, metadata = self.items[rid]
        if covers(scope, owner) or covers(owner, scope) or any(s == scope and t == text for s, t, _ in self.items.values()):
            return  # only into a disjoint scope: within one user, merging duplicates is the service's business
        self.inserted(self.memory.insert(text, metadata=metadata, scope=SCOPES[scope]), scope, text, metadata)
        assert self.items[rid] == (owner, text, metadata)

    @rule(data=st.data(), scope=st.sampled_from(NAMES), k=st.integers(1, 8))
    def retrieve(self, data: st.DataObject, scope: str, k: int) -> None:
        known = sorted({text for _, text, _ in self.items.values()})
        pick_known: bool = data.draw(st.booleans(), label="known_text")
        if known and pick_known:
            query = data.draw(st.sampled_from(known), label="query")  # often another scope's exact text
        else:
            query = " ".join(data.draw(words, label="query_words"))
        self.check_retrieved(self.memory.retrieve(query, k=k, scope=SCOPES[scope]), scope, k)

    @precondition(lambda self: self.items and not self.limited)
    @rule(data=st.data())
    def find_by_exact_text(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(list(self.items)), label="id")
        scope, text, _ = self.items[rid]
        ids = self.check_retrieved(self.memory.retrieve(text, k=self.exact_match_k, scope=SCOPES[scope]), scope, self.exact_match_k)
        assert rid in ids, f"{text!r} not found by its exact text in scope {scope} among the first {self.exact_match_k}"

    @precondition(lambda self: self.items)
    @rule(data=st.data())
    def delete_by_id(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(list(self.items)), label="id")
        owner = self.items[rid][0]
        scope = data.draw(st.sampled_from([name for name in NAMES if covers(name, owner)]), label="scope")
        if self.limited and rid not in self.memory.collection.ids(scope=SCOPES[owner]):
            with pytest.raises(NotFoundError):  # dropped by the service's capacity: unknown now
                self.memory.delete(rid, scope=SCOPES[scope])
        else:
            assert self.memory.delete(rid, scope=SCOPES[scope]) >= 1
        del self.items[rid]

    @precondition(lambda self: self.items)
    @rule(data=st.data())
    def delete_from_another_scope(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(list(self.items)), label="id")
        owner = self.items[rid][0]
        scope = data.draw(st.sampled_from([name for name in NAMES if not covers(name, owner)]), label="scope")
        before = self.observed()
        with pytest.raises(NotFoundError):
            self.memory.delete(rid, scope=SCOPES[scope])
        assert self.observed() == before, f"deleting {owner}'s id in scope {scope} changed what is stored"

    @rule(scope=st.sampled_from(NAMES), through_delete=st.booleans())
    def forget(self, scope: str, through_delete: bool) -> None:
        gone = self.visible(scope)
        if through_delete:
            removed = self.memory.delete(scope=SCOPES[scope])
        else:
            removed = self.memory.forget(SCOPES[scope])["records"]
        if not self.limited:
            assert removed >= len(gone), f"forgetting {scope} removed {removed} records, it had {len(gone)} items"
        for rid in gone:
            del self.items[rid]
        for name in NAMES:
            if covers(scope, name):
                left = self.memory.count(scope=SCOPES[name])
                assert left == 0, f"{left} records of scope {name} are left after forgetting {scope}"
        for _, text, _ in list(gone.values())[:3]:
            assert self.memory.retrieve(text, k=5, scope=SCOPES[scope]) == [], f"{text!r} is still retrieved after forgetting {scope}"

    @rule()
    def reopen(self) -> None:
        self.memory.close()
        self.memory = self.open()

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def each_scope_holds_its_own_items(self) -> None:
        for name in NAMES:
            scope = SCOPES[name]
            records = self.memory.get(scope=scope)
            assert isinstance(records, list)
            stored = {r.id for r in records}
            expected = self.visible(name)
            strangers = {rid: self.ever[rid] for rid in stored.intersection(self.ever) if rid not in expected}
            assert not strangers, f"scope {name} holds ids that are not its live items (id -> scope inserted in): {strangers}"
            count = self.memory.count(scope=scope)
            assert count == len(stored), f"count(scope={name}) = {count}, get(scope={name}) returned {len(stored)}"
            if not self.limited:
                missing = {rid: self.items[rid][1] for rid in expected if rid not in stored}
                assert not missing, f"scope {name} lost items: {missing}"


def run_scope_machine(open_memory: Callable[[Path], Memory], *, exact_match_k: int, max_examples: int, steps: int) -> None:
    """Run :class:`ScopeMachine` on memories from ``open_memory`` (``max_examples`` is the
    CI count, scaled by the loaded hypothesis profile)."""
    machine = type("ServiceScopeMachine", (ScopeMachine,), {"open_memory": staticmethod(open_memory), "exact_match_k": exact_match_k})
    run_state_machine_as_test(
        machine,
        settings=settings(max_examples=examples(max_examples), stateful_step_count=steps, deadline=None, suppress_health_check=[HealthCheck.too_slow]),
    )
