"""Seeds of a text query: the records that mention the names (or ids) a query text names."""

from __future__ import annotations

from typing import Mapping

from .names import MAX_NAME_TOKENS, word_tokens

__all__ = ["text_seeds", "known_names"]

_ID_PUNCTUATION = ".,;:!?()[]{}<>\"'`“”‘’«»"


def known_names(text: str, mentions: Mapping[str, object], longest: int) -> list[str]:
    """The entity keys of ``mentions`` written in ``text``: case-insensitive, longest match
    first, left to right (``"bank of america"`` wins over ``"america"``)."""
    tokens = word_tokens(text)
    longest = min(longest, MAX_NAME_TOKENS)
    found: dict[str, None] = {}
    i = 0
    while i < len(tokens):
        for n in range(min(longest, len(tokens) - i), 0, -1):
            key = " ".join(tokens[i : i + n])
            if key in mentions:
                found[key] = None
                i += n
                break
        else:
            i += 1
    return list(found)


def text_seeds(text: str, mentions: Mapping[str, set[str]], records: Mapping[str, object], longest: int) -> dict[str, float]:
    """Seed scores: the share of the text's known names each record matches.

    Known names are the keys of ``mentions`` (entity key -> records mentioning it) found by
    :func:`known_names`, plus the ids of ``records`` written in the text as
    whitespace-separated tokens (surrounding punctuation ignored), each counting as a
    name of that record. A record matching every known name of the text scores 1.0.
    """
    found = known_names(text, mentions, longest)
    raw = text.split()
    named = {t for t in (tok.strip(_ID_PUNCTUATION) for tok in raw) if t in records}
    named.update(t for t in raw if t in records)
    total = len(found) + len(named)
    if not total:
        return {}
    counts: dict[str, int] = {}
    for key in found:
        for rid in mentions[key]:
            counts[rid] = counts.get(rid, 0) + 1
    for rid in named:
        counts[rid] = counts.get(rid, 0) + 1
    return {rid: c / total for rid, c in counts.items()}
