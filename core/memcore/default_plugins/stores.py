"""Builtin stores: ``sqlite`` (embedded default) and ``memory``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._plugins.hookspecs import hookimpl
from ..stores._memory import MemoryStoreConfig, memory_store_factory
from ..stores._sqlite import SQLiteStoreConfig, sqlite_store_factory

if TYPE_CHECKING:
    from ..plugin import StoreFactory, Register


@hookimpl
def register_stores(register: Register[StoreFactory]) -> None:
    """Register the SQLite and in-memory stores."""
    register("sqlite", sqlite_store_factory, SQLiteStoreConfig)
    register("memory", memory_store_factory, MemoryStoreConfig)
