"""A full disk: every write raises the typed StorageFullError naming the path, and nothing
acknowledged is lost.

For real, in a subprocess: the file size limit (``RLIMIT_FSIZE`` with ``SIGXFSZ`` ignored,
so writes fail with EFBIG) and a small tmpfs filled to the last block (ENOSPC; skipped when
this machine does not let the test mount one). The subprocess inserts records, makes the
disk full, runs insert / upsert / update / delete / flush / close (each must raise
StorageFullError), frees the space, reopens and checks that every acknowledged record is
there and nothing of a refused batch is.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from memcore import StorageFullError, StoreError
from memcore.plugin import atomic_write_bytes

SCRIPT = textwrap.dedent(
    r"""
    import json, os, resource, signal, sys
    from pathlib import Path

    import memcore
    import memcore.plugin
    from memcore import StorageFullError

    mode, path = sys.argv[1], Path(sys.argv[2])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    ballast = path.parent / "ballast"

    def make_full():
        if mode == "fsize":  # soft limit only: raised again below
            resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, resource.RLIM_INFINITY))
        else:  # fill the tmpfs to its last block
            fd = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            for size in (65536, 512, 1):
                try:
                    while True:
                        os.write(fd, b"\0" * size)
                except OSError:
                    pass
            os.close(fd)

    def free():
        if mode == "fsize":
            resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        else:
            ballast.unlink()

    config = {"spaces": {"default": {"embedder": {"kind": "hashing", "dim": 64}}}}
    text = lambda i, tag="": f"record {i} {tag} " + "lorem ipsum dolor sit amet " * 20
    report = {"errors": {}}
    memory = memcore.open(config, path=path)
    acknowledged = {}
    for start in range(0, 300, 50):
        batch = [{"id": f"r{i}", "text": text(i)} for i in range(start, start + 50)]
        memory.collection.insert(batch)
        acknowledged.update({r["id"]: r["text"] for r in batch})
    make_full()

    def attempt(name, call):
        try:
            call()
        except Exception as exc:
            report["errors"][name] = {
                "type": type(exc).__name__, "storage_full": isinstance(exc, StorageFullError),
                "path": getattr(exc, "path", None), "message": str(exc), "errno": getattr(exc, "errno", None),
            }
            return
        report["errors"][name] = None

    many = lambda tag, n=400: [{"id": f"{tag}{i}", "text": text(i, tag)} for i in range(n)]
    attempt("insert", lambda: memory.collection.insert(many("new")))
    attempt("upsert", lambda: memory.collection.upsert([{"id": f"r{i}", "text": text(i, "changed")} for i in range(300)]))
    attempt("update", lambda: memory.collection.update("r1", text="updated " * 5000))
    attempt("delete", lambda: memory.collection.delete([f"r{i}" for i in range(0, 300, 2)]))
    payload = path.parent / "payload.npy"
    attempt("payload", lambda: memcore.plugin.atomic_write_bytes(payload, b"\0" * 200_000))
    report["payload_left"] = sorted(p.name for p in path.parent.iterdir() if p.name.startswith((".payload", "payload")))
    attempt("flush", memory.collection.flush)
    attempt("close", memory.close)
    free()
    with memcore.open(config, path=path) as memory:
        stored = {r.id: r.text for r in memory.collection.get_many(list(acknowledged)) if r is not None}
        report["lost"] = sorted(set(acknowledged) - set(stored))
        report["changed"] = sorted(i for i in stored if stored[i] != acknowledged[i])
        report["extra"] = memory.collection.count() - len(acknowledged)
        report["found"] = [h.id for h in memory.collection.retrieve(text(7), k=1)]
        report["store_file"] = str(memory.collection.store.file)
    print("REPORT " + json.dumps(report))
    """
)

OPERATIONS = ("insert", "upsert", "update", "delete", "payload", "flush", "close")


def run_full_disk(mode: str, path: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, mode, str(path)], capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("REPORT ")]
    assert proc.returncode == 0 and lines, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(lines[-1][len("REPORT ") :])


def check_report(report: dict, path: Path, errnos: set[int]) -> None:
    for name in OPERATIONS:
        error = report["errors"][name]
        assert error is not None, f"{name} succeeded on a full disk"
        assert error["storage_full"] and error["type"] == "StorageFullError", (name, error)
        assert error["path"] and str(path.parent) in error["path"], (name, error)
        assert "cannot rollback" not in error["message"]
    assert report["errors"]["insert"]["path"] == report["store_file"]
    payload = report["errors"]["payload"]  # an index payload's atomic write
    assert payload["storage_full"] and payload["path"] == str(path.parent / "payload.npy") and payload["errno"] in errnos, payload
    assert report["payload_left"] == []  # no temp file left behind
    assert report["lost"] == [] and report["changed"] == [] and report["extra"] == 0
    assert report["found"] == ["r7"]


def test_a_full_file_size_limit_raises_storage_full_and_loses_nothing(tmp_path):
    path = tmp_path / "mem"
    check_report(run_full_disk("fsize", path), path, {errno.EFBIG})


@pytest.fixture
def small_tmpfs(tmp_path):
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=30)


def test_a_full_tmpfs_raises_storage_full_and_loses_nothing(small_tmpfs):
    path = small_tmpfs / "mem"
    report = run_full_disk("tmpfs", path)
    check_report(report, path, {errno.ENOSPC})
    # flush saves the indexes first: their files are what could not be written
    assert f"{path}/indexes/" in report["errors"]["flush"]["path"] and report["errors"]["flush"]["errno"] == errno.ENOSPC


def test_an_atomic_write_on_a_full_device_is_storage_full_and_keeps_the_old_file(tmp_path):
    """/dev/full answers every write with ENOSPC: the write fails typed, the target keeps
    its content, and no temp file is left behind."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    target = tmp_path / "payload.bin"
    target.write_bytes(b"old")
    from memcore.plugin import atomic_write_with

    def write(tmp: str) -> None:
        with open("/dev/full", "wb") as full:
            full.write(b"x" * 8192)
            full.flush()

    with pytest.raises(StorageFullError) as caught:
        atomic_write_with(target, write)
    assert caught.value.path == str(target) and caught.value.errno == errno.ENOSPC
    assert isinstance(caught.value, StoreError) and isinstance(caught.value, OSError)
    assert target.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["payload.bin"]
    atomic_write_bytes(target, b"new")  # other errors still pass through unchanged; the next write works
    with pytest.raises(FileNotFoundError):
        atomic_write_bytes(tmp_path / f"missing-{uuid.uuid4().hex}" / "x", b"")
    assert target.read_bytes() == b"new"
