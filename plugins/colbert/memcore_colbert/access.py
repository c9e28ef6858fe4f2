"""API keys of ``memcore colbert serve``: an ASGI wrapper refusing calls without a declared key.

Keys follow memcore's scheme (:class:`memcore.plugin.ApiKeyRing`): declared as SHA-256
digests, presented as ``Authorization: Bearer <key>``, compared in constant time. The
colbert server has no scopes of its own, so an admin key or any declared key is enough.
With no key declared the server accepts every call (the default, for a server on
127.0.0.1). The gate runs before the body is read: a caller without a key cannot make the
server buffer anything. Neither a key nor the header is ever logged.
"""

from __future__ import annotations

from typing import Any, Mapping

from memcore.plugin import ApiKeyRing, ConfigError, get_logger

from .body_limit import ASGIApp, Receive, Scope, Send, send_json_error

__all__ = ["ApiKeyGate", "key_ring"]

log = get_logger("memcore.colbert")


def key_ring(declared: Mapping[str, Mapping[str, Any]] | None = None, digests: tuple[str, ...] | list[str] = ()) -> ApiKeyRing:
    """The ring of a keys table (name -> {sha256, admin | scope}) plus bare digests (admin keys
    named ``key-1``, ``key-2``...); ConfigError for a malformed declaration."""
    table = {name: dict(fields) for name, fields in (declared or {}).items()}
    for number, digest in enumerate(digests, start=1):
        name = f"key-{number}"
        if name in table:
            raise ConfigError(f"API key name {name!r} is declared twice (the keys file and --api-key-sha256)")
        table[name] = {"sha256": digest, "admin": True}
    return ApiKeyRing.from_settings(table)


class ApiKeyGate:
    """Wraps an ASGI app: with keys declared, a call without a valid key gets a JSON 401."""

    def __init__(self, app: ASGIApp, keys: ApiKeyRing):
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.keys:
            await self.app(scope, receive, send)
            return
        header = dict(scope.get("headers") or []).get(b"authorization")
        key = self.keys.authenticate(header.decode("latin-1") if header is not None else None)
        if key is None:
            log.warning("colbert.unauthorized", path=str(scope.get("path", ""))[:200], key_sent=header is not None)
            await send_json_error(
                send,
                401,
                "AuthenticationError",
                "this server needs an API key: send 'Authorization: Bearer <key>'" if header is None else "unknown API key",
                close=True,
                headers=[(b"www-authenticate", b"Bearer")],
            )
            return
        scope.setdefault("state", {})["api_key"] = key.name
        await self.app(scope, receive, send)
