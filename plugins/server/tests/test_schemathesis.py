"""Property-based tests generated from the server's OpenAPI schema (schemathesis), bounded.

For every operation, schemathesis generates bodies from the schema (valid ones and, in its
negative phases, invalid ones) and sends them to a real uvicorn server with an admin key;
every response must be in the schema (documented status, body matching its model) and none
may be a 5xx.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, settings

import memcore

schemathesis = pytest.importorskip("schemathesis")


@pytest.fixture
def api_schema(memory: memcore.Memory, served: Any, keys: dict[str, str]) -> Any:
    from memcore.plugin import hash_api_key

    memory.insert([{"text": f"seed memory {i}", "id": f"s{i}", "metadata": {"i": i}} for i in range(5)])
    server = served(memory, keys={"ops": {"sha256": hash_api_key(keys["ops"]), "admin": True}}, max_batch=50, max_k=50)
    return schemathesis.openapi.from_url(server.url + "/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_no_5xx_and_every_response_matches_the_schema(case: Any, keys: dict[str, str]) -> None:
    case.call_and_validate(headers={"Authorization": f"Bearer {keys['ops']}"})
