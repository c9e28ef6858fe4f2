"""Entity names: how a surface form ("Alice's", "BANK of  America") becomes a matching key.

A key is the word tokens of a name (:data:`memcore.NAME_WORD`), casefolded, possessive
``'s`` dropped, joined by one space. Records and queries go through the same function, so a
name written in any case or spacing in a query finds the entity a record mentions.
"""

from __future__ import annotations

from memcore.plugin import NAME_WORD

__all__ = ["MAX_NAME_TOKENS", "name_key", "word_tokens"]

MAX_NAME_TOKENS = 8
"""Names longer than this many words are not entities (a sentence, not a name)."""

_POSSESSIVE = ("'s", "’s")


def word_tokens(text: str) -> list[str]:
    """The casefolded word tokens of ``text``, possessive ``'s`` removed."""
    out = []
    for match in NAME_WORD.finditer(text):
        token = match.group().casefold()
        if token.endswith(_POSSESSIVE) and len(token) > 2:
            token = token[:-2]
        out.append(token)
    return out


def name_key(name: str) -> str | None:
    """The matching key of a name, or None when it has no word or too many words."""
    tokens = word_tokens(name)
    if not tokens or len(tokens) > MAX_NAME_TOKENS:
        return None
    key = " ".join(tokens)
    return key if len(key) >= 2 else None
