"""The LoCoMo memory test pipeline (behind ``memcore eval locomo``).

Main pipeline: **source -> caller -> sink**. The source emits packets of 1-2 turns in
order, each with its session date/time; the caller sends every packet to the *insert
pipeline* and, when questions become answerable (``test_at``: their evidence has been
inserted, or at the end of each session, or at the end of the conversation), sends them to
the *test pipeline*; the sink collects one result per question.

- Insert pipeline: ``pre_insert`` (``none`` | ``tri_embed``) returns a list of entries (one
  packet -> many entries, possibly none), ``memory_insert`` turns each into the text handed
  to ``service.insert`` through an adapter (``to_dialogs``: the packet as
  ``"(date)speaker: text"`` lines; ``to_refactor``: the triple's sentence; ``to_turns``: one
  entry per turn), ``post_insert`` (``none``). Every entry carries the ``dia_ids`` it came
  from in its metadata.
- Test pipeline: ``pre_retrieval`` (``none`` | ``embedding``), ``memory_retrieval`` (the
  service's ``retrieve``), ``post_retrieval`` (the history text with its format prompt),
  ``memory_test`` (an LLM answers; token F1 and BLEU-1 against the gold answer), skipped
  when no LLM is declared -- the retrieval metrics remain.

Steps are looked up by name in the registries below (:data:`PRE_INSERT`, :data:`ADAPTERS`,
:data:`PRE_RETRIEVAL`); a new memory mode needs a service and a config, no pipeline code.
"""

from __future__ import annotations

import copy
import json
import statistics
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Literal, Mapping

import yaml
from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from ..errors import ConfigError
from ..llms._llm import StepCounter, run_llm_step
from ..llms._triples import extract_triples, refactor_triple
from .locomo import (
    CATEGORY_NAMES,
    HEADLINE_CATEGORIES,
    RECALL_KS,
    Conversation,
    Question,
    Turn,
    answer_f1,
    bleu1,
    entry_recall,
    evidence_recall,
    turn_text,
)

if TYPE_CHECKING:
    from ..api._open import Memory

__all__ = ["LocomoConfig", "load_eval_config", "run_locomo", "Packet", "packets", "PRE_INSERT", "ADAPTERS", "PRE_RETRIEVAL"]

HISTORY_PROMPT = "The following is some history information."
ANSWER_PROMPT = (
    "Based on the above context, answer the following question concisely using exact words from the context "
    'whenever possible. If the information is not mentioned in the conversation, respond with "Not mentioned in the conversation".\n\n'
    "Question: {question}\nAnswer:"
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class InsertConfig(_Strict):
    """The insert pipeline."""

    pre_insert: Literal["none", "tri_embed"] = Field(
        "none", description="none: the packet as is; tri_embed: triples (LLM or rule fallback) -> sentences -> vectors."
    )
    adapter: Literal["to_dialogs", "to_refactor", "to_turns"] = Field("to_turns", description="How an entry becomes the inserted text.")
    post_insert: Literal["none"] = "none"
    date: bool = Field(True, description="Prefix entry texts with the session date/time '(date)'.")
    caption: bool = Field(True, description="Append ' [image: caption]' to turns that shared an image.")
    context: int = Field(
        0,
        ge=0,
        le=8,
        description="to_turns: also write the previous N turns of the session into the entry text (the entry still stands for its own turn; "
        "its metadata 'turn' keeps the turn's own text).",
    )
    max_triples: int = Field(10, ge=1, le=50, description="tri_embed: triples kept per packet.")


class TestConfig(_Strict):
    """The test pipeline."""

    pre_retrieval: Literal["none", "embedding"] = Field(
        "none", description="embedding: the question is embedded (the memory's space) and passed as the vector."
    )
    space: str | None = Field(None, description="Space used by pre_retrieval/tri_embed embeddings (default: the only one).")
    k: int = Field(50, ge=1, le=500, description="Entries retrieved per question.")
    history: int = Field(10, ge=1, description="Retrieved entries written into the answer prompt.")
    llm: str = Field("default", description="The LLM (of the memory's [llms]) that answers; undeclared 'default': no answering.")
    max_tokens: int = Field(64, ge=1, description="Longest answer, in tokens.")
    retrieve: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra keyword options of the service's retrieve (e.g. memoryos: {chain = true}, so that the answer prompt gets chain summaries).",
    )
    service_report: bool = Field(True, description="Write the service's report() and llm_report() into each question's row (as of its test).")


class LocomoConfig(_Strict):
    """``[locomo]`` of an evaluation config (beside ``[memory]``, the memcore settings)."""

    packet_size: Literal[1, 2] = Field(2, description="Turns per packet.")
    test_at: Literal["evidence", "session", "conversation"] = Field("conversation", description="When questions are tested.")
    insert: InsertConfig = Field(default_factory=InsertConfig)
    test: TestConfig = Field(default_factory=TestConfig)


def load_eval_config(path: str | Path) -> tuple[dict[str, Any], LocomoConfig]:
    """An evaluation config file (TOML or YAML): ``[memory]`` (memcore settings, given to
    :func:`memcore.open`) and ``[locomo]`` (:class:`LocomoConfig`). :class:`ConfigError` otherwise."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
        data = tomllib.loads(text) if p.suffix.lower() == ".toml" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read evaluation config {p}: {exc}") from None
    if not isinstance(data, Mapping):
        raise ConfigError(f"{p}: expected a table with [memory] and [locomo]")
    unknown = sorted(set(data) - {"memory", "locomo"})
    if unknown:
        raise ConfigError(f"{p}: unknown top-level keys {unknown} (use [memory] and [locomo])")
    try:
        config = LocomoConfig.model_validate(data.get("locomo") or {})
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(first["msg"], location=".".join(["locomo", *(str(x) for x in first["loc"])])) from None
    return dict(data.get("memory") or {}), config


# -- source --------------------------------------------------------------------------------


@dataclass
class Packet:
    """1-2 consecutive turns of one session, in order."""

    task_id: str
    session: int
    index: int
    turns: list[Turn]
    last_of_session: bool
    position: int
    """Turns inserted once this packet is (for evidence visibility)."""


def packets(conv: Conversation, size: int) -> Iterator[Packet]:
    """The source: packets of ``size`` turns within each session, in order."""
    position = 0
    for session_turns in conv.sessions():
        for start in range(0, len(session_turns), size):
            chunk = session_turns[start : start + size]
            position += len(chunk)
            yield Packet(conv.sample_id, chunk[0].session, start, chunk, start + size >= len(session_turns), position)


# -- insert pipeline -------------------------------------------------------------------------


@dataclass
class Entry:
    """What memory_insert hands to the service: text, optional vector, metadata (dia_ids...)."""

    text: str
    dia_ids: list[str]
    vector: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class InsertRun:
    """State of the insert pipeline for one conversation."""

    memory: "Memory"
    config: LocomoConfig
    conv: Conversation
    steps: StepCounter
    previous: list[Turn] = field(default_factory=list)


def _pre_none(run: InsertRun, packet: Packet) -> list[dict[str, Any]]:
    return [{"packet": packet}]


def _space(memory: "Memory", name: str | None) -> Any:
    spaces = memory.collection.spaces
    if name is None:
        if len(spaces) != 1:
            raise ConfigError(f"say which space to embed with (locomo.test.space); spaces: {sorted(spaces)}")
        name = next(iter(spaces))
    if name not in spaces:
        raise ConfigError(f"no space {name!r}; spaces: {sorted(spaces)}", location="locomo.test.space")
    return spaces[name]


def _pre_tri_embed(run: InsertRun, packet: Packet) -> list[dict[str, Any]]:
    dialogue = "\n".join(turn_text(t, date=True) for t in packet.turns)
    llm = run.memory.llms.resolve(run.config.test.llm, "locomo.test.llm")
    triples, report = extract_triples(llm, [(t.speaker, t.text) for t in packet.turns], dialogue, run.config.insert.max_triples)
    run.steps.add(report)
    if not triples:
        return []
    sentences = [refactor_triple(t) for t in triples]
    vectors = _space(run.memory, run.config.test.space).embed_documents(sentences)
    return [{"packet": packet, "triple": list(t), "refactor": s, "embedding": v} for t, s, v in zip(triples, sentences, vectors)]


PRE_INSERT: dict[str, Callable[[InsertRun, Packet], list[dict[str, Any]]]] = {"none": _pre_none, "tri_embed": _pre_tri_embed}
"""pre_insert steps: a packet -> a list of entry dicts (possibly empty)."""


def _to_dialogs(run: InsertRun, item: dict[str, Any]) -> list[Entry]:
    cfg = run.config.insert
    turns = item["packet"].turns
    return [Entry("\n".join(turn_text(t, date=cfg.date, caption=cfg.caption) for t in turns), [t.dia_id for t in turns])]


def _to_refactor(run: InsertRun, item: dict[str, Any]) -> list[Entry]:
    if "refactor" not in item:
        raise ConfigError('adapter to_refactor needs pre_insert = "tri_embed"', location="locomo.insert.adapter")
    turns = item["packet"].turns
    return [Entry(item["refactor"], [t.dia_id for t in turns], item.get("embedding"), {"triple": item["triple"]})]


def _to_turns(run: InsertRun, item: dict[str, Any]) -> list[Entry]:
    cfg = run.config.insert
    out = []
    for t in item["packet"].turns:
        turn = text = turn_text(t, date=cfg.date, caption=cfg.caption)
        if cfg.context:
            before = [p for p in run.previous[-cfg.context :] if p.session == t.session]
            if before:
                text += "\n[context] " + " | ".join(turn_text(p, caption=False) for p in before)
        out.append(Entry(text, [t.dia_id], extra={"turn": turn} if text != turn else {}))
        run.previous.append(t)
    return out


ADAPTERS: dict[str, Callable[[InsertRun, dict[str, Any]], list[Entry]]] = {"to_dialogs": _to_dialogs, "to_refactor": _to_refactor, "to_turns": _to_turns}
"""memory_insert adapters: an entry dict -> the entries handed to ``service.insert``."""


def insert_packet(run: InsertRun, packet: Packet) -> int:
    """The insert pipeline for one packet; returns how many entries were inserted."""
    items = PRE_INSERT[run.config.insert.pre_insert](run, packet) or []
    adapter = ADAPTERS[run.config.insert.adapter]
    n = 0
    for item in items:
        for entry in adapter(run, item):
            metadata = {
                "dia_ids": entry.dia_ids,
                "session": packet.session,
                "date_time": packet.turns[0].date_time,
                "speaker": packet.turns[0].speaker,
                **entry.extra,
            }
            run.memory.insert(entry.text, vector=entry.vector, metadata=metadata)
            n += 1
    return n  # post_insert "none": nothing more


# -- test pipeline ---------------------------------------------------------------------------


def _pre_retrieval_none(run: InsertRun, question: Question) -> Any:
    return None


def _pre_retrieval_embedding(run: InsertRun, question: Question) -> Any:
    return _space(run.memory, run.config.test.space).embed_queries([question.text])[0]


PRE_RETRIEVAL: dict[str, Callable[[InsertRun, Question], Any]] = {"none": _pre_retrieval_none, "embedding": _pre_retrieval_embedding}
"""pre_retrieval steps: a question -> the vector passed to ``retrieve`` (or None)."""


SUMMARY_LINE = "(conversation summary: {summary})"
"""post_retrieval: how a retrieved entry's chain summary is written, on the line after it."""


def result_summary(result: Mapping[str, Any]) -> str | None:
    """The summary a retrieved result carries of the conversation around it: memoryos's
    ``retrieve(..., chain=True)`` puts its page chain's meta-summary in ``result["chain"]["meta"]``;
    any service may put one in ``metadata["chain_summary"]``. None when there is none."""
    chain = result.get("chain")
    summary = chain.get("meta") if isinstance(chain, Mapping) else None
    if not summary:
        summary = (result.get("metadata") or {}).get("chain_summary")
    text = str(summary).strip() if summary else ""
    return text or None


def history_text(results: list[dict[str, Any]], n: int) -> str:
    """post_retrieval: the format prompt and one retrieved entry per line; an entry that
    carries a chain summary (:func:`result_summary`) is followed by it on its own line, once
    per distinct summary (the pages of one chain share theirs)."""
    lines, shown = [HISTORY_PROMPT], set()
    for r in results[:n]:
        lines.append(str(r["text"]))
        summary = result_summary(r)
        if summary and summary not in shown:
            shown.add(summary)
            lines.append(SUMMARY_LINE.format(summary=" ".join(summary.split())))  # one line, whatever the model wrote
    return "\n".join(lines)


def service_reports(memory: "Memory") -> dict[str, Any]:
    """The service's ``report()`` (when it has one) and ``llm_report()``: what the memory did
    so far (tiers, merges... and which LLM steps ran or fell back, and why)."""
    service = memory.service
    report = getattr(service, "report", None)
    out: dict[str, Any] = {"kind": getattr(service.config, "kind", type(service).__name__)}
    if callable(report):
        out["report"] = report()
    out["llm"] = service.llm_report()
    return out


def add_counts(total: dict[str, dict[str, int]], part: Mapping[str, Mapping[str, int]]) -> None:
    """Add nested counts (``{step: {path or reason: n}}``, as in ``llm_report()``) into ``total``."""
    for step, counts in part.items():
        into = total.setdefault(step, {})
        for key, n in counts.items():
            into[key] = into.get(key, 0) + n


def test_question(run: InsertRun, question: Question, ks: tuple[int, ...]) -> dict[str, Any]:
    """The test pipeline for one question: retrieve, score retrieval, answer when an LLM is declared."""
    cfg = run.config.test
    vector = PRE_RETRIEVAL[cfg.pre_retrieval](run, question)
    started = time.perf_counter()
    results = run.memory.retrieve(question.text, vector=vector, k=max(cfg.k, max(ks)), **cfg.retrieve)
    seconds = time.perf_counter() - started
    entry_turns = [list((r.get("metadata") or {}).get("dia_ids") or []) for r in results]
    row: dict[str, Any] = {
        "qid": question.qid,
        "sample_id": run.conv.sample_id,
        "category": question.category,
        "question": question.text,
        "answer": question.answer,
        "evidence": question.evidence,
        "retrieve_seconds": round(seconds, 5),
        "retrieved": [{"id": r["id"], "dia_ids": t, "score": r["score"]} for r, t in zip(results[:10], entry_turns[:10])],
    }
    if question.evidence:
        recalls = evidence_recall(entry_turns, question.evidence, ks)
        row.update({f"recall@{k}": v for k, v in recalls.items()})
        row["entry_recall@10"] = entry_recall(entry_turns, question.evidence, 10)
    if cfg.service_report:
        row["service"] = service_reports(run.memory)
    llm = run.memory.llms.resolve(cfg.llm, "locomo.test.llm")
    if llm is not None:
        prompt = history_text(results, cfg.history) + "\n\n" + ANSWER_PROMPT.format(question=question.text)
        started = time.perf_counter()
        prediction, report = run_llm_step("answer", llm, lambda m: m.complete(prompt, max_tokens=cfg.max_tokens).strip(), lambda: "", "no_answer")
        run.steps.add(report)
        row.update(
            {
                "prediction": prediction,
                "answered_by": report.used,
                "answer_seconds": round(time.perf_counter() - started, 4),
                "f1": answer_f1(prediction, question.answer, question.category),
                "bleu1": bleu1(prediction, question.answer),
            }
        )
    return row


# -- caller and sink ---------------------------------------------------------------------------


def _visible_at(conv: Conversation) -> dict[str, int]:
    """Turn id -> its 1-based position in the conversation."""
    return {t.dia_id: i for i, t in enumerate(conv.turns, start=1)}


def run_conversation(
    memory: "Memory",
    conv: Conversation,
    config: LocomoConfig,
    *,
    ks: tuple[int, ...] = RECALL_KS,
    questions: list[Question] | None = None,
    progress: Callable[[int], None] | None = None,
    steps: StepCounter | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Source -> caller -> sink over one conversation. Returns (one row per question, insert stats)."""
    run = InsertRun(memory, config, conv, steps if steps is not None else StepCounter())
    pending = list(conv.questions if questions is None else questions)
    position = _visible_at(conv)
    needed = {q.qid: max((position.get(e, len(conv.turns)) for e in q.evidence), default=len(conv.turns)) for q in pending}
    rows: list[dict[str, Any]] = []
    insert_seconds, entries = 0.0, 0

    def test(ready: list[Question]) -> None:
        for q in ready:
            rows.append(test_question(run, q, ks))
        if progress and ready:
            progress(len(ready))

    for packet in packets(conv, config.packet_size):
        started = time.perf_counter()
        entries += insert_packet(run, packet)
        insert_seconds += time.perf_counter() - started
        if progress:
            progress(0)
        at_end = packet.position == len(conv.turns)
        due = config.test_at == "evidence" or (config.test_at == "session" and packet.last_of_session) or at_end
        if due:
            ready = [q for q in pending if needed[q.qid] <= packet.position or at_end]
            pending = [q for q in pending if q not in ready]
            test(ready)
    stats = {"turns": len(conv.turns), "entries": entries, "insert_seconds": insert_seconds}
    return rows, stats


def summarise(rows: list[dict[str, Any]], ks: tuple[int, ...] = RECALL_KS) -> dict[str, Any]:
    """The headline figures (categories 1-4) and the same per category."""

    def mean(sel: list[dict[str, Any]]) -> dict[str, Any]:
        scored = [r for r in sel if "recall@10" in r]
        out: dict[str, Any] = {f"recall@{k}": round(statistics.fmean(r[f"recall@{k}"] for r in scored), 4) if scored else None for k in ks}
        out["entry_recall@10"] = round(statistics.fmean(r["entry_recall@10"] for r in scored), 4) if scored else None
        out["questions"] = len(scored)
        answered = [r for r in sel if "f1" in r]
        if answered:
            out["f1"] = round(statistics.fmean(r["f1"] for r in answered), 4)
            out["bleu1"] = round(statistics.fmean(r["bleu1"] for r in answered), 4)
            out["answered"] = len(answered)
        return out

    head = [r for r in rows if r["category"] in HEADLINE_CATEGORIES]
    summary = mean(head)
    summary["by_category"] = {f"{c} {CATEGORY_NAMES.get(c, '?')}": mean([r for r in rows if r["category"] == c]) for c in sorted({r["category"] for r in rows})}
    return summary


def run_locomo(
    memory_settings: Mapping[str, Any],
    config: LocomoConfig,
    conversations: list[Conversation],
    workdir: Path,
    *,
    ks: tuple[int, ...] = RECALL_KS,
    out: Path | None = None,
    progress: Callable[[str, int], Callable[[int], None]] | None = None,
    limit_questions: int | None = None,
) -> dict[str, Any]:
    """Evaluate the memory declared by ``memory_settings`` on ``conversations`` (one fresh
    memory per conversation under ``workdir``). Writes ``questions.jsonl`` into ``out``
    when given. Returns the summary (see ``memcore eval locomo --json``)."""
    from ..api._open import open as open_memory

    rows: list[dict[str, Any]] = []
    steps = StepCounter()
    turns = entries = 0
    insert_seconds = 0.0
    service_llm: dict[str, Any] = {}
    service_reasons: dict[str, dict[str, int]] = {}
    reports: dict[str, Any] = {}
    started = time.perf_counter()
    for conv in conversations:
        questions = conv.questions[:limit_questions] if limit_questions else conv.questions
        bar = progress(conv.sample_id, len(questions)) if progress else None
        memory = open_memory(copy.deepcopy(dict(memory_settings)), path=workdir / conv.sample_id)
        try:
            conv_rows, stats = run_conversation(memory, conv, config, ks=ks, questions=questions, progress=bar, steps=steps)
            reports[conv.sample_id] = service_reports(memory)
            add_counts(service_llm, reports[conv.sample_id]["llm"]["steps"])
            add_counts(service_reasons, reports[conv.sample_id]["llm"]["fallback_reasons"])
        finally:
            memory.close()
        rows.extend(conv_rows)
        turns += stats["turns"]
        entries += stats["entries"]
        insert_seconds += stats["insert_seconds"]
    summary = summarise(rows, ks)
    models = sorted(steps.models)
    answered = [r for r in rows if r.get("answered_by") == "llm"]
    summary["llm"] = (models[0] if len(models) == 1 else models) if answered else None
    if not any("f1" in r for r in rows):
        summary.pop("f1", None)
        summary.pop("bleu1", None)
    summary["llm_steps"] = {**steps.to_dict(), **service_llm}
    summary["llm_fallback_reasons"] = {**steps.reasons_dict(), **service_reasons}
    summary["service_reports"] = reports
    summary["conversations"] = [c.sample_id for c in conversations]
    summary["turns"] = turns
    summary["entries"] = entries
    summary["insert_turns_per_s"] = round(turns / insert_seconds, 1) if insert_seconds else None
    retrieve = [r["retrieve_seconds"] for r in rows]
    summary["retrieve_ms_median"] = round(1000 * statistics.median(retrieve), 3) if retrieve else None
    answer = [r["answer_seconds"] for r in rows if "answer_seconds" in r]
    if answer:  # the first answer includes starting a local model server, hence the median
        summary["answer_seconds_median"] = round(statistics.median(answer), 3)
    summary["seconds"] = round(time.perf_counter() - started, 2)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "questions.jsonl", "w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return summary
