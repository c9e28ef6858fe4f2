"""The business objects of HyperAmy: :class:`Point` (an emotion particle) and :class:`SearchResult`.

A point's ``emotion_vector`` is any 1-d array-like (numpy array, list, torch tensor): it is
read with ``numpy.asarray`` and only its direction is kept in storage. ``v`` is the initial
intensity (speed), ``T`` the initial temperature, ``born`` the creation time stamp
(seconds), ``current_time`` the time of this version of the record (None: now) and
``links`` the ids of neighbouring particles.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Point", "SearchResult", "MatchType"]

MatchType = Literal["direct", "neighbor"]


@dataclass
class Point:
    """One emotion particle (the unit HyperAmy stores and searches with)."""

    id: str
    emotion_vector: Any
    v: float
    T: float
    born: float
    current_time: float | None = None
    links: list[str] = field(default_factory=list)

    def to_metadata(self) -> dict[str, Any]:
        """The Chroma metadata of this point: ``v``, ``T``, ``born``, ``last_updated`` and
        ``links`` (a JSON string), plus ``link_to`` (the links as a list, absent when there
        are none) which lets a delete find the points linking to an id in one ``get``."""
        updated = self.current_time if self.current_time is not None else time.time()
        meta: dict[str, Any] = {
            "v": float(self.v),
            "T": float(self.T),
            "born": float(self.born),
            "last_updated": float(updated),
            "links": json.dumps(list(self.links)),
        }
        meta["link_to"] = list(self.links) if self.links else None  # None removes the key on upsert
        return meta


@dataclass
class SearchResult:
    """One search result: ``score`` is the hyperbolic distance (smaller is better); a
    ``neighbor`` result's distance is multiplied by the neighbour penalty."""

    id: str
    score: float
    metadata: dict[str, Any]
    vector: list[float]
    match_type: MatchType
