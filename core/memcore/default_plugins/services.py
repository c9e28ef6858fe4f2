"""Registers the builtin ``default`` service (implementation: :mod:`memcore.services._service`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._plugins.hookspecs import hookimpl
from ..services._service import DefaultServiceConfig, DefaultService

if TYPE_CHECKING:
    from ..plugin import ServiceFactory, Register

__all__ = ["DefaultServiceConfig", "DefaultService", "register_services"]


@hookimpl
def register_services(register: Register[ServiceFactory]) -> None:
    """Register the default service."""
    register("default", DefaultService, DefaultServiceConfig)
