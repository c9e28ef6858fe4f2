"""memcore-chroma-support is a library, not a plugin: no entry point, light to import,
inside the plugin API, and its ``chroma run`` fixture serves a real Chroma server."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import memcore_chroma_support
from memcore.testing import plugin_api_violations
from memcore_chroma_support import ChromaConnection, open_client


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
