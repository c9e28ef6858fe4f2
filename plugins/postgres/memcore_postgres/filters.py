"""The core's parsed ``where`` filter compiled to SQL over a ``jsonb`` column.

The semantics are the core's (:func:`memcore.plugin.matches`, the SQLite store's
``to_sql``): ``$eq``/``$in`` match only a field of the same kind (numbers compare as
numbers, booleans only booleans, strings only strings), ``$ne``/``$nin`` are their
negations (so they match records without the field), ``$gt``-``$lte`` match only fields of
the value's kind. How the differences of PostgreSQL are absorbed:

- **strings** compare by code point: ``COLLATE "C"`` over UTF-8 (byte order is code point
  order), whatever the database's collation. PostgreSQL text holds no NUL: a comparison with
  a value holding NUL is rewritten on the part before it (stored texts never hold NUL);
- **numbers** compare as ``numeric`` (exact): a filter's integer exactly, a float by its
  shortest repr, and a float of magnitude 2**53 or more (always an integer) by its exact
  digits -- the same rule that writes them into stored metadata (:func:`metadata_json`),
  so int/float comparisons are exact as in Python. Infinite bounds are numeric's
  ``Infinity``;
- every cast sits inside ``CASE WHEN jsonb_typeof(...) = 'number'`` (PostgreSQL does not
  promise to evaluate ``AND`` left to right).

Field names are checked by the core's parser (letters, digits, ``_``, ``-``: no quote can
appear) and checked again here before they are written as SQL literals (so an expression
index on ``metadata -> 'field'`` can serve a condition); values are always parameters.
"""

from __future__ import annotations

import json
import math
from typing import Any

import re

from memcore.plugin import BoolNode, Cond, Filter, FilterError

__all__ = ["compile_filter", "metadata_json", "number_text"]

_BIG = 2.0**53
FIELD_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
_COMPARE = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def number_text(value: int | float) -> str:
    """The decimal text of a number as the store writes and compares it: integers exactly,
    floats by their shortest repr (``repr``) below 2**53 and by their exact integer digits
    (with ``.0``, so they read back as floats) from 2**53 on; infinities as numeric's."""
    if isinstance(value, float):
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        if abs(value) >= _BIG:
            return f"{int(value)}.0"
        return repr(value)
    return str(int(value))


def metadata_json(metadata: dict[str, Any]) -> str:
    """The JSON text stored for a record's metadata: ``json.dumps``, except that top-level
    floats of magnitude 2**53 or more are written with their exact digits (see
    :func:`number_text`), so filters compare them exactly with integers."""
    if not any(type(v) is float and abs(v) >= _BIG for v in metadata.values()):
        return json.dumps(metadata)
    parts = [f"{json.dumps(k)}: {number_text(v) if type(v) is float and abs(v) >= _BIG else json.dumps(v)}" for k, v in metadata.items()]
    return "{" + ", ".join(parts) + "}"


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    return "null"


def compile_filter(node: Filter | None, column: str, params: list[Any]) -> str:
    """A boolean SQL expression for ``node`` over the jsonb ``column`` (a trusted SQL
    expression such as ``r.metadata``); its parameters are appended to ``params``."""
    if node is None:
        return "TRUE"
    return _compile(node, column, params)


def _compile(node: Filter, column: str, params: list[Any]) -> str:
    if isinstance(node, BoolNode):
        joiner = " AND " if node.op == "$and" else " OR "
        return "(" + joiner.join(_compile(child, column, params) for child in node.children) + ")"
    assert isinstance(node, Cond)
    op, value = node.op, node.value
    if op in ("$eq", "$ne"):
        expr = _eq(node.field, value, column, params)
        return expr if op == "$eq" else f"(NOT COALESCE({expr}, FALSE))"
    if op in ("$in", "$nin"):
        expr = _in(node.field, value, column, params)
        return expr if op == "$in" else f"(NOT COALESCE({expr}, FALSE))"
    return _compare(node.field, _COMPARE[op], value, column, params)


def _field(field: str, column: str, params: list[Any]) -> str:
    if not FIELD_PATTERN.match(field):  # the parser checked it; never splice anything else
        raise FilterError(f"bad field name {field!r}")
    return f"({column} -> '{field}')"


def _eq(field: str, value: Any, column: str, params: list[Any]) -> str:
    kind = _kind(value)
    if kind == "null":
        return f"(jsonb_typeof{_field(field, column, params)} = 'null')"
    if kind == "string" and "\x00" in value:
        return "FALSE"  # stored texts never hold NUL
    if kind == "number" and isinstance(value, float) and math.isinf(value):
        return "FALSE"  # stored numbers are finite
    if kind == "number":
        ref = _field(field, column, params)
        params.append(number_text(value))
        return f"(CASE WHEN jsonb_typeof{ref} = 'number' THEN {ref}::numeric = %s::numeric ELSE FALSE END)"
    if kind == "string":
        ref = _field(field, column, params)
        params.append(value)
        return f"(jsonb_typeof{ref} = 'string' AND ({ref} #>> '{{}}') = %s::text)"
    ref = _field(field, column, params)
    params.append("true" if value else "false")
    return f"({ref} = %s::jsonb)"


def _in(field: str, values: tuple[Any, ...], column: str, params: list[Any]) -> str:
    groups: dict[str, list[Any]] = {}
    for v in values:
        if (isinstance(v, str) and "\x00" in v) or (isinstance(v, float) and math.isinf(v)):
            continue  # no stored value equals these
        groups.setdefault(_kind(v), []).append(v)
    parts = []
    for kind, vs in groups.items():
        if len(vs) == 1:
            parts.append(_eq(field, vs[0], column, params))
            continue
        ref = _field(field, column, params)
        if kind == "number":
            params.append([number_text(v) for v in vs])
            parts.append(f"(CASE WHEN jsonb_typeof{ref} = 'number' THEN {ref}::numeric = ANY(%s::numeric[]) ELSE FALSE END)")
        elif kind == "string":
            params.append(vs)
            parts.append(f"(jsonb_typeof{ref} = 'string' AND ({ref} #>> '{{}}') = ANY(%s::text[]))")
        else:  # booleans
            params.append(["true" if v else "false" for v in vs])
            parts.append(f"({ref} = ANY(%s::jsonb[]))")
    if not parts:
        return "FALSE"
    return "(" + " OR ".join(parts) + ")"


def _compare(field: str, sql_op: str, value: Any, column: str, params: list[Any]) -> str:
    ref = _field(field, column, params)
    if isinstance(value, str):
        if "\x00" in value:
            # stored texts hold no NUL: x > p+"\0"+r  <=>  x > p, and x < p+"\0"+r  <=>  x <= p
            value = value.split("\x00", 1)[0]
            sql_op = {">": ">", ">=": ">", "<": "<=", "<=": "<="}[sql_op]
        params.append(value)
        return f"(jsonb_typeof{ref} = 'string' AND (({ref} #>> '{{}}') COLLATE \"C\") {sql_op} (%s::text COLLATE \"C\"))"
    params.append(number_text(value))
    return f"(CASE WHEN jsonb_typeof{ref} = 'number' THEN {ref}::numeric {sql_op} %s::numeric ELSE FALSE END)"
