"""The LLM steps of ``memoryos`` and their named deterministic fallbacks (MemoryOS,
BAI-LAB/MemoryOS ``memoryos-pypi``: ``prompts.py``, ``utils.py``; REFERENCES §1).

=============  ===========================================  =======================
step           LLM (prompt after MemoryOS)                  fallback
=============  ===========================================  =======================
``continuity``  is this page a continuation of the previous   ``same_session``
``meta_info``   the chain's 1-2 sentence meta-summary         ``keyword_meta``
``profile``     rewrite the user profile from hot pages       ``keyword_profile``
``knowledge``   user private data / assistant knowledge       ``first_person_lines``
``summary``     summary of an evicted (cold) segment          ``keyword_summary``
=============  ===========================================  =======================

A reply that cannot be used (a continuity answer that is neither true nor false, an empty
meta-summary or summary, a knowledge reply without its two sections) raises
:class:`memcore.ValidationError`, so ``run_llm_step`` runs the fallback and reports
``invalid_reply``. A profile reply under 30 characters keeps the old profile, as MemoryOS.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np
from memcore.plugin import LLM, LETTER_WORD, STOPWORDS_KEYWORDS, Record, ValidationError, words

from .common import unit

__all__ = [
    "Page",
    "pages_of",
    "ask_continuity",
    "check_not_echo",
    "ask_meta_info",
    "ask_profile",
    "ask_knowledge",
    "ask_summary",
    "same_session",
    "keyword_meta",
    "speakers_of",
    "date_of",
    "speaker_words",
    "Fact",
    "keyword_profile",
    "first_person_lines",
    "keyword_summary",
    "content_words",
    "parse_knowledge",
]

_LINE = re.compile(r"^\s*(?:\((?P<date>[^)]*)\))?\s*(?P<speaker>[^:\n]{1,40}):\s*(?P<text>.*)$")
_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|our|us)\b", re.IGNORECASE)

CONTINUITY_PROMPT = (
    "You are a conversation continuity detector. Return ONLY 'true' or 'false'.\n"
    "Determine if these two conversation pages are continuous (true continuation without topic shift).\n"
    'Return ONLY "true" or "false".\n\nPrevious Page:\n{previous}\n\nCurrent Page:\n{current}\n\nContinuous?'
)
META_PROMPT = (
    "You are a conversation meta-summary updater. Update the conversation meta-summary by incorporating the new dialogue "
    "while maintaining continuity: start from the previous meta-summary (if any), add or update information from the new "
    "dialogue, keep it concise (1-2 sentences max). Output ONLY the updated summary.\n\n"
    "Previous Meta-summary: {meta}\nNew Dialogue:\n{page}\n\nUpdated Meta-summary:"
)
PROFILE_PROMPT = (
    "You are an expert in user profiling. Integrate what the conversation below reveals about the user (personality, "
    "preferences, interests, habits, relationships, goals, facts about their life) into the existing profile and output the "
    "complete updated profile only.\n\nExisting profile:\n{profile}\n\nLatest conversation:\n{dialogue}\n\nUpdated profile:"
)
KNOWLEDGE_PROMPT = (
    "Please extract user private data and assistant knowledge from the latest user-AI conversation below. "
    "Be extremely concise and factual; one fact per line.\n\nLatest User-AI Conversation:\n{dialogue}\n\n"
    "【User Private Data】\n- [Brief fact]: [Minimal context (including entities and time)]\n"
    '- (If no private data found, write "None")\n\n'
    "【Assistant Knowledge】\n- Assistant [brief action] at [time/context]\n"
    '- (If no assistant knowledge found, write "None")\n'
)
SUMMARY_PROMPT = "Summarise the following conversation pages in one or two sentences, keeping names, dates and facts.\n\n{pages}\n\nSummary:"
_USER_HEAD = re.compile(r"【\s*User Private Data\s*】|^\s*#*\s*User Private Data\s*:?\s*$", re.IGNORECASE | re.MULTILINE)
_ASSISTANT_HEAD = re.compile(r"【\s*Assistant Knowledge\s*】|^\s*#*\s*Assistant Knowledge\s*:?\s*$", re.IGNORECASE | re.MULTILINE)
_NONE = {"", "none", "- none", "- none.", "none."}


@dataclass
class Page:
    """One MemoryOS page as the LLM steps see it: its record, its lines and their turn ids."""

    id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def lines(self) -> list[str]:
        """The page's non-empty lines (a page is a (user, assistant) exchange: one line each)."""
        return [line for line in self.text.splitlines() if line.strip()] or [self.text]

    @property
    def dia_ids(self) -> list[str]:
        """The turn ids the page came from (metadata ``dia_ids``)."""
        return [str(d) for d in (self.metadata.get("dia_ids") or [])]

    def line_dia_ids(self, i: int) -> list[str]:
        """The turn id of line ``i`` when lines and ``dia_ids`` align, else all of the page's."""
        ids = self.dia_ids
        return [ids[i]] if len(ids) == len(self.lines) else ids


def pages_of(records: Iterable[Record | None]) -> list[Page]:
    """Pages from stored records (missing records skipped)."""
    return [Page(r.id, r.text, dict(r.metadata or {})) for r in records if r is not None]


def content_words(text: str) -> list[str]:
    """Lower-case content words (no stop words, 3+ letters), the speaker prefixes removed."""
    body = " ".join((m.group("text") if (m := _LINE.match(line)) else line) for line in text.splitlines())
    return [w for w in words(body, LETTER_WORD) if w not in STOPWORDS_KEYWORDS and len(w) > 2]


def _speaker(line: str) -> str | None:
    m = _LINE.match(line)
    return m.group("speaker").strip() if m else None


def _dialogue(pages: Sequence[Page]) -> str:
    return "\n".join(p.text for p in pages)


# -- continuity and meta info ------------------------------------------------------------------


def ask_continuity(llm: LLM, previous: Page, current: Page) -> bool:
    """LLM: is ``current`` a continuation of ``previous``? (T=0, 'true'/'false')."""
    reply = llm.complete(CONTINUITY_PROMPT.format(previous=previous.text, current=current.text), temperature=0.0, max_tokens=10)
    word = reply.strip().strip(".'\"").lower()
    if word not in ("true", "false"):
        raise ValidationError(f"continuity reply is neither true nor false: {reply[:80]!r}")
    return word == "true"


def same_session(previous: Page | None, current: Page, session_key: str) -> bool:
    """Fallback ``same_session``: a page continues the previous one of the same session."""
    return previous is not None and previous.metadata.get(session_key) == current.metadata.get(session_key)


_SPACES = re.compile(r"\s+")
ECHO_WORDS = 5
"""A reply line of at least this many words found verbatim in the dialogue is an echo."""


def _normal(text: str) -> str:
    return _SPACES.sub(" ", text).strip().lower()


def check_not_echo(reply: str, dialogue: str, step: str) -> None:
    """Raise :class:`ValidationError` when a summary-like ``reply`` repeats the dialogue instead
    of summarising it: a line in the dialogue's own ``(date) speaker: text`` form, or a line of
    :data:`ECHO_WORDS`+ words copied verbatim from it (its speaker prefix dropped). A small
    model (SmolLM2-135M) often answers a summary prompt that way; the step's fallback runs."""
    said = _normal(dialogue)
    for line in reply.splitlines():
        m = _LINE.match(line)
        if m and m.group("date"):
            raise ValidationError(f"{step} reply repeats a dialogue line: {line.strip()[:80]!r}")
        body = _normal(m.group("text") if m else line)
        if len(body.split()) >= ECHO_WORDS and body in said:
            raise ValidationError(f"{step} reply copies the dialogue: {line.strip()[:80]!r}")


def ask_meta_info(llm: LLM, meta: str | None, page: Page) -> str:
    """LLM: the chain's meta-summary updated with ``page`` (T=0.3, <= 100 tokens); an empty
    reply or one that repeats the page (:func:`check_not_echo`) is refused."""
    reply = llm.complete(META_PROMPT.format(meta=meta or "None", page=page.text), temperature=0.3, max_tokens=100).strip()
    if not reply:
        raise ValidationError("empty meta-summary")
    check_not_echo(reply, page.text, "meta_info")
    return reply


def keyword_meta(words: Counter[str], speakers: Sequence[str], date: Any = None) -> str:
    """Fallback ``keyword_meta``: the chain's speakers, first date and most frequent words."""
    head = f"Conversation{' of ' + ', '.join(speakers) if speakers else ''}{' on ' + str(date) if date else ''}"
    return f"{head}; topics: {', '.join(w for w, _ in words.most_common(8))}."


def date_of(page: Page) -> str | None:
    """The date prefix ``(date)`` of the page's first line, if any."""
    m = _LINE.match(page.lines[0])
    return m.group("date") if m and m.group("date") else None


def speakers_of(page: Page) -> list[str]:
    """The speakers of a page's lines, in order of appearance."""
    return list(dict.fromkeys(s for line in page.lines if (s := _speaker(line))))


# -- profile -------------------------------------------------------------------------------------


def ask_profile(llm: LLM, profile: str | None, pages: Sequence[Page]) -> str | None:
    """LLM: the complete user profile rewritten with the hot pages; None (keep the old
    profile, as MemoryOS does) when the reply is under 30 characters or "none"; a reply that
    repeats the dialogue (:func:`check_not_echo`) is refused."""
    dialogue = _dialogue(pages)
    reply = llm.complete(PROFILE_PROMPT.format(profile=profile or "No existing profile data.", dialogue=dialogue)).strip()
    if len(reply) < 30 or reply.lower() == "none":
        return None
    check_not_echo(reply, dialogue, "profile")
    return reply


def keyword_profile(words: dict[str, Counter[str]]) -> str:
    """Fallback ``keyword_profile``: per speaker, the most frequent content words so far."""
    parts = [f"{speaker}: {', '.join(w for w, _ in counts.most_common(12))}" for speaker, counts in sorted(words.items()) if counts]
    return "Frequent topics per speaker. " + "; ".join(parts) + "."


def speaker_words(pages: Sequence[Page], default: str = "user") -> dict[str, Counter[str]]:
    """Content words of each speaker of ``pages`` (lines without a speaker count as ``default``)."""
    out: dict[str, Counter[str]] = {}
    for p in pages:
        for line in p.lines:
            out.setdefault(_speaker(line) or default, Counter()).update(content_words(line))
    return out


# -- knowledge -----------------------------------------------------------------------------------


@dataclass
class Fact:
    """One knowledge entry: text, the LTM store it goes to, the turns it came from."""

    text: str
    store: str  # "user" | "assistant"
    page: str
    dia_ids: list[str]
    speaker: str | None = None  # the line's speaker, when the fact is one line


def _facts(block: str) -> list[str]:
    out = []
    for line in block.splitlines():
        line = line.strip()
        if line.lower() in _NONE or line.lower().startswith("(if no"):
            continue
        out.append(re.sub(r"^[-*•\d.)\s]+", "", line).strip())
    return [f for f in out if f and f.lower() not in _NONE]


def parse_knowledge(reply: str) -> tuple[list[str], list[str]]:
    """The two sections of a knowledge reply: (user private data, assistant knowledge) lines."""
    user, assistant = _USER_HEAD.search(reply), _ASSISTANT_HEAD.search(reply)
    if user is None and assistant is None:
        raise ValidationError(f"knowledge reply has neither section: {reply[:80]!r}")
    user_block = assistant_block = ""
    if user is not None:
        user_end = assistant.start() if assistant is not None and assistant.start() > user.start() else len(reply)
        user_block = reply[user.end() : user_end]
    if assistant is not None:
        assistant_end = user.start() if user is not None and user.start() > assistant.start() else len(reply)
        assistant_block = reply[assistant.end() : assistant_end]
    return _facts(user_block), _facts(assistant_block)


def _source(fact: str, pages: Sequence[Page]) -> Page:
    """The page sharing the most content words with ``fact`` (the first on ties)."""
    words = set(content_words(fact))
    return max(pages, key=lambda p: len(words & set(content_words(p.text))))


def ask_knowledge(llm: LLM, pages: Sequence[Page]) -> list[Fact]:
    """LLM: user private data and assistant knowledge, one fact per line; each fact is
    attributed to the page it shares most words with (its turns become the fact's)."""
    user, assistant = parse_knowledge(llm.complete(KNOWLEDGE_PROMPT.format(dialogue=_dialogue(pages))))
    out = []
    for store, facts in (("user", user), ("assistant", assistant)):
        for text in facts:
            src = _source(text, pages)
            out.append(Fact(text, store, src.id, src.dia_ids))
    return out


def first_person_lines(pages: Sequence[Page]) -> list[Fact]:
    """Fallback ``first_person_lines``: every line that states something in the first person
    becomes a fact -- user knowledge for the page's first (user) line, assistant knowledge
    for its second (assistant) line, alternating as MemoryOS pages do."""
    out = []
    for p in pages:
        for i, line in enumerate(p.lines):
            m = _LINE.match(line)
            if _FIRST_PERSON.search(m.group("text") if m else line):
                out.append(Fact(line.strip(), "user" if i % 2 == 0 else "assistant", p.id, p.line_dia_ids(i), m.group("speaker").strip() if m else None))
    return out


# -- summary of an evicted segment ---------------------------------------------------------------


def ask_summary(llm: LLM, pages: Sequence[Page]) -> str:
    """LLM: a one or two sentence summary of a cold segment's pages."""
    reply = llm.complete(SUMMARY_PROMPT.format(pages=_dialogue(pages))).strip()
    if not reply:
        raise ValidationError("empty summary")
    return reply


def keyword_summary(texts: list[str], vectors: np.ndarray) -> str:
    """Fallback ``keyword_summary``: the most frequent content words, then the most central page."""
    words = Counter(w for t in texts for w in content_words(t))
    keywords = ", ".join(w for w, _ in words.most_common(8))
    if not texts:
        return f"Topics: {keywords}."
    best = int(np.argmax(vectors @ unit(vectors.mean(axis=0)))) if len(vectors) else 0
    return f"Topics: {keywords}. {texts[best]}"
