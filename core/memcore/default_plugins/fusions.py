"""Registers the builtin fusion strategies ``rrf`` and ``concat`` (implementation: :mod:`memcore.fusions.builtin`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..hookspecs import hookimpl
from ..fusions.builtin import RRFConfig, ReciprocalRankFusion, ConcatConfig, Concatenate

if TYPE_CHECKING:
    from ..factories import FusionFactory, Register

__all__ = ["RRFConfig", "ReciprocalRankFusion", "ConcatConfig", "Concatenate", "register_fusions"]


@hookimpl
def register_fusions(register: Register[FusionFactory]) -> None:
    """Register rrf and concat."""
    register("rrf", ReciprocalRankFusion, RRFConfig)
    register("concat", Concatenate, ConcatConfig)
