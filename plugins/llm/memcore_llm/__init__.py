"""memcore-llm: the LLM kinds of memcore's LLM steps and the ``llm_rerank`` stage.

Registers, through memcore's ``register_llms`` hook:

- ``openai``: :class:`memcore_llm.chat.ChatClient`, any OpenAI-compatible chat endpoint
  (it talks through :class:`memcore.JsonHttpClient`, the HTTP client it shares with
  memcore-embed's ``openai`` embedder; failures are :class:`memcore.EndpointError`);
- ``llama_server``: :class:`LlamaServerLLM`, a local llama.cpp server (SmolLM2-135M by
  default, :mod:`memcore_llm.llama_server`) started on first use, when
  ``llama-cpp-python`` is installed;

and, through ``register_stages``, the pipeline stage ``llm_rerank`` (:class:`LLMRerankStage`):
the LLM it names reorders the best hits, with a deterministic fallback (``keep`` / ``keyword``).

Standard library and memcore only: importing this module loads no model and starts nothing.
"""

from __future__ import annotations

import memcore
from memcore.plugin import LLMFactory, Register, StageFactory

from .chat import ChatClient, ChatConfig
from .llama_llm import LlamaServerConfig, LlamaServerLLM
from .llm_rerank import LLMRerankConfig, LLMRerankStage, rerank_report

__all__ = [
    "ChatClient",
    "ChatConfig",
    "LlamaServerConfig",
    "LlamaServerLLM",
    "LLMRerankConfig",
    "LLMRerankStage",
    "rerank_report",
    "register_llms",
    "register_stages",
]
__version__ = "0.1.0"


@memcore.hookimpl
def register_stages(register: Register[StageFactory]) -> None:
    """Register the ``llm_rerank`` stage: ``register(name, factory, config_model)``."""
    register("llm_rerank", LLMRerankStage, LLMRerankConfig)


@memcore.hookimpl
def register_llms(register: Register[LLMFactory]) -> None:
    """Register the LLM kinds ``openai`` (the chat client) and ``llama_server`` (formerly ``llama-server``)."""
    register("openai", ChatClient, ChatConfig)
    register("llama_server", LlamaServerLLM, LlamaServerConfig, deprecated_names=("llama-server",))
