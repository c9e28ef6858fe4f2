"""Builtin fusion strategies (registered by :mod:`memcore.default_plugins.fusions`)."""
