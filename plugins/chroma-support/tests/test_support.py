"""memcore-chroma-support is a library, not a plugin: no entry point, light to import,
inside the plugin API, and its ``chroma run`` fixture serves a real Chroma server."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import memcore_chroma_support
from memcore.testing import plugin_api_violations
from memcore_chroma_support import ChromaConnection, close_client, open_client


def test_it_registers_no_memcore_entry_point():
    dist = metadata.distribution("memcore-chroma-support")
    assert [ep for ep in dist.entry_points if ep.group == "memcore"] == []


def test_both_chroma_plugins_depend_on_it():
    for plugin in ("memcore-chroma", "memcore-poincare"):
        assert any(r.startswith("memcore-chroma-support") for r in metadata.requires(plugin) or []), plugin


def test_its_modules_keep_to_the_plugin_api():
    assert plugin_api_violations(Path(memcore_chroma_support.__file__).parent) == []


def test_importing_it_imports_no_chromadb():
    code = "import sys, memcore_chroma_support, memcore_chroma_support.home; print('chromadb' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_the_server_fixture_serves_a_real_chroma(chroma_server):
    host, port = chroma_server
    client = open_client(ChromaConnection(mode="http", host=host, port=port), None)
    assert client.heartbeat() > 0
    name = "support-check"
    client.create_collection(name=name, embedding_function=None)
    assert name in [c.name for c in client.list_collections()]
    client.delete_collection(name)
    close_client(client)


def _connections_to(port: int) -> int:
    """This process's open TCP sockets whose remote end is 127.0.0.1:``port`` (from /proc)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote, inode = fields[2], fields[9]
        if remote == f"0100007F:{port:04X}" and inode in inodes:
            count += 1
    return count


def test_close_client_closes_the_http_connections(chroma_server):
    """chromadb's own HttpClient.close() leaves its connections open until the process
    exits; close_client closes them: five clients opened, used and closed leave none."""
    host, port = chroma_server
    before = _connections_to(port)
    for _ in range(5):
        client = open_client(ChromaConnection(mode="http", host=host, port=port), None)
        assert client.heartbeat() > 0
        client.list_collections()
        close_client(client)
    assert _connections_to(port) == before


def test_close_client_closes_an_embedded_client(tmp_path: Path):
    client = open_client(ChromaConnection(), tmp_path / "db")
    client.create_collection(name="col", embedding_function=None)
    close_client(client)
    close_client(client)  # twice: a no-op
    again = open_client(ChromaConnection(), tmp_path / "db")
    assert [c.name for c in again.list_collections()] == ["col"]
    close_client(again)
