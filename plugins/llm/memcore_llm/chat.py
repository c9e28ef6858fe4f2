"""The OpenAI-compatible chat client used by the LLM steps (rerank, triple extraction,
summaries, answering): ``POST {base_url}/chat/completions``.

It is the LLM kind ``openai`` (a :class:`memcore.plugin.LLM`), declared in settings as
``[llms.<name>] kind = "openai" base_url = "..." model = "..."`` and named by the services
and stages that use it (``llm = "default"``). It shares memcore's HTTP client
(:class:`memcore.JsonHttpClient`) with memcore-embed's ``openai`` embedder: same key
handling, retries, backoff and errors (:class:`memcore.EndpointError`).
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal, Mapping, Sequence

from memcore.plugin import LLM, ComponentConfig, ConfigError, EndpointConfig, JsonHttpClient, RequestStats, ValidationError
from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

__all__ = ["ChatConfig", "ChatClient", "ChatMessage", "ChatOptions", "parse_json_reply"]


class ChatConfig(EndpointConfig, ComponentConfig):
    """Settings of the chat client (an ``[llms.<name>]`` table of kind ``openai``), plus the
    fields of :class:`EndpointConfig`."""

    kind: str = "openai"
    model: str = Field(..., min_length=1, description="Model name sent to the server.")
    timeout_s: float = Field(60.0, gt=0, description="Timeout of one request, in seconds (replies take longer than embeddings).")
    max_retries: int = Field(3, ge=0, le=20, description="Retries after the first attempt on 429, 5xx, timeouts and connection errors.")
    temperature: float = Field(0.0, ge=0, le=2, description="Sampling temperature (0: as deterministic as the server allows).")
    max_tokens: int | None = Field(512, ge=1, description="Longest reply in tokens; None leaves it to the server.")


class ChatMessage(BaseModel):
    """One message of a conversation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str


class ChatOptions(BaseModel):
    """Per-call overrides accepted by :meth:`ChatClient.complete` (anything else is refused)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = Field(None, min_length=1)
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = None
    stop: str | list[str] | None = None
    response_format: dict[str, Any] | None = None


def _first_error(exc: PydanticValidationError, prefix: str = "") -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"{prefix}{where}: {first['msg']}" if where else f"{prefix}{first['msg']}"


_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n?(.*?)```", re.DOTALL)


def parse_json_reply(text: str) -> dict[str, Any]:
    """The JSON object in a model's reply: the whole reply, a ```json fenced block, or the
    outermost ``{...}`` inside prose. :class:`memcore.ValidationError` when there is none."""
    candidates = [m.group(1).strip() for m in _FENCE.finditer(text)]
    candidates.append(text.strip())
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    found_other: str | None = None
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
        found_other = type(value).__name__
    shown = " ".join(text.split())[:200]
    if found_other:
        raise ValidationError(f"the model replied with a JSON {found_other}, expected a JSON object: {shown!r}")
    raise ValidationError(f"the model's reply holds no parseable JSON object: {shown!r}")


class ChatClient(LLM):
    """Chat completions from an OpenAI-compatible server.

    ``complete(messages) -> str`` and ``complete_json(messages, schema=None) -> dict``.
    ``messages`` is a list of ``{"role": "system"|"user"|"assistant", "content": str}``
    (or one string, sent as a single user message).
    """

    def __init__(self, config: ChatConfig | Mapping[str, Any]):
        if not isinstance(config, ChatConfig):
            try:
                config = ChatConfig.model_validate(dict(config))
            except PydanticValidationError as exc:
                raise ConfigError(_first_error(exc)) from None
        self.config = config
        self._http = JsonHttpClient(config)

    @property
    def model(self) -> str:  # type: ignore[override]  # memcore.plugin.LLM declares model a writable attribute, not a property
        """The model name sent to the server."""
        return self.config.model

    @property
    def stats(self) -> RequestStats:
        """Requests, retries and retry delays of this client."""
        return self._http.stats

    @staticmethod
    def _messages(messages: str | Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        if not isinstance(messages, Sequence) or not messages:
            raise ValidationError("messages must be a non-empty list of {role, content} (or one string)")
        out = []
        for i, message in enumerate(messages):
            try:
                out.append(ChatMessage.model_validate(message).model_dump())
            except PydanticValidationError as exc:
                raise ValidationError(_first_error(exc, f"messages[{i}].")) from None
        return out

    def _payload(self, messages: str | Sequence[Mapping[str, Any]], overrides: Mapping[str, Any]) -> dict[str, Any]:
        try:
            options = ChatOptions.model_validate(dict(overrides))
        except PydanticValidationError as exc:
            raise ValidationError(_first_error(exc, "chat option ")) from None
        payload: dict[str, Any] = {
            "model": self.config.model,
            "messages": self._messages(messages),
            "temperature": self.config.temperature,
        }
        if self.config.max_tokens is not None:
            payload["max_tokens"] = self.config.max_tokens
        payload.update(options.model_dump(exclude_none=True))
        return payload

    def complete(self, messages: str | Sequence[Mapping[str, Any]], **overrides: Any) -> str:
        """The assistant's reply text. ``overrides`` are :class:`ChatOptions` fields
        (model, temperature, max_tokens, top_p, seed, stop, response_format)."""
        body = self._http.post("chat/completions", self._payload(messages, overrides))
        try:
            content = body["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise ValidationError(f"chat reply has no choices[0].message.content: {str(body)[:200]!r}") from None
        if not isinstance(content, str):
            raise ValidationError(f"chat reply content is {type(content).__name__}, not text")
        return content

    def complete_json(
        self,
        messages: str | Sequence[Mapping[str, Any]],
        schema: type[BaseModel] | None = None,
        **overrides: Any,
    ) -> dict[str, Any]:
        """The JSON object the model replied with (fenced ```json blocks and surrounding prose
        tolerated). With ``schema`` (a pydantic model class) the object is validated and
        returned as its ``model_dump(mode="json")``. :class:`memcore.ValidationError` when the
        reply holds no JSON object or does not fit the schema."""
        value = parse_json_reply(self.complete(messages, **overrides))
        if schema is None:
            return value
        try:
            return schema.model_validate(value).model_dump(mode="json")
        except PydanticValidationError as exc:
            raise ValidationError(_first_error(exc, f"the model's JSON does not fit {schema.__name__}: ")) from None
