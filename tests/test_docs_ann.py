"""Recall figures of the approximate vector indexes that cannot go stale: the SciFact
recall@10 columns of docs/plugins/faiss.md ("Benchmark", runs A and B: raw faiss and
memcore's ``faiss`` index, Flat and HNSW32 at efSearch 16 / 64 / 128) and of
docs/plugins/lsh.md (the SciFact and 100,000-vector tables of "Benchmarks": the ``lsh``
index and ``faiss.IndexLSH`` at equal total bits; "Choosing the parameters": recall and
candidates per query of its SciFact and 100,000-vector synthetic rows) are recomputed the way
``bench/bench_faiss.py`` and ``bench/bench_lsh.py`` compute them, with their own data
functions, and compared to the precision shown.

faiss builds its HNSW graphs in parallel, which makes the graph (and the third decimal of
recall) depend on thread scheduling; these runs use one OpenMP thread, so they are
deterministic. Timing columns are measurements, not compared (the pages say when, how and
under which load they were taken).

Needs faiss-cpu, memcore-faiss and memcore-lsh, and for the SciFact figures the shared
data (``MEMCORE_SHARED`` or ``../shared``: SciFact's MiniLM vectors); skips cleanly
without them (the synthetic rows are generated, as the bench does, and run anyway). Runtime: about
60 s of CPU for the whole module (SciFact: 5,183 vectors, 809 queries, two faiss and 14
lsh indexes; synthetic: 100,000 vectors, 1,000 queries, 14 lsh indexes, each built on
first use so no test nears the per-test timeout); 3 min 30 s of wall time on the shared
2-core machine at load average 11.
"""

from __future__ import annotations

import os
import re
import sys
from importlib import util
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("MEMCORE_SHARED") or REPO.parent / "shared")
SCIFACT = SHARED / "data" / "scifact" / "minilm"
FAISS_PAGE = "docs/plugins/faiss.md"
LSH_PAGE = "docs/plugins/lsh.md"
K = 10


def section(page: str, title: str) -> str:
    """The text of the section whose heading is ``title`` (down to the next heading of the same or a higher level)."""
    text = (REPO / page).read_text(encoding="utf-8")
    match = re.search(rf"(?m)^(#+) {re.escape(title)}\s*$", text)
    assert match, f"{page} has no section {title!r}"
    level = len(match.group(1))
    end = re.compile(rf"(?m)^#{{1,{level}}} ")
    stop = end.search(text, match.end())
    return text[match.end() : stop.start() if stop else len(text)]


def rows(text: str) -> list[dict[str, str]]:
    """Every row of every markdown table in ``text``, as ``{header: cell}``."""
    out, header = [], None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
        elif not set("".join(cells)) <= set("-: "):
            out.append(dict(zip(header, cells)))
    return out


def shown(cell: str) -> str:
    """The figure of a cell, without bold."""
    return cell.replace("*", "").strip()


def close(actual: float, figure: str) -> bool:
    """``actual`` rounds to ``figure`` at the precision shown."""
    decimals = len(figure.split(".")[1]) if "." in figure else 0
    return abs(actual - float(figure)) <= 0.5 * 10**-decimals + 1e-9


@pytest.fixture(scope="module")
def bench_path():
    bench = str(REPO / "bench")
    sys.path.insert(0, bench)
    try:
        yield
    finally:
        sys.path.remove(bench)


def need(*modules: str, scifact: bool = True) -> None:
    for module in modules:
        if util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")
    if scifact and not (SCIFACT / "corpus.npy").is_file():
        pytest.skip(f"no SciFact MiniLM vectors at {SCIFACT} (set MEMCORE_SHARED)")


class one_thread:
    """faiss with one OpenMP thread inside the block (deterministic HNSW builds)."""

    def __enter__(self) -> None:
        import faiss

        self.threads = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)

    def __exit__(self, *exc: Any) -> None:
        import faiss

        faiss.omp_set_num_threads(self.threads)


# -- faiss.md -----------------------------------------------------------------------------------

FAISS_CONFIGS = {"Flat": None, "HNSW32, efSearch 16": 16, "HNSW32, efSearch 64": 64, "HNSW32, efSearch 128": 128}


def faiss_figures() -> list[tuple[str, str, str, str]]:
    """``(run, config, raw recall, memcore recall)`` of the SciFact rows of "Benchmark"."""
    text = section(FAISS_PAGE, "Benchmark")
    out = []
    for run in ("Run A", "Run B"):
        part = text.split(f"**{run}**", 1)[1].split("**Run", 1)[0]
        for row in rows(part):
            if row["dataset"].startswith("SciFact"):
                raw, mem = (shown(x) for x in row["recall@10 raw / memcore"].split("/"))
                out.append((run, row["config"], raw, mem))
    return out


FAISS_FIGURES = faiss_figures()


def test_the_faiss_rows_are_found():
    assert [c for _, c, _, _ in FAISS_FIGURES] == list(FAISS_CONFIGS) * 2


@pytest.fixture(scope="module")
def faiss_recall(bench_path) -> dict[str, tuple[float, float]]:
    """``{config: (raw recall@10, memcore recall@10)}`` on SciFact, as bench_faiss.py measures them."""
    need("faiss", "memcore_faiss")
    import bench_faiss as bf
    import faiss

    from memcore import Query, Record

    base, queries = bf.scifact()
    dim = base.shape[1]
    truth = bf.ground_truth(base, queries, K)
    records = [Record(id=str(i), text="-", vectors={"default": v}) for i, v in enumerate(base)]
    chunks = [(queries[i : i + 100], i) for i in range(0, len(queries), 100)]

    def measure(raw: Any, mem: Any, extras: dict[str, Any]) -> tuple[float, float]:
        raw_found = [row.tolist() for a, _ in chunks for row in raw.search(a, K)[1]]
        mem_found = [[int(h.id) for h in hits] for a, _ in chunks for hits in mem.search_batch([Query(vectors={"default": q}, extras=extras) for q in a], K)]
        return bf.recall(raw_found, truth, K), bf.recall(mem_found, truth, K)

    out = {}
    with one_thread():
        raw = faiss.index_factory(dim, "Flat", faiss.METRIC_INNER_PRODUCT)
        raw.add(base)
        mem = bf.memcore_index(dim, factory="Flat", omp_threads=1)
        mem.add(records)
        out["Flat"] = measure(raw, mem, {})
        raw = faiss.index_factory(dim, "HNSW32", faiss.METRIC_INNER_PRODUCT)
        raw.add(base)
        mem = bf.memcore_index(dim, factory="HNSW32", omp_threads=1)
        mem.add(records)
        for config, ef in FAISS_CONFIGS.items():
            if ef is not None:
                raw.hnsw.efSearch = ef
                out[config] = measure(raw, mem, {"faiss": {"ef_search": ef}})
    return out


@pytest.mark.parametrize(("run", "config", "raw", "mem"), FAISS_FIGURES, ids=[f"{r[-1]}-{c}" for r, c, _, _ in FAISS_FIGURES])
def test_faiss_recall_is_what_the_run_gives(run, config, raw, mem, faiss_recall):
    got_raw, got_mem = faiss_recall[config]
    assert close(got_raw, raw) and close(got_mem, mem), (
        f"{FAISS_PAGE}, {run}, SciFact {config}: recall@10 raw / memcore is {got_raw:.4f} / {got_mem:.4f}, the page says {raw} / {mem}"
    )


REFINE_SECTION = "The refine step on SciFact"
REFINE_FACTORS = (0, 2, 4, 8)


def refine_figures() -> list[tuple[str, int | None, dict[int, str]]]:
    """``(factory, nprobe, {refine_k_factor: recall@10})`` of the refine table of faiss.md."""
    out = []
    for row in rows(section(FAISS_PAGE, REFINE_SECTION)):
        nprobe = shown(row["nprobe"])
        out.append((shown(row["factory"]).strip("`"), int(nprobe) if nprobe.isdigit() else None, {f: shown(row[f"refine {f}"]) for f in REFINE_FACTORS}))
    return out


REFINE_FIGURES = refine_figures()


def test_the_refine_rows_are_found():
    assert len(REFINE_FIGURES) >= 3 and all(len(figures) == len(REFINE_FACTORS) for _, _, figures in REFINE_FIGURES)


@pytest.mark.parametrize(("factory", "nprobe", "figures"), REFINE_FIGURES, ids=[f"{f}-{n}" for f, n, _ in REFINE_FIGURES])
def test_refine_recall_is_what_the_run_gives(factory, nprobe, figures, bench_path, tmp_path):
    """The refine step re-scores from the store's vectors: a SQLite collection, as in use;
    the factor is a search-time option, so one build serves every column."""
    need("faiss", "memcore_faiss")
    import bench_faiss as bf

    from memcore import Collection, Query
    from memcore._plugins._host import get_registry
    from memcore.embedders._embedder import Space
    from memcore.stores._sqlite import SQLiteStore

    base, queries = bf.scifact()
    truth = bf.ground_truth(base, queries, K)
    with one_thread():
        col = Collection(SQLiteStore(tmp_path), {"dense": Space("dense", base.shape[1])}, get_registry(), tmp_path)
        options = {"min_train": 2000} if factory.startswith("HNSW") else {}
        col.create_index("vec", "faiss", space="dense", factory=factory, omp_threads=1, **options)
        col.insert([{"id": f"r{i}", "text": "-", "vectors": {"dense": v}} for i, v in enumerate(base)])
        assert col.index("vec").trained
        got = {}
        for factor in REFINE_FACTORS:
            mode = {"refine_k_factor": factor, **({"nprobe": nprobe} if nprobe else {})}
            found = [[int(h.id[1:]) for h in col.search_index("vec", Query(vectors={"dense": q}, k=K, extras={"faiss": mode}), K)] for q in queries]
            got[factor] = bf.recall(found, truth, K)
        col.close()
    assert all(close(got[f], figures[f]) for f in REFINE_FACTORS), f"{FAISS_PAGE}, {REFINE_SECTION}, {factory} nprobe {nprobe}: {got}, the page says {figures}"
    assert all(got[a] <= got[b] + 1e-9 for a, b in zip(REFINE_FACTORS, REFINE_FACTORS[1:]))  # more candidates never lose recall


# -- lsh.md ---------------------------------------------------------------------------------------

LABEL = re.compile(r"T(\d+)×b(\d+) r(\d)(?: p(\d+))?(?: cap(\d+))?")
SYNTHETIC_100K = "synthetic, 100,000"


def lsh_config(text: str) -> dict[str, Any]:
    """An lsh config from the page's two notations: ``T16×b16 r2 p32 cap64`` (``, codes
    only`` for ``rerank = false`` without stored vectors) or ``tables=16, bits=10, ...``;
    ``defaults`` is ``{}``."""
    text = shown(text).replace("`", "")
    match = LABEL.match(text)
    if match:
        tables, bits, radius, probes, cap = match.groups()
        config: dict[str, Any] = {"tables": int(tables), "bits": int(bits), "multi_probe": int(radius)}
        if probes:
            config["probes"] = int(probes)
        if cap:
            config["max_candidates"] = int(cap)
        if "codes only" in text:
            config |= {"rerank": False, "store_vectors": False}
        return config
    if text.startswith("defaults"):
        return {}
    return {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", text)}


LSH_TABLES = {
    "scifact": "SciFact (5,183 vectors, 809 queries; exact top-1 / top-10 cosine 0.62 / 0.45)",
    "synthetic_100k": "Synthetic, 100,000 × 384, 1,000 queries (exact top-1 / top-10 cosine 0.74 / 0.61)",
}


def lsh_table_figures() -> list[tuple[str, str, dict[str, Any], str, str]]:
    """``(dataset, label, config, recall@10, IndexLSH recall at equal total bits)`` of the
    SciFact and 100,000-vector tables of "Benchmarks" (the 1,000,000-vector table is a
    measurement: minutes and 5.6 GB)."""
    out = []
    for data, title in LSH_TABLES.items():
        for r in rows(section(LSH_PAGE, title)):
            out.append((data, shown(r["configuration"]), lsh_config(r["configuration"]), shown(r["recall@10"]), shown(r["IndexLSH recall, equal bits"])))
    return out


def lsh_choice_figures() -> list[tuple[str, dict[str, Any], str, str]]:
    """``(data, config, recall@10, candidates / query)`` of "Choosing the parameters"; the
    1,000,000-vector row is a measurement (``python bench/bench_lsh.py --n 1000000 ...``, minutes and 5.6 GB)."""
    out, data = [], ""
    for r in rows(section(LSH_PAGE, "Choosing the parameters")):
        data = "scifact" if r["data"].startswith("SciFact") else "synthetic_100k" if r["data"].startswith(SYNTHETIC_100K) else r["data"]
        out.append((data, lsh_config(r["configuration"]), shown(r["recall@10"]), shown(r["candidates / query"]).replace(",", "")))
    return out


LSH_TABLE = lsh_table_figures()
LSH_CHOICE = lsh_choice_figures()


def test_the_lsh_rows_are_found():
    assert [d for d, *_ in LSH_TABLE] == ["scifact"] * 14 + ["synthetic_100k"] * 14
    assert {d for d, _, _, _ in LSH_CHOICE} == {"scifact", "synthetic_100k", "synthetic, 1,000,000"}
    assert sum(d == "synthetic_100k" for d, _, _, _ in LSH_CHOICE) == 4


def test_lsh_labels_parse():
    assert lsh_config("**T16×b10 r1 (defaults)**") == {"tables": 16, "bits": 10, "multi_probe": 1}
    assert lsh_config("T16×b16 r1, codes only (`rerank=false`)") == {"tables": 16, "bits": 16, "multi_probe": 1, "rerank": False, "store_vectors": False}
    assert lsh_config("`tables=16, bits=16, multi_probe=2, probes=32, max_candidates=24`") == {
        "tables": 16,
        "bits": 16,
        "multi_probe": 2,
        "probes": 32,
        "max_candidates": 24,
    }


class LSHRuns:
    """Recall, candidates and IndexLSH recall per dataset and config, each computed on first use."""

    def __init__(self, bench: Any, data: dict[str, Any]):
        self.bench, self.data, self.done = bench, data, {}
        self.truth: dict[str, Any] = {}
        self.index_lsh: dict[tuple[str, int], float] = {}

    def dataset(self, name: str) -> tuple[Any, Any, Any]:
        if name not in self.truth:
            corpus, queries = self.data[name]()
            self.truth[name] = (corpus, queries, self.bench.exact_top_k(corpus, queries, K)[0])
        return self.truth[name]

    def lsh(self, name: str, config: dict[str, Any]) -> tuple[float, float]:
        key = (name, repr(sorted(config.items())))
        if key not in self.done:
            from memcore import Query

            corpus, queries, truth = self.dataset(name)
            index, _ = self.bench.build_lsh(corpus, config, 10_000)
            hits = index.search_batch([Query(vectors={"default": q}) for q in queries], K)
            self.done[key] = (self.bench.recall([[int(h.id) for h in row] for row in hits], truth), self.bench.mean_candidates(index, queries))
        return self.done[key]

    def faiss_lsh(self, name: str, nbits: int) -> float:
        if (name, nbits) not in self.index_lsh:
            import faiss

            corpus, queries, truth = self.dataset(name)
            with one_thread():
                found = self.bench.FaissLSH(faiss, corpus, nbits).search(queries, K, 1)
            self.index_lsh[(name, nbits)] = self.bench.recall([row.tolist() for row in found], truth)
        return self.index_lsh[(name, nbits)]


@pytest.fixture(scope="module")
def lsh_runs(bench_path) -> LSHRuns:
    need("faiss", "memcore_lsh", scifact=False)  # the synthetic rows need no shared data
    import bench_lsh as bl

    args = bl.parse_args([])  # the bench's defaults: 100,000 synthetic vectors, 1,000 queries, seed 0

    def scifact():
        need(scifact=True)
        corpus, queries, _ = bl.scifact(args)
        return corpus, queries

    def synthetic_100k():
        corpus, queries, _ = bl.synthetic(args)
        return corpus, queries

    return LSHRuns(bl, {"scifact": scifact, "synthetic_100k": synthetic_100k})


@pytest.mark.parametrize(("data", "label", "config", "recall", "faiss_recall"), LSH_TABLE, ids=[f"{t[0]}-{t[1]}" for t in LSH_TABLE])
def test_lsh_benchmark_recall_is_what_the_run_gives(data, label, config, recall, faiss_recall, lsh_runs):
    got, _ = lsh_runs.lsh(data, config)
    assert close(got, recall), f"{LSH_PAGE}, {data} {label}: recall@10 is {got:.4f}, the page says {recall}"
    nbits = config["tables"] * config["bits"]
    got_faiss = lsh_runs.faiss_lsh(data, nbits)
    assert close(got_faiss, faiss_recall), f"{LSH_PAGE}, {data} {label}: IndexLSH({nbits}) recall@10 is {got_faiss:.4f}, the page says {faiss_recall}"


@pytest.mark.parametrize(
    ("data", "config", "recall", "candidates"),
    [c for c in LSH_CHOICE if c[0] in ("scifact", "synthetic_100k")],
    ids=[f"{c[0]}-{i}" for i, c in enumerate(LSH_CHOICE) if c[0] in ("scifact", "synthetic_100k")],
)
def test_lsh_choice_figures_are_what_the_run_gives(data, config, recall, candidates, lsh_runs):
    got, got_candidates = lsh_runs.lsh(data, config)
    assert close(got, recall), f"{LSH_PAGE}, Choosing the parameters, {data} {config}: recall@10 is {got:.4f}, the page says {recall}"
    assert round(got_candidates) == int(candidates), f"{LSH_PAGE}, {data} {config}: {got_candidates} candidates per query, the page says {candidates}"


TIM = re.compile(r"own-bucket-only retrieval finds (\d+)% of the exact\s+top-10 on real MiniLM vectors, the defaults (\d+)%")


def test_lsh_relation_to_tim_percentages_are_what_the_run_gives(lsh_runs):
    """ "Relation to TiM" quotes two SciFact recalls in percent: T8×b16 r0 and the defaults."""
    match = TIM.search(section(LSH_PAGE, "Relation to TiM"))
    assert match, f"{LSH_PAGE}: the 'Relation to TiM' sentence is not where the test reads it"
    own = lsh_runs.lsh("scifact", {"tables": 8, "bits": 16, "multi_probe": 0})[0]
    defaults = lsh_runs.lsh("scifact", {})[0]
    assert (round(100 * own), round(100 * defaults)) == (int(match.group(1)), int(match.group(2))), (
        f"{LSH_PAGE}, Relation to TiM: {100 * own:.1f}% and {100 * defaults:.1f}%, the page says {match.group(1)}% and {match.group(2)}%"
    )


PAIR = re.compile(r"(\d\.\d{3})\s+vs\s+(\d\.\d{3})")


def test_lsh_target_prose_quotes_the_checked_tables():
    """ "Which configurations meet the target" quotes recall pairs (``0.739 vs 0.728``: the
    lsh index against IndexLSH at equal bits); each must be a row of the checked SciFact or
    100,000 tables, so the prose cannot drift from the figures the runs give."""
    text = section(LSH_PAGE, "Which configurations meet the target")
    pairs = set(PAIR.findall(" ".join(text.split())))
    rows_shown = {(recall, faiss_recall) for _, _, _, recall, faiss_recall in LSH_TABLE}
    assert len(pairs) >= 6
    assert pairs <= rows_shown, (
        f"{LSH_PAGE}, Which configurations meet the target: {sorted(pairs - rows_shown)} are no (recall, IndexLSH recall) row of the tables"
    )


def test_close():
    assert close(0.8194, "0.819") and not close(0.8196, "0.819")
    assert close(0.9995, "0.9995") and not close(0.9990, "0.9995")
