"""Registers the builtin ``hashing`` embedder (implementation: :mod:`memcore.embedders._embedder`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._plugins.hookspecs import hookimpl
from ..embedders._embedder import HashingEmbedderConfig, HashingEmbedder

if TYPE_CHECKING:
    from ..plugin import EmbedderFactory, Register

__all__ = ["HashingEmbedderConfig", "HashingEmbedder", "register_embedders"]


@hookimpl
def register_embedders(register: Register[EmbedderFactory]) -> None:
    """Register the hashing embedder."""
    register("hashing", lambda config: HashingEmbedder(config), HashingEmbedderConfig)
