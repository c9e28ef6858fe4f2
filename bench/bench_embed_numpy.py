"""MiniLM without torch: the numpy backend of ``minilm`` against sentence-transformers on torch CPU.

Embeds the first ``--n`` SciFact abstracts (title + " " + text, as the shared vectors
were made) with both backends, batch ``--batch``, and prints ONE JSON object:

- ``agreement``: min / mean cosine between the numpy vectors and (a) torch's vectors of
  this run, (b) the shared precomputed vectors ``scifact/minilm/corpus.npy``;
- ``throughput``: texts/s of each backend (median over passes), and the ratio numpy/torch
  (1.0 = as fast as torch; > 1 faster). The passes are interleaved chunk by chunk,
  rotating which backend goes first, so load from other processes hits both alike.
- ``tokens``: embed_tokens agreement (max abs difference) on a few texts.

    python bench/bench_embed_numpy.py --quick          # 128 texts, one pass
    python bench/bench_embed_numpy.py --n 1000         # the issue's figure (minutes on 2 cores)

Without torch installed only the agreement with the shared vectors and the numpy
throughput are printed. Without ``../shared/data`` it exits with a message.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from importlib import util
from pathlib import Path

import numpy as np
from _common import SHARED, emit, finish_environment, header, log, use_checkout

use_checkout("embed")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from memcore_embed.minilm import MiniLMConfig, MiniLMEmbedder  # noqa: E402

DATA = Path(os.environ.get("MEMCORE_SHARED") or SHARED) / "data" / "scifact"
"""SciFact in the shared folder beside the repository (``MEMCORE_SHARED`` overrides it)."""


def load_texts(n: int) -> tuple[list[str], np.ndarray]:
    """The first ``n`` corpus texts in the shared vectors' row order, with those vectors."""
    ids = json.loads((DATA / "minilm" / "corpus_ids.json").read_text())[:n]
    wanted = set(ids)
    docs = {}
    with (DATA / "corpus.jsonl").open() as fh:
        for line in fh:
            doc = json.loads(line)
            if doc["_id"] in wanted:
                docs[doc["_id"]] = (doc.get("title", "") + " " + doc["text"]).strip()
    vectors = np.load(DATA / "minilm" / "corpus.npy", allow_pickle=False)[: len(ids)]
    return [docs[i] for i in ids], vectors


def main(argv: list[str] | None = None) -> None:
    """Run the comparison and print the JSON result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="SciFact texts (default 1000)")
    parser.add_argument("--batch", type=int, default=32, help="batch size of both backends")
    parser.add_argument("--repeat", type=int, default=1, help="timed passes per backend")
    parser.add_argument("--chunk", type=int, default=128, help="texts per interleaved chunk")
    parser.add_argument("--quick", action="store_true", help="128 texts, one pass")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.repeat = 128, 1
    if not (DATA / "minilm" / "corpus.npy").is_file():
        sys.exit(f"no SciFact data at {DATA}: this benchmark needs ../shared/data")
    result = header("embed_numpy", args)
    texts, shared = load_texts(args.n)
    backends = {"numpy": MiniLMEmbedder(MiniLMConfig(backend="numpy", batch_size=args.batch))}
    if util.find_spec("torch") is not None and util.find_spec("sentence_transformers") is not None:
        backends["torch"] = MiniLMEmbedder(MiniLMConfig(backend="torch", batch_size=args.batch))
    for name, embedder in backends.items():  # load the models outside the timings
        started = time.perf_counter()
        embedder.embed_documents(texts[:2])
        log(f"{name} backend loaded in {time.perf_counter() - started:.1f}s")
    seconds: dict[str, list[float]] = {name: [] for name in backends}
    vectors: dict[str, np.ndarray] = {}
    chunks = [texts[i : i + args.chunk] for i in range(0, len(texts), args.chunk)]
    for rep in range(args.repeat):
        spent = {name: 0.0 for name in backends}
        outs: dict[str, list[np.ndarray]] = {name: [] for name in backends}
        for c, chunk in enumerate(chunks):
            order = list(backends) if (c + rep) % 2 == 0 else list(reversed(backends))
            for name in order:
                started = time.perf_counter()
                outs[name].append(backends[name].embed_documents(chunk))
                spent[name] += time.perf_counter() - started
            log(f"pass {rep + 1}/{args.repeat} chunk {c + 1}/{len(chunks)}: " + ", ".join(f"{n} {s:.1f}s" for n, s in spent.items()))
        for name in backends:
            seconds[name].append(spent[name])
            vectors[name] = np.concatenate(outs[name])
    throughput = {name: len(texts) / statistics.median(s) for name, s in seconds.items()}
    agreement = {"vs_shared_vectors": _cos(vectors["numpy"], shared)}
    if "torch" in vectors:
        agreement["vs_torch_this_run"] = _cos(vectors["numpy"], vectors["torch"])
        sample = texts[:8]
        mine = backends["numpy"].embed_tokens(sample)
        theirs = backends["torch"].embed_tokens(sample)
        result["tokens"] = {
            "texts": len(sample),
            "same_lengths": all(a.shape == b.shape for a, b in zip(mine, theirs)),
            "max_abs_diff": float(max(np.abs(a - b).max() for a, b in zip(mine, theirs))),
        }
    result["agreement"] = agreement
    result["throughput"] = {
        "texts_per_s": {n: round(v, 1) for n, v in throughput.items()},
        "seconds": {n: [round(x, 2) for x in s] for n, s in seconds.items()},
        "ratio_numpy_vs_torch": round(throughput["numpy"] / throughput["torch"], 3) if "torch" in throughput else None,
        "torch_threads": _torch_threads(),
    }
    result["environment"] = finish_environment(result["environment"])
    emit(result, args.out)


def _cos(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    cos = (a * b).sum(axis=1)
    return {"min": float(cos.min()), "mean": float(cos.mean()), "n": int(len(cos))}


def _torch_threads() -> int | None:
    if "torch" not in sys.modules:
        return None
    return int(sys.modules["torch"].get_num_threads())


if __name__ == "__main__":
    main()
