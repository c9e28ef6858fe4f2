"""Builtin index: ``exact`` (numpy brute force)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..hookspecs import hookimpl
from ..indexes.exact import ExactIndex, ExactIndexConfig

if TYPE_CHECKING:
    from ..factories import IndexFactory, Register


@hookimpl
def register_indexes(register: Register[IndexFactory]) -> None:
    """Register the exact vector index."""
    register("exact", ExactIndex, ExactIndexConfig)
