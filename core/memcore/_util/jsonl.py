"""Reading JSON Lines files with errors that name the file and line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from ..errors import ValidationError

__all__ = ["read_jsonl"]


def read_jsonl(path: Path) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """``(line number, "path:line", object)`` for each non-blank line of a JSON Lines file.

    A line that is not UTF-8, not JSON or not a JSON object raises :class:`ValidationError`
    naming ``path:line``. A UTF-8 byte-order mark on the first line is ignored.
    """
    with open(path, "rb") as fh:
        for number, data in enumerate(fh, start=1):
            where = f"{path}:{number}"
            try:
                line = data.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise ValidationError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValidationError(f"{where}: invalid JSON ({exc.msg} at column {exc.colno})") from None
            except RecursionError:
                raise ValidationError(f"{where}: JSON nested too deeply") from None
            if not isinstance(item, dict):
                raise ValidationError(f"{where}: expected a JSON object, got {type(item).__name__}")
            yield number, where, item
