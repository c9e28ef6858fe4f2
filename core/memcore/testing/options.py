"""The plugin guide's rule on config options, checked by the contract suites: every option
of a component's config model (every field but ``kind``) has a description, which
``memcore plugins``, the docs and settings errors show to users."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

__all__ = ["undescribed_options", "assert_options_described"]


def undescribed_options(config: Any) -> list[str]:
    """The options (fields other than ``kind``) of a config model, or of a config instance,
    that have no non-empty ``description`` (``Field(..., description="...")``); ``[]`` for
    anything that is not a pydantic model."""
    model = config if isinstance(config, type) else type(config)
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return []
    return [name for name, field in model.model_fields.items() if name != "kind" and not (field.description or "").strip()]


def assert_options_described(config: Any, what: str) -> None:
    """Fail naming ``what`` and its options without a description (see :func:`undescribed_options`)."""
    missing = undescribed_options(config)
    model = config if isinstance(config, type) else type(config)
    assert not missing, (
        f'{what}: option(s) {missing} of {model.__name__} have no description; declare each as Field(<default>, description="...") (docs/plugins/writing.md)'
    )
