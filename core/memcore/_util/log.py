"""memcore's structlog events: quiet by default, ``MEMCORE_LOG=json|console`` to see them.

``MEMCORE_LOG_LEVEL`` (default ``info`` when ``MEMCORE_LOG`` is set) filters by level.
Events are key-value: ``index.rebuilt name=dense records=1000 seconds=0.4``. memcore
wraps its own loggers and never changes the application's global structlog setup.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import structlog

__all__ = ["get_logger", "configure_logging"]

_state: dict[str, Any] = {"logger": None, "enabled": False, "configured": False}


def configure_logging(mode: str | None = None, level: str | None = None) -> None:
    """(Re)configure memcore's events from arguments, else from the environment."""
    mode = (mode or os.environ.get("MEMCORE_LOG") or "off").lower()
    _state["configured"] = True
    _state["enabled"] = mode in ("json", "console")
    level_name = (level or os.environ.get("MEMCORE_LOG_LEVEL") or "info").upper()
    numeric = getattr(logging, level_name, logging.INFO)
    renderer = structlog.processors.JSONRenderer() if mode == "json" else structlog.dev.ConsoleRenderer(colors=False)
    _state["logger"] = structlog.wrap_logger(
        structlog.PrintLogger(file=sys.stderr),
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso"), renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
    )


class _Logger:
    """A named logger that follows :func:`configure_logging` even when created earlier."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def _emit(self, method: str, event: str, **kw: Any) -> None:
        if not _state["configured"]:
            configure_logging()
        if not _state["enabled"]:
            return
        getattr(_state["logger"], method)(event, logger=self.name, **kw)

    def debug(self, event: str, **kw: Any) -> None:
        """Log at debug level."""
        self._emit("debug", event, **kw)

    def info(self, event: str, **kw: Any) -> None:
        """Log at info level."""
        self._emit("info", event, **kw)

    def warning(self, event: str, **kw: Any) -> None:
        """Log at warning level."""
        self._emit("warning", event, **kw)

    def error(self, event: str, **kw: Any) -> None:
        """Log at error level."""
        self._emit("error", event, **kw)


def get_logger(name: str) -> _Logger:
    """A memcore logger; events are key-value pairs."""
    return _Logger(name)
