"""Registers the builtin ``hashing`` embedder (implementation: :mod:`memcore.embedders.hashing`)."""

from __future__ import annotations

from ..hookspecs import hookimpl
from ..embedders.hashing import HashingEmbedderConfig, HashingEmbedder

__all__ = ["HashingEmbedderConfig", "HashingEmbedder", "register_embedders"]


@hookimpl
def register_embedders(register):
    """Register the hashing embedder."""
    register("hashing", lambda config: HashingEmbedder(config), HashingEmbedderConfig)
