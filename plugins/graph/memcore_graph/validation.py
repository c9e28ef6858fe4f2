"""Checks a record must pass before the graph index takes it (nothing changes on failure)."""

from __future__ import annotations

import math
from typing import Sequence

from memcore.plugin import Link, Record, ValidationError

__all__ = ["check_records"]


def check_records(records: Sequence[Record], index: str) -> None:
    """ValidationError for the first record that is not a Record with a string id and text
    and well-formed links (non-empty target other than itself, non-empty relation,
    finite weight)."""
    for r in records:
        if not isinstance(r, Record):
            raise ValidationError(f"graph index {index!r}: expected Records, got {type(r).__name__}")
        if not isinstance(r.id, str) or not r.id:
            raise ValidationError(f"graph index {index!r}: record id must be a non-empty string, got {r.id!r}")
        if not isinstance(r.text, str):
            raise ValidationError(f"graph index {index!r}: record {r.id!r} has no text")
        if not isinstance(r.links, (tuple, list)):
            raise ValidationError(f"graph index {index!r}: record {r.id!r} links must be a sequence of Link")
        for link in r.links:
            if not isinstance(link, Link):
                raise ValidationError(f"graph index {index!r}: record {r.id!r} has a link that is a {type(link).__name__}, not a memcore.Link")
            if not isinstance(link.target, str) or not link.target or link.target == r.id:
                raise ValidationError(f"graph index {index!r}: record {r.id!r} has a bad link target {link.target!r}")
            if not isinstance(link.relation, str) or not link.relation:
                raise ValidationError(f"graph index {index!r}: record {r.id!r} has a bad link relation {link.relation!r}")
            w = link.weight
            if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w):
                raise ValidationError(f"graph index {index!r}: record {r.id!r} has a link weight that is not a finite number: {w!r}")
