"""``memcore_llm.llama_server.LlamaServer``'s lifetime: the server subprocess never outlives
the process that started it -- stopped at interpreter exit, and killed by the kernel when
that process is killed (a killed bench left a busy llama.cpp server behind). A stand-in
``llama_cpp.server`` module (a real HTTP server on 127.0.0.1 answering ``/v1/models``) takes
the place of llama-cpp-python, so these tests need neither it nor a model."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux only")

FAKE_SERVER = """
import argparse, http.server, json
ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int)
args, _ = ap.parse_known_args()
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_GET(self):
        body = json.dumps({"data": [{"id": "fake"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(("127.0.0.1", args.port), H).serve_forever()
"""

PARENT = """
import sys, time
from pathlib import Path
from memcore_llm.llama_server import LlamaServer
server = LlamaServer(Path("model.gguf"), startup_s=60).__enter__()
print(server.proc.pid, flush=True)
if sys.argv[1] == "exit":
    sys.exit(0)  # no stop(): the atexit handler stops it
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def fake_llama(tmp_path):
    pkg = tmp_path / "llama_cpp"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "server.py").write_text(textwrap.dedent(FAKE_SERVER))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]), "TMPDIR": str(tmp_path)}
    return env


def _start_parent(env, mode):
    proc = subprocess.Popen([sys.executable, "-c", PARENT, mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    line = proc.stdout.readline()
    assert line.strip().isdigit(), proc.stderr.read()
    return proc, int(line)


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_the_server_dies_with_a_killed_parent(fake_llama, how):
    parent, server = _start_parent(fake_llama, "sleep")
    try:
        assert _alive(server)
        parent.send_signal(how)
        parent.wait(timeout=30)
        assert _gone_within(server, 20), "the llama server outlived the process that started it"
    finally:
        parent.kill()
        if _alive(server):
            os.kill(server, signal.SIGKILL)


def test_the_server_is_stopped_at_interpreter_exit(fake_llama):
    parent, server = _start_parent(fake_llama, "exit")
    try:
        assert parent.wait(timeout=60) == 0
        assert _gone_within(server, 20)
    finally:
        if _alive(server):
            os.kill(server, signal.SIGKILL)
