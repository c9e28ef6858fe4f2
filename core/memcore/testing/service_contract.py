"""``ServiceContract``: the unified interface every memory service must offer."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterator

import pytest

from ..api import Memory
from ..collection import Collection
from ..errors import ValidationError
from ..service import Service

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


class ServiceContract:
    """Contract tests for a memory service. Subclass it and provide ONE fixture,
    ``open_memory``: a callable ``open_memory(path) -> memcore.Memory`` that opens the
    memory under test at the collection directory ``path`` (usually ``memcore.open(...)``)::

        from memcore.testing import ServiceContract

        class TestMyService(ServiceContract):
            @pytest.fixture
            def open_memory(self):
                return lambda path: memcore.open({"service": {"kind": "my-service"}}, path=path)

    The suite calls it with a fresh temporary directory, and calls it again with the same
    directory after ``close()`` to check that the memory survives a restart. It closes every
    memory it opened.

    Checked: ``insert`` returns ids; ``retrieve`` returns at most ``k`` dicts with exactly the
    keys id, text, score, metadata (text and metadata as inserted); a ``metadata`` where
    filter returns only matching items; every item is found by its exact text among the
    first ``exact_match_k`` results; ``retrieve()`` without query and vector raises
    :class:`memcore.ValidationError`; everything survives close and reopen.

    Class attributes: ``items`` (the (text, metadata) pairs inserted, default
    :data:`SERVICE_ITEMS`), ``exact_match_k`` (3).
    """

    items: ClassVar[tuple[tuple[str, dict[str, Any]], ...]] = SERVICE_ITEMS
    exact_match_k: ClassVar[int] = 3

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

    def insert_items(self, memory: Memory) -> dict[str, tuple[str, dict[str, Any]]]:
        """Insert :attr:`items`; returns id -> (text, metadata)."""
        out: dict[str, tuple[str, dict[str, Any]]] = {}
        for text, metadata in self.items:
            rid = memory.insert(text, metadata=metadata)
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

    def find_exact(self, memory: Memory, inserted: dict[str, tuple[str, dict[str, Any]]], only: list[str] | None = None) -> None:
        """Each inserted item (or those in ``only``) is among the first results of its exact text."""
        for rid in only or list(inserted):
            text = inserted[rid][0]
            results = memory.retrieve(text, k=self.exact_match_k)
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
                results = memory.retrieve(text, metadata={"topic": topic}, k=len(self.items))
                self.check_results(results, len(self.items), inserted)
                assert results, f"nothing retrieved for topic {topic!r}"
                assert all(r["metadata"]["topic"] == topic for r in results)
        results = memory.retrieve(self.items[0][0], metadata={"n": {"$gte": 5}}, k=len(self.items))
        assert results and all(r["metadata"]["n"] >= 5 for r in results)
        assert memory.retrieve(self.items[0][0], metadata={"topic": "no-such-topic"}, k=5) == []

    def test_retrieve_needs_query_or_vector(self, service_memories: Callable[..., Memory]) -> None:
        memory = service_memories()
        self.insert_items(memory)
        with pytest.raises(ValidationError):
            memory.retrieve()
        with pytest.raises(ValidationError):
            memory.retrieve(None, vector=None, metadata={"topic": "work"})

    def test_state_survives_close_and_reopen(self, service_memories: Callable[..., Memory], tmp_path: Path) -> None:
        path = tmp_path / "reopened"
        memory = service_memories(path)
        inserted = self.insert_items(memory)
        count = memory.collection.count()
        memory.close()
        again = service_memories(path)
        assert again.collection.count() == count
        self.find_exact(again, inserted)
        results = again.retrieve(self.items[1][0], metadata={"topic": "work"}, k=len(self.items))
        assert results and all(r["metadata"]["topic"] == "work" for r in results)
        extra = again.insert("Gina collects vintage postcards from Lisbon", metadata={"topic": "hobby", "n": 9})
        assert isinstance(extra, str)
        inserted[extra] = ("Gina collects vintage postcards from Lisbon", {"topic": "hobby", "n": 9})
        self.find_exact(again, inserted, only=[extra])
        again.close()
        third = service_memories(path)
        self.find_exact(third, inserted)
