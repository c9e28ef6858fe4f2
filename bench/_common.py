"""What every bench script shares: paths, the checkout fallback, progress, the environment header.

Importable as ``from _common import ...`` when a script runs as ``python bench/bench_x.py``
(``bench/`` is then ``sys.path[0]``). Nothing here measures anything.

- :data:`REPO`, :data:`SHARED`: the repository and the ``shared`` data folder beside it;
- :func:`use_checkout`: import memcore (and plugins) from the checkout when not installed;
- :func:`log`: progress on stderr, with the seconds since start (stdout carries the JSON);
- :func:`environment` / :func:`finish_environment`: the ``"environment"`` header of a
  result (Python, platform, CPUs, numpy and its BLAS, memcore and library versions,
  thread variables, git commit, start time and load average; at the end the load average
  again and the peak RSS);
- :func:`header`: the head of a result (``benchmark``, ``command``, ``params``,
  ``environment``); :func:`command`: the command line to cite; :func:`emit`: the ONE JSON
  object on stdout (also written to ``--out`` when given);
- :func:`pct`: a percentile with linear interpolation.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import resource
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Sequence

import numpy as np

__all__ = [
    "REPO",
    "SHARED",
    "THREAD_VARIABLES",
    "use_checkout",
    "log",
    "loadavg",
    "package_version",
    "git_commit",
    "environment",
    "finish_environment",
    "header",
    "command",
    "emit",
    "pct",
]

REPO = Path(__file__).resolve().parent.parent
"""The repository root."""

SHARED = Path(os.environ.get("MEMCORE_SHARED") or REPO.parent / "shared")
"""The shared data folder beside the repository (``../shared``; ``MEMCORE_SHARED`` overrides it): SciFact, LoCoMo..."""

THREAD_VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
"""Environment variables that change BLAS / OpenMP timings, recorded in the header."""

_T0 = time.perf_counter()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system) a process has used so far (Linux /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def wait_for_serve(url: str, proc: subprocess.Popen[bytes], deadline_s: float = 120.0) -> None:
    """Return once ``memcore serve`` at ``url`` answers its health check; RuntimeError when
    its process ``proc`` exits first or ``deadline_s`` passes."""
    import memcore
    from memcore_server import RemoteMemory

    deadline = time.monotonic() + deadline_s
    while True:
        try:
            RemoteMemory(url, retries=0).health()
            return
        except memcore.MemcoreError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("memcore serve did not start") from None
            time.sleep(0.2)


def use_checkout(*plugins: str) -> None:
    """Make ``memcore`` and the named plugins (folder names under ``plugins/``, e.g.
    ``"fifo-kv"``) importable from this checkout when they are not installed."""
    wanted = [("memcore", REPO / "core")]
    wanted += [(f"memcore_{name.replace('-', '_')}", REPO / "plugins" / name) for name in plugins]
    for module, folder in wanted:
        if importlib.util.find_spec(module) is None and str(folder) not in sys.path:
            sys.path.insert(0, str(folder))


def log(*parts: Any) -> None:
    """Progress on stderr, led by the seconds since the script started."""
    print(f"[{time.perf_counter() - _T0:7.1f}s]", *parts, file=sys.stderr, flush=True)


def loadavg() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None where the platform has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - not on Linux / macOS
        return None


def package_version(distribution: str) -> str | None:
    """The installed version of a distribution, None when it is not installed."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def git_commit() -> str | None:
    """The short commit of the checkout (None outside git)."""
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _numpy_blas() -> Any:
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]  # type: ignore[index]
        return {k: blas.get(k) for k in ("name", "version", "openblas configuration")}
    except Exception as exc:  # noqa: BLE001 - numpy without mode="dicts"
        return f"unavailable: {exc}"


def environment(**libraries: Any) -> dict[str, Any]:
    """The environment header of a result, taken at the start of the run.

    ``libraries`` adds versions and settings of what the script compares with
    (``faiss=faiss.__version__``, ``sqlite=sqlite3.sqlite_version``...).
    """
    import memcore

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "numpy": np.__version__,
        "numpy_blas": _numpy_blas(),
        "memcore": getattr(memcore, "__version__", None),
        **libraries,
        "env": {k: os.environ.get(k) for k in THREAD_VARIABLES},
        "git_commit": git_commit(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "loadavg_at_start": loadavg(),
    }


def finish_environment(env: dict[str, Any]) -> dict[str, Any]:
    """Add what is known at the end of the run: the load average again, the peak RSS."""
    env["loadavg_at_end"] = loadavg()
    env["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    env["seconds"] = round(time.perf_counter() - _T0, 1)
    return env


def header(
    benchmark: str,
    args: argparse.Namespace | None = None,
    *,
    argv: Sequence[str] | None = None,
    params: dict[str, Any] | None = None,
    **libraries: Any,
) -> dict[str, Any]:
    """The head of a result: ``benchmark``, ``command``, ``params`` (the parsed ``args``,
    paths as strings, unless ``params`` is given) and ``environment`` (with ``libraries``)."""
    result: dict[str, Any] = {"benchmark": benchmark, "command": command(argv)}
    if params is None and args is not None:
        params = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    if params is not None:
        result["params"] = params
    result["environment"] = environment(**libraries)
    return result


def command(argv: Sequence[str] | None = None) -> str:
    """The command line of this run, as docs cite it (``python bench/bench_x.py --quick``)."""
    script = Path(sys.argv[0]).resolve()
    try:
        shown = script.relative_to(REPO).as_posix()
    except ValueError:
        shown = script.as_posix()
    return " ".join(["python", shown, *(sys.argv[1:] if argv is None else argv)])


def emit(result: dict[str, Any], out: Path | None = None) -> None:
    """Print the ONE JSON object of the run on stdout; also write it to ``out`` when given."""
    text = json.dumps(result, indent=2)
    print(text, flush=True)
    if out is not None:
        Path(out).write_text(text + "\n", encoding="utf-8")


def pct(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile of ``values`` (linear interpolation)."""
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))
