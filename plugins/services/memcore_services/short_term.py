"""``short_term_memory``: a window of the last ``max_dialog`` entries, per scope.

``insert`` appends to the window of the caller's scope (index ``stm.window``, kind
``fifo``); the entries of that scope pushed out of it leave by the configured ``on_evict``
policy: ``archive`` (default: they stay in the store, outside the window, counted in
``archived``) or ``forget`` (deleted from the store, counted in ``forgotten``).
``retrieve`` returns the entries of the caller's window -- its most recent ``max_dialog``
-- best first by the query's word overlap (recency breaks ties), filtered by ``metadata``.

**Per scope.** Each scope (``insert(..., scope={"user_id": "alice"})``) has its own window
of ``max_dialog`` entries: the service reads the newest entries of the fifo index through
the collection, which narrows the search to the bound scope, and evicts the ones of that
scope beyond ``max_dialog``; so one user's inserts never push another user's entries out,
and alice's window is the one she would have alone. The counters
(``archived``, ``forgotten``) are kept per scope too. An unscoped call is unrestricted:
its window is every entry of the index. The ``fifo`` index itself is unbounded (its
``capacity`` is a search-time option, so a memory made with the old global window opens
as it is).

**Writes around the window.** ``update`` changes an entry in place (it keeps its place in
the window; another scope's id is unknown). ``upsert`` is refused: a new entry enters the
window only through ``insert``, which evicts what it pushes out.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

from memcore.plugin import ComponentConfig, Query, Service, ValidationError
from pydantic import Field

from .common import lexical, record_result, top

__all__ = ["ShortTermMemoryConfig", "ShortTermMemory"]

WINDOW = "stm.window"
STATE = "stm"
_PROBE = 64
"""Entries read past the window per eviction round (more than that many over it, e.g. after
crashes between an insert and its eviction, take another round)."""
INSERT_KEYWORDS = ("id", "links", "vectors")
"""What ``insert`` accepts besides text, vector and metadata (``scope`` is bound by the base class)."""


class ShortTermMemoryConfig(ComponentConfig):
    """Settings of ``short_term_memory``."""

    kind: str = "short_term_memory"
    max_dialog: int = Field(5, ge=1, le=100_000, description="Entries in the window of each scope (SAGE's LoCoMo setting: 5).")
    on_evict: Literal["archive", "forget"] = Field("archive", description="What happens to entries pushed out of the window.")
    llm: str | None = Field(None, description="Unused (no LLM step); present so every service names its LLM the same way.")


class ShortTermMemory(Service):
    """The last ``max_dialog`` entries of each scope."""

    config: ShortTermMemoryConfig
    uses_pipeline = False
    capacity_limited = True
    read_only_verbs = frozenset({"retrieve"})  # retrieve reads the window and writes nothing

    @classmethod
    def required_indexes(cls, config: ComponentConfig) -> dict[str, dict[str, Any]]:
        """One unbounded fifo index: the window is kept per scope by the service."""
        return {WINDOW: {"kind": "fifo"}}

    def insert(self, text: str, vector: Any = None, metadata: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
        """Append one entry (``id``, ``links``, ``vectors`` as keywords; ``vector`` is not
        used: the window is ranked by words); the scope's entries beyond its window leave by
        ``on_evict``."""
        self.reject_unknown("insert", kwargs, INSERT_KEYWORDS)
        item: dict[str, Any] = {"text": text, "metadata": dict(metadata or {}), **{k: v for k, v in kwargs.items() if v is not None}}
        rid = self.collection.ids_of([item])[0]
        if self.collection.get_many([rid])[0] is not None:  # an idempotent retry: the same entry (in the window or archived), nothing moves
            self.collection.insert([item], indexes=[])  # DuplicateIdError for other content under that id; else writes nothing
            return rid
        rid = self.collection.insert([item], indexes=[WINDOW])[0]
        self._evict()
        return rid

    def _evict(self) -> None:
        """Take the bound scope's oldest entries beyond ``max_dialog`` out of its window, with
        their count, in one commit (normally the one entry an insert pushes out)."""
        keep, probe = self.config.max_dialog, self.config.max_dialog + _PROBE
        while True:
            newest = self._newest(probe)
            out = newest[keep:][::-1]  # oldest first
            if out:
                key = "forgotten" if self.config.on_evict == "forget" else "archived"
                state = {(STATE, key): int(self.collection.get_state(STATE, key, 0)) + len(out)}
                if self.config.on_evict == "forget":
                    self.collection.delete(out, state=state)
                else:
                    self.collection.remove_from_index(WINDOW, out, state=state)
            if len(newest) < probe:
                return

    def _newest(self, n: int) -> list[str]:
        """The bound scope's ``n`` newest window entries, newest first: the fifo index's
        arrival order, searched through the collection (which narrows it to the scope)."""
        return [h.id for h in self.collection.search_index(WINDOW, Query(k=n, extras={"fifo": {"mode": "newest"}}), n)]

    def retrieve(
        self, query: str | None = None, vector: Any = None, where: Mapping[str, Any] | None = None, k: int = 10, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """The window's entries, best word overlap first (newest first on ties)."""
        self.reject_unknown("retrieve", kwargs)
        self.make_query(query, vector, where, k)  # validates the arguments
        window = self._newest(self.config.max_dialog)[::-1]  # oldest first
        if where:
            matching = set(self.collection.ids(index=WINDOW, where=dict(where)))
            window = [i for i in window if i in matching]
        records = [r for r in self.collection.get_many(window) if r is not None]
        n = len(records)
        scored = [record_result(r, lexical(query, r.text) + (i + 1) / (1000.0 * (n + 1))) for i, r in enumerate(records)]
        return top(scored, k)

    def upsert(self, items: Any) -> list[str]:
        """Refused: a new entry enters the window through ``insert`` (which evicts what it
        pushes out), an existing one changes through ``update``."""
        raise ValidationError(
            "short_term_memory does not upsert: use insert() for new entries (the window evicts the oldest) and update(id, ...) to change one"
        )

    def report(self) -> dict[str, int]:
        """``{"window": n, "archived": n, "forgotten": n}`` of the bound scope (unscoped: every entry of the index)."""
        state = self.collection.state_items(STATE)
        return {"window": self.collection.count(index=WINDOW), "archived": state.get("archived", 0), "forgotten": state.get("forgotten", 0)}
