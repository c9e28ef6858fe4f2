"""memcore-colbert: late-interaction (ColBERT-style) retrieval.

Registers, through memcore's hooks:

- index kind ``colbert`` (:class:`ColbertIndex`, settings :class:`ColbertIndexConfig`):
  ColBERTv2 storage (k-means centroids, residuals compressed to 1/2/4 bits per dimension,
  inverted lists, doclens) searched with PLAID, over token vectors from a token embedder
  named in its settings (``minilm`` by default) and built through the registry;
- index kind ``colbert_remote`` (:class:`ColbertRemoteIndex`): the same index behind the
  HTTP API server ``memcore colbert serve``;
- embedder ``token_hashing``: deterministic per-word token vectors (tests, demos; not semantic);
- the CLI group ``memcore colbert`` (``serve``), through ``register_commands``.

Importing this module imports neither faiss, numpy-heavy code paths, FastAPI nor a model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import memcore
import memcore.plugin
from memcore.plugin import EmbedderFactory, IndexFactory, Register

from .config import ColbertIndexConfig, ColbertQueryMode, ColbertRemoteConfig
from .hashing import TokenHashingConfig, TokenHashingEmbedder

if TYPE_CHECKING:
    import click

    from .index import ColbertIndex
    from .remote import ColbertRemoteIndex

__all__ = [
    "ColbertIndex",
    "ColbertIndexConfig",
    "ColbertQueryMode",
    "ColbertRemoteConfig",
    "ColbertRemoteIndex",
    "TokenHashingConfig",
    "TokenHashingEmbedder",
    "register_indexes",
    "register_embedders",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> type[memcore.plugin.Index]:
    """The index classes are imported on first access."""
    if name == "ColbertIndex":
        from .index import ColbertIndex

        return ColbertIndex
    if name == "ColbertRemoteIndex":
        from .remote import ColbertRemoteIndex

        return ColbertRemoteIndex
    raise AttributeError(name)


def _build_local(config: ColbertIndexConfig, context: memcore.plugin.IndexContext) -> memcore.plugin.Index:
    """Factory of the ``colbert`` index kind."""
    from .index import ColbertIndex

    return ColbertIndex(config, context)


def _build_remote(config: ColbertRemoteConfig, context: memcore.plugin.IndexContext) -> memcore.plugin.Index:
    """Factory of the ``colbert_remote`` index kind."""
    from .remote import ColbertRemoteIndex

    return ColbertRemoteIndex(config, context)


@memcore.hookimpl
def register_indexes(register: Register[IndexFactory]) -> None:
    """Register ``colbert`` (in process) and ``colbert_remote`` (HTTP client; ``colbert-remote``, its old
    spelling, still works with a DeprecationWarning)."""
    register("colbert", _build_local, ColbertIndexConfig)
    register("colbert_remote", _build_remote, ColbertRemoteConfig, deprecated_names=("colbert-remote",))


@memcore.hookimpl
def register_embedders(register: Register[EmbedderFactory]) -> None:
    """Register the ``token_hashing`` token embedder (``token-hashing``, its old spelling, still works
    with a DeprecationWarning)."""
    register("token_hashing", TokenHashingEmbedder, TokenHashingConfig, deprecated_names=("token-hashing",))


@memcore.hookimpl
def register_commands(cli: click.Group) -> None:
    """Add ``memcore colbert serve`` (the HTTP API server) to the memcore CLI."""
    from .cli import colbert_group

    cli.add_command(colbert_group)
