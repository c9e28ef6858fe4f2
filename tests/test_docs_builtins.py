"""The builtin components table of docs/plugins/builtin.md is the registry's, row for row.

The expected table is generated from what the builtin plugins (``memcore.default_plugins``)
register: one row per plugin module with its category, the names in registration order and
the modules implementing them (where their config models live). A builtin added, renamed or
moved fails here, and the failure prints the table to paste; a row for something that is
not registered fails too. The last column (links) is the docs' own.
"""

from __future__ import annotations

from pathlib import Path

from memcore._plugins._host import PluginHost

DOC = Path(__file__).resolve().parents[1] / "docs" / "plugins" / "builtin.md"
HEADING = "## Builtin plugins (in the core)"
COLUMNS = ["plugin module", "category", "names", "implementation", "see"]


def generated_rows() -> dict[str, tuple[str, str, str]]:
    """plugin module -> (category, names, implementation), as the table cells show them."""
    host = PluginHost(load_entry_points=False)
    rows: dict[str, tuple[str, list[str], list[str]]] = {}
    for category, entries in host.registry.entries.items():
        for reg in entries.values():
            row = rows.setdefault(reg.plugin, (category, [], []))
            assert row[0] == category, f"{reg.plugin} registers more than one category; the table has one per row"
            row[1].append(reg.name)
            if reg.config_model.__module__ not in row[2]:
                row[2].append(reg.config_model.__module__)
    return {plugin: (category, ", ".join(f"`{n}`" for n in names), ", ".join(f"`{m}`" for m in modules)) for plugin, (category, names, modules) in rows.items()}


def documented_rows() -> dict[str, tuple[str, str, str]]:
    """The table under HEADING: plugin module -> (category, names, implementation)."""
    text = DOC.read_text(encoding="utf-8")
    assert HEADING in text, f"{DOC.name} has no heading {HEADING!r}"
    body = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    lines = [line for line in body.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == COLUMNS, f"{DOC.name}: the builtin table's columns are {header}, expected {COLUMNS}"
    rows = {}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        module = cells[0].strip("`")
        assert module not in rows, f"{DOC.name}: {module} has two rows"
        rows[module] = (cells[1], cells[2], cells[3])
    return rows


def table_to_paste() -> str:
    documented = {}
    try:
        text = DOC.read_text(encoding="utf-8").split(HEADING, 1)[1]
        for line in text.splitlines():
            if line.startswith("| `memcore."):
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                documented[cells[0].strip("`")] = cells[4]
    except IndexError:
        pass
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
    for module, (category, names, impl) in generated_rows().items():
        lines.append(f"| `{module}` | {category} | {names} | {impl} | {documented.get(module, '')} |")
    return "\n".join(lines)


def test_the_registry_has_builtins():
    rows = generated_rows()
    assert "memcore.default_plugins.stores" in rows and "`sqlite`" in rows["memcore.default_plugins.stores"][1]


def test_builtin_table_lists_every_registered_builtin_and_nothing_else():
    expected, documented = generated_rows(), documented_rows()
    problems = []
    for module, row in expected.items():
        if module not in documented:
            problems.append(f"missing row for {module} ({row[0]}: {row[1]})")
        elif documented[module] != row:
            problems.append(f"{module}: the docs show {documented[module]}, the registry has {row}")
    problems += [f"{module} is listed but registers nothing" for module in documented if module not in expected]
    assert not problems, f"{DOC} is stale:\n" + "\n".join(problems) + "\n\nthe table generated from the registry:\n" + table_to_paste()


def test_builtin_rows_are_in_the_registration_order():
    assert list(documented_rows()) == list(generated_rows()), "order the rows as the builtins load:\n" + table_to_paste()
