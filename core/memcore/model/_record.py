"""The data model: :class:`Record`, :class:`Link`, :class:`Scope`.

A record is the one copy of a memory; indexes hold only ids and what they need.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass, field, replace
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..errors import ValidationError
from ._checks import MAX_ID_CHARS, MAX_TEXT_CHARS, _F32, _fine, _plain_text, as_vector, check_json_value, check_unicode


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
