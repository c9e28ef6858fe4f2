"""Every hook of memcore: the whole extension surface.

Hooks are callbacks in the style of ``llm`` and ``datasette``: memcore calls
``register_<things>(register)`` on each plugin, and the plugin calls
``register(name, factory, config_model)`` once per thing it provides.

- ``name`` is the ``kind`` users write in settings (``[indexes.dense] kind = "exact"``);
  lowercase letters, digits, ``_`` and ``.``, unique across all installed plugins.
- ``deprecated_names=(...)`` (keyword, optional): old spellings of ``name`` that keep
  resolving to it with a DeprecationWarning (a renamed kind: ``"token-hashing"``).
- ``factory`` builds the component; what it receives is documented per hook below.
- ``config_model`` is a pydantic model (a subclass of :class:`memcore.ComponentConfig`)
  that validates the component's settings entry; ``None`` means "no options".

A plugin module implements any subset of these hooks with ``@memcore.hookimpl`` and may
accept fewer arguments than the spec (pluggy's rule), so hooks can grow without breaking
plugins. The signatures are typed: ``register`` is a :class:`Register`
of the hook's factory protocol (:mod:`memcore.plugin`).

This module is the one declaration of the surface: each component hook is declared with
:func:`component_hookspec` (its category, singular noun and factory protocol), and
:data:`COMPONENTS` / :data:`CATEGORIES` / :data:`HOOK_NAMES` are computed from those
declarations. ``memcore._plugins._registry.CATEGORIES``, ``memcore.plugin.FACTORY_PROTOCOLS``,
the plugin host's list of known hooks and the "unknown <thing> kind" messages of
:mod:`memcore.errors` are all derived from here. At run time this module imports nothing
of memcore, so any module may import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol, TypeVar

import pluggy

if TYPE_CHECKING:
    import click


hookspec = pluggy.HookspecMarker("memcore")
hookimpl = pluggy.HookimplMarker("memcore")

F = TypeVar("F", contravariant=True)


class Register(Protocol[F]):
    """The ``register`` callback a ``register_<things>`` hook receives; ``F`` is the hook's
    factory protocol (``Register[IndexFactory]``, see :mod:`memcore.plugin`)."""

    def __call__(self, name: str, factory: F, config_model: type[Any] | None = None, /, *, deprecated_names: Iterable[str] = ()) -> None:
        """Register ``factory`` under ``name`` (the settings' ``kind``), its options validated
        by ``config_model`` (a :class:`memcore.plugin.ComponentConfig` subclass; None: no options).
        ``deprecated_names``: old spellings of ``name`` that keep working, with a
        DeprecationWarning naming ``name``."""


_Spec = TypeVar("_Spec", bound=Callable[..., None])


@dataclass(frozen=True)
class Component:
    """One category of component a plugin registers through ``register_<category>``."""

    category: str
    """The registry key and settings table: ``"indexes"``."""
    singular: str
    """The noun of one of them in messages: ``"index"`` (``unknown index kind 'x'``)."""
    factory: str
    """The name of its factory protocol in :mod:`memcore.plugin`: ``"IndexFactory"``."""

    @property
    def hook(self) -> str:
        """The hook's name: ``register_<category>``."""
        return f"register_{self.category}"


_components: list[Component] = []


def component_hookspec(*, singular: str, factory: str) -> Callable[[_Spec], _Spec]:
    """Declare a ``register_<category>`` hook (a :data:`hookspec`) and its :class:`Component`."""

    def declare(spec: _Spec) -> _Spec:
        name = spec.__name__
        if not name.startswith("register_"):
            raise ValueError(f"a component hook is named register_<category>, not {name!r}")
        _components.append(Component(category=name.removeprefix("register_"), singular=singular, factory=factory))
        return hookspec(spec)

    return declare


# ---------------------------------------------------------------------------------------
# Storage: where records live
# ---------------------------------------------------------------------------------------


@component_hookspec(singular="store", factory="StoreFactory")
def register_stores(register: Register[Any]) -> None:
    """Register record stores.

    ``factory(config, path) -> memcore.Store``: ``path`` is the collection directory
    (``None`` for a purely in-memory collection). The store is the source of truth for
    records, vectors, links, index membership, service state and the operation log.
    """


# ---------------------------------------------------------------------------------------
# Embedding: turning text into vectors of a named space
# ---------------------------------------------------------------------------------------


@component_hookspec(singular="embedder", factory="EmbedderFactory")
def register_embedders(register: Register[Any]) -> None:
    """Register embedders.

    ``factory(config) -> memcore.Embedder``. Only the Collection embeds: it fills
    ``record.vectors[space]`` and ``query.vectors[space]`` for the spaces an index
    requires, batched, with the embedder declared for that space in settings.
    """


# ---------------------------------------------------------------------------------------
# Indexes: structures over (some) records of a collection
# ---------------------------------------------------------------------------------------


@component_hookspec(singular="index", factory="IndexFactory")
def register_indexes(register: Register[Any]) -> None:
    """Register index kinds.

    ``factory(config, context) -> memcore.Index`` where ``context`` is a
    :class:`memcore.IndexContext` (index name, the dimensions of the embedding spaces).
    An index declares what it ``requires`` (spaces, text, links) and implements
    ``add``, ``remove``, ``search``, ``search_batch``, ``__len__``, ``save`` and ``load``.
    """


# ---------------------------------------------------------------------------------------
# Retrieval: pipeline stages and fusion strategies
# ---------------------------------------------------------------------------------------


@component_hookspec(singular="stage", factory="StageFactory")
def register_stages(register: Register[Any]) -> None:
    """Register pipeline stage kinds.

    ``factory(config) -> memcore.Stage``. A stage reads and writes a
    :class:`memcore.PipelineContext` (the ranked lists with their provenance).
    """


@component_hookspec(singular="fusion", factory="FusionFactory")
def register_fusions(register: Register[Any]) -> None:
    """Register fusion strategies.

    ``factory(config) -> memcore.Fusion``: a callable object turning named ranked lists
    into one ranked list whose hits keep every contributing list in ``provenance``.
    """


# ---------------------------------------------------------------------------------------
# Services: memory policies over one collection
# ---------------------------------------------------------------------------------------


@component_hookspec(singular="service", factory="ServiceFactory")
def register_services(register: Register[Any]) -> None:
    """Register memory services.

    ``factory(config, collection, pipeline) -> memcore.Service``. A service decides what
    is inserted where, what migrates and what is forgotten; it declares the indexes it
    needs through its class's ``required_indexes(config)``.
    """


# ---------------------------------------------------------------------------------------
# LLMs: chat models used by LLM steps (extraction, summaries, answering, rerank)
# ---------------------------------------------------------------------------------------


@component_hookspec(singular="llm", factory="LLMFactory")
def register_llms(register: Register[Any]) -> None:
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


# ---------------------------------------------------------------------------------------
# The surface, computed from the declarations above
# ---------------------------------------------------------------------------------------

COMPONENTS: tuple[Component, ...] = tuple(_components)
"""Every component category, in declaration order (one ``register_<category>`` hook each)."""

CATEGORIES: tuple[str, ...] = tuple(c.category for c in COMPONENTS)
"""The kinds of component a plugin can register: ``("stores", "embedders", ...)``."""

SINGULAR: dict[str, str] = {c.category: c.singular for c in COMPONENTS}
"""``category -> singular noun`` (``"indexes" -> "index"``), for messages."""

HOOK_NAMES: tuple[str, ...] = tuple(name for name, value in list(globals().items()) if callable(value) and hasattr(value, f"{hookspec.project_name}_spec"))
"""Every hook of memcore (the component hooks, then ``register_commands``), in declaration order."""
