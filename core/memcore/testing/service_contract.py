"""``ServiceContract``: the unified interface every memory service must offer."""

from __future__ import annotations

import math
import secrets
import string
import time
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterator

import pytest

from ..api._open import Memory
from ..collection._collection import Collection
from ..errors import MemcoreError, NotFoundError, ValidationError
from ..model._record import Record
from ..services._service import Service
from .disk import find_bytes
from .options import assert_options_described

__all__ = ["ServiceContract", "SERVICE_ITEMS"]

OpenMemory = Callable[[Path], Memory]

SERVICE_ITEMS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("Alice moved to Zurich to work at a private bank", {"topic": "work", "n": 1}),
    ("Bob adopted a small grey cat named Pixel", {"topic": "pets", "n": 2}),
    ("The quarterly budget report is due next Friday", {"topic": "work", "n": 3}),
    ("Carol is learning to play the violin on Sundays", {"topic": "hobby", "n": 4}),
    ("Dave's dog loves chasing tennis balls in the park", {"topic": "pets", "n": 5}),
    ("The team meeting moved to Tuesday morning at nine", {"topic": "work", "n": 6}),
    ("Erin bakes sourdough bread every weekend", {"topic": "hobby", "n": 7}),
    ("Frank planted tomatoes and basil in his garden", {"topic": "hobby", "n": 8}),
)
"""(text, metadata) items the suite inserts."""

RESULT_KEYS = {"id", "text", "score", "metadata"}

ALICE = {"user_id": "alice"}
BOB = {"user_id": "bob"}


def _canary() -> str:
    """A random token of lowercase letters (one word for any tokenizer, never in a real text)."""
    return "".join(secrets.choice(string.ascii_lowercase) for _ in range(24))


class ServiceContract:
    """Contract tests for a memory service. Subclass it and provide ONE fixture,
    ``open_memory``: a callable ``open_memory(path) -> memcore.Memory`` that opens the
    memory under test at the collection directory ``path`` (usually ``memcore.open(...)``)::

        from memcore.testing import ServiceContract

        class TestMyService(ServiceContract):
            @pytest.fixture
            def open_memory(self):
                return lambda path: memcore.open({"service": {"kind": "my_service"}}, path=path)

    The suite calls it with a fresh temporary directory, and calls it again with the same
    directory after ``close()`` to check that the memory survives a restart. It closes every
    memory it opened.

    Checked: ``insert`` returns ids; ``retrieve`` returns at most ``k`` dicts with exactly the
    keys id, text, score, metadata (text and metadata as inserted); a ``metadata`` where
    filter returns only matching items; every item is found by its exact text among the
    first ``exact_match_k`` results; ``retrieve()`` without query and vector raises
    :class:`memcore.ValidationError`; everything survives close and reopen; a memory closed
    and reopened halfway through a history of inserts and retrieves ends as its twin that
    never closed (same records, metadata, index memberships, results of
    :attr:`reopen_probes`, plain public attributes of the service but
    :attr:`reopen_ignored_attributes`): state kept only in Python is lost on reopen; every
    option of the service's config model has a description. (The wall clock,
    ``time.time``, stands still during the reopen check, so that timestamps agree.)

    Isolation and forgetting (scopes ``{"user_id": "alice"}``, ``{"user_id": "bob"}`` and
    ``{"user_id": "alice", "run_id": "r1"}``):

    - a hypothesis state machine (:mod:`memcore.testing.scope_machine`) of random inserts,
      retrieves, deletes by id, forgets (``delete(scope=...)`` and ``forget``) and reopens
      against a per-scope model: a scope never gets another scope's (or a deleted) item
      from ``retrieve`` or ``get``; ``count(scope=...)`` agrees with ``get``; a forgotten
      scope counts 0 and retrieves nothing; deleting another scope's id is
      :class:`memcore.NotFoundError` and changes nothing; the same text in two disjoint scopes is
      two records. Unless the service is ``capacity_limited`` (:attr:`memcore.Service.capacity_limited`),
      also completeness: every live item is stored and found by its exact text among the
      first ``exact_match_k`` results in its own scope;
    - forgetting reaches the disk: after ``delete(scope=bob)`` and ``close()``, no file under
      the memory's directory contains any of bob's canaries (random tokens in his texts and
      metadata), while alice's items are still there;
    - ``get``, ``update``, ``upsert`` and ``delete`` of bob's id in alice's scope raise
      :class:`memcore.NotFoundError` (or, for ``update``/``upsert``, the error the service
      refuses the verb with for every record) and change nothing;
    - unknown keywords (``retrieve(wher=...)``, ``insert(bogus=1)``) raise
      :class:`memcore.ValidationError` or ``TypeError`` and change nothing.

    Threads (:mod:`memcore.testing.threads`): ``thread_count`` threads (4) of
    ``thread_items`` inserts each (12), with retrieves, idempotent retries, updates and
    deletes, on one memory at once; reopened alone, ``Memory.check_service()`` is empty,
    nothing acknowledged is lost, every index holds its members, and the suite's own items
    are inserted (in a scope of their own) and found by their exact text.

    Class attributes: ``items`` (the (text, metadata) pairs inserted, default
    :data:`SERVICE_ITEMS`), ``exact_match_k`` (3), ``isolation_examples`` (20: the state
    machine's CI example count, scaled by the hypothesis profile) and ``isolation_steps``
    (15: steps per example). The state machine needs hypothesis.
    """

    items: ClassVar[tuple[tuple[str, dict[str, Any]], ...]] = SERVICE_ITEMS
    exact_match_k: ClassVar[int] = 3
    isolation_examples: ClassVar[int] = 20
    isolation_steps: ClassVar[int] = 15
    thread_count: ClassVar[int] = 4
    thread_items: ClassVar[int] = 12
    idempotent_inserts: ClassVar[bool] = True
    """False for a service that gives identical content a new record on purpose (a particle
    born now); its retries are then not held to the first id."""

    @pytest.fixture
    def open_memory(self) -> OpenMemory:
        """Override: return ``callable(path) -> memcore.Memory``."""
        pytest.fail(f"{type(self).__name__} must define the fixture 'open_memory' (see ServiceContract)")

    @pytest.fixture
    def service_memories(self, open_memory: OpenMemory, tmp_path: Path) -> Iterator[Callable[..., Memory]]:
        """``open(path=None) -> Memory`` (default path: one temp dir); closes them all at teardown."""
        opened: list[Memory] = []
        closed: set[int] = set()
        default_path = tmp_path / "memory"

        def open_(path: Path | None = None) -> Memory:
            memory = open_memory(path or default_path)
            assert isinstance(memory, Memory), f"open_memory returned a {type(memory).__name__}, not a memcore.Memory"
            opened.append(memory)
            original_close = memory.close

            def close() -> None:
                if id(memory) not in closed:
                    closed.add(id(memory))
                    original_close()

            memory.close = close  # type: ignore[method-assign]
            return memory

        yield open_
        for memory in reversed(opened):
            memory.close()

    # -- helpers ---------------------------------------------------------------------------

    def insert_items(self, memory: Memory, scope: dict[str, Any] | None = None) -> dict[str, tuple[str, dict[str, Any]]]:
        """Insert :attr:`items` (in ``scope`` when given); returns id -> (text, metadata)."""
        out: dict[str, tuple[str, dict[str, Any]]] = {}
        for text, metadata in self.items:
            rid = memory.insert(text, metadata=metadata, **({"scope": scope} if scope else {}))
            assert isinstance(rid, str), f"insert of one text returned {rid!r}, not one id"
            out[rid] = (text, metadata)
        return out

    def check_results(self, results: Any, k: int, inserted: dict[str, tuple[str, dict[str, Any]]]) -> None:
        """The invariants of one ``retrieve`` result."""
        assert isinstance(results, list)
        assert len(results) <= k
        for item in results:
            assert isinstance(item, dict)
            assert set(item) == RESULT_KEYS, f"result keys {sorted(item)}, expected {sorted(RESULT_KEYS)}"
            assert item["id"] in inserted, f"unknown id {item['id']!r}"
            text, metadata = inserted[item["id"]]
            assert item["text"] == text
            assert item["metadata"] == metadata
            assert isinstance(item["score"], (int, float)) and math.isfinite(item["score"])
        ids = [item["id"] for item in results]
        assert len(ids) == len(set(ids)), f"duplicate ids {ids}"

    def find_exact(
        self, memory: Memory, inserted: dict[str, tuple[str, dict[str, Any]]], only: list[str] | None = None, scope: dict[str, Any] | None = None
    ) -> None:
        """Each inserted item (or those in ``only``) is among the first results of its exact
        text (retrieved in ``scope`` when given)."""
        for rid in only or list(inserted):
            text = inserted[rid][0]
            scoped: dict[str, Any] = {"scope": scope} if scope else {}
            results = memory.retrieve(text, k=self.exact_match_k, **scoped)
            self.check_results(results, self.exact_match_k, inserted)
            assert rid in [r["id"] for r in results], f"{text!r} not found by its exact text: {[r['text'] for r in results]}"

    # -- tests -----------------------------------------------------------------------------

    def test_memory_parts(self, service_memories: Callable[..., Memory]) -> None:
        memory = service_memories()
        assert isinstance(memory.service, Service)
        assert isinstance(memory.collection, Collection)

    def test_insert_returns_ids(self, service_memories: Callable[..., Memory]) -> None:
        memory = service_memories()
        inserted = self.insert_items(memory)
        assert len(inserted) == len(self.items), "different items got the same id"
        assert all(isinstance(rid, str) and rid for rid in inserted)

    @pytest.mark.parametrize("k", [1, 3, 50])
    def test_retrieve_result_shape(self, service_memories: Callable[..., Memory], k: Any) -> None:
        memory = service_memories()
        inserted = self.insert_items(memory)
        results = memory.retrieve("who moved to a new city for work", k=k)
        self.check_results(results, k, inserted)
        assert results, "nothing retrieved from a non-empty memory"

    def test_exact_text_finds_item(self, service_memories: Callable[..., Memory]) -> None:
        memory = service_memories()
        self.find_exact(memory, self.insert_items(memory))

    def test_where_filter(self, service_memories: Callable[..., Memory]) -> None:
        memory = service_memories()
        inserted = self.insert_items(memory)
        topics = sorted({meta["topic"] for _, meta in self.items})
        for topic in topics:
            for text, _ in self.items[:3]:
                results = memory.retrieve(text, where={"topic": topic}, k=len(self.items))
                self.check_results(results, len(self.items), inserted)
                assert results, f"nothing retrieved for topic {topic!r}"
                assert all(r["metadata"]["topic"] == topic for r in results)
        results = memory.retrieve(self.items[0][0], where={"n": {"$gte": 5}}, k=len(self.items))
        assert results and all(r["metadata"]["n"] >= 5 for r in results)
        assert memory.retrieve(self.items[0][0], where={"topic": "no-such-topic"}, k=5) == []

    def test_retrieve_needs_query_or_vector(self, service_memories: Callable[..., Memory]) -> None:
        memory = service_memories()
        self.insert_items(memory)
        with pytest.raises(ValidationError):
            memory.retrieve()
        with pytest.raises(ValidationError):
            memory.retrieve(None, vector=None, where={"topic": "work"})

    # -- state kept in the store, not in Python objects ---------------------------------------

    #: probes of :meth:`test_behaviour_survives_reopen`: (query, k) retrieved at each step
    reopen_probes: ClassVar[tuple[tuple[str, int], ...]] = (("who moved to a new city for work", 3), ("pets and animals", 5), ("weekend hobby", 8))
    #: public attributes of the service that may differ after a reopen (a cache, an open time...)
    reopen_ignored_attributes: ClassVar[frozenset[str]] = frozenset()

    def observed(self, memory: Memory) -> dict[str, Any]:
        """What a user can observe of a memory, by text (ids may be random): every stored
        record with its metadata and indexes, each probe's results, and the service's plain
        public attributes (numbers, strings, booleans: a counter, a cursor...)."""
        collection = memory.collection
        texts = {r.id: r.text for r in collection.get_many(collection.ids()) if r is not None}
        records = sorted((r.text, repr(sorted(r.metadata.items()))) for r in collection.get_many(list(texts)) if r is not None)
        indexes = {i["name"]: sorted(texts.get(rid, rid) for rid in collection.ids(index=i["name"])) for i in collection.list_indexes()}
        probes = [[(r["text"], round(float(r["score"]), 5)) for r in memory.retrieve(q, k=k)] for q, k in self.reopen_probes]
        plain = (bool, int, float, str)
        attributes = {
            name: value
            for name, value in sorted(vars(memory.service).items())
            if not name.startswith("_") and isinstance(value, plain) and name not in self.reopen_ignored_attributes
        }
        return {"records": records, "indexes": indexes, "probes": probes, "service attributes": attributes}

    def test_behaviour_survives_reopen(self, service_memories: Callable[..., Memory], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A memory closed and reopened in the middle of a history behaves as its twin that
        never closed: same records, metadata, index memberships, retrieve results and plain
        service attributes. State kept only in a Python attribute (a counter of inserts, a
        turn number) is lost on reopen and shows here. The wall clock (``time.time``) stands
        still meanwhile, so that the twins' timestamps (a record's birth, an age) agree."""
        frozen = time.time()
        monkeypatch.setattr(time, "time", lambda: frozen)
        twin = service_memories(tmp_path / "twin")
        path = tmp_path / "restarted"
        restarted = service_memories(path)
        half = len(self.items) // 2
        for memory in (twin, restarted):
            for text, metadata in self.items[:half]:
                memory.insert(text, metadata=metadata)
            for query, k in self.reopen_probes:
                memory.retrieve(query, k=k)  # a retrieve may update state (heat, access counts)
        restarted.close()
        restarted = service_memories(path)
        for memory in (twin, restarted):
            for text, metadata in self.items[half:]:
                memory.insert(text, metadata=metadata)
        before, after = self.observed(twin), self.observed(restarted)
        for part in before:
            assert after[part] == before[part], (
                f"after close() and reopen the memory differs from its twin that stayed open ({part}): keep the service's "
                f"state in the store (WriteBatch.state / Collection.set_state), not in Python attributes\n"
                f"  never closed: {before[part]}\n  reopened:     {after[part]}"
            )

    def test_every_option_has_a_description(self, service_memories: Callable[..., Memory]) -> None:
        memory = service_memories()
        assert_options_described(memory.service.config, f"service {memory.service.config.kind!r}")

    def test_state_survives_close_and_reopen(self, service_memories: Callable[..., Memory], tmp_path: Path) -> None:
        path = tmp_path / "reopened"
        memory = service_memories(path)
        inserted = self.insert_items(memory)
        count = memory.collection.count()
        memory.close()
        again = service_memories(path)
        assert again.collection.count() == count
        self.find_exact(again, inserted)
        results = again.retrieve(self.items[1][0], where={"topic": "work"}, k=len(self.items))
        assert results and all(r["metadata"]["topic"] == "work" for r in results)
        extra = again.insert("Gina collects vintage postcards from Lisbon", metadata={"topic": "hobby", "n": 9})
        assert isinstance(extra, str)
        inserted[extra] = ("Gina collects vintage postcards from Lisbon", {"topic": "hobby", "n": 9})
        self.find_exact(again, inserted, only=[extra])
        again.close()
        third = service_memories(path)
        self.find_exact(third, inserted)

    # -- threads -------------------------------------------------------------------------------

    def test_threads_share_one_memory(self, service_memories: Callable[..., Memory], tmp_path: Path) -> None:
        """Several threads insert, retrieve, retry, update and delete on one memory at once;
        reopened alone, the service state is consistent (``check_service``), nothing
        acknowledged is lost, every index holds its members, and the unified interface
        works on it (this suite's own items are inserted in a scope of their own and found by
        their exact text)."""
        from .threads import check_after_threads, hammer_service

        path = tmp_path / "threads"
        memory = service_memories(path)
        report = hammer_service(memory, threads=self.thread_count, items=self.thread_items, idempotent=self.idempotent_inserts)
        memory.close()
        broken = check_after_threads(service_memories, path, report)
        assert not broken, "\n".join(broken[:20])
        again = service_memories(path)
        carol = {"user_id": "carol"}  # a scope of its own: the threads' items do not compete
        inserted = self.insert_items(again, scope=carol)
        self.find_exact(again, inserted, scope=carol)
        results = again.retrieve(self.items[1][0], where={"topic": "work"}, k=len(self.items), scope=carol)
        self.check_results(results, len(self.items), inserted)
        assert results and all(r["metadata"]["topic"] == "work" for r in results)
        assert again.check_service() == []

    # -- isolation and forgetting ------------------------------------------------------------

    def test_scopes_never_cross(self, open_memory: OpenMemory) -> None:
        from .scope_machine import run_scope_machine

        run_scope_machine(open_memory, exact_match_k=self.exact_match_k, max_examples=self.isolation_examples, steps=self.isolation_steps)

    def test_forgotten_scope_leaves_no_bytes_on_disk(self, service_memories: Callable[..., Memory], tmp_path: Path) -> None:
        path = tmp_path / "forgetting"
        memory = service_memories(path)
        canaries = [_canary() for _ in range(6)]
        bob = {}
        for i, (text, metadata) in enumerate(self.items[:3]):
            item = (f"{text} {canaries[2 * i]}", {**metadata, "secret": canaries[2 * i + 1]})
            bob[memory.insert(item[0], metadata=item[1], scope=BOB)] = item
        alice = self.insert_items(memory, scope=ALICE)
        found = memory.retrieve(next(iter(bob.values()))[0], k=3, scope=BOB)  # query-time state too
        assert found or memory.service.capacity_limited, "nothing retrieved for bob before forgetting him"
        memory.close()
        memory = service_memories(path)  # bob's texts are on disk (index files are written on close)
        memory.delete(scope=BOB)
        assert memory.count(scope=BOB) == 0
        memory.close()
        # the needles are 16-letter prefixes: a stemmed or truncated token is found too
        left = find_bytes(path, [canary[:16] for canary in canaries])
        assert not left, f"files under the memory directory still hold bob's canaries after delete(scope=bob) and close(): {left}"
        again = service_memories(path)
        assert again.count(scope=BOB) == 0
        assert again.retrieve(next(iter(bob.values()))[0], k=3, scope=BOB) == []
        if not again.service.capacity_limited:
            self.find_exact(again, alice, scope=ALICE)

    def assert_not_found(self, call: Callable[[], Any], what: str, same_verb_own_record: Callable[[], Any] | None = None) -> None:
        """``call`` (on another scope's record) raises NotFoundError — or, when
        ``same_verb_own_record`` is given, the very error the service refuses the verb with on
        the caller's own record (a verb refused for every record reveals nothing)."""
        try:
            call()
        except NotFoundError:
            return
        except MemcoreError as error:
            if same_verb_own_record is None:
                raise AssertionError(f"{what}: expected NotFoundError, got {type(error).__name__}: {error}") from error
            with pytest.raises(type(error)):
                same_verb_own_record()
            return
        pytest.fail(f"{what} succeeded: another scope's record must be unknown (NotFoundError)")

    def test_other_scopes_records_are_not_found(self, service_memories: Callable[..., Memory]) -> None:
        memory = service_memories()
        alice = self.insert_items(memory, scope=ALICE)
        alice_id, (alice_text, alice_meta) = next(iter(alice.items()))
        bob_text, bob_meta = "Bob keeps his spare key under the blue flowerpot", {"topic": "home", "n": 99}
        bob_id = memory.insert(bob_text, metadata=bob_meta, scope=BOB)
        assert isinstance(bob_id, str)
        bob_record = memory.get(bob_id, scope=BOB)
        assert isinstance(bob_record, Record)
        bob_count = memory.count(scope=BOB)

        def stored() -> list[tuple[str, str, Any, Any]]:
            records = memory.collection.get_many(memory.collection.ids())
            return sorted((r.id, r.text, r.metadata, r.scope.as_dict() if r.scope else None) for r in records if r is not None)

        before = stored()
        self.assert_not_found(lambda: memory.get(bob_id, scope=ALICE), "get(bob's id, scope=alice)")
        self.assert_not_found(lambda: memory.get([alice_id, bob_id], scope=ALICE), "get([alice's id, bob's id], scope=alice)")
        self.assert_not_found(
            lambda: memory.update(bob_id, text="hijacked by alice", scope=ALICE),
            "update(bob's id, text=..., scope=alice)",
            lambda: memory.update(alice_id, text=alice_text, scope=ALICE),
        )
        self.assert_not_found(
            lambda: memory.update(bob_id, metadata={"owner": "alice"}, scope=ALICE),
            "update(bob's id, metadata=..., scope=alice)",
            lambda: memory.update(alice_id, metadata=alice_meta, scope=ALICE),
        )
        self.assert_not_found(
            lambda: memory.upsert({"id": bob_id, "text": "hijacked by alice"}, scope=ALICE),
            "upsert({'id': bob's id, ...}, scope=alice)",
            lambda: memory.upsert({"id": alice_id, "text": alice_text, "metadata": alice_meta}, scope=ALICE),
        )
        self.assert_not_found(lambda: memory.delete(bob_id, scope=ALICE), "delete(bob's id, scope=alice)")
        self.assert_not_found(lambda: memory.delete([alice_id, bob_id], scope=ALICE), "delete([alice's id, bob's id], scope=alice)")
        assert stored() == before, "a refused call on another scope's id changed what is stored"
        assert bob_id not in [r["id"] for r in memory.retrieve(bob_text, k=len(self.items) + 1, scope=ALICE)]
        # the same text and metadata in alice's scope is a record of her own
        own = memory.insert(bob_text, metadata=bob_meta, scope=ALICE)
        assert own != bob_id, "the same text in two scopes got one id"
        kept = memory.get(bob_id, scope=BOB)
        assert isinstance(kept, Record)
        assert (kept.text, kept.metadata) == (bob_record.text, bob_record.metadata), "alice's insert of the same text changed bob's record"
        assert memory.count(scope=BOB) == bob_count, "alice's insert of the same text changed what bob has"

    def test_unknown_keywords_are_refused(self, service_memories: Callable[..., Memory]) -> None:
        memory = service_memories()
        self.insert_items(memory)
        text, metadata = self.items[0]
        new = "Gina collects vintage postcards from Lisbon"
        calls: dict[str, Callable[[], Any]] = {
            "retrieve(text, wher={...})": lambda: memory.retrieve(text, k=3, wher={"topic": "work"}),
            "retrieve(text, scope=..., bogus=1)": lambda: memory.retrieve(text, k=3, scope=ALICE, bogus=1),
            "insert(text, metadata=..., bogus=1)": lambda: memory.insert(new, metadata=metadata, bogus=1),
            "insert({'text': ..., 'bogus': 1})": lambda: memory.insert({"text": new, "bogus": 1}),
        }
        accepted = []
        for name, call in calls.items():
            before = (memory.collection.count(), sorted(memory.collection.ids()))
            try:
                call()
            except (ValidationError, TypeError):
                assert (memory.collection.count(), sorted(memory.collection.ids())) == before, f"{name} was refused but changed what is stored"
            else:
                accepted.append(name)
        assert not accepted, f"unknown keywords accepted (ValidationError or TypeError expected): {accepted}"
