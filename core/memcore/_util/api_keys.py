"""API keys for memcore's servers: declared as SHA-256 digests, checked in constant time.

A server never stores or logs a key, only its digest. Each declared key is either bound to
a scope (``{"user_id": "alice"}``: every call made with it is confined to that scope) or
an admin key. The same scheme serves ``memcore serve`` and ``memcore colbert serve``::

    [server.keys.alice]
    sha256 = "<hex digest of the key>"     # memcore keys hash KEY prints it
    scope = {user_id = "alice"}

    [server.keys.ops]
    sha256 = "<hex digest>"
    admin = true
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import ConfigError

__all__ = ["ApiKey", "ApiKeyRing", "hash_api_key", "SCOPE_FIELDS"]

SCOPE_FIELDS = ("user_id", "agent_id", "run_id")
"""The scope fields a key may be bound to."""


def hash_api_key(key: str) -> str:
    """The lowercase hex SHA-256 digest of ``key`` (UTF-8), as declared in settings."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class ApiKey(BaseModel):
    """One declared key: its name, its digest, and either a scope or ``admin = true``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="The key's name in settings (logged instead of the key).")
    sha256: str = Field(description="The lowercase hex SHA-256 digest of the key (64 characters).")
    scope: dict[str, str] | None = Field(default=None, description="The scope every call made with this key is confined to (user_id, agent_id, run_id).")
    admin: bool = Field(default=False, description="An admin key may act on every scope.")

    @field_validator("sha256")
    @classmethod
    def _hex_digest(cls, value: str) -> str:
        value = value.strip().lower()
        if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
            raise ValueError("sha256 must be the 64-character hex SHA-256 digest of the key, not the key itself")
        return value

    @field_validator("scope")
    @classmethod
    def _scope_fields(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is None:
            return None
        unknown = sorted(set(value) - set(SCOPE_FIELDS))
        if unknown:
            raise ValueError(f"unknown scope field(s) {unknown}; use {list(SCOPE_FIELDS)}")
        if not value or any(not isinstance(v, str) or not v for v in value.values()):
            raise ValueError("a key's scope sets at least one field, each to a non-empty string")
        return value

    @model_validator(mode="after")
    def _scope_or_admin(self) -> ApiKey:
        if (self.scope is None) == (not self.admin):
            raise ValueError("a key has either a scope or admin = true (exactly one of them)")
        return self


class ApiKeyRing:
    """The declared keys of one server. Empty means the server accepts calls without a key."""

    def __init__(self, keys: Iterable[ApiKey] = ()):
        self._keys = tuple(keys)
        names = [k.name for k in self._keys]
        if len(set(names)) != len(names):
            raise ConfigError("API key names must be unique")

    @classmethod
    def from_settings(cls, declared: Mapping[str, Mapping[str, Any]] | None) -> ApiKeyRing:
        """Build the ring from a ``keys`` settings table (name -> {sha256, scope | admin}).

        :raises ConfigError: a declaration is malformed (the message names the key).
        """
        keys = []
        for name, fields in (declared or {}).items():
            try:
                keys.append(ApiKey(name=name, **dict(fields)))
            except ValidationError as exc:
                problems = "; ".join(e["msg"] for e in exc.errors())
                raise ConfigError(f"API key {name!r}: {problems}") from None
        return cls(keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __bool__(self) -> bool:
        return bool(self._keys)

    def authenticate(self, authorization: str | None) -> ApiKey | None:
        """The key an ``Authorization: Bearer <key>`` header carries, or ``None``.

        Compares the presented key's digest with every declared digest in constant time
        (no early exit), so timing reveals neither which key matched nor how much of one.
        """
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        presented = hash_api_key(token.strip()).encode("ascii")
        found: ApiKey | None = None
        for key in self._keys:
            if hmac.compare_digest(presented, key.sha256.encode("ascii")):
                found = key
        return found
