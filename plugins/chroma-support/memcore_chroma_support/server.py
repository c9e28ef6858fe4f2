"""A real ``chroma run`` server on a free 127.0.0.1 port (tests and benchmarks), stopped by its PID."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

__all__ = ["chroma_server", "chroma_executable", "free_port"]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]  # (host, port) of an AF_INET socket
        return port


def chroma_executable() -> str | None:
    """The ``chroma`` command beside this interpreter (a venv's), else on PATH; None if absent."""
    beside = Path(sys.executable).with_name("chroma")
    return str(beside) if beside.exists() else shutil.which("chroma")


@contextmanager
def chroma_server(path: Path) -> Iterator[tuple[str, int]]:
    """Start ``chroma run --path PATH/data`` on a free port (its log in ``PATH/server.log``);
    yields ``(host, port)`` once the heartbeat answers; stops the server (its process
    group, by PID) after."""
    exe_s = chroma_executable()
    if exe_s is None:
        raise RuntimeError("the chroma command line (chromadb) is not installed")
    port = free_port()
    log = open(Path(path) / "server.log", "wb")
    proc = subprocess.Popen(
        [exe_s, "run", "--path", str(Path(path) / "data"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"chroma run did not start: {(Path(path) / 'server.log').read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)
        yield "127.0.0.1", port
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()
