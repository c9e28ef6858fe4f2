"""Entity extraction: the names a text mentions, as matching keys (see :mod:`.names`).

Four extractors, chosen by the index config ``entity_extraction`` through
:data:`EXTRACTORS` (a name -> factory table, no branches):

- ``rule`` (:class:`RuleExtractor`): capitalised phrases ("Alice", "Bank of America") and
  quoted terms ("'deep work'", "\u201cProject X\u201d"). Dependency-free and deterministic.
- ``spacy`` (:class:`SpacyExtractor`): the named entities of a spaCy pipeline, loaded
  lazily; a missing spaCy or model is a :class:`memcore.ConfigError` saying what to install.
- ``none`` (:class:`NoExtractor`): no entities (only links and ``name_field`` connect records).
- ``llm`` (:class:`LLMExtractor`): an LLM step -- the LLM the index's ``llm`` names (an
  ``[llms.<name>]`` entry) lists the names a text mentions, one per line; the names kept
  are those found in the text. Without that LLM, when the call fails, or when the reply
  names nothing of the text, the fallback ``rule`` (:class:`RuleExtractor`) runs; which
  path ran is counted (:attr:`LLMExtractor.steps`, the index's ``stats()``).
"""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING, Any, Callable, Iterable

from memcore.plugin import LLM, NAME_WORD, STOPWORDS_EXTENDED, ConfigError, ValidationError, run_llm_step

from .names import MAX_NAME_TOKENS, name_key

if TYPE_CHECKING:
    from spacy.language import Language

__all__ = [
    "Extractor",
    "RuleExtractor",
    "SpacyExtractor",
    "NoExtractor",
    "LLMExtractor",
    "EXTRACTORS",
    "ENTITY_FALLBACK",
    "entity_prompt",
    "entity_messages",
    "parse_entities",
    "make_extractor",
    "unique_keys",
]


class Extractor:
    """Turns a text into the ordered, de-duplicated keys of the entities it mentions."""

    def extract(self, text: str) -> list[str]:
        """Entity keys of ``text``, in order of first mention."""
        raise NotImplementedError


def unique_keys(names: Iterable[str]) -> list[str]:
    """Keys of ``names`` (surface forms) in first-seen order, without duplicates or unusable names."""
    seen: dict[str, None] = {}
    for name in names:
        key = name_key(name)
        if key is not None:
            seen.setdefault(key, None)
    return list(seen)


class NoExtractor(Extractor):
    """``entity_extraction = "none"``: records mention no entities."""

    def extract(self, text: str) -> list[str]:
        return []


# Lowercase words that may sit inside a name between capitalised words ("Bank of America").
CONNECTORS = frozenset("of the de del der den di da du van von la le los las y al bin ibn".split())

_SENTENCE_BREAK = re.compile(r"[.!?:;\n\"“”«»()\[\]]")
_QUOTED = re.compile(
    r"\"([^\"\n]{1,200})\""  # "straight double"
    r"|“([^”\n]{1,200})”"  # “curly double”
    r"|«([^»\n]{1,200})»"  # «guillemets»
    r"|(?<![\w'’])'([^'\n]{1,200})'(?![\w])"  # 'single', not an apostrophe inside a word
    r"|(?<![\w'’])‘([^’\n]{1,200})’(?![\w])"  # ‘curly single’
)


class RuleExtractor(Extractor):
    """Capitalised phrases and quoted terms (``entity_extraction = "rule"``).

    A capitalised phrase is a run of capitalised words separated only by spaces, which may
    contain lowercase connectors (``of``, ``de``, ``van``...) between capitalised words.
    Common words (``The``, ``What``, ``I``, ``Yesterday``...) are trimmed from a phrase's
    ends, so a sentence-initial capital does not make an entity. Quoted terms (double,
    curly, guillemets, single quotes not used as apostrophes) are entities as written.
    Only the text itself is used, so the result never depends on other records.
    """

    def extract(self, text: str) -> list[str]:
        names = [next(g for g in m.groups() if g is not None) for m in _QUOTED.finditer(text)]
        names.extend(capitalised_phrases(text))
        return unique_keys(names)


def capitalised_phrases(text: str) -> list[str]:
    """The capitalised phrases of ``text`` (surface forms, common words trimmed)."""
    phrases: list[str] = []
    current: list[str] = []  # words of the phrase being built (may end with connectors)
    prev_end = 0

    def close() -> None:
        while current and current[-1].casefold() in CONNECTORS:
            current.pop()
        words = list(current)
        current.clear()
        while words and words[0].casefold() in STOPWORDS_EXTENDED:
            words.pop(0)
        while words and words[-1].casefold() in STOPWORDS_EXTENDED:
            words.pop()
        if words and len(words) <= MAX_NAME_TOKENS:
            phrases.append(" ".join(words))

    for match in NAME_WORD.finditer(text):
        word = match.group()
        gap = text[prev_end : match.start()]
        prev_end = match.end()
        joined = bool(current) and gap.isspace() and not _SENTENCE_BREAK.search(gap)
        if word[0].isupper():
            if not joined:
                close()
            current.append(word)
        elif joined and word in CONNECTORS:
            current.append(word)
        else:
            close()
    close()
    return phrases


_SPACY_LABELS = frozenset("PERSON NORP FAC ORG GPE LOC PRODUCT EVENT WORK_OF_ART LAW LANGUAGE".split())
_SPACY_CACHE: dict[str, Language] = {}
_SPACY_LOCK = threading.Lock()

SPACY_HINT = (
    'install spaCy and a model: pip install -c constraints.txt "memcore-graph[spacy]" '
    "&& python -m spacy download en_core_web_sm (or set spacy_model to an installed "
    'pipeline or a pipeline directory), or use entity_extraction = "rule"'
)


def load_spacy(model: str) -> Language:
    """The spaCy pipeline ``model`` (package name or directory), loaded once per process.

    Raises :class:`memcore.ConfigError` with the install hint when spaCy or the model is
    not installed.
    """
    with _SPACY_LOCK:
        nlp = _SPACY_CACHE.get(model)
        if nlp is not None:
            return nlp
        try:
            import spacy
        except ImportError:
            raise ConfigError(f'entity_extraction = "spacy" needs spaCy, which is not installed: {SPACY_HINT}', location="entity_extraction") from None
        try:
            nlp = spacy.load(model, exclude=["lemmatizer"])
        except (OSError, ImportError, ValueError) as exc:
            raise ConfigError(
                f"spaCy model {model!r} cannot be loaded ({exc.__class__.__name__}: {str(exc)[:200]}): {SPACY_HINT}", location="spacy_model"
            ) from None
        if not any(name in ("ner", "entity_ruler") or type(pipe).__name__ in ("EntityRecognizer", "EntityRuler") for name, pipe in nlp.pipeline):
            raise ConfigError(f"spaCy pipeline {model!r} has no entity recognizer ('ner' or 'entity_ruler'); pipes: {nlp.pipe_names}", location="spacy_model")
        _SPACY_CACHE[model] = nlp
        return nlp


class SpacyExtractor(Extractor):
    """Named entities of a spaCy pipeline (``entity_extraction = "spacy"``).

    Entities labelled PERSON, NORP, FAC, ORG, GPE, LOC, PRODUCT, EVENT, WORK_OF_ART, LAW
    or LANGUAGE are kept (dates, times, numbers and amounts are not names).
    """

    def __init__(self, model: str):
        self.model = model
        self.nlp = load_spacy(model)

    def extract(self, text: str) -> list[str]:
        doc = self.nlp(text)
        return unique_keys(ent.text for ent in doc.ents if ent.label_ in _SPACY_LABELS)


ENTITY_FALLBACK = "rule"
"""The fallback of the ``entity_extraction`` LLM step."""

_ENTITY_SYSTEM = (
    "You list the named entities a text mentions: people, pets, organisations, places, products, events, "
    "titles of works and other proper names. Write each exactly as it appears in the text, one per line, "
    "with no numbering or explanation. Reply None if there is none."
)
_ENTITY_EXAMPLE = (
    "Text: John: I met Anna in Paris at the Louvre.",
    "John\nAnna\nParis\nLouvre",
)


def entity_prompt(text: str) -> str:
    """The user message of the extraction for one record text."""
    return f"Text: {text}"


def entity_messages(text: str) -> list[dict[str, str]]:
    """The chat sent for one record text: the task as a system message, one worked example,
    then the text. A small model (SmolLM2-135M) given the task and the text in one user
    message repeats the text instead of listing names; with the example it lists them."""
    question, answer = _ENTITY_EXAMPLE
    return [
        {"role": "system", "content": _ENTITY_SYSTEM},
        {"role": "user", "content": question},
        {"role": "assistant", "content": answer},
        {"role": "user", "content": entity_prompt(text)},
    ]


def parse_entities(reply: str, text: str) -> list[str]:
    """The names of a model's reply that occur in ``text`` (case-insensitive), as keys.
    ``None`` replies give no names; :class:`memcore.ValidationError` when the reply lists
    names but none occurs in the text (a hallucinated or malformed reply)."""
    body = reply.strip()
    if re.fullmatch(r"(?i)\W*none\W*", body):
        return []
    folded = text.casefold()
    names = []
    for line in body.splitlines():
        for part in line.split(";"):
            name = re.sub(r"^\s*(?:[-*\u2022]|\d+[.)])\s*", "", part).strip(" \t\"'`*.,:")
            if name and name.casefold() in folded:
                names.append(name)
    keys = unique_keys(names)
    if not keys:
        raise ValidationError(f"entity reply names nothing found in the text: {body[:120]!r}")
    return keys


class LLMExtractor(Extractor):
    """Names listed by an LLM (``entity_extraction = "llm"``), the ``rule`` extractor as
    the fallback. ``steps`` counts the paths: ``{"llm": n, "fallback:rule": n}``."""

    def __init__(self, llm: LLM | None):
        self.llm = llm
        self.fallback = RuleExtractor()
        self.steps: dict[str, int] = {}
        self.reasons: dict[str, int] = {}
        self._lock = threading.Lock()

    def extract(self, text: str) -> list[str]:
        names, report = run_llm_step(
            "entity_extraction",
            self.llm,
            lambda llm: parse_entities(llm.complete(entity_messages(text)), text),
            lambda: self.fallback.extract(text),
            ENTITY_FALLBACK,
        )
        key = "llm" if report.used == "llm" else f"fallback:{report.fallback}"
        with self._lock:
            self.steps[key] = self.steps.get(key, 0) + 1
            if report.reason:
                self.reasons[report.reason] = self.reasons.get(report.reason, 0) + 1
        return names


EXTRACTORS: dict[str, Callable[[str, Any], Extractor]] = {
    "rule": lambda model, llm: RuleExtractor(),
    "spacy": lambda model, llm: SpacyExtractor(model),
    "none": lambda model, llm: NoExtractor(),
    "llm": lambda model, llm: LLMExtractor(llm),
}
"""``entity_extraction`` name -> factory taking the configured ``spacy_model`` and the
resolved LLM (None: none declared)."""


def make_extractor(kind: str, spacy_model: str, llm: LLM | None = None) -> Extractor:
    """The extractor named ``kind`` (a ConfigError for an unknown name)."""
    try:
        factory = EXTRACTORS[kind]
    except KeyError:
        raise ConfigError(f"unknown entity_extraction {kind!r}; choose one of {sorted(EXTRACTORS)}", location="entity_extraction") from None
    return factory(spacy_model, llm)
