"""Builtin plugins: each module only registers (one ``register_*`` hook), through the same
hooks as third-party plugins. The implementations live in :mod:`memcore.stores`,
:mod:`memcore.embedders`, :mod:`memcore.indexes`, :mod:`memcore.retrieval`,
:mod:`memcore.fusions` and :mod:`memcore.services`."""
