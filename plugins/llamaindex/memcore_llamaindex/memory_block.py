"""``MemcoreMemoryBlock``: long-term facts from a memcore service in a LlamaIndex agent's
``Memory``.

LlamaIndex's ``Memory`` hands each block the messages that leave its short-term buffer
(``_aput``) and asks each block for its content when it builds the context (``_aget``).
This block inserts the flushed messages into a memcore memory (through its service: a
``memoryos`` or ``hierarchical`` memory applies its own tiers and policies) and answers with
the memories relevant to the latest messages, one per line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import BaseMemoryBlock
from pydantic import ConfigDict, Field

from memcore import Memory

__all__ = ["MemcoreMemoryBlock"]


class MemcoreMemoryBlock(BaseMemoryBlock[str]):
    """A LlamaIndex memory block backed by a memcore memory (its service)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str = Field(default="MemcoreFacts", description="The block's name in the agent's context.")
    memory: Memory = Field(description="The memcore memory the conversation is remembered in.")
    k: int = Field(default=5, gt=0, description="How many memories to recall.")
    scope: dict[str, str] | None = Field(default=None, description="The memcore scope (e.g. the user) the block reads and writes.")
    recall_from_last: int = Field(default=2, gt=0, description="How many latest messages make the recall query.")

    def _scope_kwargs(self) -> dict[str, Any]:
        return {"scope": self.scope} if self.scope else {}

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        """The memories relevant to the latest messages, one per line ('' when none)."""
        query = " ".join(m.content or "" for m in (messages or [])[-self.recall_from_last :]).strip()
        if not query:
            return ""
        items = await asyncio.to_thread(self.memory.retrieve, query, k=self.k, **self._scope_kwargs())
        return "\n".join(f"- {item['text']}" for item in items)

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Remember the messages leaving the short-term buffer (role and speaker in metadata)."""
        items: list[Mapping[str, Any]] = [{"text": m.content, "metadata": {"role": str(m.role.value)}} for m in messages if m.content and m.content.strip()]
        if items:
            await asyncio.to_thread(self._insert, items)

    def _insert(self, items: list[Mapping[str, Any]]) -> None:
        with self.memory.collection.scoped(self.scope):
            self.memory.insert(list(items))
