"""Registers the builtin ``default`` service (implementation: :mod:`memcore.services.default`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..hookspecs import hookimpl
from ..services.default import DefaultServiceConfig, DefaultService

if TYPE_CHECKING:
    from ..factories import ServiceFactory, Register

__all__ = ["DefaultServiceConfig", "DefaultService", "register_services"]


@hookimpl
def register_services(register: Register[ServiceFactory]) -> None:
    """Register the default service."""
    register("default", DefaultService, DefaultServiceConfig)
