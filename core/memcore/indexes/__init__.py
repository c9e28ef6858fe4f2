"""Builtin indexes of the core."""
