"""The ``[server]`` settings table: accepted by the core's settings, validated by the server."""

from __future__ import annotations

from pathlib import Path

import pytest

import memcore
from memcore import ConfigError
from memcore.plugin import hash_api_key
from memcore_server.config import load_server_config


def test_the_core_settings_accept_a_server_table_and_leave_it_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = tmp_path / "memcore.toml"
    file.write_text('[server]\nport = 9000\n\n[server.keys.a]\nsha256 = "%s"\nscope = {user_id = "a"}\n' % hash_api_key("k"), encoding="utf-8")
    monkeypatch.setenv("MEMCORE_SERVER__KEYS__OPS__SHA256", hash_api_key("ops"))
    monkeypatch.setenv("MEMCORE_SERVER__KEYS__OPS__ADMIN", "true")
    monkeypatch.setenv("MEMCORE_SERVER__KEYS__B__SHA256", hash_api_key("b"))
    monkeypatch.setenv("MEMCORE_SERVER__KEYS__B__SCOPE", '{"agent_id": "bot"}')
    settings = memcore.load_settings(file)
    config = load_server_config(settings.server)
    assert config.port == 9000 and config.host == "127.0.0.1"
    ring = config.key_ring()
    assert len(ring) == 3
    assert ring.authenticate("Bearer ops").admin  # type: ignore[union-attr]
    assert ring.authenticate("Bearer b").scope == {"agent_id": "bot"}  # type: ignore[union-attr]
    assert ring.authenticate("Bearer k").scope == {"user_id": "a"}  # type: ignore[union-attr]
    with memcore.open(file, path=tmp_path / "mem") as memory:  # the memory ignores the server's table
        assert memory.count() == 0


@pytest.mark.parametrize(
    "table,location",
    [
        ({"max_kk": 3}, "server.max_kk"),
        ({"max_k": 0}, "server.max_k"),
        ({"port": 70000}, "server.port"),
        ({"max_body_bytes": 10}, "server.max_body_bytes"),
        ({"request_timeout_s": -1}, "server.request_timeout_s"),
        ({"blas_threads": -1}, "server.blas_threads"),
    ],
)
def test_a_bad_server_setting_names_its_key(table: dict[str, object], location: str) -> None:
    with pytest.raises(ConfigError) as failed:
        load_server_config(table)
    assert failed.value.location == location


@pytest.mark.parametrize(
    "key,message",
    [
        ({"sha256": "the-key-itself", "admin": True}, "64-character hex"),
        ({"sha256": "a" * 64}, "either a scope or admin"),
        ({"sha256": "a" * 64, "admin": True, "scope": {"user_id": "x"}}, "either a scope or admin"),
        ({"sha256": "a" * 64, "scope": {"tenant": "x"}}, "unknown scope field"),
        ({"sha256": "a" * 64, "scope": "not json"}, "JSON object"),
    ],
)
def test_a_malformed_key_fails_at_start_up(key: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_server_config({"keys": {"x": key}})
