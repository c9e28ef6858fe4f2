"""LoCoMo figures of docs/evaluation.md ("Figures on the dev file") that cannot go stale.

Every row of the table whose config is an example file (`` `name` `` for
``examples/locomo/<name>.toml``) that needs no model -- no ``minilm`` embedder, no LLM
-- is run the way the page says (``memcore eval locomo --data .../locomo_dev.json --config
examples/locomo/<name>.toml --json``) and every column compared to the precision shown:
today ``short_term_memory`` (about 15 s on the loaded 2-core machine). The rows that embed
1,451 turns with MiniLM take 5-10 minutes each and stay dated measurements (the page's
``<!-- figures: ... -->`` marker says so, tests/test_docs_figures.py checks it).

Needs the shared data (``MEMCORE_SHARED`` or ``../shared``: ``data/locomo/locomo_dev.json``);
skips cleanly without it.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE = "docs/evaluation.md"
SHARED = Path(os.environ.get("MEMCORE_SHARED") or REPO.parent / "shared")
DEV = SHARED / "data" / "locomo" / "locomo_dev.json"
EXAMPLES = REPO / "examples" / "locomo"
COLUMNS = {
    "recall@5": ("recall@5", None),
    "recall@10": ("recall@10", None),
    "recall@25": ("recall@25", None),
    "recall@50": ("recall@50", None),
    "entry_recall@10": ("entry_recall@10", None),
    "multi-hop": ("recall@10", "1 multi-hop"),
    "temporal": ("recall@10", "2 temporal"),
    "open-domain": ("recall@10", "3 open-domain"),
    "single-hop": ("recall@10", "4 single-hop"),
    "adversarial": ("recall@10", "5 adversarial"),
}
"""Table column -> (key of ``memcore eval locomo --json``, ``by_category`` entry or None)."""
NEEDS_A_MODEL = re.compile(r'kind\s*=\s*"(minilm|llama_server|llama-server|openai|chat)"')


def table() -> list[dict[str, str]]:
    text = (REPO / PAGE).read_text(encoding="utf-8").split("### Figures on the dev file", 1)[1]
    lines = [line for line in text.split("\n#", 1)[0].splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(header, (c.strip() for c in line.strip("|").split("|")))) for line in lines[2:]]


def runnable() -> list[tuple[str, str, str]]:
    """``(config, column, figure)`` of every row the tests run: an example file without a model."""
    out = []
    for row in table():
        match = re.fullmatch(r"`(\w+)`", row["config"])
        example = EXAMPLES / f"{match.group(1)}.toml" if match else None
        if example and example.is_file() and not NEEDS_A_MODEL.search(example.read_text(encoding="utf-8")):
            out += [(match.group(1), column, row[column].replace("*", "")) for column in COLUMNS]
    return out


FIGURES = runnable()


def test_the_rows_are_found():
    assert {config for config, _, _ in FIGURES} == {"short_term_memory"}, "the model-free example rows changed: update this test's docstring"
    assert len(FIGURES) == len(COLUMNS)
    assert all(re.fullmatch(r"\d\.\d+", figure) for _, _, figure in FIGURES)
    assert {row["config"] for row in table()} >= {"`hybrid` (turns + windows)", "`memoryos`", "`short_term_memory`"}


@pytest.fixture(scope="module")
def measured() -> dict[str, dict]:
    if not DEV.is_file():
        pytest.skip(f"no LoCoMo dev file at {DEV} (set MEMCORE_SHARED)")
    from click.testing import CliRunner

    from memcore.cli import main

    out = {}
    for config in sorted({c for c, _, _ in FIGURES}):
        args = ["eval", "locomo", "--data", str(DEV), "--config", str(EXAMPLES / f"{config}.toml"), "--json"]
        result = CliRunner().invoke(main, args, env={"MEMCORE_LOG": None})
        assert result.exit_code == 0, result.output
        out[config] = json.loads(result.stdout)
    return out


@pytest.mark.parametrize(("config", "column", "figure"), FIGURES, ids=[f"{c}-{col}" for c, col, _ in FIGURES])
def test_locomo_figure_is_what_memcore_eval_gives(config, column, figure, measured):
    key, category = COLUMNS[column]
    result = measured[config]
    actual = result["by_category"][category][key] if category else result[key]
    decimals = len(figure.split(".")[1])
    assert abs(actual - float(figure)) <= 0.5 * 10**-decimals + 1e-9, f"{PAGE}, `{config}`: {column} is {actual:.4f}, the page says {figure}"
