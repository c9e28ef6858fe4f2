"""API keys: digests only, scope xor admin, constant-time lookup of a Bearer header."""

import pytest

from memcore import ConfigError
from memcore.plugin import ApiKeyRing, hash_api_key

ALICE, OPS = "alice-secret-key", "ops-secret-key"


def ring():
    return ApiKeyRing.from_settings(
        {
            "alice": {"sha256": hash_api_key(ALICE), "scope": {"user_id": "alice"}},
            "ops": {"sha256": hash_api_key(OPS).upper(), "admin": True},
        }
    )


def test_a_bearer_header_finds_its_key():
    keys = ring()
    assert keys.authenticate(f"Bearer {ALICE}").scope == {"user_id": "alice"}
    assert keys.authenticate(f"bearer {OPS}").admin
    assert len(keys) == 2 and keys


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer ", f"Basic {ALICE}", "Bearer wrong", ALICE])
def test_anything_else_finds_no_key(header):
    assert ring().authenticate(header) is None


@pytest.mark.parametrize(
    "fields, problem",
    [
        ({"sha256": ALICE, "admin": True}, "64-character hex"),
        ({"sha256": hash_api_key(ALICE)}, "exactly one"),
        ({"sha256": hash_api_key(ALICE), "admin": True, "scope": {"user_id": "a"}}, "exactly one"),
        ({"sha256": hash_api_key(ALICE), "scope": {"tenant": "a"}}, "unknown scope field"),
        ({"sha256": hash_api_key(ALICE), "scope": {"user_id": ""}}, "non-empty"),
        ({"sha256": hash_api_key(ALICE), "admin": True, "extra": 1}, "xtra"),
    ],
)
def test_a_malformed_declaration_is_a_config_error_naming_the_key(fields, problem):
    with pytest.raises(ConfigError, match=f"'k'.*{problem}"):
        ApiKeyRing.from_settings({"k": fields})


def test_no_keys_is_an_empty_ring():
    assert not ApiKeyRing.from_settings(None)
    assert ApiKeyRing().authenticate(f"Bearer {ALICE}") is None
