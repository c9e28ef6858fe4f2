"""Registers the builtin ``default`` service (implementation: :mod:`memcore.services.default`)."""

from __future__ import annotations

from ..hookspecs import hookimpl
from ..services.default import DefaultServiceConfig, DefaultService

__all__ = ["DefaultServiceConfig", "DefaultService", "register_services"]


@hookimpl
def register_services(register):
    """Register the default service."""
    register("default", DefaultService, DefaultServiceConfig)
