"""Metadata filters (``where``): parse once, then evaluate in Python or compile to SQL.

Operators: ``$eq $ne $gt $gte $lt $lte $in $nin`` on fields, ``$and $or`` over filters.
A bare value means ``$eq``; several fields in one dict are AND-ed.

Semantics (the same in every store):

- ``$eq``/``$in`` match only when the field exists and equals (numbers compare as numbers,
  booleans only equal booleans, strings only strings);
- ``$ne``/``$nin`` are their negation, so they also match records without the field
  (as in MongoDB);
- ``$gt $gte $lt $lte`` take a number or a string and match only fields of the same kind.

Limits (a larger filter raises :class:`~memcore.errors.FilterError`): ``$and``/``$or``
nested at most :data:`MAX_DEPTH` deep, at most :data:`MAX_CONDITIONS` field conditions in
one filter, at most :data:`MAX_IN_VALUES` values in one ``$in``/``$nin`` list.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Union

from ..errors import FilterError

__all__ = [
    "Filter",
    "parse_filter",
    "matches",
    "to_sql",
    "filter_key",
    "filter_fields",
    "json_path",
    "FIELD_PATTERN",
    "MAX_DEPTH",
    "MAX_CONDITIONS",
    "MAX_IN_VALUES",
]

FIELD_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
MAX_DEPTH = 32
"""Deepest nesting of ``$and``/``$or`` in one filter."""
MAX_CONDITIONS = 1024
"""Most field conditions (``field op value``) in one filter."""
MAX_IN_VALUES = 100_000
"""Most values in one ``$in`` / ``$nin`` list."""

_COMPARE = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_SCALAR = (str, int, float, bool)


@dataclass(frozen=True, slots=True)
class Cond:
    """``field op value``."""

    field: str
    op: str
    value: Any


@dataclass(frozen=True, slots=True)
class BoolNode:
    """``$and`` / ``$or`` over children."""

    op: str
    children: tuple["Filter", ...]


Filter = Union[Cond, BoolNode]


def parse_filter(where: Mapping[str, Any] | None) -> Filter | None:
    """Validate a ``where`` dict and return its tree (None for no filter).

    Raises :class:`FilterError` for a malformed filter or one past the limits
    (:data:`MAX_DEPTH`, :data:`MAX_CONDITIONS`, :data:`MAX_IN_VALUES`).
    """
    budget = [MAX_CONDITIONS]
    return _parse(where, 0, budget)


def _parse(where: Any, depth: int, budget: list[int]) -> Filter | None:
    if where is None and depth == 0:
        return None
    if not isinstance(where, Mapping):
        raise FilterError(f"where must be a dict, got {type(where).__name__}")
    nodes: list[Filter] = []
    for key, value in where.items():
        if key in ("$and", "$or"):
            if depth >= MAX_DEPTH:
                raise FilterError(f"filter nested too deep: $and/$or may be nested at most {MAX_DEPTH} levels")
            if not isinstance(value, (list, tuple)) or not value:
                raise FilterError(f"{key} takes a non-empty list of filters")
            children = tuple(c for c in (_parse(v, depth + 1, budget) for v in value) if c is not None)
            if len(children) != len(value):
                raise FilterError(f"{key} entries must be non-empty filters")
            nodes.append(BoolNode(key, children))
        elif isinstance(key, str) and key.startswith("$"):
            raise FilterError(f"unknown logical operator {key!r}; use $and or $or")
        else:
            conds = _parse_field(key, value)
            budget[0] -= len(conds)
            if budget[0] < 0:
                raise FilterError(f"filter too large: at most {MAX_CONDITIONS} field conditions in one filter (use $in for many values)")
            nodes.extend(conds)
    if not nodes:
        return None
    return nodes[0] if len(nodes) == 1 else BoolNode("$and", tuple(nodes))


def _parse_field(name: Any, spec: Any) -> list[Cond]:
    if not isinstance(name, str) or not FIELD_PATTERN.match(name):
        raise FilterError(f"bad field name {name!r}: use letters, digits, '_' or '-'")
    if not isinstance(spec, Mapping):
        return [_cond(name, "$eq", spec)]
    if not spec:
        raise FilterError(f"empty operator dict for field {name!r}")
    return [_cond(name, op, value) for op, value in spec.items()]


def _cond(name: str, op: str, value: Any) -> Cond:
    if op in ("$eq", "$ne"):
        if value is not None and not isinstance(value, _SCALAR):
            raise FilterError(f"{name}: {op} takes a string, number, boolean or null")
    elif op in _COMPARE:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise FilterError(f"{name}: {op} takes a number or a string")
    elif op in ("$in", "$nin"):
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, _SCALAR) for v in value):
            raise FilterError(f"{name}: {op} takes a list of strings, numbers or booleans")
        if len(value) > MAX_IN_VALUES:
            raise FilterError(f"{name}: {op} takes at most {MAX_IN_VALUES} values, got {len(value)}")
        value = tuple(value)
    else:
        raise FilterError(f"unknown operator {op!r} for field {name!r}; use $eq $ne $gt $gte $lt $lte $in $nin")
    for v in value if isinstance(value, tuple) else (value,):
        if isinstance(v, float) and v != v:
            raise FilterError(f"{name}: NaN cannot be compared")
        if isinstance(v, int) and not isinstance(v, bool) and not -(2**63) <= v < 2**63:
            raise FilterError(f"{name}: integer {v} does not fit in 64 bits")
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise FilterError(f"{name}: {op} value is not valid Unicode (it contains a lone surrogate)") from None
    return Cond(name, op, value)


# -- identity and fields --------------------------------------------------------------------


def filter_key(node: Filter | None) -> Any:
    """A hashable key equal for filters with the same meaning as written (value kinds
    included: ``1``, ``1.0`` as numbers, ``True`` as a boolean), for caches."""
    if node is None:
        return None
    if isinstance(node, BoolNode):
        return (node.op, tuple(filter_key(c) for c in node.children))
    value = node.value
    if isinstance(value, tuple):
        return (node.field, node.op, tuple((_kind(v), v) for v in value))
    return (node.field, node.op, _kind(value), value)


def _conds(node: Filter) -> Iterator[Cond]:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Cond):
            yield n
        else:
            stack.extend(n.children)


def filter_fields(node: Filter | None) -> list[str]:
    """The metadata fields a filter reads, in first-use order."""
    return [] if node is None else list(dict.fromkeys(c.field for c in _conds(node)))


# -- evaluation in Python ------------------------------------------------------------------

_MISSING = object()


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "num"
    if isinstance(v, str):
        return "str"
    if v is None:
        return "null"
    return "other"


def _equal(actual: Any, expected: Any) -> bool:
    return actual is not _MISSING and _kind(actual) == _kind(expected) and actual == expected


_IN_SETS: dict[int, tuple[tuple[Any, ...], dict[str, frozenset[Any]]]] = {}


def _in_sets(values: tuple[Any, ...]) -> dict[str, frozenset[Any]]:
    """The values of an ``$in`` list grouped by kind, as sets (cached per list object)."""
    entry = _IN_SETS.get(id(values))
    if entry is None or entry[0] is not values:
        groups: dict[str, set[Any]] = {}
        for v in values:
            groups.setdefault(_kind(v), set()).add(v)
        if len(_IN_SETS) > 256:
            _IN_SETS.clear()
        entry = _IN_SETS[id(values)] = (values, {k: frozenset(s) for k, s in groups.items()})
    return entry[1]


def _in(actual: Any, values: tuple[Any, ...]) -> bool:
    if actual is _MISSING or not values:
        return False
    if len(values) <= 8:
        return any(_equal(actual, v) for v in values)
    group = _in_sets(values).get(_kind(actual))
    try:
        return group is not None and actual in group
    except TypeError:  # unhashable (a list or dict): never equal to a scalar
        return False


def _eval_cond(cond: Cond, metadata: Mapping[str, Any]) -> bool:
    actual = metadata.get(cond.field, _MISSING)
    op, value = cond.op, cond.value
    if op == "$eq":
        return _equal(actual, value)
    if op == "$ne":
        return not _equal(actual, value)
    if op == "$in":
        return _in(actual, value)
    if op == "$nin":
        return not _in(actual, value)
    if actual is _MISSING or _kind(actual) != _kind(value):
        return False
    return _PY_COMPARE[op](actual, value)


_PY_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


def matches(node: Filter | None, metadata: Mapping[str, Any]) -> bool:
    """Evaluate a parsed filter against one record's metadata."""
    if node is None:
        return True
    if isinstance(node, Cond):
        return _eval_cond(node, metadata)
    results = (matches(child, metadata) for child in node.children)
    return all(results) if node.op == "$and" else any(results)


# -- compilation to SQLite (JSON1) ---------------------------------------------------------
#
# Paths are SQL literals (json_extract(metadata, '$."field"')), never parameters, so that an
# index on that expression (see memcore.stores.sqlite_fields) can serve the condition.
# $and/$or compile to balanced trees (SQLite's expression depth stays ~log2 of the size)
# and $in/$nin lists to one json_each() table per value kind (any length, 1-3 parameters).

_SQL_TYPES = {"bool": "('true','false')", "num": "('integer','real')", "str": "('text')", "null": "('null')"}


def json_path(field: str) -> str:
    """The SQL literal of the JSON path of a top-level field: ``'$."field"'``."""
    # FIELD_PATTERN excludes quotes; the JSON path quotes the key so '-' is allowed.
    return "'$." + json.dumps(field) + "'"


def _sql_value(v: Any) -> Any:
    return int(v) if isinstance(v, bool) else v


def _sql_eq(path: str, column: str, value: Any, params: list[Any]) -> str:
    kind = _kind(value)
    if kind == "null":
        return f"(json_type({column}, {path}) = 'null')"
    params.append(_sql_value(value))
    return f"(json_type({column}, {path}) IN {_SQL_TYPES[kind]} AND json_extract({column}, {path}) = ?)"


def _sql_in(path: str, column: str, values: tuple[Any, ...], params: list[Any]) -> str:
    """``field IN values``, one ``json_each`` list per kind. Values no stored top-level
    field can hold are left out: texts with NUL (records refuse them; SQLite's JSON cuts
    them) and infinite numbers (metadata is finite JSON)."""
    groups: dict[str, list[Any]] = {}
    for v in values:
        if (isinstance(v, str) and "\x00" in v) or (isinstance(v, float) and v in (_INF, -_INF)):
            continue
        groups.setdefault(_kind(v), []).append(v)
    parts = []
    for kind, vs in groups.items():
        if len(vs) == 1:
            parts.append(_sql_eq(path, column, vs[0], params))
            continue
        params.append(json.dumps(vs, ensure_ascii=False))
        parts.append(f"(json_type({column}, {path}) IN {_SQL_TYPES[kind]} AND json_extract({column}, {path}) IN (SELECT value FROM json_each(?)))")
    return _join(parts, " OR ") if parts else "0"


_INF = float("inf")


def to_sql(node: Filter | None, column: str = "metadata") -> tuple[str, list[Any]]:
    """Compile a parsed filter to an SQLite boolean expression over a JSON ``column``."""
    params: list[Any] = []
    if node is None:
        return "1", params
    return _to_sql(node, column, params), params


def _flatten(node: BoolNode) -> list[Filter]:
    """Children of ``node`` with same-operator children spliced in (a AND (b AND c))."""
    out: list[Filter] = []
    stack = list(reversed(node.children))
    while stack:
        child = stack.pop()
        if isinstance(child, BoolNode) and (child.op == node.op or len(child.children) == 1):
            stack.extend(reversed(child.children))
        else:
            out.append(child)
    return out


def _join(parts: list[str], joiner: str) -> str:
    """``parts`` joined as a balanced tree of parentheses (depth log2(n), not n)."""
    if len(parts) == 1:
        return parts[0]
    mid = len(parts) // 2
    return "(" + _join(parts[:mid], joiner) + joiner + _join(parts[mid:], joiner) + ")"


def _to_sql(node: Filter, column: str, params: list[Any]) -> str:
    if isinstance(node, BoolNode):
        joiner = " AND " if node.op == "$and" else " OR "
        return _join([_to_sql(c, column, params) for c in _flatten(node)], joiner)
    path = json_path(node.field)
    op, value = node.op, node.value
    if op in ("$eq", "$ne"):
        expr = _sql_eq(path, column, value, params)
        return expr if op == "$eq" else f"(NOT COALESCE({expr}, 0))"
    if op in ("$in", "$nin"):
        if not value:
            return "0" if op == "$in" else "1"
        expr = _sql_in(path, column, value, params)
        return expr if op == "$in" else f"(NOT COALESCE({expr}, 0))"
    kind = _kind(value)
    params.append(value)
    return f"(json_type({column}, {path}) IN {_SQL_TYPES[kind]} AND json_extract({column}, {path}) {_COMPARE[op]} ?)"
