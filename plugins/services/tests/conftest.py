"""Shared fixture of the services' tests: ``open_service(path, service_entry)``."""

from __future__ import annotations

from typing import Any, Callable

import pytest

import memcore


def open_service(path, service: dict[str, Any], **extra: Any) -> memcore.Memory:
    """``memcore.open`` of a sqlite memory at ``path`` whose indexes all come from the service
    (hashing embedder: no model)."""
    return memcore.open({"indexes": {}, "service": service, **extra}, path=path)


@pytest.fixture
def opener() -> Callable[..., memcore.Memory]:
    """:func:`open_service`."""
    return open_service
