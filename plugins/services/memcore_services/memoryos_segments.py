"""MTM segment assignment of ``memoryos`` (MemoryOS ``memoryos-pypi``: ``updater.py``
``process_short_term_to_mid_term``, ``mid_term.py`` ``insert_pages_into_session``; REFERENCES §1).

A batch of pages pushed out of the STM is summarised into at most two *themes* (LLM step
``multi_summary``, MemoryOS's prompt and JSON reply; fallback ``central_page``). Each theme
is scored against every segment of the batch's session with MemoryOS's formula

    score = cos(e_theme_summary, e_segment_summary) + keyword_weight * Jaccard(K_theme, K_segment)

and the batch joins the best segment when the score reaches ``segment_threshold`` (0.6);
otherwise it starts a segment. A joined segment's summary and keywords are updated (LLM step
``segment_summary``; fallback ``central_page``).

=================== ===================================================  ===================================
step                LLM                                                  fallback ``central_page``
=================== ===================================================  ===================================
``multi_summary``   <= 2 themes ``{theme, keywords, content}`` (JSON)     the batch's most central page + its
                                                                         top content words
``segment_summary`` the segment summary merged with the new theme         the segment's most central page +
                    (JSON ``{summary, keywords}``)                        its top content words
=================== ===================================================  ===================================

"Most central" = the page whose vector is closest to the mean of the pages' vectors; its
text is the summary, so the summary's embedding is that page's (nothing is embedded again).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from memcore.plugin import LLM, ValidationError

from .common import unit
from .memoryos_ltm import Page, check_not_echo, content_words

__all__ = [
    "Theme",
    "KEYWORDS",
    "ask_multi_summary",
    "ask_segment_summary",
    "parse_themes",
    "central_page",
    "central_theme",
    "jaccard",
    "segment_score",
]

KEYWORDS = 5  # keywords of a fallback theme or segment (MemoryOS's LLM gives a handful)

MULTI_SUMMARY_SYSTEM = "You are an expert in analyzing dialogue topics. Generate  concise summaries. No more than two topics. Be as brief as possible."
MULTI_SUMMARY_PROMPT = MULTI_SUMMARY_SYSTEM.replace("{", "{{").replace("}", "}}") + (  # MemoryOS's system + user messages, as one message
    "\n\nPlease analyze the following dialogue and generate extremely concise subtopic summaries (if applicable), with a maximum of two themes.\n"
    "Each summary should be very brief - just a few words for the theme and content. Format as JSON array:\n"
    '[\n  {{"theme": "Brief theme", "keywords": ["key1", "key2"], "content": "summary"}}\n]\n'
    "\nConversation content:\n{text}"
)
SEGMENT_SUMMARY_PROMPT = (
    "You maintain the summary of one topic segment of a conversation. Merge the segment's current summary with the summary of "
    "the dialogue that just joined it, keeping names, dates and facts; be brief (one or two sentences). Format as JSON object:\n"
    '{{"summary": "merged summary", "keywords": ["key1", "key2"]}}\n\n'
    "Current summary: {summary}\nCurrent keywords: {keywords}\n\nNew dialogue summary: {new}\nNew keywords: {new_keywords}"
)
_JSON = re.compile(r"(\[.*\]|\{.*\})", re.DOTALL)


@dataclass
class Theme:
    """A summary with its keywords; ``page`` names the page whose text it is (fallback)."""

    content: str
    keywords: list[str] = field(default_factory=list)
    page: str | None = None
    theme: str = ""


def _json(reply: str) -> Any:
    m = _JSON.search(reply)
    if m is None:
        raise ValidationError(f"reply holds no JSON: {reply[:80]!r}")
    try:
        return json.loads(m.group(1))
    except json.JSONDecodeError as exc:
        raise ValidationError(f"reply is not valid JSON ({exc.msg}): {reply[:80]!r}") from None


def _keywords(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    return list(dict.fromkeys(str(k).strip().lower() for k in value if str(k).strip()))


def parse_themes(reply: str) -> list[Theme]:
    """The themes of a ``multi_summary`` reply (a JSON array, or one object): at most two,
    each with a non-empty ``content``; raises :class:`ValidationError` when there is none."""
    data = _json(reply)
    if isinstance(data, dict):
        data = data.get("summaries", [data])
    themes = []
    for item in data if isinstance(data, list) else []:
        if isinstance(item, dict) and str(item.get("content") or "").strip():
            themes.append(Theme(str(item["content"]).strip(), _keywords(item.get("keywords")), theme=str(item.get("theme") or "").strip()))
    if not themes:
        raise ValidationError(f"multi_summary reply has no theme with content: {reply[:80]!r}")
    return themes[:2]


def _dialogue(pages: Sequence[Page]) -> str:
    return "\n".join(p.text for p in pages)


TEMPLATE_VALUES = frozenset({"merged summary", "summary", "brief theme", "key1", "key2"})
"""The example values of the prompts' JSON formats: a reply that returns them answered nothing."""


def _refuse_template(theme: Theme, step: str, reply: str) -> None:
    if theme.content.strip().lower() in TEMPLATE_VALUES or (theme.keywords and set(theme.keywords) <= TEMPLATE_VALUES):
        raise ValidationError(f"{step} reply repeats the prompt's example: {reply[:80]!r}")


def ask_multi_summary(llm: LLM, pages: Sequence[Page]) -> list[Theme]:
    """LLM: at most two themes of the batch (MemoryOS's multi-summary prompt); a theme that
    repeats the prompt's example values or copies the dialogue is refused."""
    dialogue = _dialogue(pages)
    reply = llm.complete(MULTI_SUMMARY_PROMPT.format(text=dialogue), temperature=0.0, max_tokens=300)
    themes = parse_themes(reply)
    for theme in themes:
        _refuse_template(theme, "multi_summary", reply)
        check_not_echo(theme.content, dialogue, "multi_summary")
    return themes


def ask_segment_summary(llm: LLM, summary: str, keywords: Sequence[str], new: Theme) -> Theme:
    """LLM: the segment's summary and keywords merged with those of the batch that joined it."""
    reply = llm.complete(
        SEGMENT_SUMMARY_PROMPT.format(summary=summary, keywords=", ".join(keywords), new=new.content, new_keywords=", ".join(new.keywords)),
        temperature=0.0,
        max_tokens=200,
    )
    data = _json(reply)
    text = str(data.get("summary") or "").strip() if isinstance(data, dict) else ""
    if not text:
        raise ValidationError(f"segment_summary reply has no summary: {reply[:80]!r}")
    theme = Theme(text, _keywords(data.get("keywords")))
    _refuse_template(theme, "segment_summary", reply)
    return theme


def central_page(pages: Sequence[Page], vectors: np.ndarray) -> Page:
    """The page whose (unit) vector is closest to the pages' mean (the first on ties)."""
    if len(pages) == 1 or not len(vectors):
        return pages[0]
    return pages[int(np.argmax(vectors @ unit(vectors.mean(axis=0))))]


def central_theme(pages: Sequence[Page], vectors: np.ndarray, words: Counter[str] | None = None) -> Theme:
    """Fallback ``central_page``: the most central page's text, and the top ``KEYWORDS``
    content words of ``words`` (default: the pages' own)."""
    page = central_page(pages, vectors)
    counts = words if words is not None else Counter(w for p in pages for w in content_words(p.text))
    return Theme(page.text, [w for w, _ in counts.most_common(KEYWORDS)], page=page.id)


def jaccard(a: Sequence[str], b: Sequence[str]) -> float:
    """|A ∩ B| / |A ∪ B| of two keyword lists (0 when either is empty, as MemoryOS)."""
    sa, sb = set(a), set(b)
    if not sa or not sb:
        return 0.0
    return len(sa & sb) / len(sa | sb)


def segment_score(
    theme_vector: np.ndarray, theme_keywords: Sequence[str], segment_vector: np.ndarray, segment_keywords: Sequence[str], keyword_weight: float
) -> float:
    """MemoryOS's segment score: summary cosine + ``keyword_weight`` x keyword Jaccard."""
    return float(unit(theme_vector) @ unit(segment_vector)) + keyword_weight * jaccard(theme_keywords, segment_keywords)
