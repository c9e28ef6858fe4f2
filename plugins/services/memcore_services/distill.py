"""TiM's post-thinking on stored thoughts: insert, forget, merge (``vector_hash``'s ``distill``).

After a new thought is stored, the thoughts sharing its LSH buckets (the ``lsh`` index's
candidates for its vector, cosine-ranked, at least ``similarity``) are its group. With at
least ``min_neighbours`` of them, one LLM step decides what to do with the group:

- ``llm``: the prompt lists the group's thoughts; the reply is a JSON object
  ``{"to_delete": [exact thought texts], "to_insert": [merged facts]}`` (TiM's seed: remove
  duplicates and subsumed thoughts, merge related ones). Texts outside the group delete
  nothing; a merged fact must be grounded in the group's words and a thought is deleted
  only when a kept text covers it (:func:`parse_plan`). A reply that is not such an object,
  would delete everything without inserting anything, or keeps no change after those
  guards is invalid: the fallback runs instead.
- fallback ``merge_near_duplicates``: the new thought merges into its most similar
  neighbour when their cosine is at least ``merge_threshold`` (the neighbour keeps its text).

Nothing is dropped silently: every thought that leaves hands its ``provenance`` metadata
(``dia_ids``, ``source``... list-merged) and its text (``merged_from``) to a thought that
stays -- the merged facts inserted, else the new thought, else the group's best remaining
thought -- and the operations are counted in the service state (``inserted``, ``merged``,
``forgotten``, ``runs``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from memcore.plugin import HYPHENATED_WORD, STOPWORDS_SHORT, ComponentConfig, ValidationError, words
from pydantic import Field

__all__ = ["DistillConfig", "Thought", "Plan", "DISTILL_FALLBACK", "distill_prompt", "parse_plan", "fallback_plan", "merged_metadata"]

DISTILL_FALLBACK = "merge_near_duplicates"

_SYSTEM = """You maintain a memory of short factual thoughts. The user lists thoughts that are stored close
together; the last one is new. Remove duplicates and thoughts that another one makes
redundant, and merge closely related thoughts about the same subject into one fact.
Keep every piece of information; do not invent anything.
Reply with one JSON object and nothing else:
{"to_delete": [exact texts of thoughts to remove], "to_insert": [new merged thoughts]}
Reply {"to_delete": [], "to_insert": []} when nothing should change."""

_EXAMPLE = (
    "Thoughts:\n- Anna works at a bakery\n- John lives in Boston\n- Anna is a baker at the bakery",
    '{"to_delete": ["Anna works at a bakery", "Anna is a baker at the bakery"], "to_insert": ["Anna works as a baker at a bakery"]}',
)
MIN_FACT_WORDS = 3
"""Content words a merged fact needs (SmolLM2 proposes fragments such as "Melanie said")."""
COVERED = 0.5
"""Share of a thought's content words another text must hold to stand for it (or, for a
merged fact, that the group's texts must hold)."""


class DistillConfig(ComponentConfig):
    """``distill`` of ``vector_hash``: TiM's post-thinking over each new thought's buckets."""

    kind: str = "distill"
    neighbours: int = Field(10, ge=1, le=100, description="Thoughts read from the new thought's LSH buckets.")
    similarity: float = Field(0.6, ge=-1.0, le=1.0, description="Cosine a bucket neighbour needs to join the group.")
    min_neighbours: int = Field(1, ge=1, le=100, description="Fewer neighbours in the group: nothing to distill (TiM's seed: 5).")
    merge_threshold: float = Field(0.9, ge=-1.0, le=1.0, description="Fallback merge_near_duplicates: cosine at or above which the new thought merges.")
    provenance: list[str] = Field(
        default_factory=lambda: ["dia_ids", "source"], description="Metadata keys a merged or forgotten thought hands to the one that keeps it (lists merged)."
    )


@dataclass
class Thought:
    """One thought of a group: id, text, metadata, cosine to the new thought (1 for itself)."""

    id: str
    text: str
    metadata: dict[str, Any]
    score: float = 1.0


@dataclass
class Plan:
    """What a distillation does: ids to delete, merged texts to insert."""

    delete: list[str] = field(default_factory=list)
    insert: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """Whether the plan changes nothing."""
        return not self.delete and not self.insert


def distill_prompt(group: Sequence[Thought]) -> list[dict[str, str]]:
    """The chat listing the group (the new thought last): the task as a system message, one
    worked example, then the thoughts. A small model (SmolLM2-135M) given all of it in one
    user message writes prose lists; with the example it answers the JSON object."""
    question, answer = _EXAMPLE
    return [
        {"role": "system", "content": _SYSTEM},
        {"role": "user", "content": question},
        {"role": "assistant", "content": answer},
        {"role": "user", "content": "Thoughts:\n" + "\n".join(f"- {t.text}" for t in group)},
    ]


def _content(text: str) -> set[str]:
    return {w for w in words(str(text), HYPHENATED_WORD, fold=str.casefold) if w not in STOPWORDS_SHORT}


def _covers(words: set[str], texts: Sequence[set[str]]) -> bool:
    """Whether one of ``texts`` holds at least :data:`COVERED` of ``words``."""
    return not words or any(len(words & t) >= COVERED * len(words) for t in texts)


def _norm(text: str) -> str:
    return " ".join(str(text).split()).strip(" .\"'").casefold()


def parse_plan(reply: str, group: Sequence[Thought]) -> Plan:
    """The plan of a model's reply; :class:`ValidationError` when it is not a JSON object of
    two string lists, deletes every thought and inserts nothing, or proposes changes of
    which none survives the guards. Texts to delete that are not in the group delete
    nothing; a merged fact of fewer than :data:`MIN_FACT_WORDS` content words, or already
    part of a thought that stays, is not inserted; and:

    - a merged fact to insert must be grounded: at least :data:`COVERED` of its content words
      occur in the group's texts (else it is dropped: made up, or the prompt's example);
    - a thought is deleted only when a merged fact kept or a thought that stays holds at
      least :data:`COVERED` of its content words (else it stays: a small model deletes
      unrelated thoughts along with the duplicates)."""
    match = re.search(r"\{.*\}", reply, re.S)
    if match is None:
        raise ValidationError("distillation reply holds no JSON object")
    try:
        data = json.loads(match.group(0))
    except ValueError as exc:
        raise ValidationError(f"distillation reply is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValidationError("distillation reply is not a JSON object")
    delete, insert = data.get("to_delete", []), data.get("to_insert", [])
    if not (isinstance(delete, list) and isinstance(insert, list) and all(isinstance(x, str) for x in [*delete, *insert])):
        raise ValidationError("to_delete and to_insert must be lists of strings")
    by_text: dict[str, str] = {}
    for t in group:
        by_text.setdefault(_norm(t.text), t.id)
    # texts outside the group delete nothing (SmolLM2 splits "Caroline said How have you been" in two)
    ids = list(dict.fromkeys(by_text[_norm(d)] for d in delete if _norm(d) in by_text))
    texts = list(dict.fromkeys(s.strip() for s in insert if s.strip()))
    if len(ids) == len({t.id for t in group}) and not texts:
        raise ValidationError("distillation would delete every thought and insert none")
    group_words = set().union(*(_content(t.text) for t in group)) if group else set()
    staying_texts = [_norm(t.text) for t in group if t.id not in ids]
    grounded = [
        x
        for x in texts
        if len(_content(x)) >= MIN_FACT_WORDS
        and len(_content(x) & group_words) >= COVERED * len(_content(x))
        and not any(_norm(x) in kept for kept in staying_texts)
    ]
    text_of = {t.id: t.text for t in group}
    kept = [*(_content(x) for x in grounded), *(_content(t.text) for t in group if t.id not in ids)]
    covered = []
    for i in ids:  # in order: a deletion refused keeps its thought, which may stand for the next one
        words = _content(text_of[i])
        if _covers(words, kept):
            covered.append(i)
        else:
            kept.append(words)
    if (delete or texts) and not (covered or grounded):
        raise ValidationError(f"distillation proposes no grounded change: to_delete {delete[:3]}, to_insert {insert[:3]}")
    return Plan(covered, grounded)


def fallback_plan(new: Thought, neighbours: Sequence[Thought], merge_threshold: float) -> tuple[Plan, str | None]:
    """``merge_near_duplicates``: delete the new thought when a neighbour is at least
    ``merge_threshold`` similar; returns the plan and the id of the thought that keeps it."""
    best = max(neighbours, key=lambda t: t.score, default=None)
    if best is None or best.score < merge_threshold:
        return Plan(), None
    return Plan(delete=[new.id]), best.id


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def merged_metadata(keeper: Mapping[str, Any], leaving: Sequence[Thought], keys: Sequence[str], texts: bool = True) -> dict[str, Any]:
    """``keeper``'s metadata with the ``keys`` of ``leaving`` list-merged in (order kept, no
    repeats) and, with ``texts``, their texts appended to ``merged_from``."""
    out = dict(keeper)
    for key in keys:
        values = _as_list(keeper.get(key))
        for t in leaving:
            values.extend(v for v in _as_list(t.metadata.get(key)) if v not in values)
        if values:
            out[key] = values
    if texts and leaving:
        out["merged_from"] = [*_as_list(keeper.get("merged_from")), *(t.text for t in leaving)]
    return out
