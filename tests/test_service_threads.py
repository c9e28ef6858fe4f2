"""A third-party service is safe under concurrent callers by construction (issue 27): the
``Service`` base class serialises its state-changing verbs, runs the ``read_only_verbs``
beside them, and turns a raw failure on inconsistent state into a typed error."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any, Mapping

import pytest

import memcore
from memcore import CorruptError, hookimpl
from memcore.plugin import ComponentConfig, Service, ServiceProblem, hit_to_dict
from memcore.testing import ServiceContract, register_plugin

STATE = "racy"


class RacyConfig(ComponentConfig):
    kind: str = "racy"


class RacyService(Service):
    """A naive read-modify-write of a counter, with a pause inside: without the base
    class's lock two threads read the same value and one increment is lost."""

    config: RacyConfig
    read_only_verbs = frozenset({"retrieve"})
    overlapping = 0
    max_overlap = 0

    def insert(self, text: str, vector: Any = None, metadata: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
        self.reject_unknown("insert", kwargs, ("id",))
        item = {"text": text, "metadata": dict(metadata or {}), **kwargs}
        if self.collection.get_many(self.collection.ids_of([item]))[0] is not None:  # an idempotent retry
            return self.collection.insert([item])[0]
        count = int(self.collection.get_state(STATE, "count", 0))
        time.sleep(0.002)
        return self.collection.insert([item], state={(STATE, "count"): count + 1})[0]

    def retrieve(
        self, query: str | None = None, vector: Any = None, where: Mapping[str, Any] | None = None, k: int = 10, **kwargs: Any
    ) -> list[dict[str, Any]]:
        self.reject_unknown("retrieve", kwargs)
        type(self).overlapping += 1
        type(self).max_overlap = max(type(self).max_overlap, type(self).overlapping)
        try:
            time.sleep(0.01)
            assert self.pipeline is not None
            return [hit_to_dict(h) for h in self.pipeline.run(self.collection, self.make_query(query, vector, where, k))]
        finally:
            type(self).overlapping -= 1

    def _own_count(self) -> int:
        """Records of exactly the bound scope (its counter counts them; narrower scopes have their own)."""
        bound = self.scope.as_dict() if self.scope is not None else {}
        return sum(1 for r in self.collection.get_many(self.collection.ids()) if r is not None and (r.scope.as_dict() if r.scope else {}) == bound)

    def check(self) -> list[ServiceProblem]:
        problems = []
        for scope in [None, *(s for s in self.state_scopes(STATE) if s is not None)]:
            with self.collection.scoped(scope):
                count, own = int(self.collection.get_state(STATE, "count", 0)), self._own_count()
                if count != own:
                    problems.append(ServiceProblem("count_mismatch", f"count {count} for {own} records", scope, ("count",)))
        return problems

    def repair(self) -> list[ServiceProblem]:
        problems = self.check()
        for problem in problems:
            with self.collection.scoped(problem.scope):
                self.collection.set_state({(STATE, "count"): self._own_count()})
        return problems

    def delete(self, ids: list[str]) -> int:
        own = set(self.collection.ids())
        bound = self.scope.as_dict() if self.scope is not None else {}
        mine = sum(1 for r in self.collection.get_many([i for i in ids if i in own]) if r is not None and (r.scope.as_dict() if r.scope else {}) == bound)
        return self.collection.delete(ids, state={(STATE, "count"): int(self.collection.get_state(STATE, "count", 0)) - mine})

    def forget(self) -> dict[str, Any]:
        return super().forget()

    def update(self, id: str, **fields: Any) -> Any:
        if int(self.collection.get_state(STATE, "count", 0)) != self._own_count():
            raise KeyError("the counter does not match")  # a raw error a bug could raise
        return super().update(id, **fields)


@hookimpl
def register_services(register: Any) -> None:
    register("racy", RacyService, RacyConfig)


@pytest.fixture
def racy():
    with register_plugin(SimpleNamespace(register_services=register_services), name="racy-service"):
        yield lambda path: memcore.open({"indexes": {"flat": {"kind": "exact", "space": "default"}}, "service": {"kind": "racy"}}, path=path)


def test_the_base_class_serialises_a_third_party_services_read_modify_write(racy, tmp_path):
    memory = racy(tmp_path / "m")

    def work(t: int) -> None:
        for i in range(15):
            memory.insert(f"thread {t} item {i}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert memory.collection.get_state(STATE, "count") == 60 == memory.count()
    assert memory.check_service() == []
    memory.close()


def test_read_only_verbs_run_beside_each_other(racy, tmp_path):
    memory = racy(tmp_path / "m")
    memory.insert("one text")
    RacyService.max_overlap = 0
    threads = [threading.Thread(target=lambda: [memory.retrieve("text", k=1) for _ in range(5)]) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert RacyService.max_overlap > 1, "retrieve is declared read-only: it does not wait for the lock"
    memory.close()


def test_a_raw_failure_on_inconsistent_state_is_a_typed_error_and_repair_fixes_it(racy, tmp_path):
    memory = racy(tmp_path / "m")
    rid = memory.insert("one text")
    memory.collection.set_state({(STATE, "count"): 7})
    memory.close()
    memory = racy(tmp_path / "m")  # opens
    assert [p.kind for p in memory.check_service()] == ["count_mismatch"]
    with pytest.raises(CorruptError, match="count_mismatch.*repair") as raised:
        memory.update(rid, metadata={"a": 1})
    assert isinstance(raised.value.__cause__, KeyError)
    result = memory.repair_service()
    assert [p.kind for p in result["repaired"]] == ["count_mismatch"] and result["problems"] == []
    assert memory.update(rid, metadata={"a": 1}).metadata == {"a": 1}
    memory.close()


def test_read_only_verbs_must_name_service_verbs():
    with pytest.raises(TypeError, match="read_only_verbs"):

        class Wrong(RacyService):
            read_only_verbs = frozenset({"report"})


def test_a_subclass_rewriting_a_read_only_verb_is_serialised_again():
    from memcore.plugin import Service as Base

    class Counting(RacyService):
        def retrieve(self, query: str | None = None, vector: Any = None, where: Any = None, k: int = 10, **kwargs: Any) -> list[dict[str, Any]]:
            return []  # (would count visits: a write)

    class Declared(RacyService):
        read_only_verbs = frozenset({"retrieve"})

        def retrieve(self, query: str | None = None, vector: Any = None, where: Any = None, k: int = 10, **kwargs: Any) -> list[dict[str, Any]]:
            return []

    assert RacyService.read_only_verbs == {"retrieve"} and Base.read_only_verbs == frozenset()
    assert Counting.read_only_verbs == frozenset() and Declared.read_only_verbs == {"retrieve"}


def test_the_default_checks_nothing(tmp_path):
    with memcore.open(path=tmp_path / "m") as memory:
        memory.insert("a text")
        assert memory.check_service() == []
        assert memory.repair_service() == {"repaired": [], "problems": []}


class TestRacyContract(ServiceContract):
    @pytest.fixture
    def open_memory(self, racy):
        return racy
