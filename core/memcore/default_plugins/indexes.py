"""Builtin index: ``exact`` (numpy brute force)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._plugins.hookspecs import hookimpl
from ..indexes._exact import ExactIndex, ExactIndexConfig

if TYPE_CHECKING:
    from ..plugin import IndexFactory, Register


@hookimpl
def register_indexes(register: Register[IndexFactory]) -> None:
    """Register the exact vector index."""
    register("exact", ExactIndex, ExactIndexConfig)
