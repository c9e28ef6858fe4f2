"""memcore-lsh: locality-sensitive hashing of vectors.

This distribution will provide, through memcore's ``register_*`` hooks:

- index kind `lsh`: random-hyperplane hashing of an embedding space into buckets, the
  vector-hash memory that TiM-style services build on
- candidate lookup by hash bucket, re-ranked by exact similarity

Status: package layout only. The module is installed and announced under the
``memcore`` entry-point group as ``lsh``, but it registers nothing yet: it has no hook
implementations, so it never offers a component that does not really work. The
implementation is tracked in issue 3.
"""

__all__: list[str] = []
