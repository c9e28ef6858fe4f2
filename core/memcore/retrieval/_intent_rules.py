"""The rules that give a query its intent: ``temporal``, ``entity``, ``factual`` or ``default``.

Checked in this order; the first that fires wins:

1. **temporal**: the query mentions a time: a year (``1999``, ``2024``), an ISO date
   (``2024-03-16``) or a d/m/y date (``16/03/2024``), a month name (``March``, ``Sept``;
   ``May`` only capitalised and not first), a weekday, a relative time word
   (``yesterday``, ``today``, ``tonight``, ``tomorrow``, ``recently``, ``recent``,
   ``latest``, ``lately``, ``ago``, ``earlier``, ``weekend``), a phrase ``last|next|this|past``
   + ``week|month|year|weekend|night|morning|evening|summer|winter|spring|autumn|fall|<weekday>``,
   or asks ``when`` / ``what time`` / ``what date`` / ``what year`` / ``which year`` /
   ``how long ago``. Its terms are those time expressions.
2. **entity**: the query names something: a capitalised word that does not start a sentence
   (``what does Alice do``; the period of ``Mr.``, ``Dr.``, ``St.``... ends no sentence),
   an all-capitals acronym of 2+ letters anywhere (``NASA``), or a
   run of such words (``New York``; a capitalised sentence-start word joins a run that
   follows it). Question words, stopwords, ``I``, month and weekday names are not entities;
   a trailing ``'s`` is dropped. Its terms are the entities.
3. **factual**: the query asks ``who``, ``what``, ``which``, ``where``, ``why``, ``how``,
   ``whom`` or ``whose``. Its terms are the query's content words.
4. **default**: anything else. Its terms are the query's content words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..model._text import STOPWORDS, content_tokens, tokenize

__all__ = ["INTENTS", "QueryIntent", "classify", "time_expressions", "entities", "question_word"]

INTENTS: tuple[str, ...] = ("temporal", "entity", "factual", "default")
"""The intents, in the order their rules are checked."""

MONTHS = ("january february march april june july august september october november december jan feb mar apr jun jul aug sep sept oct nov dec").split()
WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
RELATIVE_WORDS = "yesterday today tonight tomorrow recently recent latest lately ago earlier weekend".split()
QUESTION_WORDS = ("who", "what", "when", "where", "why", "how", "which", "whom", "whose")

_PERIODS = "week|month|year|weekend|night|morning|evening|summer|winter|spring|autumn|fall|" + "|".join(WEEKDAYS)
_TIME_PATTERNS = [
    re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b"),
    re.compile(r"\b\d{1,2}/\d{1,2}/\d{2,4}\b"),
    re.compile(r"\b(?:1[5-9]\d{2}|20\d{2})s?\b"),
    re.compile(r"\b(?:" + "|".join(MONTHS + WEEKDAYS + RELATIVE_WORDS) + r")\b", re.IGNORECASE),
    re.compile(rf"\b(?:last|next|this|past)\s+(?:{_PERIODS})\b", re.IGNORECASE),
]
_MAY = re.compile(r"(?<=\S\s)May\b")
_WHEN = re.compile(r"\b(?:when|what\s+time|what\s+date|what\s+year|which\s+year|how\s+long\s+ago)\b", re.IGNORECASE)
_WORD = re.compile(r"[^\W\d_][\w'’\-]*|[.!?]+", re.UNICODE)
_ABBREVIATIONS = frozenset("mr mrs ms dr prof st jr sr mt vs".split())
_NOT_ENTITY = STOPWORDS | set(QUESTION_WORDS) | set(MONTHS) | set(WEEKDAYS) | set(RELATIVE_WORDS) | {"may", "i"}


@dataclass(frozen=True)
class QueryIntent:
    """The intent of a query: ``name`` (one of :data:`INTENTS`), its key ``terms`` (each a
    list of tokens, matched as a whole against a record's text), the detected time
    expressions, entities and question word."""

    name: str
    terms: tuple[tuple[str, ...], ...] = ()
    times: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    question: str | None = None
    content: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, object]:
        """JSON-safe form (stored in ``Query.extras["intent"]``)."""
        return {
            "name": self.name,
            "terms": [" ".join(t) for t in self.terms],
            "times": list(self.times),
            "entities": list(self.entities),
            "question": self.question,
        }


def time_expressions(text: str) -> list[str]:
    """The time expressions of ``text`` (rule 1), in order of appearance, lowercased."""
    found: list[tuple[int, str]] = []
    taken: list[tuple[int, int]] = []
    for pattern in [_TIME_PATTERNS[0], _TIME_PATTERNS[1], _TIME_PATTERNS[4], _TIME_PATTERNS[2], _TIME_PATTERNS[3], _MAY]:
        for m in pattern.finditer(text):
            if any(s < m.end() and m.start() < e for s, e in taken):
                continue
            taken.append((m.start(), m.end()))
            found.append((m.start(), m.group(0).lower()))
    return [expr for _, expr in sorted(found)]


def question_word(text: str) -> str | None:
    """The first question word of ``text`` (lowercased), or None."""
    for token in tokenize(text):
        if token in QUESTION_WORDS:
            return token
    return None


def _clean(word: str) -> str:
    for suffix in ("'s", "’s"):
        if word.endswith(suffix):
            return word[: -len(suffix)]
    return word.rstrip("'’-")


def _is_name(word: str) -> bool:
    return word[:1].isupper() and word.lower() not in _NOT_ENTITY


def _is_acronym(word: str) -> bool:
    return len(word) >= 2 and word.isalpha() and word.isupper() and word.lower() not in _NOT_ENTITY


def entities(text: str) -> list[str]:
    """The named entities of ``text`` by rule 2, in order, without repeats."""
    words = [m.group(0) for m in _WORD.finditer(text)]
    out: list[str] = []
    run: list[str] = []
    pending: str | None = None  # a capitalised sentence-start word that may begin a run
    at_start = True

    def close() -> None:
        nonlocal run
        if run:
            name = " ".join(run)
            if name not in out:
                out.append(name)
        run = []

    previous = ""
    for raw in words:
        if raw == "." and previous.lower() in _ABBREVIATIONS:
            continue  # "Mr. Smith": the period of an abbreviation ends no sentence
        previous = raw
        if raw[0] in ".!?":
            close()
            pending, at_start = None, True
            continue
        word = _clean(raw)
        if not word:
            continue
        if at_start:
            at_start = False
            if _is_acronym(word):
                run = [word]
            elif _is_name(word):
                pending = word
            continue
        if _is_name(word) or _is_acronym(word):
            if not run and pending is not None:
                run = [pending]
            pending = None
            run.append(word)
        else:
            pending = None
            close()
    close()
    return out


def classify(text: str | None) -> QueryIntent:
    """Apply the rules (module doc) to a query text; ``default`` for an empty one."""
    if not text or not text.strip():
        return QueryIntent("default")
    times = tuple(time_expressions(text))
    names = tuple(entities(text))
    question = question_word(text)
    content = tuple(sorted(content_tokens(text)))
    if times or _WHEN.search(text):
        terms = tuple(tuple(tokenize(t)) for t in times)
        return QueryIntent("temporal", terms, times, names, question, content)
    if names:
        return QueryIntent("entity", tuple(tuple(tokenize(n)) for n in names), times, names, question, content)
    terms = tuple((t,) for t in content)
    if question is not None:
        return QueryIntent("factual", terms, times, names, question, content)
    return QueryIntent("default", terms, times, names, question, content)
