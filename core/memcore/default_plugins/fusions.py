"""Registers the builtin fusion strategies ``rrf`` and ``concat`` (implementation: :mod:`memcore.retrieval._fusions`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._plugins.hookspecs import hookimpl
from ..retrieval._fusions import RRFConfig, ReciprocalRankFusion, ConcatConfig, Concatenate

if TYPE_CHECKING:
    from ..plugin import FusionFactory, Register

__all__ = ["RRFConfig", "ReciprocalRankFusion", "ConcatConfig", "Concatenate", "register_fusions"]


@hookimpl
def register_fusions(register: Register[FusionFactory]) -> None:
    """Register rrf and concat."""
    register("rrf", ReciprocalRankFusion, RRFConfig)
    register("concat", Concatenate, ConcatConfig)
