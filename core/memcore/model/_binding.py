"""The caller's scope, bound by the core for the duration of one call.

Scopes are a security boundary: a call made for ``{"user_id": "alice"}`` must not read,
count, update or delete another scope's records, and what it writes (records a service
derives, service state) belongs to alice. Rather than trusting every service and stage to
pass the scope along, the entry points (:class:`memcore.Memory`, the :class:`memcore.Service`
methods) *bind* it on the collection, and the collection applies the bound scope to every
read and write it serves:

- reads (``get``, ``ids``, ``count``, index searches, pipelines, stored vectors) see only
  records the bound scope covers; an id outside it is unknown (:class:`NotFoundError`);
- records written without a scope get the bound one, records with a scope outside it are
  refused (:class:`ScopeError`);
- component state (``get_state``, ``set_state``, ``state=`` of a write) lives in a
  namespace of its own per bound scope, so per-user state (a profile, heat, segments) is
  kept per user and forgotten with the user.

A binding is per thread and per asyncio task (a :class:`contextvars.ContextVar`), and
nests: binding ``{"run_id": "r1"}`` inside ``{"user_id": "alice"}`` narrows to both; a
scope that contradicts the bound one is a :class:`ScopeError`.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator, Mapping

from ..errors import ScopeError
from ._record import Record, Scope

__all__ = ["ScopeBinding", "narrow", "stamp_scope", "state_namespace", "namespace_scope", "SCOPED_STATE_MARK"]

SCOPED_STATE_MARK = "@scope:"
"""What separates a state namespace from the scope it belongs to (``memoryos@scope:{...}``)."""


def narrow(outer: Scope | None, inner: Scope | None) -> Scope | None:
    """The scope that both ``outer`` and ``inner`` ask for (None: no restriction).

    Raises :class:`ScopeError` when they contradict each other (two different user ids).
    """
    if outer is None or outer.is_empty():
        return inner if inner is not None and not inner.is_empty() else None
    if inner is None or inner.is_empty():
        return outer
    fields = outer.as_dict()
    for key, value in inner.as_dict().items():
        if fields.setdefault(key, value) != value:
            raise ScopeError(f"scope {inner.as_dict()} is outside the scope this call is bound to ({outer.as_dict()})")
    return Scope(**fields)


def state_namespace(namespace: str, scope: Scope | None) -> str:
    """Where ``namespace``'s state is stored for ``scope`` (the plain name when unscoped)."""
    if scope is None or scope.is_empty():
        return namespace
    return namespace + SCOPED_STATE_MARK + json.dumps(scope.as_dict(), sort_keys=True, ensure_ascii=False)


def namespace_scope(stored: str) -> Scope | None:
    """The scope a stored state namespace belongs to (None for an unscoped one)."""
    _, mark, scope = stored.partition(SCOPED_STATE_MARK)
    if not mark:
        return None
    try:
        return Scope.coerce(json.loads(scope))
    except (ValueError, TypeError):
        return None


def stamp_scope(records: list[Record], scope: Scope | None, what: str = "the scope") -> None:
    """Give ``records`` without a scope ``scope``; a record whose own scope lies outside it
    (another user's) is a :class:`ScopeError`, raised before any record is changed."""
    if scope is None:
        return
    outside = [r for r in records if r.scope is not None and not r.scope.is_empty() and not scope.covers(r.scope)]
    if outside:
        first = outside[0]
        owner = first.scope.as_dict() if first.scope is not None else {}
        raise ScopeError(f"record {first.id!r} has scope {owner}, outside {what} {scope.as_dict()}")
    for r in records:
        if r.scope is None or r.scope.is_empty():
            r.scope = scope


class ScopeBinding:
    """The scope bound on one collection, per thread and task."""

    def __init__(self) -> None:
        self.var: ContextVar[Scope | None] = ContextVar(f"memcore-scope-{id(self)}", default=None)
        """The bound scope as a context variable (``var.get()``: what :attr:`scope` returns, without a call here)."""

    @property
    def scope(self) -> Scope | None:
        """The bound scope (None: the call is not restricted)."""
        return self.var.get()

    @contextmanager
    def bind(self, scope: Scope | Mapping[str, Any] | None) -> Iterator[Scope | None]:
        """Restrict what runs inside to ``scope`` (narrowed with what is already bound)."""
        current = self.var.get()
        if scope is None or scope is current:  # nothing new to bind (a checked query carries the bound scope itself)
            yield current
            return
        bound = narrow(current, scope if type(scope) is Scope else Scope.coerce(scope))
        token = self.var.set(bound)
        try:
            yield bound
        finally:
            self.var.reset(token)

    def effective(self, scope: Scope | Mapping[str, Any] | None) -> Scope | None:
        """The scope a read asked for, restricted to the bound one."""
        return narrow(self.var.get(), Scope.coerce(scope))

    def covers(self, record: Record) -> bool:
        """True when ``record`` is visible to the bound scope."""
        bound = self.var.get()
        return bound is None or bound.covers(record.scope)

    def stamp(self, records: list[Record]) -> None:
        """Give records written without a scope the bound one; refuse one outside it."""
        stamp_scope(records, self.var.get(), "the scope this call is bound to")

    def namespace(self, namespace: str) -> str:
        """Where the bound scope's state of ``namespace`` is stored."""
        return state_namespace(namespace, self.var.get())
