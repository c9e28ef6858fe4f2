"""memcore for LangChain: a VectorStore and a Retriever over any memcore memory.

- :class:`MemcoreVectorStore`: LangChain's ``VectorStore`` on a memcore memory (one vector
  index of it), with memcore ``where`` filters and memcore's MMR.
- :class:`MemcoreRetriever`: LangChain's ``BaseRetriever`` over the memory's declared
  pipeline (``hybrid``, ...) or its service (``memoryos``, ...).
- :class:`MemcoreStore`: LangGraph's long-term memory store (``BaseStore``) on a memory.
- :class:`MemcoreEmbeddings`: a memcore embedder seen as LangChain ``Embeddings``.
"""

from .embeddings import MemcoreEmbeddings
from .retriever import MemcoreRetriever
from .store import MemcoreStore
from .vectorstore import MemcoreVectorStore

__all__ = ["MemcoreVectorStore", "MemcoreRetriever", "MemcoreStore", "MemcoreEmbeddings"]
