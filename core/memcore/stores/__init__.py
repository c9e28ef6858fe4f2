"""Builtin stores: SQLite (the embedded default) and in-memory."""
