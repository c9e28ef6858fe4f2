"""Fixtures of the memcore-chroma tests: ``chroma_server``, a real ``chroma run`` on a free port
(shared with memcore-poincare through memcore-chroma-support)."""

from __future__ import annotations

from memcore_chroma_support.testing import chroma_server  # noqa: F401  (a pytest fixture)
