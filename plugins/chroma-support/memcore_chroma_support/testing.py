"""The pytest fixture of the Chroma-backed plugins' tests: a real ``chroma run`` server.

Import it into a ``conftest.py``::

    from memcore_chroma_support.testing import chroma_server  # noqa: F401  (a fixture)

Needs pytest (imported here only, never by the plugins themselves).
"""

from __future__ import annotations

from typing import Iterator

import pytest

from .server import chroma_executable, chroma_server as _start

__all__ = ["chroma_server"]


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """``(host, port)`` of a ``chroma run`` started for this test session on a free
    127.0.0.1 port, stopped after; skips when the chroma command line is not installed."""
    if chroma_executable() is None:
        pytest.skip("the chroma command line (chromadb) is not installed")
    with _start(tmp_path_factory.mktemp("chroma-server")) as address:
        yield address
