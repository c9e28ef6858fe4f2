"""The canary test of forgetting: a deleted scope leaves none of its bytes on disk.

:func:`check_scope_forgotten` writes canary records for one user (``bob``) beside other
records (``alice``), deletes bob's scope with ``Memory.delete(scope=...)``, closes the
memory, searches the raw bytes of every file under its directory
(:func:`memcore.testing.assert_no_bytes`), then reopens it and checks alice's records are
intact and still retrieved. A plugin's test runs it with its own settings::

    from memcore.testing import check_scope_forgotten

    def test_forgets_a_scope(tmp_path):
        check_scope_forgotten(lambda path: memcore.open({"indexes": {"kw": {"kind": "my_index"}}}, path=path), tmp_path)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from ..api._memory import Memory
from .disk import assert_no_bytes

__all__ = ["check_scope_forgotten", "retrieve_by_index", "BOB_ITEMS", "BOB_IDS", "ALICE_ITEMS", "CANARIES"]

BOB = {"user_id": "bob"}
ALICE = {"user_id": "alice"}

BOB_ITEMS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("bob hides the Zqxvelvetkey behind the blue piano", {"note": "zqxmetapiano", "n": 1}),
    ("the 'zqxorchidlock' opens bob's garage", {"note": "zqxmetagarage", "n": 2}),
    ("bob told his doctor about the zqxmarbleknot", {"note": "zqxmetadoctor", "n": 3}),
)
"""Bob's (text, metadata) canary items: every text and metadata string is searched on disk."""

BOB_IDS: tuple[str, ...] = ("zqxbobrecord-1", "zqxbobrecord-2", "zqxbobrecord-3")
"""The ids bob's items are inserted with (an id may be as telling as a text: also searched,
unless ``check_ids=False``)."""

ALICE_ITEMS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("alice waters the tomatoes in her garden every sunday", {"note": "garden", "n": 10}),
    ("alice is learning the violin with a patient teacher", {"note": "music", "n": 11}),
    ("alice booked a train to the mountains for the holidays", {"note": "travel", "n": 12}),
)
"""Alice's items, kept: they must survive the deletion and still be retrieved."""

CANARIES: tuple[str, ...] = (
    *(text for text, _ in BOB_ITEMS),
    "zqxvelvetkey",
    "Zqxvelvetkey",
    "zqxorchidlock",
    "zqxmarbleknot",
    *(meta["note"] for _, meta in BOB_ITEMS),
)
"""The needles searched: bob's texts, the rare word of each (what a text index keeps as a
term: an English stemmer leaves them as they are; one is capitalised and one quoted, the
names an entity extractor picks) and his metadata strings."""

Retrieve = Callable[[Memory, str, dict[str, str], int], Sequence[str]]


def _service_ids(memory: Memory, text: str, scope: dict[str, str], k: int) -> list[str]:
    return [str(item["id"]) for item in memory.retrieve(text, k=k, scope=scope)]


def retrieve_by_index(name: str) -> Retrieve:
    """A ``retrieve`` for :func:`check_scope_forgotten` that searches one index
    (``Memory.query(text, index=name, ...)``): for an index kind tested on its own."""
    return lambda memory, text, scope, k: [h.id for h in memory.query(text, index=name, k=k, scope=scope)]


def check_scope_forgotten(
    open_memory: Callable[[Path], Memory],
    path: Path,
    *,
    retrieve: Retrieve | None = _service_ids,
    encodings: Sequence[str] = ("utf-8",),
    rounds: int = 1,
    check_ids: bool = True,
) -> None:
    """Insert bob's canaries and alice's items, ``delete(scope=bob)``, close, and assert
    no file under ``path`` holds a canary; reopen and check alice's records are all there
    and each is found by its own text (``retrieve(memory, text, scope, k)`` returns ids;
    default: the service's ``retrieve``; None skips that check).

    ``rounds`` > 1 closes, reopens and inserts one more record of alice's ``rounds - 1``
    times before deleting (index files and backups of several saves). ``check_ids``: bob's record ids
    (:data:`BOB_IDS`) must be gone too (False for an index known to keep deleted ids)."""
    memory = open_memory(path)
    try:
        ids = memory.insert([{"text": t, "metadata": m, "scope": ALICE} for t, m in ALICE_ITEMS[:1]])
        alice_ids = list(ids) if isinstance(ids, list) else [ids]
        bob = memory.insert([{"id": rid, "text": t, "metadata": m, "scope": BOB} for rid, (t, m) in zip(BOB_IDS, BOB_ITEMS)])
        assert len(bob) == len(BOB_ITEMS)
        more = memory.insert([{"text": t, "metadata": m, "scope": ALICE} for t, m in ALICE_ITEMS[1:]])
        alice_ids += list(more) if isinstance(more, list) else [more]
        memory.collection.flush()  # the canaries are in the saved index files, as after any earlier close
    except BaseException:
        memory.close()
        raise
    for n in range(rounds - 1):  # each round's close saves the indexes again (a new save, a .previous backup)
        memory.close()
        memory = open_memory(path)
        memory.insert({"text": f"alice filler number {n}", "metadata": {"note": "filler", "n": 100 + n}, "scope": ALICE})
    try:
        deleted = memory.delete(scope=BOB)
        assert deleted >= len(BOB_ITEMS), f"delete(scope=bob) removed {deleted} records, expected at least {len(BOB_ITEMS)}"
    finally:
        memory.close()
    assert_no_bytes(path, [*CANARIES, *(BOB_IDS if check_ids else ())], encodings=encodings)
    memory = open_memory(path)
    try:
        assert memory.count(scope=BOB) == 0
        records = memory.get(list(alice_ids))
        assert isinstance(records, list)
        assert [r.text for r in records] == [t for t, _ in ALICE_ITEMS]
        assert [r.metadata for r in records] == [m for _, m in ALICE_ITEMS]
        if retrieve is not None:
            for rid, (text, _) in zip(alice_ids, ALICE_ITEMS):
                found = list(retrieve(memory, text, ALICE, len(ALICE_ITEMS) + rounds))
                assert rid in found, f"alice's {text!r} is not retrieved after the deletion: {found}"
    finally:
        memory.close()
