"""``memcore.llms._triples``: the extraction chat and the robust parser, on replies SmolLM2-135M
(Q4_1, llama.cpp, temperature 0) actually gave (recorded with ``bench/bench_llm_steps.py
--record``), and :func:`memcore.llms._triples.extract_triples` falling back on them."""

from __future__ import annotations

from typing import Any

import pytest

from memcore.plugin import LLM, parse_triples, triple_prompt
from memcore import ValidationError
from memcore.llms._triples import extract_triples

DIALOGUE = (
    "(1:56 pm on 8 May, 2023)Caroline: I went to a LGBTQ support group yesterday and it was so powerful.\n"
    "(1:56 pm on 8 May, 2023)Melanie: Wow, that's cool, Caroline! What happened that was so awesome?"
)
# the old one-message prompt: the model repeated the dialogue; its second line split into
# exactly three comma-separated parts and was taken for a triple
ECHO = (
    "(1:56 pm on 8 May, 2023)Caroline: I went to a LGBTQ support group yesterday and it was so powerful.\n"
    "Melanie: Wow, that's cool, Caroline! What happened that was so awesome?"
)
# the chat with a worked example: triples, a stray line, and once the example's own triple
FEW_SHOT = "(Caroline, went to, a LGBTQ support group)\nMelanie, amazing! What was that?"
LEAKED = "(Melanie, painted, lake sunrise)\n(John, moved to, Boston)"


def test_an_echoed_dialogue_is_no_triple():
    with pytest.raises(ValidationError, match="no \\(subject"):
        parse_triples(ECHO)
    with pytest.raises(ValidationError):
        parse_triples(ECHO, source=DIALOGUE)


def test_real_replies_parse_and_triples_copied_from_the_example_are_dropped():
    assert parse_triples(FEW_SHOT, source=DIALOGUE) == [("Caroline", "went to", "a LGBTQ support group")]
    said = "(1:56 pm on 8 May, 2023)Melanie: Yeah, I painted that lake sunrise last year! It's special to me."
    assert parse_triples(LEAKED, source=said) == [("Melanie", "painted", "lake sunrise")]
    assert parse_triples(LEAKED) == [("Melanie", "painted", "lake sunrise"), ("John", "moved to", "Boston")]  # no source: no grounding
    with pytest.raises(ValidationError):
        parse_triples("(John, moved to, Boston)", source=said)  # nothing grounded is left
    assert parse_triples("None.", source=said) == []


def test_the_prompt_is_a_chat_with_one_worked_example():
    messages = triple_prompt(DIALOGUE)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[-1]["content"].endswith(DIALOGUE) and "(subject, predicate, object)" in messages[0]["content"]
    assert parse_triples(messages[2]["content"], source=messages[1]["content"])  # the example answers itself


class _Replay(LLM):
    model = "replay"

    def __init__(self, reply: str):
        self.reply, self.sent = reply, []

    def complete(self, messages: Any, **options: Any) -> str:
        self.sent.append(messages)
        return self.reply


def test_extract_triples_falls_back_on_an_echo_and_uses_a_real_reply():
    turns = [("Caroline", "I went to a LGBTQ support group yesterday and it was so powerful."), ("Melanie", "Wow, that's cool, Caroline!")]
    triples, report = extract_triples(_Replay(ECHO), turns, DIALOGUE)
    assert report.used == "fallback" and report.reason == "invalid_reply" and triples and triples[0][0] == "Caroline"
    triples, report = extract_triples(_Replay(FEW_SHOT), turns, DIALOGUE)
    assert report.used == "llm" and triples == [("Caroline", "went to", "a LGBTQ support group")]


# the chat on LoCoMo conv-26 (bench_llm_steps --components tim): most replies are pairs
PAIRS = [
    ("(Caroline, takes care of herself)\nMelanie: Yep, Caroline. I'm off to go swimming with the kids.", [("Caroline", "takes care of herself", "")]),
    (
        "(Melanie, ran a charity race for mental health)\nCaroline: That's awesome!\n(1:14 pm on 25 May, 2023)Caroline: proud of you",
        [("Melanie", "ran a charity race for mental health", "")],
    ),
]


def test_pairs_are_triples_without_object_and_dates_are_not_pairs():
    source = "(1:14 pm on 25 May, 2023)Melanie: I ran a charity race. Caroline: Taking care of ourselves is vital."
    for reply, expected in PAIRS:
        assert parse_triples(reply, source=source) == expected
    assert parse_triples("(Caroline, went to, the group)\n(Caroline, nice)", source=source) == [("Caroline", "went to", "the group")]  # triples first
    with pytest.raises(ValidationError):
        parse_triples("(1:14 pm on 25 May, 2023)", source=source)
