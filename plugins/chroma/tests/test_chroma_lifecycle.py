"""The index folder (``IndexContext.directory``) and ``close``: an embedded index lives in its
final folder from its first write (a save copies nothing), and generations nobody saved --
unsaved, dropped or left by a crash -- are deleted, embedded and on a real ``chroma run``."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np

import memcore
from memcore.plugin import IndexContext, SpaceInfo
from memcore import Query, Record
from memcore_chroma import ChromaIndexConfig
from memcore_chroma.index import ChromaIndex
from memcore_chroma_support import ChromaConnection, close_client, open_client


def ctx(directory=None, name="vec"):
    return IndexContext(name=name, spaces={"default": SpaceInfo("default", 8, "test")}, directory=directory)


def recs(n, seed=0):
    x = np.random.default_rng(seed).standard_normal((n, 8)).astype(np.float32)
    return [Record(id=f"r{i}", text="", vectors={"default": x[i]}) for i in range(n)]


def test_an_embedded_index_with_a_folder_is_on_disk_from_its_first_write(tmp_path, monkeypatch):
    folder = tmp_path / "idx"
    index = ChromaIndex(ChromaIndexConfig(), ctx(folder))
    assert not folder.exists()  # nothing before the first add
    index.add(recs(30))
    assert (folder / "chroma").is_dir()
    name = index.home.collection.name
    copies = []
    monkeypatch.setattr(index.home, "_move_to", lambda target: copies.append(target))
    folder.mkdir(exist_ok=True)
    index.save(folder)
    assert copies == [] and json.loads((folder / "state.json").read_text())["collection"] == name
    index.close()
    again = ChromaIndex(ChromaIndexConfig(), ctx(folder))
    again.load(folder)
    assert len(again) == 30 and again.search(Query(vectors={"default": recs(30)[4].vectors["default"]}), 1)[0].id == "r4"
    again.close()


def test_a_save_sweeps_generations_a_crash_left_in_the_folder(tmp_path):
    folder = tmp_path / "idx"
    crashed = ChromaIndex(ChromaIndexConfig(), ctx(folder))
    crashed.add(recs(5))  # never saved, never closed: a process that died
    left = crashed.home.collection.name
    fresh = ChromaIndex(ChromaIndexConfig(), ctx(folder))  # the rebuild of the next open
    fresh.add(recs(7, seed=1))
    fresh.save(folder)
    names = [c.name for c in fresh.home.client.list_collections()]
    assert names == [fresh.home.collection.name] and left not in names
    fresh.close()


def test_closing_an_unsaved_embedded_index_deletes_its_generation(tmp_path):
    folder = tmp_path / "idx"
    index = ChromaIndex(ChromaIndexConfig(), ctx(folder))
    index.add(recs(5))
    index.close()
    client = open_client(ChromaConnection(), folder / "chroma")
    assert client.list_collections() == []
    close_client(client)


def _server_names(host, port):
    client = open_client(ChromaConnection(mode="http", host=host, port=port), None)
    try:
        return sorted(c.name for c in client.list_collections())
    finally:
        close_client(client)


def test_server_generations_nobody_saved_are_deleted(chroma_server, tmp_path):
    host, port = chroma_server
    config = ChromaIndexConfig(collection_prefix="life", connection={"mode": "http", "host": host, "port": port})
    before = _server_names(host, port)
    # an index without a folder (an in-memory collection) is never saved: close deletes it
    loose = ChromaIndex(config, ctx(None, name="loose"))
    loose.add(recs(5))
    assert loose.home.collection.name in _server_names(host, port)
    loose.close()
    assert _server_names(host, port) == before
    # a process that dies before its first save: its generation is listed in chroma/pending.json
    folder = tmp_path / "idx"
    script = textwrap.dedent(
        f"""
        import os, numpy as np
        from memcore import IndexContext, Record, SpaceInfo
        from memcore_chroma import ChromaIndexConfig
        from memcore_chroma.index import ChromaIndex
        index = ChromaIndex(ChromaIndexConfig(collection_prefix="life", connection={{"mode": "http", "host": {host!r}, "port": {port}}}),
                            IndexContext(name="vec", spaces={{"default": SpaceInfo("default", 8, "t")}}, directory=__import__("pathlib").Path({str(folder)!r})))
        index.add([Record(id="x", text="", vectors={{"default": np.ones(8, dtype=np.float32)}})])
        print(index.home.collection.name)
        os._exit(0)
        """
    )
    left = subprocess.run([sys.executable, "-c", script], check=True, timeout=120, capture_output=True, text=True).stdout.split()[-1]
    assert left in _server_names(host, port)
    assert json.loads((folder / "chroma" / "pending.json").read_text()) == [left]
    fresh = ChromaIndex(config, ctx(folder))
    fresh.add(recs(3))
    fresh.save(folder)
    kept = fresh.home.collection.name
    assert left not in _server_names(host, port) and kept in _server_names(host, port)
    assert json.loads((folder / "chroma" / "pending.json").read_text()) == []
    fresh.close()  # saved: kept on the server
    assert kept in _server_names(host, port)


def test_dropping_a_server_index_deletes_its_collection(chroma_server, tmp_path):
    host, port = chroma_server
    settings = {
        "spaces": {"default": {"embedder": {"kind": "hashing", "dim": 16}}},
        "indexes": {"vec": {"kind": "chroma", "collection_prefix": "drop", "connection": {"mode": "http", "host": host, "port": port}}},
    }
    memory = memcore.open(settings, path=tmp_path / "m")
    memory.collection.insert([{"text": f"note {i}"} for i in range(5)])
    memory.collection.flush()
    mine = [n for n in _server_names(host, port) if n.startswith("drop-vec-")]
    assert len(mine) == 1
    memory.collection.drop_index("vec")
    assert [n for n in _server_names(host, port) if n.startswith("drop-vec-")] == []
    memory.close()
