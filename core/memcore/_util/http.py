"""JSON POSTs to an OpenAI-compatible server: the HTTP client plugins share.

Standard library only (``urllib.request`` + ``json``), exported by :mod:`memcore` for
plugins, which may not import each other: memcore-embed's ``openai`` embedder and
memcore-llm's chat client (``openai`` LLM kind) use it, so both follow one policy:

- the API key is read from the environment variable named by ``api_key_env`` at each
  request (never stored in settings); no variable or an unset one sends no
  ``Authorization`` header (local servers);
- HTTP 429 and 5xx, timeouts and connection errors are retried up to ``max_retries``
  times with exponential backoff and jitter (``backoff_s * 2**attempt``, scaled by a
  random factor in [0.5, 1], capped at ``max_backoff_s``); a ``Retry-After`` header
  (seconds or an HTTP date) is honoured, up to ``max_backoff_s``;
- other statuses fail at once; failures raise :class:`EndpointError`, a 2xx reply that
  is not JSON raises :class:`memcore.ValidationError`.
"""

from __future__ import annotations

import email.utils
import json
import os
import random
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..errors import EndpointError, ValidationError
from .log import get_logger

__all__ = ["EndpointConfig", "JsonHttpClient", "RequestStats", "parse_retry_after"]

log = get_logger("memcore.http_client")

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_USER_AGENT = "memcore/0.1 (+urllib)"
_EXCERPT = 300


class EndpointConfig(BaseModel):
    """Where an OpenAI-compatible server is and how patiently to talk to it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = Field("https://api.openai.com/v1", description="Server root including the version, e.g. http://127.0.0.1:8080/v1.")
    api_key_env: str | None = Field(
        "OPENAI_API_KEY",
        description="Name of the environment variable holding the API key, read at each request; None or unset: no key.",
    )
    timeout_s: float = Field(30.0, gt=0, description="Timeout of one HTTP request, in seconds.")
    max_retries: int = Field(4, ge=0, le=20, description="Retries after the first attempt on 429, 5xx, timeouts and connection errors.")
    backoff_s: float = Field(0.5, ge=0, description="Delay before the first retry; doubles at each retry (with jitter).")
    max_backoff_s: float = Field(30.0, ge=0, description="Longest wait between two attempts (also caps Retry-After).")

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, value: str) -> str:
        value = value.strip()
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {value!r}")
        return value.rstrip("/")

    @field_validator("api_key_env")
    @classmethod
    def _check_env_name(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        if not _ENV_NAME.match(value):
            raise ValueError("api_key_env is the NAME of an environment variable (letters, digits, '_'), not the key itself; export the key in that variable")
        return value


@dataclass
class RequestStats:
    """Counters of one client: requests sent, retries made and the delays waited."""

    requests: int = 0
    retries: int = 0
    failures: int = 0
    retry_delays: list[float] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def _count(self, *, request: bool = False, retry_delay: float | None = None, failure: bool = False) -> None:
        with self._lock:
            self.requests += request
            self.failures += failure
            if retry_delay is not None:
                self.retries += 1
                self.retry_delays.append(retry_delay)
                del self.retry_delays[:-100]


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta seconds or HTTP date); None if absent/invalid."""
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    current = datetime.now(timezone.utc).timestamp() if now is None else now
    return max(0.0, when.timestamp() - current)


def _excerpt(raw: bytes | str) -> str:
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    text = " ".join(text.split())
    return text if len(text) <= _EXCERPT else text[:_EXCERPT] + "..."


def _server_message(raw: bytes) -> str:
    """The ``error.message`` of an OpenAI-style error body, else an excerpt of the body."""
    try:
        body = json.loads(raw)
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return _excerpt(error["message"])
        if isinstance(error, str):
            return _excerpt(error)
    except (ValueError, UnicodeDecodeError):
        pass
    return _excerpt(raw) or "(empty body)"


class JsonHttpClient:
    """POSTs JSON to ``{base_url}/{path}`` with the retry policy of :class:`EndpointConfig`."""

    def __init__(self, config: EndpointConfig):
        self.config = config
        self.stats = RequestStats()
        self._random = random.Random()

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": _USER_AGENT}
        name = self.config.api_key_env
        key = os.environ.get(name, "").strip() if name else ""
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        cap = self.config.max_backoff_s
        delay: float = min(cap, self.config.backoff_s * (2**attempt)) * self._random.uniform(0.5, 1.0)  # int ** int is Any to mypy
        if retry_after is not None:
            delay = max(delay, min(cap, retry_after))
        return delay

    def _hint(self, status: int) -> str:
        if status in (401, 403):
            name = self.config.api_key_env
            if name is None:
                return " (no API key is sent: set api_key_env to the name of the variable holding it)"
            state = "is set" if os.environ.get(name) else "is NOT set"
            return f" (the API key is read from ${name}, which {state})"
        if status == 404:
            return f" (check base_url {self.config.base_url!r}: it usually ends in /v1)"
        return ""

    def post(self, path: str, payload: dict[str, Any]) -> Any:
        """POST ``payload`` as JSON and return the decoded JSON reply.

        Raises :class:`EndpointError` when the server keeps failing (or fails in a
        way retrying cannot fix) and :class:`memcore.ValidationError` when a 2xx reply is
        not JSON.
        """
        import http.client  # here, not at module level: ``import memcore`` need not load http/ssl
        import urllib.error
        import urllib.request

        url = f"{self.config.base_url}/{path.lstrip('/')}"
        body = json.dumps(payload, ensure_ascii=False, allow_nan=False).encode("utf-8")
        attempts = self.config.max_retries + 1
        for attempt in range(attempts):
            request = urllib.request.Request(url, data=body, headers=self._headers(), method="POST")
            self.stats._count(request=True)
            retry_after: float | None = None
            status: int | None = None
            try:
                with urllib.request.urlopen(request, timeout=self.config.timeout_s) as response:
                    raw = response.read()
            except urllib.error.HTTPError as exc:
                status = exc.code
                try:
                    raw_error = exc.read()
                except (OSError, http.client.HTTPException):
                    raw_error = b""
                finally:
                    exc.close()
                problem = f"HTTP {status}: {_server_message(raw_error)}"
                if status != 429 and status < 500:
                    self.stats._count(failure=True)
                    raise EndpointError(f"POST {url} failed with {problem}{self._hint(status)}", url=url, status=status, attempts=attempt + 1) from None
                retry_after = parse_retry_after(exc.headers.get("Retry-After") if exc.headers else None)
            except (OSError, http.client.HTTPException) as exc:  # URLError, timeouts, refused/reset connections
                reason = getattr(exc, "reason", exc)
                kind = "timed out" if isinstance(reason, TimeoutError) or "timed out" in str(reason) else "connection error"
                problem = f"{kind} ({reason}; timeout_s={self.config.timeout_s})" if kind == "timed out" else f"{kind}: {reason}"
            else:
                return self._decode(raw, url)
            if attempt + 1 >= attempts:
                self.stats._count(failure=True)
                raise EndpointError(f"POST {url} failed after {attempts} attempt(s): {problem}", url=url, status=status, attempts=attempts) from None
            delay = self._delay(attempt, retry_after)
            self.stats._count(retry_delay=delay)
            log.info("http.retry", url=url, attempt=attempt + 1, problem=problem, delay_s=round(delay, 3))
            time.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _decode(raw: bytes, url: str) -> Any:
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise ValidationError(f"POST {url} returned a reply that is not JSON: {_excerpt(raw)!r}") from None
