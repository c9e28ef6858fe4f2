"""``short_term_memory``: a window of the last ``max_dialog`` entries (a fifo index).

``insert`` appends to the window; the entries pushed out of it leave by the configured
``on_evict`` policy: ``archive`` (default: they stay in the store, outside the window,
counted in ``archived``) or ``forget`` (deleted from the store, counted in ``forgotten``).
``retrieve`` returns the entries of the window -- the most recent ``max_dialog`` --
best first by the query's word overlap (recency breaks ties), filtered by ``metadata``.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

from memcore import ComponentConfig, Service
from pydantic import Field

from .common import lexical, record_result, top, where_ids

__all__ = ["ShortTermMemoryConfig", "ShortTermMemory"]

WINDOW = "stm.window"
STATE = "stm"


class ShortTermMemoryConfig(ComponentConfig):
    """Settings of ``short_term_memory``."""

    kind: str = "short_term_memory"
    max_dialog: int = Field(5, ge=1, le=100_000, description="Entries in the window (SAGE's LoCoMo setting: 5).")
    on_evict: Literal["archive", "forget"] = Field("archive", description="What happens to entries pushed out of the window.")
    llm: str | None = Field(None, description="Unused (no LLM step); present so every service names its LLM the same way.")


class ShortTermMemory(Service):
    """The last ``max_dialog`` entries."""

    uses_pipeline = False

    @classmethod
    def required_indexes(cls, config: ShortTermMemoryConfig) -> dict[str, dict[str, Any]]:
        """One fifo index bounded at ``max_dialog``."""
        return {WINDOW: {"kind": "fifo", "capacity": config.max_dialog}}

    def insert(self, text: str, vector: Any = None, metadata: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
        """Append one entry; entries beyond the window leave by ``on_evict``."""
        rid = self.collection.insert([{"text": text, "metadata": dict(metadata or {}), **kwargs}], indexes=[WINDOW])[0]
        counts = self.collection.state_items(STATE)
        out = self.collection.evict(WINDOW)
        if out:
            key = "forgotten" if self.config.on_evict == "forget" else "archived"
            if self.config.on_evict == "forget":
                self.collection.delete(out, state={(STATE, key): counts.get(key, 0) + len(out)})
            else:
                self.collection.set_state({(STATE, key): counts.get(key, 0) + len(out)})
        return rid

    def retrieve(
        self, query: str | None = None, vector: Any = None, metadata: Mapping[str, Any] | None = None, k: int = 10, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """The window's entries, best word overlap first (newest first on ties)."""
        self.make_query(query, vector, metadata, k)  # validates the arguments
        ids = where_ids(self.collection, WINDOW, metadata)
        records = [r for r in self.collection.get_many(ids) if r is not None]
        n = len(records)
        scored = [record_result(r, lexical(query, r.text) + (i + 1) / (1000.0 * (n + 1))) for i, r in enumerate(records)]
        return top(scored, k)

    def report(self) -> dict[str, int]:
        """``{"window": n, "archived": n, "forgotten": n}``."""
        state = self.collection.state_items(STATE)
        return {"window": self.collection.count(index=WINDOW), "archived": state.get("archived", 0), "forgotten": state.get("forgotten", 0)}
