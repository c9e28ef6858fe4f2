"""The data model: :class:`Record`, :class:`Link`, :class:`Scope`, :class:`Query`, :class:`Hit`.

A record is the one copy of a memory; indexes hold only ids and what they need.
Scores on hits are always "higher is better"; ``Hit.raw`` keeps the library's own number.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import warnings
from dataclasses import dataclass, field, replace
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from .errors import DimensionError, ValidationError
from .filters import Filter, parse_filter

from .hit import Contribution, Hit

__all__ = ["Scope", "Link", "Record", "Query", "Hit", "Contribution", "content_id", "as_vector", "check_finite_vectors", "MAX_VECTOR_NORM", "MIN_VECTOR_NORM"]

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


@dataclass(frozen=True, slots=True)
class Scope:
    """Who a record belongs to. A scoped read never sees another scope's records.

    A query scope matches a record when every field the query sets equals the record's.
    """

    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None

    def __post_init__(self) -> None:
        for k, v in (("user_id", self.user_id), ("agent_id", self.agent_id), ("run_id", self.run_id)):
            if v is not None:
                if not isinstance(v, str):
                    raise ValidationError(f"scope field {k} must be a string, got {type(v).__name__}")
                check_unicode(v, f"scope field {k}")

    def as_dict(self) -> dict[str, str]:
        """The fields that are set."""
        return {k: v for k, v in (("user_id", self.user_id), ("agent_id", self.agent_id), ("run_id", self.run_id)) if v is not None}

    def is_empty(self) -> bool:
        """True when no field is set."""
        return not self.as_dict()

    def covers(self, other: "Scope | None") -> bool:
        """True when a record with scope ``other`` is visible through this scope."""
        other = other or Scope()
        return all(getattr(other, k) == v for k, v in self.as_dict().items())

    @classmethod
    def coerce(cls, value: "Scope | Mapping[str, Any] | None") -> "Scope | None":
        """Accept a Scope, a dict with user_id/agent_id/run_id, or None."""
        if value is None or isinstance(value, Scope):
            return value
        if isinstance(value, Mapping):
            unknown = set(value) - {"user_id", "agent_id", "run_id"}
            if unknown:
                raise ValidationError(f"unknown scope fields {sorted(unknown)}; use user_id, agent_id, run_id")
            return cls(**value)
        raise ValidationError(f"scope must be a Scope or a dict, got {type(value).__name__}")


@dataclass(frozen=True, slots=True)
class Link:
    """A typed, weighted edge from the record that holds it to ``target``."""

    target: str
    relation: str = "related"
    weight: float = 1.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {"target": self.target, "relation": self.relation, "weight": self.weight}


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
warnings.filterwarnings("ignore", message="overflow encountered in (dot|einsum)", category=RuntimeWarning, module=r"memcore\.records$")
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


def _flat_copy(metadata: dict[str, Any]) -> dict[str, Any] | None:
    """The common case of :func:`_json_safe` without a JSON round trip: a dict of scalars
    that passes every rule, copied with its keys sorted (what the round trip gave); None
    when any key or value needs the full path (which then raises the right error)."""
    for key, value in metadata.items():
        if type(key) is not str or not key or not (key.isascii() and "\x00" not in key or _plain_text(key)):
            return None
        kind = type(value)
        if kind is str:
            if not (value.isascii() and "\x00" not in value or _plain_text(value)):
                return None
        elif kind is int:
            if not -(2**63) <= value < 2**63:
                return None
        elif kind is float:
            if not math.isfinite(value):
                return None
        elif kind is not bool and value is not None:
            return None
    return dict(sorted(metadata.items()))


def _json_safe(metadata: Any) -> dict[str, Any]:
    if metadata is None:
        return {}
    if type(metadata) is dict:
        flat = _flat_copy(metadata)
        if flat is not None:
            return flat
    if not isinstance(metadata, Mapping):
        raise ValidationError(f"metadata must be a dict, got {type(metadata).__name__}")
    try:
        check_json_value(metadata, "metadata")
    except ValidationError as exc:
        raise ValidationError(f"metadata is not JSON-safe: {exc}") from None
    try:
        text = json.dumps(metadata, sort_keys=True, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"metadata is not JSON-safe: {exc}") from None
    check_unicode(text, "metadata")
    out: dict[str, Any] = json.loads(text)
    for key, value in out.items():
        if not isinstance(key, str) or not key:
            raise ValidationError("metadata keys must be non-empty strings")
        if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
            raise ValidationError(f"metadata field {key!r}: integer {value} does not fit in 64 bits (filters compare 64-bit integers)")
        if isinstance(value, str) and "\x00" in value:
            raise ValidationError(f"metadata field {key!r}: text contains a NUL character (SQLite filters cannot compare it)")
    return out


def content_id(text: str, metadata: Mapping[str, Any] | None = None, scope: Scope | None = None) -> str:
    """The id of a record inserted without one: a hash of its text, metadata and scope.

    Inserting identical content twice without an id is therefore idempotent.
    """
    payload = json.dumps({"t": text, "m": metadata or {}, "s": (scope or Scope()).as_dict()}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


@dataclass(slots=True)
class Record:
    """One memory: the single stored copy that every index refers to by ``id``."""

    id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    links: tuple[Link, ...] = ()
    scope: Scope | None = None
    created_at: float = 0.0
    updated_at: float = 0.0

    @classmethod
    def create(
        cls,
        text: str,
        *,
        id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        vectors: Mapping[str, Any] | None = None,
        links: Any = (),
        scope: Scope | Mapping[str, Any] | None = None,
    ) -> "Record":
        """Validate user input and build a record (id derived from content when absent)."""
        if not isinstance(text, str):
            raise ValidationError(f"text must be a string, got {type(text).__name__}")
        if not text or text.isspace():  # ``not text.strip()`` without the copy
            raise ValidationError("text must not be empty")
        if len(text) > MAX_TEXT_CHARS:
            raise ValidationError(f"text has {len(text)} characters; the limit is {MAX_TEXT_CHARS}")
        check_unicode(text, "text")
        meta = _json_safe(metadata)
        scope = Scope.coerce(scope)
        if scope is not None and scope.is_empty():
            scope = None
        if id is None:
            id = content_id(text, meta, scope)
        elif not isinstance(id, str) or not id or len(id) > MAX_ID_CHARS:
            raise ValidationError(f"record id must be a non-empty string of at most {MAX_ID_CHARS} characters, got {id!r}")
        check_unicode(id, "record id")
        if vectors is not None and type(vectors) is not dict and not isinstance(vectors, Mapping):
            raise ValidationError(f"vectors must be a dict of space name -> vector, got {type(vectors).__name__}")
        if links is not None and type(links) not in (list, tuple) and (isinstance(links, (str, bytes, Mapping, Link)) or not isinstance(links, Iterable)):
            raise ValidationError(f"links must be a list of links, got {type(links).__name__}")
        vecs = {}
        if vectors:
            for space, value in vectors.items():
                if type(space) is str and type(value) is np.ndarray and value.dtype is _F32 and value.ndim == 1 and value.size and _fine(value):
                    vecs[space] = value  # as_vector's common case, without formatting its error label
                else:
                    vecs[str(space)] = as_vector(value, what=f"vector {space!r} of record {id!r}")
        parsed_links: tuple[Link, ...] = ()
        if links:
            unique: dict[tuple[str, str], Link] = {}  # one edge per (target, relation): the last weight wins
            for value in links:
                link = _coerce_link(value, id)
                unique[(link.target, link.relation)] = link
            parsed_links = tuple(unique.values())
        now = time.time()
        return cls(id=id, text=text, metadata=meta, vectors=vecs, links=parsed_links, scope=scope, created_at=now, updated_at=now)

    def same_content(self, other: "Record") -> bool:
        """True when text, metadata, scope and links are equal (vectors and times ignored)."""
        return (
            self.text == other.text
            and self.metadata == other.metadata
            and (self.scope or Scope()) == (other.scope or Scope())
            and set(self.links) == set(other.links)
        )

    def evolve(self, **changes: Any) -> "Record":
        """A copy with some fields replaced."""
        return replace(self, **changes)

    def to_dict(self, *, with_vectors: bool = False) -> dict[str, Any]:
        """JSON-safe dict (vectors as lists when asked for)."""
        out: dict[str, Any] = {
            "id": self.id,
            "text": self.text,
            "metadata": self.metadata,
            "links": [link.as_dict() for link in self.links],
            "scope": (self.scope.as_dict() if self.scope else {}),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }
        if with_vectors:
            out["vectors"] = {k: v.tolist() for k, v in self.vectors.items()}
        return out


def _coerce_link(value: Any, source: str) -> Link:
    if isinstance(value, Link):
        link = value
    elif isinstance(value, str):
        link = Link(target=value)
    elif isinstance(value, Mapping):
        unknown = set(value) - {"target", "relation", "weight"}
        if unknown:
            raise ValidationError(f"unknown link fields {sorted(unknown)}")
        link = Link(**value)
    else:
        raise ValidationError(f"a link must be a Link, a target id or a dict, got {type(value).__name__}")
    if not isinstance(link.target, str) or not link.target:
        raise ValidationError("link target must be a non-empty record id")
    check_unicode(link.target, "link target")
    if link.target == source:
        raise ValidationError(f"record {source!r} cannot link to itself")
    if not isinstance(link.relation, str) or not link.relation:
        raise ValidationError("link relation must be a non-empty string")
    check_unicode(link.relation, "link relation")
    if not isinstance(link.weight, (int, float)) or not math.isfinite(link.weight):
        raise ValidationError("link weight must be a finite number")
    return Link(link.target, link.relation, float(link.weight))


_UNPARSED: Any = object()


@dataclass(slots=True)
class Query:
    """What to retrieve: text and/or vectors per space, ``k``, a ``where`` filter, scope, extras.

    ``extras`` carries kind-specific query modes (graph start nodes, FIFO ``newest``...),
    validated by the index that reads them.
    """

    text: str | None = None
    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    k: int = 10
    where: dict[str, Any] | None = None
    scope: Scope | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    _parsed_where: Any = field(default=_UNPARSED, init=False, repr=False, compare=False)
    #: the indexes' parsed query modes, by (mode key, model): see :meth:`memcore.Index.mode`
    _modes: dict[tuple[str, int], Any] | None = field(default=None, init=False, repr=False, compare=False)
    #: vectors a vector index checked already, by space: see :meth:`memcore.VectorIndex.query_vector`
    _checked: dict[str, np.ndarray] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # runs for every query: the common shapes are checked without a call each (a positive
        # int k, an ASCII text, float32 vectors, no extras, no scope); anything else takes the full checks
        k = self.k
        if type(k) is not int or k <= 0:
            validate_k(k)
        text = self.text
        if text is not None:
            if not isinstance(text, str):
                raise ValidationError(f"query text must be a string, got {type(text).__name__}")
            if len(text) > MAX_TEXT_CHARS:
                raise ValidationError(f"query text has {len(text)} characters; the limit is {MAX_TEXT_CHARS}")
            if not text.isascii():  # an ASCII string holds no lone surrogate
                check_unicode(text, "query text")
        vectors = self.vectors
        if vectors is not None and type(vectors) is not dict and not isinstance(vectors, Mapping):
            raise ValidationError(f"query vectors must be a dict of space name -> vector, got {type(vectors).__name__}")
        checked: dict[str, np.ndarray] = {}
        if vectors:
            for key, value in vectors.items():  # a loop, not a comprehension: no function call per query on CPython 3.11
                checked[key if type(key) is str else str(key)] = _query_vector(value, key)
        self.vectors = checked
        extras = self.extras
        if extras is None:
            self.extras = {}
        elif type(extras) is not dict or extras:
            if not isinstance(extras, Mapping) or not all(isinstance(key, str) for key in extras):
                raise ValidationError(f"query extras must be a dict keyed by index kind (e.g. {{'faiss': {{...}}}}), got {extras!r}"[:300])
        if self.scope is not None:
            self.scope = Scope.coerce(self.scope)

    @classmethod
    def coerce(cls, value: "Query | str | Mapping[str, Any]", **defaults: Any) -> "Query":
        """Accept a Query, a text, or a dict of Query fields; ``defaults`` fill unset fields."""
        if isinstance(value, Query):
            return value
        if isinstance(value, str):
            return cls(text=value, **defaults)
        if isinstance(value, Mapping):
            unknown = sorted(set(value) - _QUERY_FIELDS)
            if unknown:
                raise ValidationError(f"unknown query fields {unknown}; use {sorted(_QUERY_FIELDS)}")
            return cls(**{**defaults, **value})
        raise ValidationError(f"a query must be a Query, a string or a dict, got {type(value).__name__}")

    def evolve(self, **changes: Any) -> "Query":
        """A copy with some fields replaced (validated again)."""
        # what dataclasses.replace does, without its walk over the fields' metadata (a seventh of the cost)
        copy = Query(**{"text": self.text, "vectors": self.vectors, "k": self.k, "where": self.where, "scope": self.scope, "extras": self.extras, **changes})
        if self._modes is not None and "extras" not in changes:  # the same extras: their parsed modes still hold
            copy._modes = self._modes
        return copy

    def parsed_where(self) -> Filter | None:
        """The ``where`` filter parsed (:class:`FilterError` when malformed), once per query:
        every recall stage of a pipeline run resolves the same parsed filter."""
        if self._parsed_where is _UNPARSED:
            self._parsed_where = parse_filter(self.where)
        return self._parsed_where  # type: ignore[no-any-return]


_QUERY_FIELDS = frozenset({"text", "vectors", "k", "where", "scope", "extras"})


def validate_k(k: Any) -> int:
    """Reject k that is not a positive int (bools included); indexes cap it at their size."""
    if type(k) is int and k > 0:  # the common case, checked cheaply (bool is not int by type)
        return k
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k <= 0:
        raise ValidationError(f"k must be a positive integer, got {k!r}")
    return int(k)
