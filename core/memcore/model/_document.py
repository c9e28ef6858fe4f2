"""Text filters on the record text (``where_document``), Chroma's shape: parse once, then
evaluate in Python or compile to SQL.

Operators: ``{"$contains": "text"}`` (the record's text holds ``text``, case-sensitive, as
written) and ``{"$not_contains": "text"}`` (it does not), combined with ``{"$and": [...]}``
and ``{"$or": [...]}``. A ``where_document`` is always AND-ed with the ``where`` filter and
the scope of the same call.

Limits (anything else raises :class:`~memcore.errors.FilterError`): one operator per dict;
a non-empty string of at most :data:`MAX_CONTAINS_CHARS` characters without NUL or lone
surrogates; ``$and``/``$or`` nested at most :data:`~memcore.model._filters.MAX_DEPTH` deep
and at most :data:`~memcore.model._filters.MAX_CONDITIONS` conditions in one filter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Union

from ..errors import FilterError
from ._filters import MAX_CONDITIONS, MAX_DEPTH, _join

__all__ = [
    "DocumentFilter",
    "TextCond",
    "TextBool",
    "MAX_CONTAINS_CHARS",
    "parse_where_document",
    "document_matches",
    "document_to_sql",
    "document_key",
    "both",
]

MAX_CONTAINS_CHARS = 4096
"""Longest string one ``$contains`` / ``$not_contains`` takes."""

_TEXT_OPS = ("$contains", "$not_contains")
_BOOL_OPS = ("$and", "$or")


@dataclass(frozen=True, slots=True)
class TextCond:
    """``$contains`` / ``$not_contains`` one string."""

    op: str
    value: str


@dataclass(frozen=True, slots=True)
class TextBool:
    """``$and`` / ``$or`` over text filters."""

    op: str
    children: tuple["DocumentFilter", ...]


DocumentFilter = Union[TextCond, TextBool]


def parse_where_document(where_document: Mapping[str, Any] | None) -> DocumentFilter | None:
    """Validate a ``where_document`` dict and return its tree (None for no filter).

    Raises :class:`FilterError` for anything but Chroma's shape or past the limits."""
    if where_document is None:
        return None
    budget = [MAX_CONDITIONS]
    return _parse(where_document, 0, budget)


def _parse(spec: Any, depth: int, budget: list[int]) -> DocumentFilter:
    if not isinstance(spec, Mapping):
        raise FilterError(f"where_document must be a dict such as {{'$contains': 'text'}}, got {type(spec).__name__}")
    if len(spec) != 1:
        raise FilterError(f"where_document takes exactly one operator per dict ($contains, $not_contains, $and, $or), got {sorted(map(str, spec))}")
    ((op, value),) = spec.items()
    if op in _BOOL_OPS:
        if depth >= MAX_DEPTH:
            raise FilterError(f"where_document nested too deep: $and/$or may be nested at most {MAX_DEPTH} levels")
        if not isinstance(value, (list, tuple)) or not value:
            raise FilterError(f"where_document {op} takes a non-empty list of filters")
        return TextBool(op, tuple(_parse(child, depth + 1, budget) for child in value))
    if op not in _TEXT_OPS:
        raise FilterError(f"unknown where_document operator {op!r}; use $contains, $not_contains, $and or $or")
    if not isinstance(value, str):
        raise FilterError(f"where_document {op} takes a string, got {type(value).__name__}")
    if not value:
        raise FilterError(f"where_document {op} takes a non-empty string")
    if len(value) > MAX_CONTAINS_CHARS:
        raise FilterError(f"where_document {op} takes at most {MAX_CONTAINS_CHARS} characters, got {len(value)}")
    if "\x00" in value:
        raise FilterError(f"where_document {op}: the string contains NUL")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise FilterError(f"where_document {op}: the string is not valid Unicode (it contains a lone surrogate)") from None
    budget[0] -= 1
    if budget[0] < 0:
        raise FilterError(f"where_document too large: at most {MAX_CONDITIONS} conditions in one filter")
    return TextCond(op, value)


def both(first: DocumentFilter | None, second: DocumentFilter | None) -> DocumentFilter | None:
    """``first`` AND ``second`` (either may be None)."""
    if first is None:
        return second
    if second is None or second == first:
        return first
    return TextBool("$and", (first, second))


def document_key(node: DocumentFilter | None) -> Any:
    """A hashable key equal for text filters with the same meaning as written (for caches)."""
    if node is None:
        return None
    if isinstance(node, TextCond):
        return (node.op, node.value)
    return (node.op, tuple(document_key(c) for c in node.children))


def document_matches(node: DocumentFilter | None, text: str) -> bool:
    """Evaluate a parsed text filter against one record's text."""
    if node is None:
        return True
    if isinstance(node, TextCond):
        found = node.value in text
        return found if node.op == "$contains" else not found
    results = (document_matches(child, text) for child in node.children)
    return all(results) if node.op == "$and" else any(results)


def document_to_sql(node: DocumentFilter | None, column: str = "text") -> tuple[str, list[Any]]:
    """Compile a parsed text filter to an SQLite boolean expression over a TEXT ``column``
    (``instr``: case-sensitive, exact, as :func:`document_matches`)."""
    params: list[Any] = []
    if node is None:
        return "1", params
    return _to_sql(node, column, params), params


def _to_sql(node: DocumentFilter, column: str, params: list[Any]) -> str:
    if isinstance(node, TextCond):
        params.append(node.value)
        return f"(instr({column}, ?) {'>' if node.op == '$contains' else '='} 0)"
    joiner = " AND " if node.op == "$and" else " OR "
    return _join([_to_sql(child, column, params) for child in node.children], joiner)  # balanced: SQLite's depth stays ~log2
