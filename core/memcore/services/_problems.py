"""What a service's consistency check finds: :class:`ServiceProblem`.

A service keeps state beside its records (tiers, segments, counters...). ``Service.check()``
compares the two and returns one :class:`ServiceProblem` per inconsistency it finds;
``Service.repair()`` fixes them and returns the problems it fixed. Both are reads/writes of
the store only, so a memory whose service state is inconsistent still opens
(``memcore.open`` never runs them), is reported (``Memory.check_service``, ``memcore info
--check``) and is repaired (``Memory.repair_service``, ``memcore service repair``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..model._record import Scope

__all__ = ["ServiceProblem"]


@dataclass(frozen=True)
class ServiceProblem:
    """One inconsistency between a service's state and its records.

    ``kind`` is a short stable code (``segment_lists_missing_page``, ``entry_in_two_tiers``...),
    ``message`` says it for a person, ``scope`` is the scope whose state holds it (None:
    unscoped), ``ids`` the records or state keys involved, ``repairable`` whether
    ``Service.repair()`` fixes it.
    """

    kind: str
    message: str
    scope: Scope | None = None
    ids: tuple[str, ...] = field(default_factory=tuple)
    repairable: bool = True

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe form (``memcore info --check --json``, ``memcore service repair --json``)."""
        return {
            "kind": self.kind,
            "message": self.message,
            "scope": self.scope.as_dict() if self.scope is not None else None,
            "ids": list(self.ids),
            "repairable": self.repairable,
        }

    def __str__(self) -> str:
        where = f" [scope {self.scope.as_dict()}]" if self.scope is not None and not self.scope.is_empty() else ""
        return f"{self.kind}: {self.message}{where}"
