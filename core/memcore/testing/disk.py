"""Raw-bytes checks of a memory directory: is a deleted text really gone from disk?

:func:`find_bytes` walks every file under a directory -- hidden files, SQLite's ``-wal``
and ``-shm`` files, an index's ``.previous/`` backup, a plugin's own SQLite or binary
files -- and reports which files hold which needle; :func:`assert_no_bytes` fails with
that report. A needle is searched as UTF-8 and, when it differs, as JSON writes it with
``ensure_ascii`` (``\\u00e9``); pass ``encodings`` for an index that stores text
otherwise (``("utf-8", "utf-16-le")``)::

    memory.delete(scope={"user_id": "bob"})
    memory.close()
    assert_no_bytes(path, ["bob's canary text"])
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Sequence

__all__ = ["find_bytes", "assert_no_bytes", "needle_forms"]

_BLOCK = 1 << 20


def needle_forms(needle: str, encodings: Sequence[str] = ("utf-8",)) -> list[bytes]:
    """The byte strings ``needle`` is searched as: each of ``encodings``, plus its JSON
    ``ensure_ascii`` escape when that differs from its UTF-8 bytes (non-ASCII text)."""
    if not needle:
        raise ValueError("an empty needle matches every file")
    forms = [needle.encode(encoding) for encoding in encodings]
    escaped = json.dumps(needle)[1:-1].encode("ascii")
    if escaped != needle.encode("utf-8"):
        forms.append(escaped)
    return list(dict.fromkeys(forms))


def _holds(path: Path, forms: dict[bytes, str], longest: int) -> set[str]:
    """The needles (by name) found in the file at ``path``, read in blocks that overlap by
    one needle's length so a match across two blocks is found."""
    found: set[str] = set()
    tail = b""
    with open(path, "rb") as fh:
        while True:
            block = fh.read(_BLOCK)
            if not block:
                break
            window = tail + block
            for form, name in forms.items():
                if name not in found and form in window:
                    found.add(name)
            tail = window[-(longest - 1) :] if longest > 1 else b""
    return found


def find_bytes(directory: str | os.PathLike[str], needles: Iterable[str], *, encodings: Sequence[str] = ("utf-8",)) -> dict[str, list[str]]:
    """``{file path relative to directory: [needles it contains]}`` for every regular file
    under ``directory`` (hidden ones included, symbolic links not followed) holding at
    least one of ``needles`` in one of its :func:`needle_forms`."""
    root = Path(directory)
    forms: dict[bytes, str] = {}
    for needle in needles:
        for form in needle_forms(needle, encodings):
            forms.setdefault(form, needle)
    if not forms:
        return {}
    longest = max(map(len, forms))
    report: dict[str, list[str]] = {}
    for folder, _dirs, files in os.walk(root):
        for name in sorted(files):
            path = Path(folder) / name
            if path.is_symlink() or not path.is_file():
                continue
            found = _holds(path, forms, longest)
            if found:
                report[path.relative_to(root).as_posix()] = sorted(found)
    return dict(sorted(report.items()))


def assert_no_bytes(directory: str | os.PathLike[str], needles: Iterable[str], *, encodings: Sequence[str] = ("utf-8",)) -> None:
    """Fail (AssertionError) naming each file under ``directory`` that still holds one of
    ``needles`` (see :func:`find_bytes`)."""
    report = find_bytes(directory, needles, encodings=encodings)
    if report:
        lines = "\n".join(f"  {path}: {', '.join(map(repr, found))}" for path, found in report.items())
        raise AssertionError(f"{len(report)} file(s) under {directory} still hold deleted bytes:\n{lines}")
