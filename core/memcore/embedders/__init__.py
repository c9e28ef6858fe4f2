"""Builtin embedders (registered by :mod:`memcore.default_plugins.embedders`)."""
