"""Input checks shared by the embedders: a batch of texts, rejected before any model sees it."""

from __future__ import annotations

from typing import Any, Sequence

from memcore.plugin import ValidationError

__all__ = ["check_texts"]


def check_texts(texts: Sequence[str] | Any, *, allow_empty_strings: bool = True) -> list[str]:
    """The texts as a list of str; :class:`memcore.ValidationError` for a lone string,
    a non-string item or (when not allowed) an empty string."""
    if isinstance(texts, (str, bytes)):
        raise ValidationError("embedders take a sequence of texts, not a single string: wrap it in a list")
    try:
        items = list(texts)
    except TypeError:
        raise ValidationError(f"embedders take a sequence of texts, got {type(texts).__name__}") from None
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise ValidationError(f"text {i} is a {type(text).__name__}, not a str")
        if not allow_empty_strings and not text:
            raise ValidationError(f"text {i} is empty (this endpoint rejects empty inputs)")
    return items
