"""Every settings file under examples/ (and examples/locomo/) loads through settings and
passes the checks of ``memcore.open`` -- and so does each alternative it shows commented
out (a ``# [table]`` block, or a ``# key = value`` option inside an active table), since a
reader uncomments those as they are."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from memcore._plugins._host import get_registry
from memcore._util.merge import merge_layers
from memcore.api._check import check_settings
from memcore.errors import UnknownComponentError
from memcore.eval.locomo_pipeline import LocomoConfig, load_eval_config
from memcore.settings import load_settings

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted([*(REPO / "examples").glob("*.toml"), *(REPO / "examples" / "locomo").glob("*.toml")])
HEADER = re.compile(r"^\[([^\]]+)\]\s*(?:#.*)?$")
COMMENTED_HEADER = re.compile(r"^#\s?\[([^\]]+)\]\s*(?:#.*)?$")
COMMENTED_OPTION = re.compile(r"^#\s?([A-Za-z_][\w]*\s*=\s*.+)$")


def commented_alternatives(text: str) -> list[tuple[str, dict]]:
    """``(what, table)`` for every commented-out alternative of a settings file: a
    ``# [header]`` block with its ``# key = value`` lines, and each ``# key = value`` line
    under an active table (a TOML table to merge over the file)."""
    found: list[tuple[str, dict]] = []
    lines = text.splitlines()
    active: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if HEADER.match(line):
            active = HEADER.match(line).group(1)
        elif COMMENTED_HEADER.match(line):
            block = [line.lstrip("#").strip()]
            i += 1
            while i < len(lines) and COMMENTED_OPTION.match(lines[i].strip()):
                block.append(COMMENTED_OPTION.match(lines[i].strip()).group(1))
                i += 1
            found.append((f"the commented block [{COMMENTED_HEADER.match(line).group(1)}]", tomllib.loads("\n".join(block))))
            active = None  # what follows the block until the next header is prose or the block's own
            continue
        elif active is not None and COMMENTED_OPTION.match(line):
            option = COMMENTED_OPTION.match(line).group(1)
            try:
                value = tomllib.loads(option)
            except tomllib.TOMLDecodeError:  # prose that happens to hold a '='
                value = None
            if value:
                table: dict = value
                for part in reversed(active.split(".")):
                    table = {part: table}
                found.append((f"the commented option `{option.split('#')[0].strip()}` of [{active}]", table))
        elif not line:
            pass
        i += 1
    return found


def check(data: dict, where: str) -> None:
    """``data`` loads as settings and every entry passes its component's config model
    (skipped when a kind is not installed here)."""
    try:
        settings = load_settings(None, **data)
        check_settings(settings, get_registry())
    except UnknownComponentError as exc:
        pytest.skip(f"{where}: {exc}")


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(REPO / "examples")))
def test_example_settings_load(path, monkeypatch):
    for key in [k for k in __import__("os").environ if k.startswith("MEMCORE_") and k not in ("MEMCORE_SHARED", "MEMCORE_DEFAULT_EMBEDDER")]:
        monkeypatch.delenv(key)
    text = path.read_text(encoding="utf-8")
    if path.parent.name == "locomo":  # an evaluation config: [memory] (memcore settings) and [locomo]
        memory, _ = load_eval_config(path)
        check(memory, path.name)
        data = tomllib.loads(text)
        for what, table in commented_alternatives(text):
            merged = merge_layers(data, table)
            assert set(merged) <= {"memory", "locomo"}, f"{path.name}, {what}: unknown top-level keys"
            LocomoConfig.model_validate(merged.get("locomo") or {})
            check(merged.get("memory") or {}, f"{path.name}, {what}")
        return
    check(tomllib.loads(text), path.name)
    load_settings(path)  # as memcore.open reads the file (the environment cleared above)
    data = tomllib.loads(text)
    for what, table in commented_alternatives(text):
        check(merge_layers(data, table), f"{path.name}, {what}")


def test_every_example_directory_is_covered():
    assert {p.parent.name for p in EXAMPLES} == {"examples", "locomo"}
    assert len(EXAMPLES) >= 20


def test_commented_alternatives_are_found():
    text = '[indexes.vector]\nkind = "exact"\n# metric = "ip"   # or cosine\n# See the docs = here\n\n# [llm]\n# model = "x"\n# temperature = 0.0\n'
    found = commented_alternatives(text)
    assert found == [
        ('the commented option `metric = "ip"` of [indexes.vector]', {"indexes": {"vector": {"metric": "ip"}}}),
        ("the commented block [llm]", {"llm": {"model": "x", "temperature": 0.0}}),
    ]


def test_a_stale_commented_block_fails():
    """What the test catches: the old ``[llm]`` block of examples/minilm.toml."""
    from memcore.errors import ConfigError

    data = tomllib.loads((REPO / "examples" / "minilm.toml").read_text(encoding="utf-8"))
    with pytest.raises(ConfigError, match="llm"):
        load_settings(None, **merge_layers(data, {"llm": {"base_url": "http://127.0.0.1:8080/v1", "model": "m"}}))
