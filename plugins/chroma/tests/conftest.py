"""Fixtures of the memcore-chroma tests: a real ``chroma run`` server on a free port."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chroma_executable() -> str | None:
    beside = Path(sys.executable).with_name("chroma")
    return str(beside) if beside.exists() else shutil.which("chroma")


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory):
    """``(host, port)`` of a ``chroma run`` started for this test session, stopped after."""
    exe = chroma_executable()
    if exe is None:
        pytest.skip("the chroma command line (chromadb) is not installed")
    path = tmp_path_factory.mktemp("chroma-server")
    port = free_port()
    log = open(path / "server.log", "wb")
    proc = subprocess.Popen(
        [exe, "run", "--path", str(path / "data"), "--host", "127.0.0.1", "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
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
                raise RuntimeError(f"chroma run did not start: {(path / 'server.log').read_text(errors='replace')[-2000:]}")
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
