"""The manifest of an embedded Chroma folder: its files as they were when Chroma last let go of them.

Chroma rewrites its files whenever a client opens the folder (``chroma.sqlite3`` at every
open, the HNSW files of a collection it loads), so they cannot be checked against a checksum
taken at an index's ``save``. What can be checked is whether anything touched them while no
client had them open. ``memcore-manifest.json`` in the Chroma folder (written atomically):

- ``{"state": "open", "token"}``: written when a memcore instance opens the folder for
  writing. Found at the next open, it means that instance never closed (a crash): the files
  may hold writes after the last save, legitimately, so they are *probed*;
- ``{"state": "closed", "token", "files": {path: [size, sha256]}}``: written when the last
  instance of the process released its client. Found at the next open, every file must
  still have exactly that size and checksum; anything else is damage (a
  :class:`~memcore.CorruptError` naming the file: the index is rebuilt from the store).

A folder without a readable manifest (saved by an older memcore-chroma-support, or the
manifest itself damaged) is probed too. :func:`probe_folder` checks the HNSW files in Python
(:mod:`.hnsw_files`) and SQLite's ``quick_check`` on ``chroma.sqlite3``, then opens the
collection in a child process (:mod:`.probe`): counting, reading and querying it there, so
that a crash of Chroma's native code kills the child, not the application.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from memcore.plugin import CorruptError, atomic_write_json

from .hnsw_files import check_folder

__all__ = ["MANIFEST_FILE", "read_manifest", "mark_open", "seal", "verify_sealed", "probe_folder", "PROBE_TIMEOUT"]

MANIFEST_FILE = "memcore-manifest.json"
_NOT_CHROMA = {MANIFEST_FILE, "pending.json"}
PROBE_TIMEOUT = 120.0


def _files(folder: Path) -> dict[str, tuple[int, str]]:
    out: dict[str, tuple[int, str]] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name not in _NOT_CHROMA and not path.name.endswith(".tmp"):
            h = hashlib.sha256()
            with open(path, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            out[path.relative_to(folder).as_posix()] = (path.stat().st_size, h.hexdigest())
    return out


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The manifest of ``folder`` (None: missing or unreadable)."""
    try:
        data = json.loads((Path(folder) / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("state") in ("open", "closed") and isinstance(data.get("token"), str) else None


def mark_open(folder: Path) -> str:
    """Record that a writer has ``folder`` open; returns the token :func:`seal` checks."""
    token = uuid.uuid4().hex
    atomic_write_json(Path(folder) / MANIFEST_FILE, {"state": "open", "token": token})
    return token


def seal(folder: Path, token: str | None) -> bool:
    """Write the closed manifest (every file's size and SHA-256) when the manifest still
    carries ``token`` (nobody else opened the folder since); returns whether it did."""
    folder = Path(folder)
    current = read_manifest(folder)
    if token is None or current is None or current.get("token") != token or not folder.is_dir():
        return False
    atomic_write_json(folder / MANIFEST_FILE, {"state": "closed", "token": uuid.uuid4().hex, "files": _files(folder)})
    return True


def verify_sealed(folder: Path, manifest: dict[str, Any], where: str) -> None:
    """Check every file of ``folder`` against a closed ``manifest``; CorruptError naming the first difference."""
    saved = manifest.get("files")
    if not isinstance(saved, dict):
        raise CorruptError(f"{where}: {MANIFEST_FILE} lists no files")
    found = _files(folder)
    for name in sorted(set(saved) | set(found)):
        if name not in found:
            raise CorruptError(f"{where}: chroma/{name} is missing (it was there when Chroma last closed the folder)")
        if name not in saved:
            raise CorruptError(f"{where}: chroma/{name} appeared after Chroma last closed the folder")
        size, digest = found[name]
        entry = saved[name]
        if not isinstance(entry, list) or len(entry) != 2 or entry[0] != size:
            raise CorruptError(f"{where}: chroma/{name} has {size} bytes, not the {entry[0] if isinstance(entry, list) and entry else '?'} it had when closed")
        if entry[1] != digest:
            raise CorruptError(f"{where}: chroma/{name} changed since Chroma last closed the folder (checksum mismatch)")


def _sqlite_check(folder: Path, where: str) -> None:
    db = folder / "chroma.sqlite3"
    if not db.is_file():
        raise CorruptError(f"{where}: chroma/chroma.sqlite3 is missing")
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        try:
            rows = con.execute("PRAGMA quick_check").fetchall()
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise CorruptError(f"{where}: chroma/chroma.sqlite3 cannot be read: {exc}") from None
    if rows != [("ok",)]:
        raise CorruptError(f"{where}: chroma/chroma.sqlite3 fails SQLite's quick_check: {'; '.join(str(r[0]) for r in rows[:3])}")


def probe_folder(folder: Path, collection: str, where: str, timeout: float = PROBE_TIMEOUT) -> dict[str, Any]:
    """Check a folder that was not closed cleanly: the HNSW files and SQLite in Python, then
    the collection opened, counted, read and queried in a child process. Returns what the
    child reported; CorruptError when anything fails, the child's crash (a signal) included."""
    folder = Path(folder)
    _sqlite_check(folder, where)
    problems = check_folder(folder)
    if problems:
        raise CorruptError(f"{where}: damaged HNSW files: {'; '.join(problems[:3])}")
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "memcore_chroma_support.probe", str(folder), collection],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        raise CorruptError(f"{where}: probing the Chroma folder took more than {timeout:.0f} s") from None
    if done.returncode != 0:
        why = f"signal {-done.returncode}" if done.returncode < 0 else (done.stderr.strip().splitlines() or ["exit status %d" % done.returncode])[-1]
        raise CorruptError(f"{where}: Chroma cannot read its folder (probe: {why[:300]})")
    try:
        report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise CorruptError(f"{where}: the Chroma probe printed no report") from None
    return report
