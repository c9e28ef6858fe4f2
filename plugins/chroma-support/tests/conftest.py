"""``chroma_server``: the fixture this library ships (a real ``chroma run`` on a free port)."""

from __future__ import annotations

from memcore_chroma_support.testing import chroma_server  # noqa: F401  (a pytest fixture)
