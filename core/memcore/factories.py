"""The typed signature of every hook's ``register`` and of the factories it takes.

What :mod:`memcore.hookspecs` says in prose, as :class:`typing.Protocol` classes a type
checker holds a plugin to::

    from memcore.factories import IndexFactory, Register

    @memcore.hookimpl
    def register_indexes(register: Register[IndexFactory]) -> None:
        register("keyword", KeywordIndex, KeywordIndexConfig)

A class whose ``__init__`` takes the listed arguments is a factory (``KeywordIndex``
above); so is any function or callable object with that signature. A factory receives its
config already validated by the config model it was registered with.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Protocol, TypeVar

from .hookspecs import COMPONENTS

if TYPE_CHECKING:
    from .collection import Collection
    from .embedder import Embedder
    from .fusion import Fusion
    from .index import Index, IndexContext
    from .llm import LLM
    from .pipeline import Pipeline, Stage
    from .registry import ComponentConfig
    from .service import Service
    from .store import Store

__all__ = [
    "Register",
    "StoreFactory",
    "EmbedderFactory",
    "IndexFactory",
    "StageFactory",
    "FusionFactory",
    "ServiceFactory",
    "LLMFactory",
    "FACTORY_PROTOCOLS",
]

F = TypeVar("F", contravariant=True)


class Register(Protocol[F]):
    """The ``register`` callback a ``register_<things>`` hook receives."""

    def __call__(self, name: str, factory: F, config_model: type[ComponentConfig] | None = None, /, *, deprecated_names: Iterable[str] = ()) -> None:
        """Register ``factory`` under ``name`` (the settings' ``kind``), its options validated
        by ``config_model`` (None: no options). ``deprecated_names``: old spellings of
        ``name`` that keep working, with a DeprecationWarning naming ``name``."""


class StoreFactory(Protocol):
    """``factory(config, path) -> Store``: ``path`` is the collection directory, None in memory."""

    def __call__(self, config: Any, path: Path | None, /) -> Store: ...


class EmbedderFactory(Protocol):
    """``factory(config) -> Embedder``."""

    def __call__(self, config: Any, /) -> Embedder: ...


class IndexFactory(Protocol):
    """``factory(config, context) -> Index``: ``context`` names the index, its kind (the key
    of its query modes in ``Query.extras``) and the declared embedding spaces."""

    def __call__(self, config: Any, context: IndexContext, /) -> Index: ...


class StageFactory(Protocol):
    """``factory(config) -> Stage``."""

    def __call__(self, config: Any, /) -> Stage: ...


class FusionFactory(Protocol):
    """``factory(config) -> Fusion``."""

    def __call__(self, config: Any, /) -> Fusion: ...


class ServiceFactory(Protocol):
    """``factory(config, collection, pipeline) -> Service``.

    The indexes a service needs are read from the factory's ``required_indexes(config)``
    (a :class:`memcore.Service` subclass has it): register the class itself, or give a
    factory function that attribute; a service whose class requires indexes its factory
    does not declare is refused when the memory is opened, never silently left without them.
    """

    def __call__(self, config: Any, collection: Collection, pipeline: Pipeline | None, /) -> Service: ...


class LLMFactory(Protocol):
    """``factory(config) -> LLM``, built on first use from an ``[llms.<name>]`` entry."""

    def __call__(self, config: Any, /) -> LLM: ...


FACTORY_PROTOCOLS: dict[str, type] = {c.category: globals()[c.factory] for c in COMPONENTS}
"""The factory protocol of each registry category (``register_<category>``), as named by
its declaration in :mod:`memcore.hookspecs`."""
