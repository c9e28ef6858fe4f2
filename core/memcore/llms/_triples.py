"""(subject, relation, object) triples from dialog text: the LLM prompt and its robust parser,
the rule-based fallback, and the triple -> sentence refactor (TiM's "thoughts").

:func:`extract_triples` is an LLM step: with an LLM the prompt of :func:`triple_prompt` is
sent and the reply parsed by :func:`parse_triples`; without one (or when the call fails or
the reply holds no triple) :func:`rule_triples` runs -- fallback ``rule_svo``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..errors import ValidationError
from ._llm import run_llm_step
from ..model._text import HYPHENATED_WORD, UTTERANCE_OPENERS, words

if TYPE_CHECKING:
    from ._llm import LLM, StepReport

__all__ = ["Triple", "triple_prompt", "parse_triples", "rule_triples", "refactor_triple", "extract_triples", "TRIPLE_FALLBACK"]

Triple = tuple[str, str, str]
TRIPLE_FALLBACK = "rule_svo"

_SYSTEM = """You are a factual knowledge extractor. From the dialogue the user gives, extract subject-predicate-object
triples for the facts it states or directly implies about people, organisations, objects,
preferences, roles, places, activities and states.
Rules: map first-person pronouns (I, me, my) to the speaker's name; never output pronouns;
use active-voice predicates that keep time and place; no outside knowledge.
Output one triple per line as (subject, predicate, object), or the word None."""

_EXAMPLE = (
    "Dialogue:\n(2 May, 2023)John: I moved to Boston last month.\n(2 May, 2023)Anna: Nice! I still work at the bakery.",
    "(John, moved to, Boston)\n(Anna, works at, the bakery)",
)

_PAREN = re.compile(r"\(\s*([^(),]+?)\s*,\s*([^(),]+?)\s*,\s*([^()]+?)\s*\)")
_PAIR = re.compile(r"\(\s*([^(),]+?)\s*,\s*([^(),]+?)\s*\)")
_SPEAKER_LINE = re.compile(r"^\s*(?:\([^)]*\))?\s*[A-Z][\w .'-]{0,40}:\s")
_FIRST_PERSON = {"i": None, "me": None, "my": "'s", "mine": "'s", "i'm": "is", "i've": "has", "we": None, "our": "'s"}


def triple_prompt(dialogue: str) -> list[dict[str, str]]:
    """The extraction chat for one formatted dialogue (``"(date)speaker: text"`` lines): the
    task as a system message, one worked example, then the dialogue. A small model
    (SmolLM2-135M) given the task and the dialogue in one user message repeats the dialogue;
    with the example it writes triples (and sometimes repeats the example's, which
    :func:`parse_triples` drops when given the dialogue as ``source``)."""
    question, answer = _EXAMPLE
    return [
        {"role": "system", "content": _SYSTEM},
        {"role": "user", "content": question},
        {"role": "assistant", "content": answer},
        {"role": "user", "content": f"Dialogue:\n{dialogue}"},
    ]


def _grounded(subject: str, source: str) -> bool:
    """Whether a word of ``subject`` occurs in ``source`` (case-insensitive)."""
    said = set(words(source, HYPHENATED_WORD, fold=str.casefold))
    return any(w in said for w in words(subject, HYPHENATED_WORD, fold=str.casefold))


def parse_triples(reply: str, max_triples: int = 10, source: str | None = None) -> list[Triple]:
    """Triples in a model's reply: parenthesised ``(s, p, o)`` anywhere, else lines of exactly
    three comma-separated parts, else parenthesised pairs ``(s, p)`` as ``(s, p, "")`` (a
    pair whose subject does not start with a letter, like a date, is none); lines that
    repeat a ``speaker: text`` dialogue line are no triples. With ``source`` (the dialogue), a triple whose subject shares no word with it
    is dropped (copied from the prompt's example, or made up). :class:`ValidationError` when
    no triple is left (``None`` replies give an empty list)."""
    text = reply.strip()
    if re.fullmatch(r"(?i)\W*none\W*", text):
        return []
    lines = [line for line in text.splitlines() if not _SPEAKER_LINE.match(line)]
    found = [tuple(p.strip(" \"'`*") for p in m.groups()) for m in _PAREN.finditer(text)]
    if not found:
        for line in lines:
            parts = [p.strip(" \"'`*-") for p in re.sub(r"^\s*\d+[.)]\s*", "", line).split(",")]
            if len(parts) == 3 and all(parts):
                found.append(tuple(parts))
    if not found:  # SmolLM2 often writes pairs: "(Caroline, takes care of herself)" -> (subject, predicate, "")
        for line in lines:
            found.extend((s.strip(" \"'`*"), p.strip(" \"'`*"), "") for s, p in _PAIR.findall(line) if s.strip(" \"'`*")[:1].isalpha())
    found = [t for t in found if t[0] and t[1] and (source is None or _grounded(t[0], source))]
    if not found:
        raise ValidationError(f"no (subject, predicate, object) triple in the reply: {' '.join(text.split())[:200]!r}")
    return [(s, p, o) for s, p, o in dict.fromkeys(found)][:max_triples]


def _clauses(text: str) -> list[str]:
    parts = re.split(r"[.!?;]+\s*|\s+(?:and|but|so|because)\s+", text)
    return [" ".join(p.split()) for p in parts if p and len(p.split()) >= 2]


def rule_triples(speaker: str, text: str, max_triples: int = 10) -> list[Triple]:
    """Deterministic fallback: one triple per clause. A clause opening with a first-person
    pronoun becomes (speaker, verb phrase, rest); any other clause (speaker, "said", clause),
    so no clause is lost."""
    out: list[Triple] = []
    for clause in _clauses(text):
        words = clause.split()
        while words and words[0].lower().strip(",") in UTTERANCE_OPENERS:
            words = words[1:]
        if len(words) < 2:
            continue
        head = words[0].lower().strip(",")
        if head in _FIRST_PERSON:
            if _FIRST_PERSON[head] == "'s":  # "my sister is ..." -> (speaker's sister, is, ...)
                subject, rest = f"{speaker}'s {words[1]}", words[2:]
            else:
                lead = _FIRST_PERSON[head]
                subject, rest = speaker, ([lead] if lead else []) + words[1:]
            if len(rest) >= 2:
                cut = 2 if rest[0].lower() in {"am", "was", "have", "had", "will", "just", "really", "also", "is", "has"} and len(rest) > 2 else 1
                out.append((subject, " ".join(rest[:cut]), " ".join(rest[cut:]).strip(" ,")))
            elif rest:
                out.append((subject, rest[0], ""))
            continue
        out.append((speaker, "said", " ".join(words)))
    return [t for t in out if t[1]][:max_triples]


def refactor_triple(triple: Triple) -> str:
    """The sentence of a triple: ``"{subject} {predicate} {object}"``."""
    return " ".join(p for p in triple if p).strip()


def extract_triples(llm: "LLM | None", turns: list[tuple[str, str]], dialogue: str, max_triples: int = 10) -> tuple[list[Triple], "StepReport"]:
    """Triples of one packet (``turns``: (speaker, text) pairs; ``dialogue``: their formatted
    text for the prompt), with the LLM or the ``rule_svo`` fallback."""

    def call(model: "LLM") -> list[Triple]:
        return parse_triples(model.complete(triple_prompt(dialogue)), max_triples, dialogue)

    def fallback() -> list[Triple]:
        out: list[Triple] = []
        for speaker, text in turns:
            out.extend(rule_triples(speaker, text, max_triples))
        return out[:max_triples]

    return run_llm_step("triple_extraction", llm, call, fallback, TRIPLE_FALLBACK)
