"""Tokens for the rule-based stages: lowercase ``\\w+`` runs, and a small English stopword list."""

from __future__ import annotations

import re
import sys
from functools import lru_cache
from typing import Iterable

__all__ = ["tokenize", "content_tokens", "token_set", "token_sets", "STOPWORDS", "TOKEN_SET_CACHE_SIZE", "CACHED_TEXT_CHARS"]

_TOKEN = re.compile(r"\w+", re.UNICODE)

STOPWORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom whose why will with would you your yours yourself yourselves s t don
    """.split()
)
"""Function words ignored by keyword overlap (question words included)."""


def tokenize(text: str | None) -> list[str]:
    """The lowercase ``\\w+`` tokens of ``text`` in order (empty for None)."""
    return _TOKEN.findall(text.lower()) if text else []


def content_tokens(text: str | None) -> set[str]:
    """The distinct tokens of ``text`` minus :data:`STOPWORDS`; all its tokens when every one
    is a stopword (so "who is it" still has something to match)."""
    tokens = set(tokenize(text))
    content = tokens - STOPWORDS
    return content or tokens


TOKEN_SET_CACHE_SIZE = 8192
"""How many texts' token sets :func:`token_set` keeps (least recently used dropped): the
rerank and intent stages see the same candidates over and over across queries."""

CACHED_TEXT_CHARS = 4096
"""Texts up to this length have their token sets cached (tokens interned, so the cache
holds each distinct word once); longer texts are tokenised on every call, which bounds the
cache's memory whatever the records hold."""


@lru_cache(maxsize=TOKEN_SET_CACHE_SIZE)
def _cached_token_set(text: str) -> frozenset[str]:
    return frozenset(map(sys.intern, tokenize(text)))


def token_set(text: str) -> frozenset[str]:
    """The distinct tokens of ``text``; cached by the text itself (so an updated record's
    new text is tokenised afresh) when it is at most :data:`CACHED_TEXT_CHARS` long."""
    return _cached_token_set(text) if len(text) <= CACHED_TEXT_CHARS else frozenset(tokenize(text))


_EMPTY: frozenset[str] = frozenset()


def token_sets(texts: Iterable[str | None]) -> list[frozenset[str]]:
    """The token set of each text (empty for None or empty text)."""
    return [token_set(t) if t else _EMPTY for t in texts]
