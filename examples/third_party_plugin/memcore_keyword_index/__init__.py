"""memcore-keyword-index: an example third-party memcore plugin.

It registers one index kind, ``keyword``: a token-overlap index over record texts.
memcore finds this module through the entry point declared in ``pyproject.toml``::

    [project.entry-points.memcore]
    keyword = "memcore_keyword_index"

and calls the ``register_indexes`` hook below once, when it loads its plugins.
"""

from __future__ import annotations

import memcore
from memcore.plugin import IndexFactory, Register

from .index import KeywordIndex, KeywordIndexConfig, tokenize

__all__ = ["KeywordIndex", "KeywordIndexConfig", "tokenize", "register_indexes"]
__version__ = "0.1.0"


@memcore.hookimpl
def register_indexes(register: Register[IndexFactory]) -> None:
    """Register the ``keyword`` index kind: ``register(name, factory, config_model)``."""
    register("keyword", KeywordIndex, KeywordIndexConfig)
