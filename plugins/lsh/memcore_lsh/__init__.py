"""memcore-lsh: locality-sensitive hashing of vectors (the vector-hash memory of TiM).

Registers the index kind ``lsh`` (:class:`LSHIndex`, settings :class:`LSHIndexConfig`):
random-hyperplane (SimHash) codes of one embedding space in ``tables`` hash tables of
``bits`` bits, multi-probe bucket lookup (Hamming radius ``multi_probe``, optionally only
the likeliest ``probes`` buckets), exact cosine re-ranking of the candidates, incremental
add/remove, and pickle-free persistence (``.npy`` + JSON, hyperplanes included).

Per-query modes go in ``Query.extras["lsh"]`` (:class:`LSHQueryMode`). The plugin needs
only numpy, which the core already imports: loading it stays cheap.
"""

from __future__ import annotations

import memcore
from memcore.plugin import IndexFactory, Register

from .config import LSHIndexConfig, LSHQueryMode
from .index import LSHIndex

__all__ = ["LSHIndex", "LSHIndexConfig", "LSHQueryMode", "register_indexes"]
__version__ = "0.1.0"


@memcore.hookimpl
def register_indexes(register: Register[IndexFactory]) -> None:
    """Register the ``lsh`` index kind."""
    register("lsh", LSHIndex, LSHIndexConfig)
