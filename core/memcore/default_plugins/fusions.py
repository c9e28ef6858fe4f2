"""Registers the builtin fusion strategy ``concat`` (implementation: :mod:`memcore.retrieval._fusions`).

``rrf``, the default fusion of the ``fuse`` stage and of ``Collection.retrieve_multi``, is
registered by memcore-rrf (``memcore[rrf]``): without it, naming ``rrf`` raises
:class:`memcore.UnknownComponentError` with the ``pip install`` hint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._plugins.hookspecs import hookimpl
from ..retrieval._fusions import ConcatConfig, Concatenate

if TYPE_CHECKING:
    from ..plugin import FusionFactory, Register

__all__ = ["ConcatConfig", "Concatenate", "register_fusions"]


@hookimpl
def register_fusions(register: Register[FusionFactory]) -> None:
    """Register concat."""
    register("concat", Concatenate, ConcatConfig)
