"""The Fusion interface: named ranked lists -> one ranked list with provenance."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Collection, Mapping, Sequence

from ..model._query import Contribution, Hit

__all__ = ["Fusion", "merge_provenance", "distinct_ids"]


class Fusion(ABC):
    """A fusion strategy. Fused hits keep every contributing list in ``provenance``."""

    @abstractmethod
    def fuse(self, lists: Mapping[str, Sequence[Hit]], k: int) -> list[Hit]:
        """Fuse ``lists`` (name -> hits, best first) into the best ``k`` hits."""

    def __call__(self, lists: Mapping[str, Sequence[Hit]], k: int) -> list[Hit]:
        return self.fuse(lists, k)

    def default_depth(self, lists: Mapping[str, Sequence[Hit]]) -> int:
        """How many hits a ``fuse`` stage without ``k`` asks for: the longest input list
        (each recall already over-fetched for the stages after it). Fusions whose meaning is
        "every id" (concatenation, union) return the number of distinct ids."""
        return max((len(hits) for hits in lists.values()), default=0)


def distinct_ids(lists: Mapping[str, Sequence[Hit]]) -> int:
    """How many distinct ids ``lists`` hold together."""
    return len({hit.id for hits in lists.values() for hit in hits})


def merge_provenance(lists: Mapping[str, Sequence[Hit]], ids: Collection[str] | None = None) -> dict[str, list[Contribution]]:
    """For each id (of ``ids``, or all), one contribution per list it appears in
    (1-based rank, that list's score). Fusions pass their top ``k`` ids to skip the rest."""
    out: dict[str, list[Contribution]] = {}
    for name, hits in lists.items():
        for rank, hit in enumerate(hits, start=1):
            if ids is None or hit.id in ids:
                out.setdefault(hit.id, []).append(Contribution(name, rank, float(hit.score)))
    return out
