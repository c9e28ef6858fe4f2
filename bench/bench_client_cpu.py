#!/usr/bin/env python
"""The synchronous client's CPU per request: ``RemoteMemory`` searching one ``memcore serve``.

One ``memcore serve`` (its own process on 127.0.0.1) serves ``--n`` records with caller-given
vectors (``--dim``, an ``exact`` index); one client thread runs ``--ops`` searches (k=10, by
vector) and the CPU this thread spent (``time.thread_time``; user and system apart from
``getrusage``) is divided by the requests: what the client costs per request, which on a
busy machine is taken from the server's cores.

With ``--baseline DIR`` (the ``memcore_server`` package of another tree, e.g.
``/tmp/old/plugins/server/memcore_server``) the same searches also run through that
package's ``RemoteMemory`` (its client and HTTP modules; the core is this tree's), in
``--rounds`` rounds alternating the two (A/B interleaved, same server, same process), and
the paired ratio current / baseline per round is reported. With ``--profile``
one extra round of the current client runs under cProfile (CPU clock) and its top functions
are printed on stderr.

    python bench/bench_client_cpu.py --baseline /tmp/old/plugins/server/memcore_server
    python bench/bench_client_cpu.py --quick --profile

Prints ONE JSON object on stdout (progress on stderr). Never run as a test.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import io
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from _common import emit, finish_environment, free_port, header, loadavg, log, pct, process_cpu_s, use_checkout, wait_for_serve

use_checkout("server")

import memcore  # noqa: E402
from memcore_server import RemoteMemory  # noqa: E402


def load_client_class(package: Path) -> Any:
    """``RemoteMemory`` of another tree's ``memcore_server`` package (its client and its
    HTTP modules), imported as a package of its own name beside this tree's."""
    spec = importlib.util.spec_from_file_location("_baseline_server", package / "__init__.py", submodule_search_locations=[str(package)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return importlib.import_module("_baseline_server.client").RemoteMemory


def one_round(remote: RemoteMemory, queries: np.ndarray, ops: int, server_pid: int) -> dict[str, float]:
    """``ops`` searches: client CPU (and its user / system split) and server CPU per request (us), wall p50 (ms)."""
    lat = []
    u0 = resource.getrusage(resource.RUSAGE_THREAD)
    s0, c0 = process_cpu_s(server_pid), time.thread_time()
    for i in range(ops):
        t0 = time.perf_counter()
        remote.retrieve(vector=queries[i % len(queries)], k=10)
        lat.append((time.perf_counter() - t0) * 1000)
    cpu = time.thread_time() - c0
    s1 = process_cpu_s(server_pid)
    u1 = resource.getrusage(resource.RUSAGE_THREAD)
    out = {
        "client_cpu_us": cpu * 1e6 / ops,
        "client_user_us": (u1.ru_utime - u0.ru_utime) * 1e6 / ops,
        "client_system_us": (u1.ru_stime - u0.ru_stime) * 1e6 / ops,
    }
    out["p50_ms"] = pct(lat, 50)
    if s0 is not None and s1 is not None:
        out["server_cpu_us"] = (s1 - s0) * 1e6 / ops
    return out


def summary(rounds: list[dict[str, float]]) -> dict[str, Any]:
    keys = rounds[0].keys()
    return {f"{k}_median": round(float(np.median([r[k] for r in rounds])), 3) for k in keys} | {
        "rounds": [{k: round(v, 3) for k, v in r.items()} for r in rounds]
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--ops", type=int, default=2000, help="searches per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per variant (alternated with --baseline)")
    parser.add_argument("--baseline", type=Path, default=None, help="another tree's memcore_server package directory to compare with (its RemoteMemory)")
    parser.add_argument("--profile", action="store_true", help="one more round of the current client under cProfile (CPU clock), top functions on stderr")
    parser.add_argument("--quick", action="store_true", help="1,000 records, 300 searches per round, 2 rounds")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.quick:
        args.n, args.ops, args.rounds = min(args.n, 1000), min(args.ops, 300), min(args.rounds, 2)

    result = header("client_cpu", args)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.n, args.dim)).astype(np.float32)
    queries = rng.normal(size=(500, args.dim)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        settings = {"spaces": {"default": {"dim": args.dim}}, "indexes": {"vector": {"kind": "exact", "space": "default"}}}
        log(f"loading {args.n} records")
        with memcore.open(settings, path=Path(tmp) / "served") as memory:
            for start in range(0, args.n, 1000):
                memory.insert([{"text": f"record {i}", "id": f"r{i}", "vectors": {"default": x[i]}} for i in range(start, min(args.n, start + 1000))])
        port = free_port()
        config = Path(tmp) / "memcore.toml"
        config.write_text(
            f'[spaces.default]\ndim = {args.dim}\n\n[indexes.vector]\nkind = "exact"\nspace = "default"\n\n[server]\nport = {port}\n', encoding="utf-8"
        )
        cmd = [sys.executable, "-m", "memcore.cli", "serve", "--config", str(config), "--path", str(Path(tmp) / "served")]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_for_serve(url, proc)
            current = RemoteMemory(url, retries=0)
            variants = {"current": current}
            if args.baseline is not None:
                variants["baseline"] = load_client_class(args.baseline)(url, retries=0)
            for remote in variants.values():  # warm the connections, the server and the caches
                one_round(remote, queries, min(200, args.ops), proc.pid)
            load_before = loadavg()
            rounds: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
            for r in range(args.rounds):
                order = list(variants) if r % 2 == 0 else list(reversed(variants))
                for name in order:
                    rounds[name].append(one_round(variants[name], queries, args.ops, proc.pid))
                log(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{n} {rounds[n][-1]['client_cpu_us']:.0f} us" for n in variants))
            result["load"] = {"before": load_before, "after": loadavg()}
            for name in variants:
                result[name] = summary(rounds[name])
            if "baseline" in variants:
                ratios = [a["client_cpu_us"] / b["client_cpu_us"] for a, b in zip(rounds["current"], rounds["baseline"])]
                result["client_cpu_current_over_baseline"] = {"median": round(float(np.median(ratios)), 3), "rounds": [round(v, 3) for v in ratios]}
                if all("server_cpu_us" in r for r in rounds["current"] + rounds["baseline"]):
                    sr = [a["server_cpu_us"] / b["server_cpu_us"] for a, b in zip(rounds["current"], rounds["baseline"])]
                    result["server_cpu_current_over_baseline"] = {"median": round(float(np.median(sr)), 3), "rounds": [round(v, 3) for v in sr]}
            if args.profile:
                profiler = cProfile.Profile(time.thread_time)
                profiler.enable()
                one_round(current, queries, args.ops, proc.pid)
                profiler.disable()
                text = io.StringIO()
                pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(30)
                print(text.getvalue(), file=sys.stderr)
            for remote in variants.values():
                remote.close()
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    result["environment"] = finish_environment(result["environment"])
    emit(result, args.out)


if __name__ == "__main__":
    main()
