"""``memcore.eval.locomo`` (loader, turn-counting recall, F1/BLEU-1) and the LoCoMo memory test
pipeline behind ``memcore eval locomo``, on a small synthetic LoCoMo-shaped file (and the real
dev file when ../shared/data is present)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

from memcore.plugin import LLM, ComponentConfig
from memcore import ConfigError, ValidationError, hookimpl
from memcore.cli import main as cli
from memcore.eval.locomo import answer_f1, bleu1, entry_recall, evidence_recall, first_turns, load_locomo, normalise_ids, token_f1
from memcore.eval.locomo_pipeline import HISTORY_PROMPT, LocomoConfig, history_text, load_eval_config, packets, result_summary, run_locomo
from memcore.testing import register_plugin

DEV = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev.json"

SAMPLE = {
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Alice",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Alice", "dia_id": "D1:1", "text": "I started working at a bakery in Lisbon last week."},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "Nice! I adopted a grey cat called Pixel."},
            {"speaker": "Alice", "dia_id": "D1:3", "text": "My sister plays the violin every Sunday.", "blip_caption": "a violin on a chair"},
        ],
        "session_2_date_time": "10:00 am on 20 May, 2023",
        "session_2": [
            {"speaker": "Bob", "dia_id": "D2:1", "text": "Pixel knocked over my coffee this morning."},
            {"speaker": "Alice", "dia_id": "D2:2", "text": "The bakery sells sourdough bread now."},
        ],
    },
    "qa": [
        {"question": "Where does Alice work?", "answer": "a bakery in Lisbon", "evidence": ["D1:1"], "category": 4},
        {"question": "What is the name of Bob's cat?", "answer": "Pixel", "evidence": ["D1:2; D2:1"], "category": 1},
        {"question": "What instrument does Alice's sister play?", "answer": "violin", "evidence": ["D:1:3", "D1:3"], "category": 4},
        {"question": "When did Bob's cat spill coffee?", "answer": "20 May 2023", "evidence": ["D2:01", "D9:9"], "category": 2},
        {"question": "What does Bob's bakery sell?", "adversarial_answer": "sourdough", "evidence": ["D2:2"], "category": 5},
        {"question": "No evidence here?", "answer": "x", "evidence": [], "category": 3},
    ],
}

MEMORY = {"store": "memory", "indexes": {"vector": {"kind": "exact", "space": "default"}}, "pipeline": "basic"}


@pytest.fixture
def data_file(tmp_path) -> Path:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([SAMPLE]))
    return path


def test_loader_normalises_ids_and_drops_unknown_evidence(data_file):
    [conv] = load_locomo(data_file)
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
    assert conv.turns[3].session == 2 and conv.turns[3].date_time == "10:00 am on 20 May, 2023"
    assert conv.turns[2].caption == "a violin on a chair"
    assert [q.evidence for q in conv.questions] == [["D1:1"], ["D1:2", "D2:1"], ["D1:3"], ["D2:1"], ["D2:2"], []]
    assert conv.dropped_evidence == ["D9:9"]
    assert conv.questions[4].answer is None and conv.questions[4].adversarial_answer == "sourdough"
    assert normalise_ids("D9:1 D4:4") == ["D9:1", "D4:4"] and normalise_ids("D") == []


def test_loader_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a list"}')
    with pytest.raises(ValidationError, match="JSON list"):
        load_locomo(bad)
    bad.write_text('[{"sample_id": "x"}]')
    with pytest.raises(ValidationError, match="sample 0"):
        load_locomo(bad)
    with pytest.raises(ValidationError, match="cannot read"):
        load_locomo(tmp_path / "missing.json")


def test_recall_counts_turns_not_entries():
    ranking = [["D1:1", "D1:2"], ["D1:2"], ["D2:1", "D2:2", "D3:1"]]
    assert first_turns(ranking, 3) == ["D1:1", "D1:2", "D2:1"]
    r = evidence_recall(ranking, ["D2:2", "D1:1"], (1, 3, 4))
    assert r == {1: 0.5, 3: 0.5, 4: 1.0}
    assert entry_recall(ranking, ["D2:2", "D1:1"], 2) == 0.5
    assert entry_recall(ranking, ["D2:2", "D1:1"], 3) == 1.0
    with pytest.raises(ValidationError):
        evidence_recall(ranking, [], (5,))


def test_answer_metrics():
    assert token_f1("The bakery in Lisbon", "a bakery in Lisbon") == 1.0
    assert 0 < token_f1("bakery", "a bakery in Lisbon") < 1
    assert token_f1("running", "runs") == 1.0  # stemmed
    assert answer_f1("Not mentioned in the conversation", None, 5) == 1.0
    assert answer_f1("sourdough", None, 5) == 0.0
    assert answer_f1("violin, piano", "piano, violin", 1) == 1.0
    assert answer_f1("hiking", "hiking; maybe camping", 3) == 1.0
    assert bleu1("a bakery in Lisbon", "a bakery in Lisbon") == 1.0
    assert bleu1("", "x") == 0.0 and 0 < bleu1("bakery", "a bakery in Lisbon") < 0.5


def test_source_packets(data_file):
    [conv] = load_locomo(data_file)
    got = [(p.session, [t.dia_id for t in p.turns], p.last_of_session, p.position) for p in packets(conv, 2)]
    assert got == [(1, ["D1:1", "D1:2"], False, 2), (1, ["D1:3"], True, 3), (2, ["D2:1", "D2:2"], True, 5)]


@pytest.mark.parametrize("test_at", ["evidence", "session", "conversation"])
def test_pipeline_scores_every_question_with_evidence(data_file, tmp_path, test_at):
    config = LocomoConfig.model_validate({"test_at": test_at, "insert": {"adapter": "to_turns"}, "test": {"k": 5}})
    summary = run_locomo(MEMORY, config, load_locomo(data_file), tmp_path / "work", out=tmp_path / "out")
    assert summary["questions"] == 4 and summary["by_category"]["5 adversarial"]["questions"] == 1
    assert summary["recall@5"] == 1.0  # five turns, k=5: everything is retrieved
    assert summary["llm"] is None and "f1" not in summary
    rows = [json.loads(line) for line in (tmp_path / "out" / "questions.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and all("recall@5" in r for r in rows if r["evidence"])
    assert all(t for r in rows for hit in r["retrieved"] for t in [hit["dia_ids"]])


def test_evidence_mode_tests_a_question_once_its_evidence_is_in(data_file, tmp_path):
    config = LocomoConfig.model_validate({"test_at": "evidence", "packet_size": 1, "test": {"k": 5}})
    summary = run_locomo(MEMORY, config, load_locomo(data_file), tmp_path / "w")
    # the first question is asked when only D1:1 is stored: recall is exact at k=1
    assert summary["by_category"]["4 single-hop"]["recall@5"] == 1.0


def test_dialogs_adapter_entries_carry_every_turn(data_file, tmp_path):
    config = LocomoConfig.model_validate({"insert": {"adapter": "to_dialogs"}, "test": {"k": 5}})
    summary = run_locomo(MEMORY, config, load_locomo(data_file), tmp_path / "w", out=tmp_path / "o")
    assert summary["entries"] == 3
    rows = [json.loads(line) for line in (tmp_path / "o" / "questions.jsonl").read_text().splitlines()]
    assert any(hit["dia_ids"] == ["D1:1", "D1:2"] for hit in rows[0]["retrieved"])


def test_tri_embed_uses_the_rule_fallback_without_an_llm(data_file, tmp_path):
    config = LocomoConfig.model_validate({"insert": {"pre_insert": "tri_embed", "adapter": "to_refactor"}, "test": {"pre_retrieval": "embedding"}})
    summary = run_locomo(MEMORY, config, load_locomo(data_file), tmp_path / "w", out=tmp_path / "o")
    assert summary["llm_steps"]["triple_extraction"] == {"fallback:rule_svo": 3}
    assert summary["entries"] >= 5


def test_to_refactor_needs_tri_embed(data_file, tmp_path):
    config = LocomoConfig.model_validate({"insert": {"adapter": "to_refactor"}})
    with pytest.raises(ConfigError, match="tri_embed"):
        run_locomo(MEMORY, config, load_locomo(data_file), tmp_path / "w")


def test_eval_config_errors(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[locomo]\ntest_at = "never"\n')
    with pytest.raises(ConfigError, match=r"locomo\.test_at"):
        load_eval_config(p)
    p.write_text("[memroy]\n")
    with pytest.raises(ConfigError, match="unknown top-level"):
        load_eval_config(p)
    p.write_text('[locomo.insert]\nadapter = "to_tokens"\n')
    with pytest.raises(ConfigError, match=r"locomo\.insert\.adapter"):
        load_eval_config(p)


def test_cli_json(data_file, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[locomo.test]\nk = 5\n\n[memory]\nstore = "memory"\n')
    result = CliRunner().invoke(cli, ["eval", "locomo", "--data", str(data_file), "--config", str(config), "--json", "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    for key in ("recall@5", "recall@10", "recall@25", "recall@50", "entry_recall@10", "questions", "by_category", "llm"):
        assert key in summary
    assert (tmp_path / "o" / "questions.jsonl").is_file()


@pytest.mark.skipif(not DEV.is_file(), reason="../shared/data/locomo is absent")
def test_the_dev_file_loads():
    convs = load_locomo(DEV)
    assert [c.sample_id for c in convs] == ["conv-26", "conv-30", "conv-41"]
    assert sum(len(c.turns) for c in convs) == 1451 and sum(len(c.questions) for c in convs) == 497


EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "locomo"


@pytest.mark.parametrize("name", sorted(p.stem for p in EXAMPLES.glob("*.toml")))
def test_every_example_config_runs_with_the_hashing_embedder(data_file, tmp_path, name):
    pytest.importorskip("memcore_services")
    memory, config = load_eval_config(EXAMPLES / f"{name}.toml")
    memory["spaces"] = {"default": {"embedder": {"kind": "hashing"}}}  # no model: the pipeline and the services only
    memory.pop("llms", None)
    summary = run_locomo(memory, config, load_locomo(data_file), tmp_path / "w")
    assert summary["questions"] == 4 and 0.0 <= summary["recall@10"] <= 1.0


def test_context_entries_keep_their_own_turn_text(data_file, tmp_path):
    import memcore
    from memcore.eval.locomo_pipeline import InsertRun, insert_packet
    from memcore.llms._llm import StepCounter

    [conv] = load_locomo(data_file)
    config = LocomoConfig.model_validate({"insert": {"adapter": "to_turns", "context": 1}})
    with memcore.open(MEMORY, path=tmp_path / "m") as m:
        run = InsertRun(m, config, conv, StepCounter())
        for packet in packets(conv, 2):
            insert_packet(run, packet)
        records = {r.metadata["dia_ids"][0]: r for r in m.collection.get_many(m.collection.ids())}
    assert "[context] Alice: I started working" in records["D1:2"].text
    assert records["D1:2"].metadata["turn"] == "(1:56 pm on 8 May, 2023)Bob: Nice! I adopted a grey cat called Pixel."
    assert "turn" not in records["D1:1"].metadata and "turn" not in records["D2:1"].metadata  # no previous turn in the session


class _AnswerConfig(ComponentConfig):
    kind: str = "answerer"


class _AnswerLLM(LLM):
    """Answers "Lisbon" and keeps every prompt it was sent."""

    prompts: list[Any] = []

    def __init__(self, config: _AnswerConfig):
        self.model = "answerer"

    def complete(self, messages: Any, **options: Any) -> str:
        _AnswerLLM.prompts.append(messages)
        return "Lisbon"


@pytest.fixture
def answerer():
    _AnswerLLM.prompts.clear()
    with register_plugin(SimpleNamespace(register_llms=hookimpl(lambda register: register("answerer", _AnswerLLM, _AnswerConfig))), name="answerer-llm"):
        yield _AnswerLLM.prompts


def test_history_text_adds_each_chain_summary_once():
    results = [
        {"text": "Alice: I work at a bakery.", "chain": {"prev": None, "next": "p2", "meta": "Alice talks about her job in Lisbon."}},
        {"text": "Bob: Nice!", "chain": {"prev": "p1", "next": None, "meta": "Alice talks about her job in Lisbon."}},
        {"text": "Alice's profile", "chain": None},
        {"text": "a turn", "metadata": {"chain_summary": "Bob's\n  cat."}},  # a model's multi-line reply: one line
        {"text": "beyond history", "chain": {"meta": "never shown"}},
    ]
    assert history_text(results, 4).splitlines() == [
        HISTORY_PROMPT,
        "Alice: I work at a bakery.",
        "(conversation summary: Alice talks about her job in Lisbon.)",
        "Bob: Nice!",
        "Alice's profile",
        "a turn",
        "(conversation summary: Bob's cat.)",
    ]
    assert result_summary({"text": "x", "chain": {"meta": "  "}}) is None and result_summary({"text": "x"}) is None


def test_memoryos_chain_summaries_reach_the_answer_prompt_and_rows_carry_the_service_report(data_file, tmp_path, answerer):
    pytest.importorskip("memcore_services")
    memory = {
        "store": "memory",
        "spaces": {"default": {"embedder": {"kind": "hashing"}}},
        "llms": {"answer": {"kind": "answerer"}},
        "service": {"kind": "memoryos", "stm_capacity": 1, "heat_threshold": None, "segment_min_sim": -1.0, "page_min_sim": -1.0},
    }
    config = LocomoConfig.model_validate({"insert": {"adapter": "to_dialogs"}, "test": {"k": 10, "llm": "answer", "history": 10, "retrieve": {"chain": True}}})
    summary = run_locomo(memory, config, load_locomo(data_file), tmp_path / "w", out=tmp_path / "o")
    rows = [json.loads(line) for line in (tmp_path / "o" / "questions.jsonl").read_text().splitlines()]
    # the two session-1 pages left the STM for the MTM, chained; their chain's keyword meta-summary is in every prompt
    assert len(answerer) == len(rows) == 6
    assert all(sum(line.startswith("(conversation summary: ") for line in p.splitlines()) == 1 for p in answerer)
    assert all("Alice" in next(line for line in p.splitlines() if line.startswith("(conversation")) for p in answerer)
    service = rows[0]["service"]
    assert service["kind"] == "memoryos" and service["report"]["mtm"] == 2 and service["report"]["stm"] == 1
    assert service["llm"]["steps"]["meta_info"] == {"fallback:keyword_meta": 2}
    assert service["llm"]["fallback_reasons"]["meta_info"] == {"no_llm": 2}
    assert summary["service_reports"]["conv-x"]["report"]["mtm"] == 2
    assert summary["llm_fallback_reasons"]["meta_info"] == {"no_llm": 2} and summary["llm_steps"]["answer"] == {"llm": 6}
    # without the option the service returns no chains and the prompt has no summary
    plain = config.model_copy(update={"test": config.test.model_copy(update={"retrieve": {}, "service_report": False})})
    answerer.clear()
    run_locomo(memory, plain, load_locomo(data_file), tmp_path / "w2", out=tmp_path / "o2")
    assert answerer and not any("(conversation summary" in p for p in answerer)
    assert all("service" not in json.loads(line) for line in (tmp_path / "o2" / "questions.jsonl").read_text().splitlines())


def test_a_service_without_report_still_gets_its_llm_report_and_unknown_retrieve_options_are_refused(data_file, tmp_path):
    config = LocomoConfig.model_validate({"test": {"k": 5}})
    run_locomo(MEMORY, config, load_locomo(data_file), tmp_path / "w", out=tmp_path / "o")
    row = json.loads((tmp_path / "o" / "questions.jsonl").read_text().splitlines()[0])
    assert "report" not in row["service"] and row["service"]["llm"] == {"model": None, "steps": {}, "fallback_reasons": {}}
    bad = LocomoConfig.model_validate({"test": {"k": 5, "retrieve": {"chian": True}}})
    with pytest.raises(ValidationError, match="chian"):
        run_locomo(MEMORY, bad, load_locomo(data_file), tmp_path / "w2")
