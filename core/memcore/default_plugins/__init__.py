"""Dependency-free builtin plugins, registered through the same hooks as third-party ones."""
