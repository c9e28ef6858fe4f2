"""Issue 25: large payload files are checked at open by size + a sampled SHA-256.

The damage matrix runs on small indexes (every file below the threshold, hashed whole):
here the threshold is lowered so that every payload file is checked by samples, and a
damaged one is still refused (the index is rebuilt from the store, same results)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memcore import Collection, Query
from memcore._plugins._host import get_registry
from memcore.embedders._embedder import Space
from memcore.indexes import _handle
from memcore.stores._sqlite import SQLiteStore

DIM = 8


def _open(path: Path) -> Collection:
    return Collection(SQLiteStore(path), {"v": Space("v", DIM)}, get_registry(), path)


def _results(col: Collection) -> list[str]:
    q = np.linspace(-1, 1, DIM, dtype=np.float32)
    return [h.id for h in col.search_index("e", Query(vectors={"v": q}, k=10), 10)]


def _garbage(p: Path) -> None:
    p.write_bytes(np.random.default_rng(1).bytes(p.stat().st_size))


def _flip(p: Path) -> None:
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF  # in the middle: a sampled block holds it only by chance
    p.write_bytes(bytes(data[:64]) + bytes(b ^ 0x5A for b in data[64:128]) + bytes(data[128:]))


DAMAGES = {
    "garbage": _garbage,
    "half": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    "zero": lambda p: p.write_bytes(b""),
    "flip": _flip,
    "one_byte_longer": lambda p: p.write_bytes(p.read_bytes() + b"\0"),
}


@pytest.fixture
def saved(tmp_path, monkeypatch) -> tuple[Path, list[str]]:
    monkeypatch.setattr(_handle, "SAMPLED_FROM", 1)  # every payload file checked by samples
    col = _open(tmp_path)
    col.create_index("e", "exact", space="v")
    rng = np.random.default_rng(0)
    col.insert([{"id": f"r{i}", "text": f"t{i}", "vectors": {"v": rng.standard_normal(DIM).astype(np.float32)}} for i in range(300)])
    expected = _results(col)
    col.close()
    return tmp_path, expected


def test_sampled_digests_are_recorded_and_an_intact_payload_loads(saved):
    path, expected = saved
    manifest = json.loads((path / "indexes" / "e" / "index.json").read_text())
    assert set(manifest["sampled"]) == {"ids.json", "matrix.npy"} and set(manifest["files"]) == {"ids.json", "matrix.npy"}
    col = _open(path)
    try:
        assert col._handle("e").loaded_from_disk and col._handle("e").load_error is None
        assert _results(col) == expected
    finally:
        col.close()


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_large_payload_is_refused_and_rebuilt(saved, damage):
    path, expected = saved
    DAMAGES[damage](path / "indexes" / "e" / "matrix.npy")
    col = _open(path)
    try:
        handle = col._handle("e")
        assert not handle.loaded_from_disk and handle.load_error is not None
        assert _results(col) == expected
    finally:
        col.close()
