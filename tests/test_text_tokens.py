"""The one tokenizer module: the word patterns and stopword lists every call site uses."""

from __future__ import annotations

import memcore.plugin
from memcore.plugin import ASCII_WORD, HYPHENATED_WORD, LETTER_WORD, NAME_WORD, tokenize, words
from memcore.plugin import STOPWORDS, STOPWORDS_EXTENDED, STOPWORDS_KEYWORDS, STOPWORDS_SHORT, UTTERANCE_OPENERS
from memcore.model import _text as text

TEXT = "I don't know: Café x_y, well-known Alice's 42 abc1"


def test_words_with_the_default_pattern_is_tokenize():
    assert words(TEXT) == tokenize(TEXT) == ["i", "don", "t", "know", "café", "x_y", "well", "known", "alice", "s", "42", "abc1"]
    assert words(None) == words("") == tokenize(None) == []


def test_each_variant_matches_as_documented():
    assert words("Café x_y", ASCII_WORD) == ["caf", "x", "y"]
    assert words(TEXT, HYPHENATED_WORD, fold=str.casefold) == ["don't", "know", "caf", "well-known", "alice's", "42", "abc1"]
    assert words(TEXT, LETTER_WORD) == ["don't", "know", "caf", "well", "known", "alice's", "abc"]
    assert words("Straße", HYPHENATED_WORD, fold=str.casefold) == ["strasse"] and words("Straße", HYPHENATED_WORD) == ["stra"]
    assert NAME_WORD.findall(TEXT) == ["I", "don't", "know", "Café", "x", "y", "well", "known", "Alice's", "42", "abc1"]


def test_the_stopword_lists_relate_as_documented():
    assert STOPWORDS_SHORT < STOPWORDS
    assert UTTERANCE_OPENERS < STOPWORDS_EXTENDED
    assert STOPWORDS_EXTENDED >= STOPWORDS - {"don", "own", "s", "t"} and "don" not in STOPWORDS_EXTENDED  # Don is a name
    assert (len(STOPWORDS), len(STOPWORDS_EXTENDED), len(STOPWORDS_KEYWORDS), len(STOPWORDS_SHORT), len(UTTERANCE_OPENERS)) == (130, 230, 93, 29, 13)


def test_every_pattern_and_list_is_public():
    assert set(text.__all__) - {"TOKEN_SET_CACHE_SIZE", "CACHED_TEXT_CHARS"} <= set(memcore.plugin.__all__)
