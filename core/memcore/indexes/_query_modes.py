"""Query modes: an index's per-query options in ``Query.extras[<its kind>]``, validated by a pydantic model.

See :func:`query_mode`; the key is the index's kind (``IndexContext.kind``).
"""

from __future__ import annotations

from typing import Any, Mapping, TypeVar, get_args, overload

from pydantic import BaseModel, TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from ..errors import ValidationError

__all__ = ["query_mode"]


ModeT = TypeVar("ModeT")

_TAG_ERRORS = frozenset({"union_tag_invalid", "union_tag_not_found"})


@overload
def query_mode(
    extras: Mapping[str, Any] | None, key: str, model: type[ModeT], index_name: str, *, defaults: None = None, label: str | None = None
) -> ModeT | None: ...
@overload
def query_mode(
    extras: Mapping[str, Any] | None, key: str, model: type[ModeT], index_name: str, *, defaults: Mapping[str, Any], label: str | None = None
) -> ModeT: ...
@overload
def query_mode(
    extras: Mapping[str, Any] | None, key: str, model: Any, index_name: str, *, defaults: Mapping[str, Any] | None = None, label: str | None = None
) -> Any: ...


def query_mode(
    extras: Mapping[str, Any] | None,
    key: str,
    model: Any,
    index_name: str,
    *,
    defaults: Mapping[str, Any] | None = None,
    label: str | None = None,
) -> Any:
    """An index's query mode: ``extras[key]`` validated by ``model`` (None when absent).

    The convention of every index: its modes live under its kind (``{"faiss": {...}}``);
    other keys belong to other indexes or stages and are ignored.

    - ``model``: a pydantic model class, or a discriminated union of model classes
      (``Annotated[Union[TopMode, RangeMode], Field(discriminator="mode")]``); a value that
      already is one of these models is returned as is.
    - ``defaults``: values for the fields the entry leaves out, e.g. the union's tag
      (``{"mode": "top"}``); with ``defaults`` (``{}`` included) an absent or ``None``
      entry is the default mode, validated from ``defaults`` alone, instead of None.
    - ``label``: how messages name the index (default ``index '<name>' (<key>)``).

    Non-dict ``extras``, a non-dict entry, or an entry ``model`` rejects raise
    :class:`ValidationError` naming ``extras.<key>.<field>`` and the fields allowed there
    (for a union: in the mode given). An index reads its mode with :meth:`memcore.Index.mode`,
    which parses it once per query.
    """
    if extras is None:
        raw = None
    elif type(extras) is dict or isinstance(extras, Mapping):
        raw = extras.get(key)
    else:
        who = label or f"index {index_name!r} ({key})"
        raise ValidationError(f"{who}: query extras must be a dict, got {type(extras).__name__}")
    spec = _mode_spec(model)
    if raw is None:
        if defaults is None:
            return None
        raw = {}
    elif isinstance(raw, spec.classes):
        return raw
    elif not isinstance(raw, Mapping):
        who = label or f"index {index_name!r} ({key})"
        raise ValidationError(f"{who}: bad query extras: extras.{key} must be a dict of query modes ({spec.describe()}), got {type(raw).__name__}")
    data = {**defaults, **raw} if defaults else dict(raw)
    try:
        return spec.adapter.validate_python(data)
    except PydanticValidationError as exc:
        who = label or f"index {index_name!r} ({key})"
        raise ValidationError(f"{who}: bad query extras: {spec.explain(key, data, exc)}") from None


class _ModeSpec:
    """What :func:`query_mode` knows of a mode type: its validator, its models, its tag."""

    def __init__(self, model: Any):
        self.adapter: TypeAdapter[Any] = TypeAdapter(model)
        self.tag: str | None = None
        self.choices: dict[Any, type[BaseModel]] = {}
        if isinstance(model, type) and issubclass(model, BaseModel):
            self.classes: tuple[type[BaseModel], ...] = (model,)
        else:  # Annotated[Union[A, B, ...], Field(discriminator="tag")]
            union, *meta = get_args(model)
            self.tag = next((m.discriminator for m in meta if isinstance(getattr(m, "discriminator", None), str)), None)
            self.classes = tuple(get_args(union))
            if self.tag is None or not self.classes or not all(isinstance(c, type) and issubclass(c, BaseModel) for c in self.classes):
                raise TypeError("query_mode needs a pydantic model class or Annotated[Union[models...], Field(discriminator=...)]")
            for cls in self.classes:
                for value in get_args(cls.model_fields[self.tag].annotation):
                    self.choices[value] = cls

    def describe(self) -> str:
        """The allowed fields (one model) or modes (a union), for messages."""
        if self.tag is None:
            return f"allowed: {sorted(self.classes[0].model_fields)}"
        return f"allowed {self.tag} values: {sorted(self.choices)}"

    def explain(self, key: str, data: Mapping[str, Any], exc: PydanticValidationError) -> str:
        """``extras.<key>.<field>: <message>; allowed in mode 'x': [...]`` for the first error."""
        first = exc.errors()[0]
        loc = tuple(str(p) for p in first["loc"])
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        if self.tag is None:
            return f"{'.'.join(('extras', key, *loc))}: {first['msg']}{more}; {self.describe()}"
        tag = data.get(self.tag)
        chosen = None if first["type"] in _TAG_ERRORS else next((c for t, c in self.choices.items() if t == tag), None)
        if chosen is None:  # an unknown or missing tag: extras.<key>.mode
            return f"extras.{key}.{self.tag}: {first['msg']}{more}; {self.describe()}"
        where = ".".join(("extras", key, *loc[1:]))  # the union puts the tag first: ("range", "gte") is extras.<key>.gte
        return f"{where}: {first['msg']}{more}; allowed in {self.tag} {tag!r}: {sorted(chosen.model_fields)}"


_SPECS: dict[int, tuple[Any, _ModeSpec]] = {}  # by id(model) (hashing an Annotated union is slow); the model kept alive


def _mode_spec(model: Any) -> _ModeSpec:
    entry = _SPECS.get(id(model))
    if entry is None or entry[0] is not model:
        entry = _SPECS[id(model)] = (model, _ModeSpec(model))
    return entry[1]
