"""The first query of a broad filter: search unfiltered, keep the allowed candidates.

Resolving a filter lists every matching record in the store (one SQL statement over the
matches: ~17-30 ms at 50% of 100k records), while a graph search that follows it takes
about a millisecond; the collection keeps the resolved set for the next queries of that
filter, so only the first one pays. When the index is handed a set not resolved yet
(:class:`memcore.plugin.AllowedRows`), it first searches unfiltered for
:data:`CANDIDATES_PER_HIT` times ``k`` candidates and asks the store which of those few are
members (:meth:`~memcore.plugin.AllowedRows.among`: one lookup of their ids under the same
filter and scope). When at least ``k`` are, they are the answer: an allowed record that
scores above the ``k``-th allowed candidate scores above every candidate below it, so it
would have been a candidate itself (as far as the unfiltered search finds the best
candidates: its own recall). Otherwise (a selective filter, or a store that cannot answer)
the set is resolved and searched as before, and its next queries use the resolved set.

So a broad filter (about a quarter of the records and more) never lists its matches, and a
selective one pays one unfiltered search of a few dozen candidates on its first query.
Only the store decides membership, so scopes and deletions hold as for a resolved set.
"""

from __future__ import annotations

from typing import Sequence

from memcore.plugin import AllowedRows, Hit

__all__ = ["CANDIDATES_PER_HIT", "allowed_candidates"]

CANDIDATES_PER_HIT = 4
"""Unfiltered candidates searched per wanted hit (``k``) before the store is asked which
are allowed: at 50% of the records ~2k allowed are expected, and fewer than ``k`` of
``4k`` (k=10) happen once in about a thousand queries (then the set is resolved)."""


def allowed_candidates(hits: Sequence[Hit], allowed: AllowedRows, k: int) -> list[Hit] | None:
    """The best ``k`` of ``hits`` (an unfiltered search's, best first) that ``allowed`` holds,
    when at least ``k`` of them are; None when fewer are or the store cannot say."""
    if not hits:
        return None
    members = allowed.among([h.id for h in hits])
    if members is None:
        return None
    kept = [h for h in hits if h.id in members]
    if len(kept) < k:
        return None
    return kept[:k]
