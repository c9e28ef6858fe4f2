"""memcore for LlamaIndex.

- :class:`MemcoreVectorStore`: LlamaIndex's ``BasePydanticVectorStore`` on a memcore memory.
- :class:`MemcoreRetriever`: LlamaIndex's ``BaseRetriever`` over a memory's declared
  pipeline or service, returning ``NodeWithScore``.
- :class:`MemcoreMemoryBlock`: a memory block for a LlamaIndex agent's ``Memory``: the
  conversation goes into a memcore service, relevant long-term facts come back.
"""

from .memory_block import MemcoreMemoryBlock
from .retriever import MemcoreRetriever
from .vectorstore import MemcoreVectorStore

__all__ = ["MemcoreVectorStore", "MemcoreRetriever", "MemcoreMemoryBlock"]
