"""Input checks shared by every layer: texts, ids, vectors, JSON values, ``k``.

Each check raises :class:`memcore.ValidationError` (or :class:`memcore.DimensionError`)
with a message naming what was wrong; none of them changes its input.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import DimensionError, ValidationError


MAX_ID_CHARS = 512
"""The longest record id accepted."""
MAX_TEXT_CHARS = 1_000_000
"""Texts longer than this are rejected (a memory is not a book; split it first)."""

MAX_VECTOR_NORM = 1e18
"""The largest L2 norm a vector may have. Squared norms, inner products and squared L2
distances of any two such vectors stay below ~4e36, far from the float32 maximum (3.4e38):
every index computes them in float32, where larger values overflow to infinity."""

MIN_VECTOR_NORM = 1e-18
"""The smallest L2 norm of a non-zero vector: below it the float32 squared norm
underflows, and normalising (cosine) would silently turn the vector into zeros."""


def check_unicode(value: str, what: str) -> None:
    """Reject strings that cannot be stored as UTF-8 (lone surrogates)."""
    if value.isascii():  # the common case: no encoding needed to know
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(f"{what} is not valid Unicode (it contains a lone surrogate)") from None


def as_vector(value: Any, *, what: str = "vector", dim: int | None = None) -> np.ndarray:
    """Convert ``value`` to a 1-d float32 array, rejecting NaN/inf and wrong dimensions."""
    if type(value) is np.ndarray and value.dtype is _F32 and value.ndim == 1 and value.size:  # the common case, checked cheaply
        if dim is not None and value.shape[0] != dim:
            raise DimensionError(f"{what} has dimension {value.shape[0]}, expected {dim}")
        _check_one(value, what)
        return value
    if np.iscomplexobj(value):
        raise ValidationError(f"{what} is complex; vectors are real numbers")
    try:
        with np.errstate(over="ignore"):  # values beyond float32 become inf and are refused below
            arr = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{what} is not numeric: {exc}") from None
    if arr.ndim != 1 or arr.size == 0:
        raise DimensionError(f"{what} must be a non-empty 1-d array, got shape {arr.shape}")
    if dim is not None and arr.shape[0] != dim:
        raise DimensionError(f"{what} has dimension {arr.shape[0]}, expected {dim}")
    _check_one(arr, what)
    return arr


_F32 = np.dtype(np.float32)
# The float32 squared norms below overflow only for vectors that are refused anyway (a norm
# above 1e18): numpy's warning about it would only repeat the ValidationError raised next.
# Scoped to this module's own calls; with warnings turned into errors the exact path decides.
warnings.filterwarnings("ignore", message="overflow encountered in (dot|einsum)", category=RuntimeWarning, module=r"memcore\.model\._checks$")
_FAST_LOW = 4 * MIN_VECTOR_NORM**2
_FAST_HIGH = MAX_VECTOR_NORM**2 / 4
"""A float32 squared norm strictly between these accepts a vector without a float64 pass.

Sound: the sum of squares is finite only when every value is (squares are never negative,
nothing cancels; NaN fails every comparison); float32 rounding moves it by a relative
~n * 6e-8 and underflow only lowers it, far inside the factor-4 margins around
:data:`MIN_VECTOR_NORM` squared and :data:`MAX_VECTOR_NORM` squared. Anything else (zero,
tiny, huge, overflowing, non-finite) takes the exact float64 path."""


def _query_vector(value: Any, space: Any) -> np.ndarray:
    """:func:`as_vector` for a query's vector, its error message built only when needed."""
    if type(value) is np.ndarray and value.dtype is _F32 and value.ndim == 1 and value.size:
        try:  # _fine(value), inlined: this runs for every query
            if _FAST_LOW < float(value.dot(value)) < _FAST_HIGH:
                return value
        except RuntimeWarning:  # overflow, with warnings turned into errors: the exact path decides
            pass
    return as_vector(value, what=f"query vector {space!r}")


def _fine(vector: np.ndarray) -> bool:
    """True when a 1-d float32 vector surely passes :func:`_check_one`: its float32 squared
    norm lies strictly between :data:`_FAST_LOW` and :data:`_FAST_HIGH`, where float32
    rounding cannot move it across a bound. NaN, infinity, overflow, underflow and anything
    near a bound answer False (the exact check decides)."""
    try:
        return _FAST_LOW < float(vector.dot(vector)) < _FAST_HIGH  # the method: a third cheaper than np.dot
    except RuntimeWarning:  # overflow, with warnings turned into errors
        return False


def _check_one(vector: np.ndarray, what: str) -> None:
    """:func:`check_finite_vectors` for one 1-d vector: one float32 dot product in the common
    case (see :func:`_fine`), else one float64 dot product. Its squared norm is finite
    exactly when every value is, and then the norm decides; otherwise the full check names
    the problem."""
    if vector.dtype is _F32 and _fine(vector):
        return
    wide = vector.astype(np.float64)
    squared = float(wide @ wide)
    if math.isfinite(squared):
        norm = math.sqrt(squared)
        if norm <= MAX_VECTOR_NORM and (norm == 0 or norm >= MIN_VECTOR_NORM):
            return
    check_finite_vectors(vector.reshape(1, -1), what)


def check_finite_vectors(matrix: np.ndarray, what: str = "vectors") -> None:
    """Reject rows that float32 arithmetic cannot handle: NaN/inf values, a norm above
    :data:`MAX_VECTOR_NORM` (squares and distances would overflow) or a non-zero norm
    below :data:`MIN_VECTOR_NORM` (normalisation would turn the row into zeros).

    ``matrix`` is a 2-d float array, one vector per row; the norms are computed in float64
    unless every float32 row passes the float32 squared-norm test of :data:`_FAST_HIGH`.
    """
    if matrix.dtype == np.float32 and matrix.ndim == 2 and matrix.shape[0]:
        try:
            squares = np.einsum("ij,ij->i", matrix, matrix)
            if bool((squares > _FAST_LOW).all()) and bool((squares < _FAST_HIGH).all()):
                return
        except RuntimeWarning:  # overflow, with warnings turned into errors: the exact path decides
            pass
    if not np.isfinite(matrix).all():
        row = int(np.flatnonzero(~np.isfinite(matrix).all(axis=1))[0])
        raise ValidationError(f"{what} contains NaN or infinite values" + (f" (row {row})" if matrix.shape[0] > 1 else ""))
    wide = matrix.astype(np.float64, copy=False)
    norms = np.sqrt(np.einsum("ij,ij->i", wide, wide))
    bad = (norms > MAX_VECTOR_NORM) | ((norms > 0) & (norms < MIN_VECTOR_NORM))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        where = f" (row {row})" if matrix.shape[0] > 1 else ""
        raise ValidationError(
            f"{what}{where} has L2 norm {norms[row]:.3g}; vectors need a norm of 0 or between "
            f"{MIN_VECTOR_NORM:g} and {MAX_VECTOR_NORM:g} so that float32 arithmetic stays finite and exact (scale it)"
        )


MAX_JSON_DEPTH = 32
"""Deepest nesting of dicts/lists accepted in metadata and state values."""


def check_json_value(value: Any, what: str) -> None:
    """Walk a JSON-like value without recursion and apply the same rules at every depth:
    dict keys are non-empty strings without NUL, integers fit in 64 bits, strings have no NUL,
    floats are finite, nesting is at most :data:`MAX_JSON_DEPTH`; anything else is a ValidationError."""
    stack: list[tuple[Any, int, str]] = [(value, 0, what)]
    while stack:
        item, depth, where = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise ValidationError(f"{what} is nested more than {MAX_JSON_DEPTH} levels deep")
        if isinstance(item, Mapping):
            for key, sub in item.items():
                if not isinstance(key, str) or not key or "\x00" in key:
                    raise ValidationError(f"{where}: keys must be non-empty strings without NUL, got {key!r}")
                stack.append((sub, depth + 1, f"{where}.{key}"))
        elif isinstance(item, (list, tuple)):
            stack.extend((sub, depth + 1, f"{where}[{i}]") for i, sub in enumerate(item))
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if not -(2**63) <= item < 2**63:
                raise ValidationError(f"{where}: integer {item} does not fit in 64 bits (filters compare 64-bit integers)")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise ValidationError(f"{where}: {item} is not a finite number (JSON has no NaN/inf)")
        elif isinstance(item, str):
            if "\x00" in item:
                raise ValidationError(f"{where}: text contains a NUL character (SQLite filters cannot compare it)")
            check_unicode(item, where)
        else:
            raise ValidationError(f"{where}: a {type(item).__name__} is not JSON (use dicts, lists, strings, numbers, booleans, null)")


def _plain_text(value: str) -> bool:
    """No NUL and encodable as UTF-8 (no lone surrogate)."""
    if "\x00" in value:
        return False
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def validate_k(k: Any) -> int:
    """Reject k that is not a positive int (bools included); indexes cap it at their size."""
    if type(k) is int and k > 0:  # the common case, checked cheaply (bool is not int by type)
        return k
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k <= 0:
        raise ValidationError(f"k must be a positive integer, got {k!r}")
    return int(k)


def check_page(offset: Any, limit: Any) -> None:
    """A page of results: ``offset`` a non-negative int, ``limit`` None or a non-negative int
    (:class:`ValidationError` otherwise)."""
    if type(offset) is not int or offset < 0:
        raise ValidationError(f"offset must be a non-negative int, not {offset!r}")
    if limit is not None and (type(limit) is not int or limit < 0):
        raise ValidationError(f"limit must be a non-negative int, not {limit!r}")


def validate_min_score(value: Any) -> float | None:
    """``min_score`` of a retrieval: None (no cut) or a finite real number (bools and NaN
    or infinities are refused with :class:`ValidationError`)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not np.isfinite(value):
        raise ValidationError(f"min_score must be a finite number, got {value!r}")
    return float(value)
