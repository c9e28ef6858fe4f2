"""Property-based tests generated from the server's OpenAPI schema (schemathesis), bounded.

For every operation, schemathesis generates requests from the schema — valid ones, and in
the negative mode invalid ones — and sends them to a real uvicorn server with an admin key;
schemathesis' checks then require that no response is a 5xx, that every status and body is
the one the schema documents, and that invalid requests are refused with a 4xx. (Its
``positive_data_acceptance`` check is left out: the schema cannot say everything memcore
refuses — a blank text, a filter on a field name with control characters — so a
schema-valid request may rightly get a documented 400.)
(Driven through hypothesis directly: schemathesis' pytest fixture loader does not support
pytest 9 yet.)
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

import memcore
from memcore.plugin import hash_api_key

schemathesis = pytest.importorskip("schemathesis")
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import positive_data_acceptance  # noqa: E402

OPERATIONS = [
    ("GET", "/v1/health"),
    ("GET", "/v1/info"),
    ("POST", "/v1/insert"),
    ("POST", "/v1/insert_many"),
    ("POST", "/v1/upsert"),
    ("POST", "/v1/update"),
    ("POST", "/v1/get"),
    ("POST", "/v1/delete"),
    ("POST", "/v1/forget"),
    ("POST", "/v1/count"),
    ("POST", "/v1/search"),
    ("POST", "/v1/retrieve_many"),
    ("POST", "/v1/history"),
    ("GET", "/v1/records/{id}"),
    ("PATCH", "/v1/records/{id}"),
    ("DELETE", "/v1/records/{id}"),
]
"""Every operation of the API (the first test checks that the schema has these and no other)."""

MAX_EXAMPLES = int(os.environ.get("MEMCORE_SCHEMATHESIS_EXAMPLES", "12"))
"""Examples per operation and mode (bounded for CI; raise it locally to search harder)."""


@pytest.fixture
def api(memory: memcore.Memory, served: Any, keys: dict[str, str]) -> tuple[Any, dict[str, str]]:
    """The schema of a served memory holding a few records, and the admin key's header."""
    memory.insert([{"text": f"seed memory {i}", "id": f"s{i}", "metadata": {"i": i}} for i in range(5)])
    server = served(memory, keys={"ops": {"sha256": hash_api_key(keys["ops"]), "admin": True}}, max_batch=50, max_k=50)
    schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
    return schema, {"Authorization": f"Bearer {keys['ops']}"}


def test_the_schema_has_exactly_these_operations(api: tuple[Any, dict[str, str]]) -> None:
    schema, _ = api
    found = sorted((op.ok().method.upper(), op.ok().path) for op in schema.get_all_operations())
    assert found == sorted(OPERATIONS)


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["valid", "invalid"])
@pytest.mark.parametrize("method,path", OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_no_5xx_and_every_response_matches_the_schema(api: tuple[Any, dict[str, str]], method: str, path: str, mode: Any) -> None:
    schema, headers = api
    operation = schema[path][method.lower()]
    if mode == GenerationMode.NEGATIVE and path in ("/v1/health", "/v1/info"):
        pytest.skip("no parameters and no body: nothing to make invalid")

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=MAX_EXAMPLES <= 12, database=None, suppress_health_check=list(HealthCheck))
    def check(case: Any) -> None:
        case.call_and_validate(headers=headers, excluded_checks=[positive_data_acceptance])

    check()
