"""memcore-fifo-kv: FIFO queue, sorted key-value and BM25 text indexes.

This distribution will provide, through memcore's ``register_*`` hooks:

- index kind `fifo`: a bounded first-in-first-out queue with `oldest`/`newest` query
  modes
- index kind `sorted`: records ordered by a metadata key, with range queries
- index kind `bm25`: BM25 text search on bm25s with incremental segments and merges

Status: package layout only. The module is installed and announced under the
``memcore`` entry-point group as ``fifo-kv``, but it registers nothing yet: it has no hook
implementations, so it never offers a component that does not really work. The
implementation is tracked in issue 3.
"""

__all__: list[str] = []
