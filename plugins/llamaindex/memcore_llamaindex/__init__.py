"""memcore for LlamaIndex.

- :class:`MemcoreVectorStore`: LlamaIndex's ``BasePydanticVectorStore`` on a memcore memory.
- :class:`MemcoreRetriever`: LlamaIndex's ``BaseRetriever`` over a memory's declared
  pipeline or service, returning ``NodeWithScore``.
- :class:`MemcoreMemoryBlock`: a memory block for a LlamaIndex agent's ``Memory``: the
  conversation goes into a memcore service, relevant long-term facts come back.
- :class:`MemcoreEmbedding`: a memcore embedder (the offline MiniLM...) as a LlamaIndex embed model.
"""

from .embedding import MemcoreEmbedding
from .memory_block import MemcoreMemoryBlock
from .retriever import MemcoreRetriever
from .vectorstore import MemcoreVectorStore

__all__ = ["MemcoreVectorStore", "MemcoreRetriever", "MemcoreMemoryBlock", "MemcoreEmbedding"]
