"""The clock of ``memoryos``'s heat recency.

MemoryOS measures recency ``exp(-(now - last_visit) / tau)`` on the wall clock. Replaying a
recorded conversation (an evaluation) inserts weeks of dialogue in minutes, so recency is ~1
for every segment. With ``clock = "event"`` the service's clock is instead the latest *event
time* of the entries inserted so far: the first metadata key of ``time_keys`` present on an
entry, parsed by :func:`event_time`. Entries without one do not move the clock.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from typing import Any, Mapping, Protocol, Sequence

from memcore.plugin import ValidationError

from .common import now
from .memoryos_state import StateView

__all__ = ["event_time", "EventClock"]

# LoCoMo's session dates ("1:56 pm on 8 May, 2023") and a few common spellings
_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%d %B, %Y", "%d %B %Y", "%B %d, %Y", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d")
_SPACES = re.compile(r"\s+")


def _epoch(dt: datetime) -> float:
    return (dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)).timestamp()


def event_time(value: Any, key: str = "timestamp") -> float:
    """Seconds since the epoch of an entry's event time: a number (epoch seconds), an ISO 8601
    string, or a date such as LoCoMo's ``"1:56 pm on 8 May, 2023"`` (naive times are UTC).
    Raises :class:`memcore.ValidationError` naming ``key`` for anything else."""
    if isinstance(value, bool):
        raise ValidationError(f"metadata {key!r}: a boolean is not an event time")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValidationError(f"metadata {key!r}: event time must be finite, got {value!r}")
        return float(value)
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"metadata {key!r}: event time must be a number or a date string, got {value!r}")
    text = _SPACES.sub(" ", value.strip())
    try:
        return _epoch(datetime.fromisoformat(text))
    except ValueError:
        pass
    for fmt in _FORMATS:
        try:
            return _epoch(datetime.strptime(text, fmt))
        except ValueError:
            continue
    raise ValidationError(f"metadata {key!r}: cannot read {value!r} as an event time (epoch seconds, ISO 8601 or e.g. '1:56 pm on 8 May, 2023')")


class ClockConfig(Protocol):
    """What :class:`EventClock` reads of the service's settings."""

    @property
    def clock(self) -> str: ...

    @property
    def time_keys(self) -> Sequence[str]: ...


class EventClock:
    """The clock methods of ``memoryos`` (a mixin: needs ``self.config`` with ``clock`` and
    ``time_keys``, and ``self.state``, the service's :class:`StateView`)."""

    config: ClockConfig
    state: StateView

    def _clock_change(self, metadata: Mapping[str, Any] | None) -> dict[str, Any]:
        """``{"clock": t}`` when the entry's event time moves the event clock forward."""
        t = self._event_of(metadata) if self.config.clock == "event" else None
        return {"clock": t} if t is not None and t > float(self.state.get("clock", float("-inf"))) else {}

    def _event_of(self, metadata: Mapping[str, Any] | None) -> float | None:
        """The event time of an entry: its first ``time_keys`` value present, parsed (None: none)."""
        key = next((k for k in self.config.time_keys if (metadata or {}).get(k) is not None), None)
        return None if key is None or metadata is None else event_time(metadata[key], key)

    def _now(self) -> float:
        """Wall-clock seconds, or (``clock = "event"``) the latest event time seen (0 before any)."""
        return now() if self.config.clock == "wall" else float(self.state.get("clock", 0.0))

    def _batch_time(self, pages: Sequence[Any]) -> float:
        """When pages joined MTM: now, or (``clock = "event"``) the latest event time among
        them (pages: anything with ``metadata``; the clock when none has one)."""
        if self.config.clock == "wall":
            return now()
        times = [t for p in pages if (t := self._event_of(p.metadata)) is not None]
        return max(times) if times else self._now()
