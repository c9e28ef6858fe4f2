"""``memcore.atomic_write_*`` (module ``memcore._util.atomic``) atomic writes: a file is replaced whole or not at all."""

from __future__ import annotations

import pytest

from memcore.plugin import atomic_write_bytes, atomic_write_json, atomic_write_with


def test_atomic_write_with_replaces_the_file(tmp_path):
    target = tmp_path / "data.bin"
    atomic_write_bytes(target, b"old")
    atomic_write_with(target, lambda tmp: open(tmp, "wb").write(b"new contents"))
    assert target.read_bytes() == b"new contents"
    assert [p.name for p in tmp_path.iterdir()] == ["data.bin"]


def test_a_failing_writer_leaves_the_old_file_and_no_temp_file(tmp_path):
    target = tmp_path / "state.json"
    atomic_write_json(target, {"v": 1})

    def half_written(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            fh.write(b"{broken")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write_with(target, half_written)
    assert target.read_text() == '{\n "v": 1\n}'
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]
