"""Who is calling, and the scope imposed on everything they do.

Each request presents ``Authorization: Bearer <key>``; the key ring (the core's
:class:`memcore.plugin.ApiKeyRing`: SHA-256 digests, constant-time lookup) says which
declared key it is. A key bound to a scope runs every call inside
``memory.collection.scoped(key.scope)``: the core then hides every record outside the
scope (an id of another tenant is as unknown as an id nobody wrote: the same 404), stamps
the scope on what the call writes, and refuses a scope the call asks for outside it
(a 403 here). An admin key, or any call to a server without keys, is unrestricted.

Record ids are global in a collection; a scoped caller's ids live in a namespace of its
scope (:mod:`.idspace`), so a tenant never collides with, nor learns of, another's ids.

Keys are never logged, echoed or kept: only their names are.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Union

import memcore
from memcore import AuthenticationError, PermissionDeniedError, ScopeError
from memcore.plugin import ApiKey, ApiKeyRing, get_logger

from .idspace import TenantMemory

__all__ = ["Caller", "authenticate", "known_caller", "imposed", "Served"]

log = get_logger("memcore.server")


@dataclass(frozen=True)
class Caller:
    """The caller of one request: the key's name (``None`` without keys) and its scope."""

    name: str | None
    scope: Mapping[str, str] | None
    admin: bool

    def describe(self) -> dict[str, Any]:
        """What ``/v1/info`` says about the caller (never the key)."""
        return {"key": self.name, "admin": self.admin, "scope": dict(self.scope) if self.scope else None}


ANONYMOUS = Caller(name=None, scope=None, admin=True)
"""The caller of a server that declares no keys (only served on loopback unless allowed)."""


def authenticate(ring: ApiKeyRing, authorization: str | None) -> Caller:
    """The caller an ``Authorization`` header names.

    :raises AuthenticationError: keys are declared and the header carries none of them.
    """
    who = known_caller(ring, authorization)
    if who is None:
        log.info("server.auth_refused", presented=bool(authorization))
        raise AuthenticationError("missing or unknown API key: send Authorization: Bearer <key>")
    return who


def known_caller(ring: ApiKeyRing, authorization: str | None) -> Caller | None:
    """The caller an ``Authorization`` header names, or None when keys are declared and the
    header carries none of them (nothing logged: :func:`authenticate` refuses and logs)."""
    if not ring:
        return ANONYMOUS
    key: ApiKey | None = ring.authenticate(authorization)
    return None if key is None else Caller(name=key.name, scope=key.scope, admin=key.admin)


Served = Union[memcore.Memory, TenantMemory]
"""What a call runs on: the memory itself (unrestricted callers) or a tenant's view of it."""


@contextmanager
def imposed(memory: memcore.Memory, caller: Caller) -> Iterator[Served]:
    """Run the block inside the caller's scope, on the memory as the caller sees it (its
    ids in its own namespace, :class:`.idspace.TenantMemory`); a scope outside it becomes a 403."""
    if caller.scope is None:
        yield memory
        return
    try:
        with memory.collection.scoped(caller.scope):
            yield TenantMemory(memory, caller.scope)
    except ScopeError as exc:
        raise PermissionDeniedError(f"outside the scope of API key {caller.name!r}: {exc}") from None
