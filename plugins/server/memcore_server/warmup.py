"""Warm the served memory before the first request: load the models its embedders use.

An embedder loads its model lazily, on the first text it embeds (MiniLM: a second or more
on a busy machine, plus the import of its library). Inside a request that first load can
outlast ``request_timeout_s``, so ``memcore serve`` (with ``[server] warm = true``, the
default) embeds one short query text with each space's embedder while it starts, before it
accepts a connection: the first request then finds the model loaded, and ``/v1/health``
answers only once it is.

A failure is logged and the server starts anyway (a remote embedder that is briefly
unreachable must not keep the memory from being served): the first request that embeds
then meets the same error, as a typed memcore error.
"""

from __future__ import annotations

import memcore
from memcore.plugin import get_logger

__all__ = ["warm_embedders", "WARM_TEXT"]

log = get_logger("memcore.server")

WARM_TEXT = "memcore warm-up"
"""The text embedded once per space at start-up."""


def warm_embedders(memory: memcore.Memory) -> list[str]:
    """Embed :data:`WARM_TEXT` with the embedder of every space that has one; returns the
    names of the spaces warmed (a space whose embedder failed is logged and left out)."""
    warmed = []
    for name, space in memory.collection.spaces.items():
        if space.embedder is None:
            continue
        try:
            space.embed_queries([WARM_TEXT])
        except Exception as exc:  # logged, not raised: see the module docstring
            log.warning("server.warm_failed", space=name, type=type(exc).__name__, message=str(exc))
            continue
        warmed.append(name)
    return warmed
