"""Registers the builtin ``hashing`` embedder (implementation: :mod:`memcore.embedders.hashing`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..hookspecs import hookimpl
from ..embedders.hashing import HashingEmbedderConfig, HashingEmbedder

if TYPE_CHECKING:
    from ..factories import EmbedderFactory, Register

__all__ = ["HashingEmbedderConfig", "HashingEmbedder", "register_embedders"]


@hookimpl
def register_embedders(register: Register[EmbedderFactory]) -> None:
    """Register the hashing embedder."""
    register("hashing", lambda config: HashingEmbedder(config), HashingEmbedderConfig)
