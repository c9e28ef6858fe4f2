"""LLMs as components: chat models declared in settings (``[llms.<name>] kind = "openai"``),
registered by plugins through ``register_llms``, named by the services and stages that use
them (``llm = "default"``).

Every LLM step (triple extraction, summaries, answering, LLM rerank) has a named
deterministic fallback that runs when no LLM is declared or the call fails;
:func:`run_llm_step` runs one step either way and returns a :class:`StepReport` saying
which one ran, and :class:`StepCounter` adds those reports up for a service's
``llm_report()``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence, TypeVar

from ..errors import ConfigError, MemcoreError
from .._util.log import get_logger

if TYPE_CHECKING:
    from .._plugins._registry import ComponentConfig, Registry

__all__ = ["LLM", "LLMs", "StepReport", "StepCounter", "run_llm_step", "DEFAULT_LLM"]

DEFAULT_LLM = "default"
"""The LLM name services and stages use unless told otherwise."""

log = get_logger("memcore.llm")
T = TypeVar("T")

Messages = str | Sequence[Mapping[str, Any]]


class LLM(ABC):
    """A chat model: ``complete(messages) -> reply text``.

    ``messages`` is one string (a single user message) or a list of
    ``{"role": "system"|"user"|"assistant", "content": str}``. ``model`` names the model
    (recorded in evaluation output). Failures raise a :class:`memcore.MemcoreError`
    subclass, so LLM steps can fall back.
    """

    model: str = ""

    @abstractmethod
    def complete(self, messages: Messages, **options: Any) -> str:
        """The model's reply text. ``options``: per-call overrides (temperature, max_tokens...)."""

    def close(self) -> None:
        """Release what the LLM holds (a server process, connections)."""


class LLMs(Mapping[str, LLM]):
    """The LLMs declared in settings, by name, built on first use and closed together.

    ``llms.get("default")`` is None when no LLM of that name is declared.
    """

    def __init__(self, configs: Mapping[str, "ComponentConfig"] | None = None, registry: "Registry | None" = None, built: Mapping[str, LLM] | None = None):
        self._configs = dict(configs or {})
        self._registry = registry
        self._built: dict[str, LLM] = dict(built or {})

    @classmethod
    def of(cls, **llms: LLM) -> "LLMs":
        """Already built LLMs by name (tests, scripts): ``LLMs.of(default=client)``."""
        return cls(built=llms)

    def __getitem__(self, name: str) -> LLM:
        if name in self._built:
            return self._built[name]
        config = self._configs.get(name)
        if config is None or self._registry is None:
            raise KeyError(name)
        llm = self._registry.get("llms", config.kind, location=f"llms.{name}.kind").build(config)
        if not isinstance(llm, LLM):
            raise ConfigError(f"llm kind {config.kind!r} built a {type(llm).__name__}, not a memcore.LLM", location=f"llms.{name}")
        self._built[name] = llm
        return llm

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self._configs, *self._built]))

    def __len__(self) -> int:
        return len(set(self._configs) | set(self._built))

    def resolve(self, name: str | None, location: str) -> LLM | None:
        """The LLM a component names: None for ``name=None`` or an undeclared ``"default"``
        (its fallback runs); :class:`ConfigError` at ``location`` for another undeclared name."""
        if name is None:
            return None
        if name not in self:
            if name == DEFAULT_LLM:
                return None
            raise ConfigError(f"no LLM named {name!r} is declared (declared: {sorted(self) or 'none'}); add an [llms.{name}] table", location=location)
        return self[name]

    def close(self) -> None:
        """Close every LLM built so far."""
        for llm in self._built.values():
            try:
                llm.close()
            except Exception as exc:  # noqa: BLE001 - closing must not mask the caller's error
                log.warning("llm.close_failed", error=f"{type(exc).__name__}: {exc}")


@dataclass(frozen=True)
class StepReport:
    """Which path one LLM step took: ``used`` is ``"llm"`` or ``"fallback"``; ``fallback`` the
    fallback's name; ``reason`` why the fallback ran (``no_llm``, ``llm_error``,
    ``invalid_reply``); ``model`` the LLM's model when it answered."""

    step: str
    used: str
    fallback: str
    reason: str | None = None
    model: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict."""
        return {"step": self.step, "used": self.used, "fallback": self.fallback, "reason": self.reason, "model": self.model}


def run_llm_step(step: str, llm: LLM | None, call: Callable[[LLM], T], fallback: Callable[[], T], fallback_name: str) -> tuple[T, StepReport]:
    """Run ``call(llm)``; run ``fallback()`` instead when ``llm`` is None or the call raises a
    :class:`MemcoreError` (a failed request, an unparseable reply: raise
    :class:`memcore.ValidationError` from ``call`` for the latter)."""
    if llm is None:
        return fallback(), StepReport(step, "fallback", fallback_name, "no_llm")
    try:
        return call(llm), StepReport(step, "llm", fallback_name, None, llm.model or None)
    except MemcoreError as exc:
        reason = "invalid_reply" if isinstance(exc, ValueError) and not isinstance(exc, ConfigError) else "llm_error"
        log.warning("llm.step_fallback", step=step, reason=reason, error=str(exc)[:300])
        return fallback(), StepReport(step, "fallback", fallback_name, reason)


class StepCounter:
    """How often each LLM step took each path: ``{step: {"llm": n, "fallback:<name>": n}}``,
    and why its fallbacks ran: ``reasons`` = ``{step: {"no_llm" | "llm_error" | "invalid_reply": n}}``."""

    def __init__(self) -> None:
        self.counts: dict[str, dict[str, int]] = {}
        self.reasons: dict[str, dict[str, int]] = {}
        self.models: set[str] = set()

    def add(self, report: StepReport) -> None:
        """Count one report."""
        key = "llm" if report.used == "llm" else f"fallback:{report.fallback}"
        bucket = self.counts.setdefault(report.step, {})
        bucket[key] = bucket.get(key, 0) + 1
        if report.reason:
            why = self.reasons.setdefault(report.step, {})
            why[report.reason] = why.get(report.reason, 0) + 1
        if report.model:
            self.models.add(report.model)

    def to_dict(self) -> dict[str, dict[str, int]]:
        """A copy of the counts."""
        return {step: dict(c) for step, c in self.counts.items()}

    def reasons_dict(self) -> dict[str, dict[str, int]]:
        """A copy of the fallback reasons per step (steps whose fallback never ran are absent)."""
        return {step: dict(c) for step, c in self.reasons.items()}
