"""Issue 27: damaged embedded Chroma files never crash the process nor give wrong results silently.

The victim (open the memory, search, print the hits) runs in a child process, so a
segmentation fault of Chroma's native code fails the test instead of killing pytest.
Enough records are written that Chroma persists its HNSW files with elements in them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import memcore
from memcore.plugin import CorruptError
from memcore_chroma_support import manifest
from memcore_chroma_support.hnsw_files import check_folder
from memcore_chroma_support.manifest import MANIFEST_FILE, mark_open, probe_folder, read_manifest

DIM = 8
N = 1200  # past Chroma's HNSW sync threshold (1000): data_level0.bin holds the elements
SETTINGS = {
    "spaces": {"v": {"dim": DIM}},
    "indexes": {"vec": {"kind": "chroma", "space": "v"}},
    "pipeline": [{"kind": "recall", "index": "vec"}, {"kind": "limit"}],
}
VICTIM = """
import json, sys
import numpy as np
import memcore
settings, path = json.loads(sys.argv[1]), sys.argv[2]
vectors = np.random.default_rng(0).standard_normal((%d, %d)).astype("float32")
with memcore.open(settings, path=path) as memory:
    c = memory.collection
    status = {i["name"]: i["status"] for i in c.list_indexes()}
    hits = [c.retrieve({"vectors": {"v": vectors[i]}}, index="vec", k=1, with_records=False)[0].id for i in range(0, %d, 97)]
print(json.dumps({"status": status, "hits": hits}))
""" % (N, DIM, N)


def _vectors() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((N, DIM)).astype(np.float32)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("chroma-damage") / "memory"
    with memcore.open(SETTINGS, path=path) as memory:
        memory.collection.insert([{"id": f"r{i}", "text": f"t{i}", "vectors": {"v": v}} for i, v in enumerate(_vectors())])
    return path


def _copy(saved: Path, tmp_path: Path) -> Path:
    import shutil

    work = tmp_path / "work"
    shutil.copytree(saved, work)
    return work


def _segment(path: Path) -> Path:
    folders = [p for p in (path / "indexes" / "vec" / "chroma").iterdir() if p.is_dir() and (p / "data_level0.bin").is_file()]
    assert len(folders) == 1
    return folders[0]


def _victim(path: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", VICTIM, json.dumps(SETTINGS), str(path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"the victim died with {done.returncode}: {done.stderr[-2000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


EXPECTED = [f"r{i}" for i in range(0, N, 97)]


def _garbage(p: Path) -> None:
    p.write_bytes(np.random.default_rng(7).bytes(p.stat().st_size))


def _half(p: Path) -> None:
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


@pytest.mark.parametrize("damage", [_garbage, _half], ids=["overwritten", "truncated"])
@pytest.mark.parametrize("closed", [True, False], ids=["after-close", "after-crash"])
def test_damaged_data_level0_then_search_neither_crashes_nor_lies(saved, tmp_path, damage, closed):
    work = _copy(saved, tmp_path)
    chroma = work / "indexes" / "vec" / "chroma"
    assert read_manifest(chroma)["state"] == "closed"
    if not closed:
        mark_open(chroma)  # as a writer killed after its last save leaves it: the folder is probed
    damage(_segment(work) / "data_level0.bin")
    first = _victim(work)
    assert first == {"status": {"vec": "ok"}, "hits": EXPECTED}  # detected and rebuilt from the store
    assert _victim(work) == first


def test_the_python_checks_see_what_would_crash_chroma(saved, tmp_path, monkeypatch):
    work = _copy(saved, tmp_path)
    chroma = work / "indexes" / "vec" / "chroma"
    name = json.loads((work / "indexes" / "vec" / "state.json").read_text())["collection"]
    assert check_folder(chroma) == []
    _garbage(_segment(work) / "data_level0.bin")
    assert check_folder(chroma) and "data_level0.bin" in check_folder(chroma)[0]
    with pytest.raises(CorruptError, match="HNSW"):
        probe_folder(chroma, name, "test")
    # past the Python checks, Chroma itself reads the garbage -- in the child process only
    monkeypatch.setattr(manifest, "check_folder", lambda folder: [])
    with pytest.raises(CorruptError, match="Chroma cannot read its folder"):
        probe_folder(chroma, name, "test")


def test_a_folder_left_open_by_a_crash_is_probed_and_kept_when_sound(saved, tmp_path):
    work = _copy(saved, tmp_path)
    chroma = work / "indexes" / "vec" / "chroma"
    (chroma / MANIFEST_FILE).unlink()  # an older save, or the manifest lost: probed
    name = json.loads((work / "indexes" / "vec" / "state.json").read_text())["collection"]
    report = probe_folder(chroma, name, "test")
    assert report["count"] == N and report["checked"] > 0
    assert _victim(work)["hits"] == EXPECTED
    assert read_manifest(chroma)["state"] == "closed"  # sealed again by the clean close


def test_a_damaged_folder_can_be_dropped_and_checked_without_a_traceback(saved, tmp_path):
    from click.testing import CliRunner

    from memcore.cli import main as cli

    work = _copy(saved, tmp_path)
    _garbage(work / "indexes" / "vec" / "chroma" / "chroma.sqlite3")
    checked = CliRunner().invoke(cli, ["info", "--path", str(work), "--check", "--json"])
    assert checked.exit_code == 0, checked.output
    entry = json.loads(checked.output)["check"]["indexes"]["vec"]
    assert entry["status"] == "rebuild" and "chroma.sqlite3" in entry["error"]
    config = tmp_path / "settings.yaml"
    config.write_text(json.dumps(SETTINGS))
    dropped = CliRunner().invoke(cli, ["index", "drop", "--config", str(config), "--path", str(work), "vec"])
    assert dropped.exit_code == 0, (dropped.output, dropped.exception)
    assert not (work / "indexes" / "vec").exists()
