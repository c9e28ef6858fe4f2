"""memcore-faiss: vector database index on faiss-cpu.

This distribution will provide, through memcore's ``register_*`` hooks:

- index kind `faiss`: approximate and exact vector search with faiss-cpu (Flat, IVF,
  HNSW)
- `allowed` id sets pushed down to faiss through an IDSelector
- tombstones plus rebuild where faiss cannot remove ids (HNSW)
- native faiss files for persistence (no pickle)

Status: package layout only. The module is installed and announced under the
``memcore`` entry-point group as ``faiss``, but it registers nothing yet: it has no hook
implementations, so it never offers a component that does not really work. The
implementation is tracked in issue 3.
"""

__all__: list[str] = []
