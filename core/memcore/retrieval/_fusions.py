"""The builtin fusion strategy ``concat`` (reciprocal rank fusion, ``rrf``, is memcore-rrf's)."""

from __future__ import annotations

from typing import Mapping, Sequence

from ._fusion import Fusion, distinct_ids, merge_provenance
from ..model._query import Hit
from .._plugins._registry import ComponentConfig


class ConcatConfig(ComponentConfig):
    """Settings of ``concat`` (none besides ``kind``)."""

    kind: str = "concat"


class Concatenate(Fusion):
    """Lists one after another, first occurrence wins; the score is ``-position``."""

    def __init__(self, config: ConcatConfig | None = None):
        self.config = config or ConcatConfig()

    def default_depth(self, lists: Mapping[str, Sequence[Hit]]) -> int:
        """Every distinct id."""
        return distinct_ids(lists)

    def fuse(self, lists: Mapping[str, Sequence[Hit]], k: int) -> list[Hit]:
        """Keep order across lists; duplicates keep their first position."""
        provenance = merge_provenance(lists)
        order: list[str] = []
        seen: set[str] = set()
        for hits in lists.values():
            for hit in hits:
                if hit.id not in seen:
                    seen.add(hit.id)
                    order.append(hit.id)
        return [Hit(rid, -float(pos), raw=None, source="concat", provenance=tuple(provenance[rid])) for pos, rid in enumerate(order[:k])]
