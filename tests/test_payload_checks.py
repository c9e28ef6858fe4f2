"""Issue 25: payload files are checked at open by a CRC-32 per block, every block of every
file up to ``FULL_CHECK_UP_TO`` (a flipped bit anywhere is found); larger files by their
size and blocks spread evenly, and ``memcore info --check`` checks every block.

The blocks are made small here (the payload of a few hundred records spans many of them)
so that a flip in a block the samples do not read can be placed on purpose."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memcore import Collection, Query
from memcore._plugins._host import get_registry
from memcore.cli.check import check_collection
from memcore.embedders._embedder import Space
from memcore.indexes import _handle
from memcore.stores._sqlite import SQLiteStore, SQLiteStoreConfig

DIM = 8
BLOCK = 256


def _open(path: Path) -> Collection:
    return Collection(SQLiteStore(path), {"v": Space("v", DIM)}, get_registry(), path)


def _results(col: Collection) -> list[str]:
    q = np.linspace(-1, 1, DIM, dtype=np.float32)
    return [h.id for h in col.search_index("e", Query(vectors={"v": q}, k=10), 10)]


def _garbage(p: Path) -> None:
    p.write_bytes(np.random.default_rng(1).bytes(p.stat().st_size))


def _flip_at(p: Path, offset: int) -> None:
    data = bytearray(p.read_bytes())
    data[offset] ^= 0x01  # one bit
    p.write_bytes(bytes(data))


DAMAGES = {
    "garbage": _garbage,
    "half": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    "zero": lambda p: p.write_bytes(b""),
    "one_bit_in_the_middle": lambda p: _flip_at(p, p.stat().st_size // 2 + 3),
    "one_byte_longer": lambda p: p.write_bytes(p.read_bytes() + b"\0"),
}


@pytest.fixture
def saved(tmp_path, monkeypatch) -> tuple[Path, list[str]]:
    monkeypatch.setattr(_handle, "BLOCK", BLOCK)
    col = _open(tmp_path)
    col.create_index("e", "exact", space="v")
    rng = np.random.default_rng(0)
    col.insert([{"id": f"r{i}", "text": f"t{i}", "vectors": {"v": rng.standard_normal(DIM).astype(np.float32)}} for i in range(600)])
    expected = _results(col)
    col.close()
    return tmp_path, expected


def test_block_checksums_are_recorded_and_an_intact_payload_loads(saved):
    path, expected = saved
    manifest = json.loads((path / "indexes" / "e" / "index.json").read_text())
    assert set(manifest["blocks"]) == set(manifest["files"]) == {"ids.json", "ids.txt", "rows.npy", "scale.npy"}
    rows = manifest["blocks"]["rows.npy"]
    assert rows["block"] == BLOCK and len(rows["crc32"]) == -(-rows["size"] // BLOCK) > 1
    col = _open(path)
    try:
        assert col._handle("e").loaded_from_disk and col._handle("e").load_error is None
        assert _results(col) == expected
    finally:
        col.close()


@pytest.mark.parametrize("name", ["rows.npy", "scale.npy", "ids.txt", "ids.json"])
@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_payload_is_refused_and_rebuilt(saved, damage, name):
    path, expected = saved
    DAMAGES[damage](path / "indexes" / "e" / name)
    col = _open(path)
    try:
        handle = col._handle("e")
        assert not handle.loaded_from_disk and "checksum mismatch" in (handle.load_error or "")
        assert _results(col) == expected
    finally:
        col.close()


def test_large_files_are_sampled_at_open_and_checked_whole_by_info_check(saved, monkeypatch):
    """Above ``FULL_CHECK_UP_TO`` an open reads the size and sampled blocks: a bit flipped
    in a block it does not read loads (what sampling gives up), ``info --check`` finds it."""
    path, _expected = saved
    monkeypatch.setattr(_handle, "FULL_CHECK_UP_TO", 0)
    monkeypatch.setattr(_handle, "_SAMPLES", 2)  # blocks 0, the middle one and the last
    target = path / "indexes" / "e" / "rows.npy"
    blocks = -(-target.stat().st_size // BLOCK)
    assert blocks >= 8
    _flip_at(target, BLOCK)  # block 1, not sampled: the low byte of a row number (a row still in range, a wrong one)
    store = SQLiteStore(path, SQLiteStoreConfig(read_only=True))
    try:
        report = check_collection(store, path)
    finally:
        store.close()
    assert report["indexes"]["e"]["status"] == "rebuild" and "checksum mismatch in rows.npy" in report["indexes"]["e"]["error"]
    col = _open(path)
    try:
        assert col._handle("e").loaded_from_disk  # sampled: not seen at open
    finally:
        col.store.close()  # no save: the damaged file stays as it is
    _flip_at(target, BLOCK)  # undone; now in a sampled block (the middle one)
    _flip_at(target, (blocks - 1) // 2 * BLOCK + 1)
    col = _open(path)
    try:
        assert not col._handle("e").loaded_from_disk
    finally:
        col.close()
