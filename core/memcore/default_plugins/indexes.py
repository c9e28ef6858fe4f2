"""Builtin index: ``exact`` (numpy brute force)."""

from __future__ import annotations

from ..hookspecs import hookimpl
from ..indexes.exact import ExactIndex, ExactIndexConfig


@hookimpl
def register_indexes(register):
    """Register the exact vector index."""
    register("exact", ExactIndex, ExactIndexConfig)
