"""memcore-colbert: late-interaction (ColBERT-style) retrieval.

This distribution will provide, through memcore's ``register_*`` hooks:

- index kind `colbert`: MaxSim late interaction over token-level vectors (MiniLM token
  embeddings), kept inside the index
- index kind `colbert-remote`: the same scoring against a remote token store

Status: package layout only. The module is installed and announced under the
``memcore`` entry-point group as ``colbert``, but it registers nothing yet: it has no hook
implementations, so it never offers a component that does not really work. The
implementation is tracked in a later issue.
"""

__all__: list[str] = []
