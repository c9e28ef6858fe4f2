"""Every hook of memcore: the whole extension surface.

Hooks are callbacks in the style of ``llm`` and ``datasette``: memcore calls
``register_<things>(register)`` on each plugin, and the plugin calls
``register(name, factory, config_model)`` once per thing it provides.

- ``name`` is the ``kind`` users write in settings (``[indexes.dense] kind = "exact"``);
  it must be unique across all installed plugins.
- ``factory`` builds the component; what it receives is documented per hook below.
- ``config_model`` is a pydantic model (a subclass of :class:`memcore.ComponentConfig`)
  that validates the component's settings entry; ``None`` means "no options".

A plugin module implements any subset of these hooks with ``@memcore.hookimpl`` and may
accept fewer arguments than the spec (pluggy's rule), so hooks can grow without breaking
plugins. The signatures are typed: ``register`` is a :class:`memcore.factories.Register`
of the hook's factory protocol (:mod:`memcore.factories`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    import click

    from .factories import EmbedderFactory, FusionFactory, IndexFactory, LLMFactory, Register, ServiceFactory, StageFactory, StoreFactory

hookspec = pluggy.HookspecMarker("memcore")
hookimpl = pluggy.HookimplMarker("memcore")

# ---------------------------------------------------------------------------------------
# Storage: where records live
# ---------------------------------------------------------------------------------------


@hookspec
def register_stores(register: Register[StoreFactory]) -> None:
    """Register record stores.

    ``factory(config, path) -> memcore.Store``: ``path`` is the collection directory
    (``None`` for a purely in-memory collection). The store is the source of truth for
    records, vectors, links, index membership, service state and the operation log.
    """


# ---------------------------------------------------------------------------------------
# Embedding: turning text into vectors of a named space
# ---------------------------------------------------------------------------------------


@hookspec
def register_embedders(register: Register[EmbedderFactory]) -> None:
    """Register embedders.

    ``factory(config) -> memcore.Embedder``. Only the Collection embeds: it fills
    ``record.vectors[space]`` and ``query.vectors[space]`` for the spaces an index
    requires, batched, with the embedder declared for that space in settings.
    """


# ---------------------------------------------------------------------------------------
# Indexes: structures over (some) records of a collection
# ---------------------------------------------------------------------------------------


@hookspec
def register_indexes(register: Register[IndexFactory]) -> None:
    """Register index kinds.

    ``factory(config, context) -> memcore.Index`` where ``context`` is a
    :class:`memcore.IndexContext` (index name, the dimensions of the embedding spaces).
    An index declares what it ``requires`` (spaces, text, links) and implements
    ``add``, ``remove``, ``search``, ``search_batch``, ``__len__``, ``save`` and ``load``.
    """


# ---------------------------------------------------------------------------------------
# Retrieval: pipeline stages and fusion strategies
# ---------------------------------------------------------------------------------------


@hookspec
def register_stages(register: Register[StageFactory]) -> None:
    """Register pipeline stage kinds.

    ``factory(config) -> memcore.Stage``. A stage reads and writes a
    :class:`memcore.PipelineContext` (the ranked lists with their provenance).
    """


@hookspec
def register_fusions(register: Register[FusionFactory]) -> None:
    """Register fusion strategies.

    ``factory(config) -> memcore.Fusion``: a callable object turning named ranked lists
    into one ranked list whose hits keep every contributing list in ``provenance``.
    """


# ---------------------------------------------------------------------------------------
# Services: memory policies over one collection
# ---------------------------------------------------------------------------------------


@hookspec
def register_services(register: Register[ServiceFactory]) -> None:
    """Register memory services.

    ``factory(config, collection, pipeline) -> memcore.Service``. A service decides what
    is inserted where, what migrates and what is forgotten; it declares the indexes it
    needs through its class's ``required_indexes(config)``.
    """


# ---------------------------------------------------------------------------------------
# LLMs: chat models used by LLM steps (extraction, summaries, answering, rerank)
# ---------------------------------------------------------------------------------------


@hookspec
def register_llms(register: Register[LLMFactory]) -> None:
    """Register LLM (chat model) kinds.

    ``factory(config) -> memcore.LLM``, built on first use from an ``[llms.<name>]``
    settings table. Services and stages name the LLM they use (``llm = "default"``);
    every LLM step has a deterministic fallback when none is declared or a call fails.
    """


# ---------------------------------------------------------------------------------------
# Command line: subcommands a plugin adds to ``memcore``
# ---------------------------------------------------------------------------------------


@hookspec
def register_commands(cli: click.Group) -> None:
    """Add subcommands to the ``memcore`` command line.

    ``cli`` is the root click group: call ``cli.add_command(group)`` (or decorate with
    ``@cli.command()`` / ``@cli.group()``). The hook is called only when the CLI runs, the
    first time it looks a command up, so loading plugins stays cheap; import heavy
    libraries inside the command. A command whose name is already taken (a builtin or
    another plugin's) is refused and reported on stderr, and the plugin's other commands stay.
    Example: memcore-colbert adds ``memcore colbert serve``.
    """
