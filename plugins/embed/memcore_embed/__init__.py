"""memcore-embed: real embedders and the OpenAI-compatible chat client.

This distribution will provide, through memcore's ``register_*`` hooks:

- embedder kind `minilm`: all-MiniLM-L6-v2 loaded offline from a packaged copy
- embedder kind `openai`: any OpenAI-compatible embeddings endpoint
- the OpenAI-compatible chat client used by the LLM steps, and stage kind `llm_rerank`

Status: package layout only. The module is installed and announced under the
``memcore`` entry-point group as ``embed``, but it registers nothing yet: it has no hook
implementations, so it never offers a component that does not really work. The
implementation is tracked in issue 4.
"""

__all__: list[str] = []
