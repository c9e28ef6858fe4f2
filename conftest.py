"""Repository-wide pytest setup (loaded for every testpath: tests/, plugins/, examples/).

``--slow`` selects the ``slow`` hypothesis profile (ten times the examples of the default
``ci`` profile, random instead of derandomized): the nightly-style run. See
:mod:`memcore.testing.hypothesis_profiles`.

New memories of the tests get the lexical ``hashing`` embedder (``MEMCORE_DEFAULT_EMBEDDER``,
inherited by the processes tests start): the tests written before the default became
``minilm`` (when memcore-embed and its model are installed) keep their meaning and speed.
A test of the real default removes the variable (``monkeypatch.delenv``).
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("MEMCORE_DEFAULT_EMBEDDER", "hashing")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--slow", action="store_true", default=False, help="hypothesis 'slow' profile: 10x the examples of the default 'ci' profile (nightly-style run)"
    )


def pytest_configure(config: pytest.Config) -> None:
    from memcore.testing.hypothesis_profiles import load_profile

    load_profile(slow=config.getoption("--slow"))
