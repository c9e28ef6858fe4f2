"""A small synchronous client of the colbert HTTP API (urllib, no extra dependency)."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Mapping, Sequence

from memcore import AuthenticationError, PermissionDeniedError
from memcore.plugin import CorruptError, MemcoreError, NotFoundError, ValidationError

from .names import check_index_name

__all__ = ["ColbertClient", "ServerError", "to_tsv"]


class ServerError(MemcoreError):
    """The server could not be reached or answered with an unexpected error."""


def to_tsv(passages: Sequence[tuple[str, str]]) -> str:
    """``pid\\ttext`` lines; tabs and newlines inside texts become spaces."""
    return "".join(f"{pid}\t{' '.join(text.split())}\n" for pid, text in passages)


class ColbertClient:
    """Calls of ``memcore colbert serve``; server errors come back as memcore errors."""

    def __init__(self, url: str, timeout: float = 30.0, *, api_key: str | None = None, api_key_env: str | None = None):
        """``api_key`` (or the environment variable named ``api_key_env``, read at each call):
        sent as ``Authorization: Bearer`` to a server that declares keys; never logged."""
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._api_key = api_key or None
        self.api_key_env = api_key_env or None

    def _key(self) -> str | None:
        if self._api_key:
            return self._api_key
        return (os.environ.get(self.api_key_env, "").strip() or None) if self.api_key_env else None

    def _auth_hint(self) -> str:
        if self._api_key:
            return " (the API key given was refused)"
        if self.api_key_env:
            return f" (the API key is read from ${self.api_key_env}, which {'is set' if os.environ.get(self.api_key_env) else 'is NOT set'})"
        return " (no API key is sent: set api_key_env to the name of the variable holding it)"

    def _call(self, method: str, path: str, body: Any = None, params: Mapping[str, Any] | None = None) -> Any:
        url = self.url + path + (("?" + urllib.parse.urlencode(params)) if params else "")
        data = json.dumps(body).encode("utf-8") if body is not None else None
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = self._key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            try:
                payload = json.loads(exc.read().decode("utf-8")).get("error", {})
            except (ValueError, AttributeError):
                payload = {}
            message = f"colbert server {self.url}: {payload.get('message') or exc.reason} (HTTP {exc.code})"
            if exc.code == 401:
                raise AuthenticationError(message + self._auth_hint()) from None
            if exc.code == 403:
                raise PermissionDeniedError(message) from None
            if exc.code == 404:
                raise NotFoundError(message) from None
            if exc.code in (400, 409, 413, 422):
                raise ValidationError(message) from None
            if exc.code == 500 and payload.get("type") == "CorruptError":
                raise CorruptError(message) from None
            raise ServerError(message) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise ServerError(f"colbert server {self.url} unreachable: {exc}") from None

    def health(self) -> dict[str, Any]:
        answer: dict[str, Any] = self._call("GET", "/api/health")
        return answer

    def info(self, index_name: str) -> dict[str, Any]:
        answer: dict[str, Any] = self._call("GET", f"/api/indexes/{check_index_name(index_name)}")
        return answer

    def create_index(
        self,
        index_name: str,
        passages: Sequence[tuple[str, str]],
        metadata: Mapping[str, Any] | None = None,
        config: Mapping[str, Any] | None = None,
        overwrite: bool = False,
    ) -> dict[str, Any]:
        answer: dict[str, Any] = self._call(
            "POST",
            "/api/create-index",
            {
                "index_name": index_name,
                "collection_tsv_data": to_tsv(passages),
                "metadata": dict(metadata or {}),
                "config": dict(config or {}),
                "overwrite": overwrite,
            },
        )
        return answer

    def add_to_index(self, index_name: str, passages: Sequence[tuple[str, str]], metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
        answer: dict[str, Any] = self._call(
            "POST", "/api/add-to-index", {"index_name": index_name, "collection_tsv_data": to_tsv(passages), "metadata": dict(metadata or {})}
        )
        return answer

    def delete_passages(self, index_name: str, pids: Sequence[str]) -> int:
        return int(self._call("DELETE", f"/api/indexes/{check_index_name(index_name)}/passages", {"pids": list(pids)})["deleted"])

    def drop_index(self, index_name: str) -> None:
        self._call("DELETE", f"/api/indexes/{check_index_name(index_name)}")

    def search(self, index_name: str, query: str, k: int, pids: Sequence[str] | None = None, exhaustive: bool = False) -> list[dict[str, Any]]:
        if pids is None and not exhaustive:
            topk: list[dict[str, Any]] = self._call("GET", "/api/search", params={"query": query, "k": k, "index_name": index_name})["topk"]
            return topk
        body: dict[str, Any] = {"index_name": index_name, "query": query, "k": k, "exhaustive": exhaustive}
        if pids is not None:
            body["pids"] = list(pids)
        topk = self._call("POST", "/api/search", body)["topk"]
        return topk
