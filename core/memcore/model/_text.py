"""Every way memcore splits text into words, in one file: the word patterns and stopword lists
of the core and of its plugins.

The tokenizer is :data:`WORD` (lowercase ``\\w+`` runs, :func:`tokenize`) with the stopword
list :data:`STOPWORDS`; the rule-based stages, the ``rerank`` keyword overlap, the
``hashing`` embedder, colbert's ``token-hashing`` embedder and mmr's Jaccard fallback use
them. A few call sites match differently, and their results (scores, keywords, entity
names) depend on it, so they keep their own pattern or list, named here:

- :data:`ASCII_WORD` ``[a-z0-9]+``: the services' ``lexical`` relevance;
- :data:`HYPHENATED_WORD` ``[a-z0-9][a-z0-9'-]+`` in casefolded text: the triples'
  grounding check, and distill's content words with :data:`STOPWORDS_SHORT`;
- :data:`LETTER_WORD` ``[a-z][a-z']+``: MemoryOS keywords, with :data:`STOPWORDS_KEYWORDS`;
- :data:`NAME_WORD` (letters/digits with inner apostrophes, case kept): graph entity names,
  with :data:`STOPWORDS_EXTENDED`;
- :data:`UTTERANCE_OPENERS`: the fillers rule-based triples drop at a clause's start.

:func:`words` applies any of the patterns. Not here: patterns that find something else
than words (the intent rules' dates and sentence ends, a speaker's capitalised name in a
query), the LoCoMo answer metrics' normalisation (the benchmark's own, in
:mod:`memcore.eval.locomo`) and the BM25 index's tokenizer (bm25s' own, chosen by the
index's ``stopwords``/``stemmer`` settings).
"""

from __future__ import annotations

import re
import sys
from functools import lru_cache
from typing import Callable, Iterable

__all__ = [
    "WORD",
    "ASCII_WORD",
    "HYPHENATED_WORD",
    "LETTER_WORD",
    "NAME_WORD",
    "words",
    "tokenize",
    "content_tokens",
    "token_set",
    "token_sets",
    "STOPWORDS",
    "STOPWORDS_EXTENDED",
    "STOPWORDS_KEYWORDS",
    "STOPWORDS_SHORT",
    "UTTERANCE_OPENERS",
    "TOKEN_SET_CACHE_SIZE",
    "CACHED_TEXT_CHARS",
]

# -- word patterns ------------------------------------------------------------------------

WORD = re.compile(r"\w+", re.UNICODE)
"""The word: a run of letters, digits or underscores (any script); :func:`tokenize` lowercases first."""

ASCII_WORD = re.compile(r"[a-z0-9]+")
"""A run of ASCII letters and digits (matched in lowercased text): the services' ``lexical``
relevance (``café`` gives ``caf``, ``x_y`` gives ``x`` and ``y``)."""

HYPHENATED_WORD = re.compile(r"[a-z0-9][a-z0-9'-]+")
"""Two or more ASCII letters/digits, apostrophes and hyphens, not starting with either
(``don't`` and ``well-known`` are one word, ``a`` and ``I`` none); matched in casefolded text
by the triples' grounding check and distill's content words."""

LETTER_WORD = re.compile(r"[a-z][a-z']+")
"""Two or more ASCII letters and apostrophes starting with a letter (no digits): the words of
MemoryOS keyword profiles."""

NAME_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
"""A word of a name: letters/digits of any script with inner apostrophes (``don't``,
``Alice's``), matched in the text as written (the graph keeps case to find capitalised names)."""


def words(text: str | None, pattern: re.Pattern[str] = WORD, *, fold: Callable[[str], str] = str.lower) -> list[str]:
    """The matches of ``pattern`` in ``fold(text)`` in order (empty for None or empty text);
    ``words(text)`` is :func:`tokenize`. ``fold=str.casefold`` where a call site casefolds."""
    return pattern.findall(fold(text)) if text else []


def tokenize(text: str | None) -> list[str]:
    """The lowercase ``\\w+`` tokens of ``text`` in order (empty for None)."""
    return WORD.findall(text.lower()) if text else []


# -- stopword lists -----------------------------------------------------------------------

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

STOPWORDS_EXTENDED: frozenset[str] = (STOPWORDS - {"don", "own", "s", "t"}) | frozenset(
    """
    also although always another anyway around besides cannot done either else even ever every
    everyone everything first hello hey hi however i'd i'll i'm i've indeed instead it's last
    later let let's like maybe meanwhile might mine moreover much must never next nobody none
    nothing often oh ok okay one others otherwise perhaps please quite rather really says since
    someone something sometimes soon still sure thank thanks that's there's therefore they're
    though thus today together tomorrow tonight unless upon us usually we're well what's
    whenever whether whoever within without yes yesterday yet you're dear great good nice wow
    yeah yep nope sorry btw lol
    """.split()
)
"""Words capitalised because they start a sentence (or are "I"), not because they name
something: :data:`STOPWORDS` plus chat words, contractions and day words, without the
contraction pieces (``Don`` is a name). The graph's ``rule`` entity extractor trims them from
a capitalised phrase's ends."""

STOPWORDS_KEYWORDS: frozenset[str] = frozenset(
    """
    the a an and or but to of in on at for with is are was were be been i you he she it we they
    my your our his her their me him them this that so just really very what do did does have
    has had not no yes oh too also can will would about from as by if then than there here how
    when where why who which all any some more most like get got i'm it's that's you're i've
    don't can't i'll thanks thank wow great good
    """.split()
)
"""Words left out of MemoryOS keyword profiles (with :data:`LETTER_WORD`, words of 3+ letters):
a shorter function-word list than :data:`STOPWORDS` plus chat words and contractions."""

STOPWORDS_SHORT: frozenset[str] = frozenset(
    "the a an and or but to of in on at for with is are was were be been has have had it its this that as by from".split()
)
"""Articles, auxiliaries and prepositions (a subset of :data:`STOPWORDS`): distill's content
words, with :data:`HYPHENATED_WORD`."""

UTTERANCE_OPENERS: frozenset[str] = frozenset("and but so oh well yeah yes no wow hey hi thanks thank".split())
"""Fillers that open a dialog line (``"Oh well, I moved"``): rule-based triples drop them
before the subject."""


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
