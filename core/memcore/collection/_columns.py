"""A batch given as columns, validated into records: what :meth:`Collection.insert_columns` takes.

The columns are ``texts`` (one string per record), ``ids`` (None: derived from the content,
as :meth:`memcore.Record.create` derives them), ``metadata`` (``{field: one value per
record}``) and ``vectors`` (``{space: an (n, dim) matrix}``). Each rule of
:meth:`memcore.Record.create` runs once over a column (C-level passes, one squared-norm test
per matrix) instead of once per record, and the records come out as a
:class:`~memcore.model._record_rows.RecordRows` that keeps each space's matrix and the
metadata JSON for the rest of the write path.

When any value breaks a rule, the batch is built record by record through the path of
:meth:`memcore.Collection.insert` (:func:`~memcore.collection._input.coerce_records`), which
raises the typed error that names the record -- the same error ``insert`` raises for the
same records given as dicts -- so nothing is written. A batch that only the column checks
are too strict for (an id repeated with identical content, a vector norm near a bound) is
accepted as ``insert`` accepts it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from itertools import repeat
from operator import call
from typing import Any, Callable

import numpy as np

from ..embedders._embedder import Space
from ..errors import DimensionError, ValidationError
from ..model._checks import _FAST_HIGH, _FAST_LOW, MAX_ID_CHARS, MAX_TEXT_CHARS
from ..model._record import Record, Scope, content_id
from ..model._record_rows import RecordRows
from ._input import _plain_column, _unicode_clean, coerce_records, scalar_kinds

__all__ = ["coerce_columns", "columns_as_items"]

_STR = {str}
_encode_str: Callable[[str], str] = json.encoder.encode_basestring_ascii  # the C function json.dumps uses (ensure_ascii)


def _scalar_json(value: Any) -> str:
    """``json.dumps(value)`` of one metadata scalar (str, int, float, bool or None)."""
    kind = type(value)
    if kind is str:
        return _encode_str(value)
    if kind is bool:
        return "true" if value else "false"
    if value is None:
        return "null"
    return repr(value)  # int and float: what json.dumps writes for them (floats are finite here)


_KIND_JSON: dict[type, Callable[[Any], str]] = {str: _encode_str, int: int.__repr__, float: float.__repr__}


def _as_list(column: Any, what: str) -> list[Any]:
    """A column as a list: a list, a tuple or another sequence, or a 1-d numpy array (its
    values as Python scalars); anything else is a :class:`ValidationError`."""
    if type(column) is list:
        return column
    if isinstance(column, np.ndarray):
        if column.ndim != 1:
            raise ValidationError(f"{what} must be a 1-d column, got an array of shape {column.shape}")
        values: list[Any] = column.tolist()
        return values
    if isinstance(column, (str, bytes, Mapping)) or not isinstance(column, Sequence):
        raise ValidationError(f"{what} must be a list (or a 1-d array) with one value per record, got {type(column).__name__}")
    return list(column)


def _matrix(name: Any, value: Any, n: int, spaces: Mapping[str, Space]) -> np.ndarray:
    """The vectors of one space as an owned, read-only ``(n, dim)`` float32 matrix (a copy:
    the caller's array can change afterwards); not-a-matrix, another row count or another
    dimension is an error (finiteness is checked by the caller)."""
    if type(name) is not str or name not in spaces:
        raise ValidationError(f"vectors given for undeclared space {name!r}; spaces: {sorted(spaces)}")
    if np.iscomplexobj(value):
        raise ValidationError(f"the vectors of space {name!r} are complex; vectors are real numbers")
    try:
        with np.errstate(over="ignore"):  # values beyond float32 become inf and are refused with the norms
            matrix = np.array(value, dtype=np.float32, order="C", copy=True)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"the vectors of space {name!r} are not numeric: {exc}") from None
    if matrix.ndim != 2:
        raise DimensionError(f"the vectors of space {name!r} must be an (n, dim) matrix, one row per record; got shape {matrix.shape}")
    if matrix.shape[0] != n:
        raise ValidationError(f"the vectors of space {name!r} have {matrix.shape[0]} rows for {n} records: every column needs one value per record")
    dim = spaces[name].dim
    if matrix.shape[1] != dim:
        raise DimensionError(f"the vectors of space {name!r} have dimension {matrix.shape[1]}, expected {dim}")
    matrix.flags.writeable = False
    return matrix


def _norms_fine(matrix: np.ndarray) -> bool:
    """Every row surely passes :func:`memcore.model.check_finite_vectors` (the float32
    squared-norm test of ``records._fine``, one pass over the matrix)."""
    try:
        squares = np.einsum("ij,ij->i", matrix, matrix)
    except RuntimeWarning:  # overflow, with warnings turned into errors: the per-record path decides
        return False
    return bool((squares > _FAST_LOW).all()) and bool((squares < _FAST_HIGH).all())


def _strings_fine(ids: list[Any], texts: list[Any]) -> bool:
    """The ids and texts pass :meth:`Record.create`'s rules and no id repeats."""
    if {*map(type, ids)} != _STR or {*map(type, texts)} != _STR:
        return False
    if not all(ids) or max(map(len, ids)) > MAX_ID_CHARS or len(set(ids)) != len(ids) or not _unicode_clean(ids):
        return False
    return all(texts) and not any(map(str.isspace, texts)) and max(map(len, texts)) <= MAX_TEXT_CHARS and _unicode_clean(texts)


def _column_json(values: list[Any]) -> list[str] | None:
    """The JSON text of each value of a metadata column when every value is a scalar that
    :func:`memcore.model._record._flat_copy` accepts (None: the per-record path decides)."""
    kinds = scalar_kinds(values)
    if kinds is None:
        return None
    if len(kinds) == 1:
        (kind,) = kinds
        encode = _KIND_JSON.get(kind)
        if encode is not None:
            return list(map(encode, values))
    return list(map(_scalar_json, values))


def _metadata(columns: dict[str, list[Any]], n: int) -> tuple[list[dict[str, Any]], list[str]] | None:
    """Each record's metadata dict (keys sorted, as the per-record path copies them) and its
    JSON text (what the store writes), when every key and value passes the rules (None otherwise)."""
    keys = sorted(columns)
    if not keys:
        return [{} for _ in range(n)], ["{}"] * n
    if {*map(type, keys)} != _STR or not all(keys) or not _plain_column(keys):
        return None
    parts: list[Any] = []
    for i, key in enumerate(keys):
        encoded = _column_json(columns[key])
        if encoded is None:
            return None
        parts += [repeat(("{" if i == 0 else ", ") + _encode_str(key) + ": "), encoded]
    texts = list(map("".join, zip(*parts, repeat("}"))))
    dicts = list(map(dict, map(zip, repeat(keys), zip(*[columns[key] for key in keys]))))
    return dicts, texts


def coerce_columns(texts: Any, ids: Any, metadata: Any, vectors: Any, scope: Scope | None, spaces: Mapping[str, Space]) -> list[Record]:
    """Validate a batch of columns into fresh records (the caller's columns are never changed).

    Every column needs one value per record (a :class:`ValidationError` names the one that
    does not); the records pass exactly the rules of :meth:`memcore.Collection.insert`, and a
    record that breaks one raises the error ``insert`` raises for it. An empty batch is a
    :class:`ValidationError`.
    """
    text_list, id_list, columns = _column_lists(texts, ids, metadata, vectors, {})
    n = len(text_list)
    if n == 0:
        raise ValidationError("nothing to write: the batch is empty")
    matrices = {name: _matrix(name, value, n, spaces) for name, value in (vectors or {}).items()}
    if scope is not None and scope.is_empty():
        scope = None
    built = _metadata(columns, n)
    fine = built is not None and all(map(_norms_fine, matrices.values()))
    if fine and built is not None:
        metas, meta_json = built
        if id_list is None:
            id_list = list(map(content_id, text_list, metas, repeat(scope)))
        fine = _strings_fine(id_list, text_list)
    if not fine or built is None or id_list is None:  # some value breaks a rule: insert's path names it (or accepts the batch)
        return _per_record(text_list, id_list, columns, matrices, scope, spaces)
    rows = {name: list(matrix) for name, matrix in matrices.items()}
    if len(rows) == 1:
        ((name, column),) = rows.items()
        vecs = [{name: row} for row in column]
    else:
        names = list(rows)
        vecs = list(map(dict, map(zip, repeat(names), zip(*rows.values())))) if names else [{} for _ in range(n)]
    stamps = list(map(call, repeat(time.time, n)))  # created_at == updated_at, one reading per record as Record.create takes it
    records = list(map(Record, id_list, text_list, metas, vecs, repeat(()), repeat(scope), stamps, stamps))
    return RecordRows(records, matrices, meta_json)


def _per_record(
    texts: list[Any],
    ids: list[Any] | None,
    columns: dict[str, list[Any]],
    matrices: dict[str, np.ndarray],
    scope: Scope | None,
    spaces: Mapping[str, Space],
) -> list[Record]:
    """The batch as the dicts ``insert`` takes, validated by its path (the error naming the
    first bad record, or the records it builds)."""
    return coerce_records(_items(texts, ids, columns, matrices), scope, spaces)


def _column_lists(texts: Any, ids: Any, metadata: Any, vectors: Any, more: Mapping[str, int]) -> tuple[list[Any], list[Any] | None, dict[str, list[Any]]]:
    """Texts, ids and metadata columns as lists, after the checks of the columns themselves:
    containers, ``metadata`` and ``vectors`` dicts, one value per record in ids, each
    metadata column and each of ``more`` (what -> length) (a :class:`ValidationError` naming
    the columns that are not)."""
    text_list = _as_list(texts, "texts")
    n = len(text_list)
    id_list = None if ids is None else _as_list(ids, "ids")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ValidationError(f"metadata must be a dict of columns {{field: one value per record}}, got {type(metadata).__name__}")
    if vectors is not None and not isinstance(vectors, Mapping):
        raise ValidationError(f"vectors must be a dict of matrices {{space: (n, dim) array}}, got {type(vectors).__name__}")
    columns = {key: _as_list(column, f"metadata column {key!r}") for key, column in (metadata or {}).items()}
    lengths = {"ids": len(id_list) if id_list is not None else n, **{f"metadata column {key!r}": len(c) for key, c in columns.items()}, **more}
    wrong = [f"{what} has {count}" for what, count in lengths.items() if count != n]
    if wrong:
        raise ValidationError(f"every column needs one value per record: texts has {n}, " + ", ".join(wrong))
    return text_list, id_list, columns


def _items(texts: list[Any], ids: list[Any] | None, columns: Mapping[str, list[Any]], matrices: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One ``insert`` dict per record of the columns (checked to have one value per record)."""
    items: list[dict[str, Any]] = []
    for i in range(len(texts)):
        item: dict[str, Any] = {"text": texts[i], "metadata": {key: column[i] for key, column in columns.items()}}
        if ids is not None:
            item["id"] = ids[i]
        if matrices:
            item["vectors"] = {name: matrix[i] for name, matrix in matrices.items()}
        items.append(item)
    return items


def columns_as_items(texts: Any, ids: Any = None, metadata: Any = None, vectors: Any = None) -> list[dict[str, Any]]:
    """The batch as the dicts :meth:`memcore.Collection.insert` takes, one per record (what
    a service without a column path of its own inserts), after the checks of the columns
    themselves: containers, one value per record in each (a :class:`ValidationError`
    otherwise). The records' own rules are left to ``insert``."""
    rows: dict[str, Any] = {}
    for name, value in (vectors or {}).items() if isinstance(vectors, Mapping) else ():
        array = np.asarray(value)
        if array.ndim != 2:
            raise DimensionError(f"the vectors of space {name!r} must be an (n, dim) matrix, one row per record; got shape {array.shape}")
        rows[name] = array
    text_list, id_list, columns = _column_lists(texts, ids, metadata, vectors, {f"the vectors of space {name!r}": len(a) for name, a in rows.items()})
    return _items(text_list, id_list, columns, rows)
