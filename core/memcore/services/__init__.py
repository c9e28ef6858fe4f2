"""Builtin services (registered by :mod:`memcore.default_plugins.services`)."""
