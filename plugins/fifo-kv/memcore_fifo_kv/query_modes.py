"""Query modes: an index's entry of ``Query.extras``, parsed by a pydantic model into a typed mode.

Convention (shared with the ``bm25`` index): an index reads its modes from
``Query.extras[<its kind>]`` -- ``extras["fifo"]`` for a fifo index, ``extras["sorted"]``
for a sorted index -- and ignores every other key, so one ``Query`` can carry the modes
of several indexes of a pipeline. No entry (or ``None``) is the default mode.

Each index of this plugin declares its modes as pydantic models (``extra="forbid"``) and
calls :func:`parse_mode` in ``validate_query`` and ``search``; a bad mode (an unknown key
inside the index's own entry, a bad value, an entry that is not a dict) becomes a
:class:`memcore.ValidationError` naming the index and the offending key
(``extras.fifo.mode``), before anything is searched.
"""

from __future__ import annotations

from typing import Any, Mapping, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from memcore import ValidationError

__all__ = ["ModeModel", "parse_mode", "check_k"]

T = TypeVar("T")

_TAG_ERRORS = frozenset({"union_tag_invalid", "union_tag_not_found"})


class ModeModel(BaseModel):
    """Base of the query-mode models: unknown keys are errors, values are not coerced."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def parse_mode(
    adapter: TypeAdapter[T], extras: Mapping[str, Any] | None, *, key: str, index: str, default_mode: str
) -> T:
    """Validate ``extras[key]`` with ``adapter``; ``mode`` defaults to ``default_mode``.

    ``extras`` is the whole ``Query.extras``: only its ``key`` entry (the index kind) is
    read, every other key is ignored. A missing or ``None`` entry is the default mode.
    Raises :class:`memcore.ValidationError` when ``extras`` or its entry is not a dict,
    or for anything the model rejects ("index 'stm' (fifo): bad query extras:
    extras.fifo.mode: Input should be 'newest' or 'oldest'"). Parsed modes are frozen and
    cached by content (value types included, so ``True`` is never taken for ``1``): a
    search repeating the same modes skips the validation.
    """
    if extras is None:
        extras = {}
    if not isinstance(extras, Mapping):
        raise ValidationError(f"index {index!r} ({key}): query extras must be a dict, got {type(extras).__name__}")
    raw = extras.get(key)
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ValidationError(
            f"index {index!r} ({key}): extras.{key} must be a dict of query modes "
            f"(e.g. {{{key!r}: {{'mode': {default_mode!r}}}}}), got {type(raw).__name__}"
        )
    data = {"mode": default_mode, **raw}
    cache_key = _cache_key(adapter, data)
    cached = _CACHE.get(cache_key) if cache_key is not None else None
    if cached is not None:
        return cached
    try:
        parsed = adapter.validate_python(data)
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(("extras", key, *(str(p) for p in _field_loc(adapter, first))))
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ValidationError(f"index {index!r} ({key}): bad query extras: {where}: {first['msg']}{more}") from None
    if cache_key is not None:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.clear()
        _CACHE[cache_key] = parsed
    return parsed


def _field_loc(adapter: TypeAdapter[Any], error: Mapping[str, Any]) -> tuple[Any, ...]:
    """The error's location inside the modes, without the tag a discriminated union adds."""
    if error["type"] in _TAG_ERRORS:
        return ("mode",)
    loc = tuple(error["loc"])
    if loc and getattr(adapter, "core_schema", {}).get("type") == "tagged-union":
        loc = loc[1:]  # ("range", "gte") -> ("gte",)
    return loc


_CACHE: dict[tuple[Any, ...], Any] = {}
_CACHE_SIZE = 512


def _cache_key(adapter: TypeAdapter[Any], data: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """A hashable key of the extras, or None when a value is not a plain scalar."""
    items = []
    for name, value in data.items():
        if not isinstance(name, str) or not (value is None or type(value) in (str, int, float, bool)):
            return None
        items.append((name, type(value).__name__, value))
    return (id(adapter), *sorted(items))


def check_k(k: Any) -> int:
    """``k`` (or a count ``n``) as a positive int, else :class:`memcore.ValidationError`.

    The collection checks ``k`` too; an index used directly checks it here.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k <= 0:
        raise ValidationError(f"k must be a positive integer, got {k!r}")
    return int(k)
