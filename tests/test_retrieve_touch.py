"""One default ``Memory.retrieve`` touches at most 14 core source files (issue 21's "Done when"
said 12; since then the ``relevance`` stage joined the ``basic`` preset (its module; it reuses
the recall's cosines instead of reading the hits' vectors back) and the ``exact`` index
searches the store's mapped vector file through its own module, ``indexes/_exact_mapped``).

A reader follows a query through the core: the fewer files it crosses, the shorter the
read. The files are counted with ``sys.setprofile`` (every Python function called, by the
file it is defined in) over one retrieve of a memory opened with the defaults (``sqlite``
store, ``hashing`` embedder, one ``exact`` index, the ``basic`` preset), after a warm-up
retrieve (lazy loads and caches).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import FrameType
from typing import Any


import memcore

CORE = os.path.dirname(memcore.__file__)
LIMIT = 14


def files_touched_by_one_retrieve(path: Path) -> dict[str, int]:
    """Core file (relative to the package) -> Python calls into it, for one default retrieve."""
    mem = memcore.open(path=path)
    try:
        mem.insert("Alice moved to Paris in May.")
        mem.insert("Bob likes green tea.")
        mem.retrieve("where does Alice live?")  # warm-up: lazy loads and caches
        seen: dict[str, int] = {}

        def profile(frame: FrameType, event: str, arg: Any) -> None:
            if event == "call" and frame.f_code.co_filename.startswith(CORE):
                seen[frame.f_code.co_filename] = seen.get(frame.f_code.co_filename, 0) + 1

        sys.setprofile(profile)
        try:
            hits = mem.retrieve("where does Alice live?")
        finally:
            sys.setprofile(None)
    finally:
        mem.close()
    assert hits and hits[0]["text"] == "Alice moved to Paris in May."
    return {os.path.relpath(f, CORE): n for f, n in sorted(seen.items(), key=lambda item: -item[1])}


def _listing(seen: dict[str, int]) -> str:
    return "\n".join(f"  {n:3d} calls  {f}" for f, n in seen.items())


def test_a_default_retrieve_touches_at_most_14_core_files(tmp_path):
    seen = files_touched_by_one_retrieve(tmp_path / "m")
    assert len(seen) <= LIMIT, f"one default retrieve touches {len(seen)} core files (at most {LIMIT}):\n{_listing(seen)}"


def test_the_read_path_of_the_collection_is_one_module(tmp_path):
    """The collection's part of a default retrieve is its read path (``collection/_reads``):
    the shared helpers of ``collection/_base`` and the scope binding's module stay off it
    (the reader reads the binding's context variable itself, and finds a usable index
    without a call)."""
    seen = files_touched_by_one_retrieve(tmp_path / "m")
    assert [f for f in seen if f.startswith("collection/")] == ["collection/_reads.py"], _listing(seen)
    assert "model/_binding.py" not in seen, _listing(seen)
