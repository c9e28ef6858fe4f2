"""memcore's payload helpers (read_json_object, read_npy, npy_bytes, write_npz, read_npz): every
unreadable or unexpected file is a CorruptError naming the index and the file; no pickle."""

from __future__ import annotations

import numpy as np
import pytest

from memcore import CorruptError
from memcore.plugin import atomic_write_bytes, npy_bytes, read_json, read_json_object, read_npy, read_npz, write_npz

WHERE = "test index 'x' in /somewhere"


def test_json_objects(tmp_path):
    path = tmp_path / "state.json"
    path.write_text('{"a": [1, 2]}')
    assert read_json_object(path, WHERE) == {"a": [1, 2]}
    path.write_text("[1, 2]")
    assert read_json(path, WHERE) == [1, 2]
    with pytest.raises(CorruptError, match=r"test index 'x' in /somewhere: state.json is not a JSON object"):
        read_json_object(path, WHERE)
    with pytest.raises(CorruptError, match="cannot read missing.json"):
        read_json_object(tmp_path / "missing.json", WHERE)


def test_npy_round_trip_and_checks(tmp_path):
    path = tmp_path / "codes.npy"
    array = np.arange(12, dtype=np.uint64).reshape(3, 4)[:, ::2]  # not contiguous
    atomic_write_bytes(path, npy_bytes(array))
    assert np.array_equal(read_npy(path, WHERE, dtype=np.uint64, shape=(3, 2)), array)
    assert np.array_equal(read_npy(path, WHERE, mmap=True), array)
    with pytest.raises(CorruptError, match=r"codes.npy holds uint64\[3, 2\], expected float32\[3, 2\]"):
        read_npy(path, WHERE, dtype=np.float32)
    with pytest.raises(CorruptError, match=r"codes.npy holds uint64\[3, 2\], expected uint64\[2, 3\]"):
        read_npy(path, WHERE, shape=[2, 3])
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(CorruptError, match="cannot read codes.npy"):  # a pickle is never loaded
        read_npy(path, WHERE)
    with pytest.raises(CorruptError, match="cannot read gone.npy"):
        read_npy(tmp_path / "gone.npy", WHERE)


@pytest.mark.parametrize(
    ("name", "content", "read"),
    [
        ("state.json", b"{not json", read_json_object),
        ("state.json", b"", read_json_object),
        ("state.json", "\u00e9".encode("latin-1"), read_json),
        ("codes.npy", b"", read_npy),
        ("codes.npy", b"garbage", read_npy),
        ("codes.npy", npy_bytes(np.zeros(100))[:90], read_npy),  # truncated
    ],
)
def test_unreadable_files(tmp_path, name, content, read):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(CorruptError, match=f"^{WHERE}: cannot read {name}: "):
        read(tmp_path / name, WHERE)


def test_npz_round_trip_and_checks(tmp_path):
    path = tmp_path / "idmap.npz"
    arrays = {"labels": np.arange(3, dtype=np.int64), "text": np.frombuffer(b"abc", dtype=np.uint8)}
    write_npz(path, arrays)
    loaded = read_npz(path, WHERE, ("labels", "text"))
    assert all(np.array_equal(loaded[k], arrays[k]) for k in arrays)
    with pytest.raises(CorruptError, match="cannot read idmap.npz"):
        read_npz(path, WHERE, ("labels", "offsets"))
    atomic_write_bytes(path, npy_bytes(np.zeros(3)))
    with pytest.raises(CorruptError, match="idmap.npz is not an .npz archive"):
        read_npz(path, WHERE, ("labels",))
    path.write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(CorruptError, match="cannot read idmap.npz"):
        read_npz(path, WHERE, ("labels",))
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
