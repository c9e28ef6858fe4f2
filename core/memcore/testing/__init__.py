"""What plugin authors reuse in their tests: contract suites, fixtures and test data.

Contract suites (pytest classes; subclass one with a ``Test`` name and provide its ONE
fixture — see each class docstring):

- :class:`IndexContract` — fixture ``make_index``: ``callable(IndexContext) -> Index``;
- :class:`StoreContract` — fixture ``store``: a fresh, empty store;
- :class:`FusionContract` — fixture ``fusion``: the Fusion under test (and :func:`fused`: the
  fused hits of several indexes, through a pipeline of recall stages and a fuse stage);
- :class:`StageContract` — fixture ``stage``: the Stage under test (:func:`build_stage`);
- :class:`ServiceContract` — fixture ``open_memory``: ``callable(path) -> memcore.Memory``;
- :class:`PluginRegistrationContract` — no fixture, class attributes: an installed plugin
  distribution loads, registers what it declares and imports no heavy library on load.

The base classes are named ``*Contract`` so pytest never collects them on their own::

    import pytest
    from memcore.testing import IndexContract

    class TestMyIndex(IndexContract):
        @pytest.fixture
        def make_index(self):
            return lambda context: MyIndex(MyIndexConfig(), context)

Fixtures: :func:`register_plugin` (a context manager) and the pytest plugin
``memcore.testing.pytest_plugin`` (fixture ``memcore_plugin``), enabled with
``pytest_plugins = ["memcore.testing.pytest_plugin"]``.

The plugin API check: :func:`plugin_api_violations` (imports of a plugin package that
leave ``memcore.__all__`` / ``memcore.testing``; run by ``PluginRegistrationContract``).

Disk: :func:`assert_no_bytes` / :func:`find_bytes` (which files under a memory directory
still hold given texts) and :func:`check_scope_forgotten` (the canary test: a scope deleted
with ``Memory.delete(scope=...)`` leaves none of its texts in any file, the others stay).

Data: :func:`make_records`, :func:`random_unit_vectors`, :func:`make_texts`.

HTTP: :class:`FakeOpenAIServer` (a local OpenAI-compatible server, scripted failures, for
tests of HTTP embedders and LLM clients; state :class:`FakeOpenAI`).

Threads: :func:`hammer_service` (several threads calling a service's verbs on one shared
memory at once) and :func:`check_after_threads` (reopen alone: the service's
:meth:`~memcore.Memory.check_service` is clean, nothing acknowledged is lost, every index
holds its members, new calls work); :class:`ServiceContract` runs both.

Hypothesis: the ``ci``/``slow`` profiles (:func:`load_profile`, loaded by the repository's
root ``conftest.py``; ``pytest --slow``) and :func:`examples` (a test's CI example count,
scaled under ``slow``).

The contract suites need pytest; the rest of this package does not.
"""

from __future__ import annotations

from typing import Any

from .disk import assert_no_bytes, find_bytes, needle_forms
from .data import WORDS, make_records, make_texts, random_unit_vectors, unique_word
from .plugin import register_plugin
from .plugin_api import plugin_api, plugin_api_violations
from .options import assert_options_described, undescribed_options

_CONTRACTS = {
    "IndexContract": "index_contract",
    "StoreContract": "store_contract",
    "FusionContract": "fusion_contract",
    "make_ranked_lists": "fusion_contract",
    "fused": "fusion_contract",
    "StageContract": "stage_contract",
    "build_stage": "stage_contract",
    "ServiceContract": "service_contract",
    "SERVICE_ITEMS": "service_contract",
    "PluginRegistrationContract": "registration_contract",
    "HEAVY_MODULES": "registration_contract",
    "check_scope_forgotten": "forgetting",
    "retrieve_by_index": "forgetting",
    "examples": "hypothesis_profiles",
    "load_profile": "hypothesis_profiles",
    # -- issue 21 honest names (memcore-llm) --
    "FakeOpenAIServer": "openai_server",
    "FakeOpenAI": "openai_server",
    # -- issue 27: threads sharing one memory --
    "hammer_service": "threads",
    "check_after_threads": "threads",
    "ThreadsReport": "threads",
}

try:  # rewrite the suites' asserts for readable failures (must run before they are imported)
    import pytest as _pytest

    _pytest.register_assert_rewrite(*sorted({f"{__name__}.{m}" for m in (*_CONTRACTS.values(), "scope_machine")}))
except ImportError:  # pragma: no cover - pytest is only needed for the contract suites
    pass

__all__ = ["WORDS", "make_records", "make_texts", "random_unit_vectors", "unique_word", "register_plugin", "plugin_api", "plugin_api_violations", *_CONTRACTS]  # noqa: PLE0604
__all__ += ["assert_no_bytes", "find_bytes", "needle_forms"]
__all__ += ["assert_options_described", "undescribed_options"]


def __getattr__(name: str) -> Any:
    """Import the contract suites (and pytest) on first use."""
    module = _CONTRACTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_CONTRACTS))
