"""memcore-poincare: hyperbolic (Poincare ball) memory on ChromaDB.

This distribution will provide, through memcore's ``register_*`` hooks:

- index kind `poincare`: records embedded in the Poincare ball, score = -hyperbolic
  distance
- store kind `chroma`: ChromaDB as a (possibly networked) record store and vector index
- service kind `hyperamy`: the Poincare emotional memory

Status: package layout only. The module is installed and announced under the
``memcore`` entry-point group as ``poincare``, but it registers nothing yet: it has no hook
implementations, so it never offers a component that does not really work. The
implementation is tracked in a later issue.
"""

__all__: list[str] = []
