"""LoCoMo: the long-conversation memory benchmark (snap-research/LoCoMo, ACL 2024).

Loading (:func:`load_locomo`: turns with normalised ``dia_id``, session number and date;
questions with normalised evidence) and the metrics of the LoCoMo paper:

- evidence recall@k counts **turns** (docs/architecture.md §9): the ``dia_id`` lists of the retrieved
  entries are concatenated in rank order, de-duplicated, cut to the first k turns; recall
  is the share of the question's evidence turns among them (:func:`evidence_recall`);
- entry recall@k: the share of evidence turns carried by the first k *entries*
  (:func:`entry_recall`), reported apart;
- answer token F1 as LoCoMo's ``evaluation.py`` computes it (normalise, Porter/Snowball
  stemmed tokens, multiset overlap; category 1 splits answers on ',', category 3 cuts the
  gold answer at ';') and BLEU-1 (unigram modified precision with brevity penalty).
"""

from __future__ import annotations

import json
import math
import re
import string
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from ..errors import ValidationError
from ..model._text import tokenize

__all__ = [
    "Turn",
    "Question",
    "Conversation",
    "load_locomo",
    "normalise_ids",
    "turn_text",
    "first_turns",
    "evidence_recall",
    "entry_recall",
    "token_f1",
    "answer_f1",
    "bleu1",
    "CATEGORY_NAMES",
    "HEADLINE_CATEGORIES",
    "RECALL_KS",
]

CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
HEADLINE_CATEGORIES = (1, 2, 3, 4)
"""Categories of the headline figures (adversarial questions ask about things never said)."""
RECALL_KS = (5, 10, 25, 50)

_EVIDENCE_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


def normalise_ids(raw: Any) -> list[str]:
    """Canonical ``D<s>:<t>`` ids in a raw evidence entry ("D8:6; D9:17", "D9:1 D4:4",
    "D:11:26", "D30:05" -> "D30:5"); an entry without one ("D") gives none."""
    return [f"D{int(s)}:{int(t)}" for s, t in _EVIDENCE_ID.findall(str(raw))]


@dataclass(frozen=True)
class Turn:
    """One dialog turn: ``dia_id`` (normalised), speaker, text, session number and date/time
    text, and the BLIP caption of a shared image (or None)."""

    dia_id: str
    speaker: str
    text: str
    session: int
    date_time: str
    caption: str | None = None


@dataclass
class Question:
    """One QA item: question, gold answer (None for adversarial ones), category, normalised
    evidence turn ids (de-duplicated, turns of the conversation only)."""

    qid: str
    text: str
    answer: str | None
    category: int
    evidence: list[str]
    adversarial_answer: str | None = None


@dataclass
class Conversation:
    """One LoCoMo sample: speakers, turns in order, questions, and the evidence ids that
    named no turn (dropped)."""

    sample_id: str
    speakers: tuple[str, str]
    turns: list[Turn]
    questions: list[Question]
    dropped_evidence: list[str] = field(default_factory=list)

    def sessions(self) -> list[list[Turn]]:
        """The turns grouped by session, in order."""
        out: dict[int, list[Turn]] = {}
        for t in self.turns:
            out.setdefault(t.session, []).append(t)
        return [out[s] for s in sorted(out)]


def load_locomo(path: str | Path) -> list[Conversation]:
    """Parse a LoCoMo JSON file (a list of samples). :class:`ValidationError` when the file
    is not LoCoMo-shaped; evidence ids that name no turn are dropped and listed."""
    try:
        samples = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValidationError(f"cannot read LoCoMo file {path}: {exc}") from None
    if not isinstance(samples, list):
        raise ValidationError(f"{path}: expected a JSON list of LoCoMo samples")
    out = []
    for i, sample in enumerate(samples):
        try:
            out.append(_conversation(sample))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValidationError(f"{path}: sample {i} is not a LoCoMo sample ({type(exc).__name__}: {exc})") from None
    return out


def _conversation(sample: dict[str, Any]) -> Conversation:
    conv = sample["conversation"]
    sessions = sorted((int(m.group(1)), key) for key in conv if (m := re.fullmatch(r"session_(\d+)", key)))
    turns = []
    for number, key in sessions:
        for raw in conv[key]:
            ids = normalise_ids(raw["dia_id"])
            if len(ids) != 1:
                raise ValueError(f"unreadable turn id {raw['dia_id']!r}")
            caption = raw.get("blip_caption") or None
            turns.append(Turn(ids[0], str(raw["speaker"]), str(raw["text"]), number, str(conv.get(f"{key}_date_time", "")), caption))
    known = {t.dia_id for t in turns}
    questions, dropped = [], []
    for n, qa in enumerate(sample["qa"]):
        evidence: list[str] = []
        for raw in qa.get("evidence") or []:
            for eid in normalise_ids(raw):
                if eid not in known:
                    dropped.append(str(raw))
                elif eid not in evidence:
                    evidence.append(eid)
        answer = qa.get("answer")
        questions.append(
            Question(
                f"{sample['sample_id']}:q{n}",
                str(qa["question"]),
                None if answer is None else str(answer),
                int(qa["category"]),
                evidence,
                qa.get("adversarial_answer"),
            )
        )
    return Conversation(str(sample["sample_id"]), (str(conv.get("speaker_a", "")), str(conv.get("speaker_b", ""))), turns, questions, dropped)


def turn_text(turn: Turn, *, date: bool = False, caption: bool = True) -> str:
    """``"speaker: text"`` (``"(date)speaker: text"`` with ``date``), plus
    ``" [image: caption]"`` when the turn shared an image and ``caption`` is on."""
    text = f"{turn.speaker}: {turn.text}"
    if caption and turn.caption:
        text += f" [image: {turn.caption}]"
    return f"({turn.date_time}){text}" if date else text


# -- retrieval metrics -------------------------------------------------------------------


def first_turns(entry_turns: Iterable[Sequence[str]], k: int) -> list[str]:
    """The first ``k`` distinct turns of a ranking whose entries carry ``dia_id`` lists."""
    seen: dict[str, None] = {}
    for ids in entry_turns:
        for t in ids:
            if t not in seen:
                seen[t] = None
                if len(seen) == k:
                    return list(seen)
    return list(seen)


def evidence_recall(entry_turns: Sequence[Sequence[str]], evidence: Sequence[str], ks: Sequence[int]) -> dict[int, float]:
    """Recall@k counting turns (LoCoMo paper, docs/architecture.md §9), for each k in ``ks``."""
    ev = set(evidence)
    if not ev:
        raise ValidationError("evidence recall needs a question with evidence")
    turns = first_turns(entry_turns, max(ks))
    return {k: len(ev.intersection(turns[:k])) / len(ev) for k in ks}


def entry_recall(entry_turns: Sequence[Sequence[str]], evidence: Sequence[str], k: int) -> float:
    """Share of the evidence turns carried by the first ``k`` entries."""
    ev = set(evidence)
    if not ev:
        raise ValidationError("entry recall needs a question with evidence")
    found = {t for ids in entry_turns[:k] for t in ids}
    return len(ev & found) / len(ev)


# -- answer metrics ----------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


@lru_cache(maxsize=1)
def _stemmer() -> Callable[[str], str]:
    """PyStemmer's English (Porter2) stemmer when installed, else identity."""
    try:
        import Stemmer
    except ImportError:
        return lambda w: w
    stem = Stemmer.Stemmer("english")
    stem_word: Callable[[str], str] = stem.stemWord
    return stem_word


def _tokens(text: str) -> list[str]:
    text = str(text).replace(",", "").lower().translate(_PUNCT)
    text = " ".join(_ARTICLES.sub(" ", text).split())
    stem = _stemmer()
    return [stem(w) for w in text.split()]


def token_f1(prediction: str, gold: str) -> float:
    """LoCoMo token F1: normalised, stemmed tokens, multiset overlap."""
    pred, ref = _tokens(prediction), _tokens(gold)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    p, r = common / len(pred), common / len(ref)
    return 2 * p * r / (p + r)


def answer_f1(prediction: str, gold: str | None, category: int) -> float:
    """F1 by category as LoCoMo scores it: 1 multi-hop (mean over gold parts split on ','
    of the best predicted part), 3 (gold cut at ';'), 2/4 plain token F1, 5 adversarial
    (1 when the answer says it is not mentioned)."""
    if category == 5 or gold is None:
        low = prediction.lower()
        return 1.0 if ("not mentioned" in low or "no information available" in low) else 0.0
    if category == 3:
        gold = gold.split(";")[0]
    if category == 1:
        preds = [p for p in prediction.split(",") if p.strip()] or [prediction]
        golds = [g for g in gold.split(",") if g.strip()] or [gold]
        return sum(max(token_f1(p, g) for p in preds) for g in golds) / len(golds)
    return token_f1(prediction, gold)


def bleu1(prediction: str, gold: str | None) -> float:
    """Sentence BLEU-1: clipped unigram precision times the brevity penalty (lowercased word
    tokens; 0 for an empty prediction)."""
    pred = tokenize(prediction)
    ref = tokenize(str(gold or ""))
    if not pred or not ref:
        return 0.0
    clipped = sum((Counter(pred) & Counter(ref)).values())
    precision = clipped / len(pred)
    bp = 1.0 if len(pred) > len(ref) else math.exp(1 - len(ref) / len(pred))
    return bp * precision
