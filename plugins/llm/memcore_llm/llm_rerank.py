"""The ``llm_rerank`` stage: a chat model (the LLM named by ``llm``, declared in settings as
``[llms.<name>]``) reorders the best hits.

The first ``top_n`` hits of the working list are sent, in batches of ``batch`` consecutive
hits, as numbered passages (record texts, at most ``max_chars`` characters each) with the
query; the model answers ``{"ranking": [passage numbers, most relevant first]}``. Each
batch is reordered by its ranking (passages it leaves out follow the ranked ones in their
incoming order); hits never move between batches, and hits beyond ``top_n`` follow in
their incoming order.

A reply is read by :func:`read_reply`: its JSON object (fenced or inside prose), else a
*bare ranking* -- the whole reply (or one line labelled ``ranking``) is nothing but passage
numbers separated by commas, semicolons, ``>``, ``->`` or spaces, optionally in brackets:
``[3, 1, 2]``, ``3,1,2``, ``Ranking: 3 > 1 > 2``, ``[3] > [1] > [2]``. Numbers are never
fished out of prose. ``response_format`` (e.g. ``{type = "json_object"}``) is passed to
the server to ask for constrained JSON when it supports it.

When no LLM of that name is declared (reason ``no_llm``; naming an undeclared LLM other
than ``"default"`` is a :class:`memcore.ConfigError` when the memory opens), the query has
no text, or a call fails after the client's retries, or a reply holds
no valid ranking (neither a JSON object nor a bare ranking, no ``ranking`` list, a number
out of range, a repeated number), the stage uses its deterministic ``fallback`` for the
whole list: ``keep`` (the incoming order) or ``keyword`` (share of the query's content
words in the passage, ties in incoming order). It never raises for these.

Which path ran is recorded for each run with ``ctx.note(<stage name>, **report)``, so it is
in ``ctx.notes[<stage name>]`` and in the stage's ``ctx.trace`` entry under ``"notes"`` (read
it with :func:`rerank_report`), and logged as the structlog event ``stage.llm_rerank``.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Sequence

from memcore.plugin import (
    ComponentConfig,
    LLM,
    LLMs,
    MemcoreError,
    content_tokens,
    get_logger,
    Hit,
    PipelineContext,
    Stage,
    term_overlap,
    token_sets,
    unique_hits,
    ValidationError,
)
from pydantic import Field, model_validator

from .chat import parse_json_reply

__all__ = [
    "LLMRerankConfig",
    "LLMRerankStage",
    "rerank_report",
    "read_reply",
    "bare_ranking",
    "parse_ranking",
    "parse_reply",
    "SYSTEM_PROMPT",
]

log = get_logger("memcore_llm.llm_rerank")

SYSTEM_PROMPT = (
    "You rank passages by how well they answer a search query. "
    'Reply with one JSON object and nothing else: {"ranking": [passage numbers, most relevant first]}.'
)


class LLMRerankConfig(ComponentConfig):
    """``llm_rerank``: reorder the best hits with an OpenAI-compatible chat model."""

    kind: str = "llm_rerank"
    llm: str = Field(
        "default", min_length=1, description="Name of the LLM (an [llms.<name>] settings table) that ranks; undeclared 'default': the fallback runs."
    )
    top_n: int = Field(20, gt=0, description="How many of the first hits are sent to the model; the rest follow in their incoming order.")
    batch: int | None = Field(None, gt=0, description="Passages per prompt (default: top_n, one prompt); hits are reordered within their batch.")
    fallback: Literal["keep", "keyword"] = Field(
        "keep",
        description="Used when there is no query text, a call fails, or a reply holds no valid ranking: keep the incoming order, or rank by keyword overlap.",
    )
    max_chars: int = Field(500, gt=0, description="Longest passage sent, in characters (longer texts are cut and end with ' ...').")
    response_format: dict[str, Any] | None = Field(
        None,
        description='Sent as the request\'s response_format when set, e.g. {type = "json_object"} (JSON mode of OpenAI, vLLM, '
        "llama.cpp); a server that refuses it makes every call a service_error.",
    )
    name: str | None = Field(None, description="Name of the stage (the hits' source and the report key); default llm_rerank.")

    @model_validator(mode="after")
    def _batch_le_top_n(self) -> "LLMRerankConfig":
        if self.batch is not None and self.batch > self.top_n:
            raise ValueError(f"batch ({self.batch}) cannot exceed top_n ({self.top_n})")
        return self


def truncate(text: str | None, max_chars: int) -> str:
    """``text`` with whitespace runs collapsed, cut to ``max_chars`` characters plus ``" ..."``."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= max_chars else flat[:max_chars].rstrip() + " ..."


def build_messages(query: str, passages: Sequence[str]) -> list[dict[str, str]]:
    """The chat messages of one batch: the system prompt, then the query and numbered passages."""
    numbered = "\n".join(f"[{i}] {p}" for i, p in enumerate(passages, start=1))
    user = (
        f"Query: {query}\n\nPassages:\n{numbered}\n\n"
        f"Rank the passages 1-{len(passages)} from most to least relevant to the query. "
        f'Reply with JSON only: {{"ranking": [...]}}.'
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


_NUMBER = r'(?:\[\s*\d+\s*\]|"\d+"|\d+)'
_SEPARATOR = r"(?:\s*(?:,|;|->|>)\s*|\s+)"
_NUMBERS = rf"\[?\s*{_NUMBER}(?:{_SEPARATOR}{_NUMBER})*(?:\s*,)?\s*\]?\.?"
# Unambiguous on purpose (no two ways to match the same spaces): linear on long replies.
_BARE = re.compile(rf"\s*({_NUMBERS})\s*")
_LABELLED = re.compile(rf"\s*(?:the\s+|final\s+)?ranking(?:\s+is)?\s*[:=]?\s*({_NUMBERS})\s*", re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*\w*[ \t]*\r?\n?(.*?)```", re.DOTALL)


def bare_ranking(text: str) -> list[int] | None:
    """The passage numbers of a reply that is only a ranking, or None.

    Accepted: the whole reply (or the content of a ``` fence) is numbers separated by ``,``
    ``;`` ``>`` ``->`` or spaces, each number optionally ``[n]`` or ``"n"``, the list
    optionally in brackets and ended by a period (``[3, 1, 2]``, ``3,1,2``, ``3 > 1 > 2``,
    ``[3] > [1]``); or one line ``Ranking: <such numbers>`` (``ranking is``, ``ranking =``;
    markdown ``*``/``_`` ignored) anywhere in the reply. Numbers are never taken from prose:
    ``"I think passage 3 is best"`` gives None."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for candidate in candidates:
        match = _BARE.fullmatch(candidate)
        if match:
            return [int(d) for d in re.findall(r"\d+", match.group(1))]
    for line in text.splitlines():
        match = _LABELLED.fullmatch(re.sub(r"[*_`]", "", line))
        if match:
            return [int(d) for d in re.findall(r"\d+", match.group(1))]
    return None


def read_reply(text: str) -> dict[str, Any]:
    """The reply as ``{"ranking": ...}``: its JSON object (see
    :func:`memcore_llm.chat.parse_json_reply`), else ``{"ranking": [numbers]}`` from a
    :func:`bare_ranking`. :class:`memcore.ValidationError` when it holds neither."""
    try:
        return parse_json_reply(text)
    except ValidationError as exc:
        numbers = bare_ranking(text)
        if numbers is None:
            raise ValidationError(f"{exc} (nor a bare ranking such as '3, 1, 2' or 'Ranking: 3 > 1 > 2')") from None
        return {"ranking": numbers}


def parse_ranking(reply: Any, n: int) -> list[int]:
    """The 0-based order of ``n`` passages from a parsed reply ``{"ranking": [numbers]}``.

    Numbers are 1-based integers (or strings of digits) in ``1..n``, each at most once;
    passages not named follow in their incoming order. A string ranking is read as a
    :func:`bare_ranking` (``{"ranking": "3, 1, 2"}``). :class:`memcore.ValidationError`
    otherwise (also for an empty ranking)."""
    ranking = reply.get("ranking") if isinstance(reply, dict) else None
    if isinstance(ranking, str):
        ranking = bare_ranking(ranking)
    if not isinstance(ranking, list) or not ranking:
        raise ValidationError(f"the reply has no non-empty 'ranking' list: {str(reply)[:200]!r}")
    order: list[int] = []
    for item in ranking:
        if isinstance(item, str) and item.strip().isdigit():
            item = int(item.strip())
        if isinstance(item, bool) or not isinstance(item, int):
            raise ValidationError(f"ranking holds {item!r}, not a passage number")
        if not 1 <= item <= n:
            raise ValidationError(f"ranking names passage {item}; the passages are 1-{n}")
        if item - 1 in order:
            raise ValidationError(f"ranking names passage {item} twice")
        order.append(item - 1)
    named = set(order)
    return order + [i for i in range(n) if i not in named]


def parse_reply(text: str, n: int) -> list[int]:
    """The 0-based order of ``n`` passages from a model's reply text:
    ``parse_ranking(read_reply(text), n)``."""
    return parse_ranking(read_reply(text), n)


def rerank_report(ctx: PipelineContext, name: str = "llm_rerank") -> dict[str, Any] | None:
    """What the ``llm_rerank`` stage called ``name`` did in this run, or None if it did not run:
    ``{"used": "llm" | "fallback", "reason": None | str, "fallback": "keep" | "keyword",
    "sent": int, "calls": int}``. ``reason`` is ``no_llm``, ``no_query_text``, ``service_error``,
    ``invalid_reply`` or ``invalid_ranking`` for the fallback. It is ``ctx.notes.get(name)``
    (the stage records it with :meth:`memcore.retrieval._pipeline.PipelineContext.note`)."""
    return ctx.notes.get(name)


class LLMRerankStage(Stage):
    """Reorder the first ``top_n`` hits with a chat model (see the module doc).

    Hits keep their id, provenance and record; ``score`` becomes ``1 / rank`` over the whole
    output list (strictly decreasing), ``raw`` the incoming score, ``source`` the stage name.
    """

    def __init__(self, config: LLMRerankConfig):
        self.config = config
        self.name = config.name or "llm_rerank"
        self.client: LLM | None = None
        self._options = {"response_format": config.response_format} if config.response_format is not None else {}

    def bind_llms(self, llms: LLMs) -> None:
        """Resolve the LLM named by ``llm`` (None: the fallback runs, reason ``no_llm``)."""
        self.client = llms.resolve(self.config.llm, f"stage {self.name}.llm")

    def run(self, ctx: PipelineContext) -> None:
        hits = unique_hits(ctx.current)
        head, tail = hits[: self.config.top_n], hits[self.config.top_n :]
        report: dict[str, Any] = {"used": "llm", "reason": None, "fallback": self.config.fallback, "sent": len(head), "calls": 0}
        if head:
            texts = ctx.texts([h.id for h in head])
            order, report["reason"], report["calls"] = self._llm_order(ctx.query.text, texts)
            if order is None:
                report["used"] = "fallback"
                order = self._fallback_order(ctx.query.text, texts)
            head = [head[i] for i in order]
        else:
            report["used"] = "none"
        self._record(ctx, report)
        ctx.current = [
            Hit(h.id, 1.0 / rank, raw=float(h.score), source=self.name, provenance=h.provenance, record=h.record) for rank, h in enumerate(head + tail, start=1)
        ]

    def _llm_order(self, query: str | None, texts: list[str | None]) -> tuple[list[int] | None, str | None, int]:
        """The new order of the sent hits, or ``(None, reason, calls)`` for the fallback."""
        if self.client is None:
            return None, "no_llm", 0
        if not query or not query.strip():
            return None, "no_query_text", 0
        size = self.config.batch or self.config.top_n
        order: list[int] = []
        calls = 0
        for start in range(0, len(texts), size):
            chunk = texts[start : start + size]
            passages = [truncate(t, self.config.max_chars) for t in chunk]
            calls += 1
            try:
                reply = read_reply(self.client.complete(build_messages(query, passages), **self._options))
            except ValidationError as exc:
                log.warning("stage.llm_rerank_failed", stage=self.name, reason="invalid_reply", error=str(exc))
                return None, "invalid_reply", calls
            except MemcoreError as exc:  # EndpointError, or any LLM kind's failure
                log.warning("stage.llm_rerank_failed", stage=self.name, reason="service_error", error=str(exc))
                return None, "service_error", calls
            try:
                order.extend(start + i for i in parse_ranking(reply, len(chunk)))
            except ValidationError as exc:
                log.warning("stage.llm_rerank_failed", stage=self.name, reason="invalid_ranking", error=str(exc))
                return None, "invalid_ranking", calls
        return order, None, calls

    def _fallback_order(self, query: str | None, texts: list[str | None]) -> list[int]:
        """``keep``: the incoming order; ``keyword``: by keyword overlap, ties in incoming order."""
        if self.config.fallback == "keep" or not query:
            return list(range(len(texts)))
        overlap = term_overlap(content_tokens(query), token_sets(texts), "query_fraction")
        return sorted(range(len(texts)), key=lambda i: -float(overlap[i]))

    def _record(self, ctx: PipelineContext, report: dict[str, Any]) -> None:
        """Note the report on the context (``ctx.notes[self.name]``) and log it."""
        ctx.note(self.name, **report)
        log.info("stage.llm_rerank", stage=self.name, **report)
