"""Index names of the server: ``{workspace}_{kb}_{table}``, one directory each under the root.

A name is 1-128 characters of ASCII letters, digits, ``_`` and ``-``, starting with a
letter or digit: no ``/``, ``\\``, ``.`` or anything else that could leave the root.
"""

from __future__ import annotations

import re

from memcore.plugin import ValidationError

__all__ = ["check_index_name", "index_name", "check_pid", "check_unicode"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")
_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,40}$")
_MAX_PID = 512


def check_index_name(name: object) -> str:
    """``name`` when it is a safe index name, else ValidationError."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValidationError(
            f"invalid index name {name!r}: use 1-128 ASCII letters, digits, '_' or '-', starting with a letter or digit "
            "(e.g. '{workspace}_{kb}_{table}'); no path separators or dots"
        )
    return name


def index_name(workspace: str, kb: str, table: str) -> str:
    """The multi-tenant name ``{workspace}_{kb}_{table}``; each part letters, digits and '-'."""
    for what, part in (("workspace", workspace), ("kb", kb), ("table", table)):
        if not isinstance(part, str) or not _PART.match(part):
            raise ValidationError(f"invalid {what} {part!r} for an index name: 1-41 ASCII letters, digits or '-'")
    return f"{workspace}_{kb}_{table}"


def check_pid(pid: object, where: str) -> str:
    """A passage id: a non-empty string without tabs, newlines or control characters."""
    if not isinstance(pid, str) or not pid or len(pid) > _MAX_PID or any(ord(c) < 32 for c in pid):
        raise ValidationError(f"{where}: invalid passage id {pid!r} (1-{_MAX_PID} characters, no tabs or control characters)")
    return check_unicode(pid, f"{where}: passage id")


def check_unicode(text: str, where: str) -> str:
    """``text`` when it is valid Unicode (encodable as UTF-8); ValidationError for a lone
    surrogate (JSON's ``"\\ud800"`` decodes to one): stored, it could never be sent back."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(
            f"{where} holds a lone surrogate (U+{ord(text[exc.start]):04X} at character {exc.start}), which is not valid Unicode text"
        ) from None
    return text
