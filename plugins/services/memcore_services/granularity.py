"""Several granularities in one memory: entries plus sliding windows of consecutive entries.

A window is one more record, made of the last ``size`` entries of the same group (the
entries' ``group`` metadata value, e.g. a dialog session): its text is their texts joined
by newlines, its metadata lists the ``members`` (entry ids, oldest first) and keeps the
metadata values every member shares. Windows live only in the window indexes; a window
stands for its members.

The ``expand`` stage turns the ranked lists of window records into ranked lists of their
member entries, before a ``fuse`` stage: each window is replaced by its members that are
not ranked yet (the window's score), so a window-level list and an entry-level list fuse
as two rankings of the same entries. Within a window, the members best ranked by the
pipeline's other lists come first (then the order of the conversation). Entries retrieved
through a window therefore count as themselves -- e.g. as the turns they came from in
LoCoMo's turn-counted recall (docs/architecture.md §9).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from memcore.plugin import ComponentConfig, ConfigError, Contribution, Hit, PipelineContext, Stage
from pydantic import Field

__all__ = ["WindowsConfig", "ExpandConfig", "ExpandStage", "MEMBERS", "GRANULARITY", "window_record", "shared_metadata"]

MEMBERS = "members"
"""Metadata key of a window record: its member entry ids, oldest first."""
GRANULARITY = "granularity"
"""Metadata key of a window record: ``"window"``."""


class WindowsConfig(ComponentConfig):
    """``windows`` of the ``hybrid`` service: one window record per entry, made of it and
    the ``size - 1`` entries before it in the same group."""

    kind: str = "windows"
    size: int = Field(4, ge=2, le=64, description="Entries per window (the last one is the entry just inserted).")
    group: str | None = Field("session", description="Metadata key whose value delimits windows (None: one stream); entries without it form one group.")
    indexes: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Indexes holding the windows (name -> {kind, options}), created as hybrid.window.<name>."
    )
    text_field: str | None = Field(
        None, description="Metadata field holding the text a member contributes to its windows (default, or when absent: the entry's text)."
    )


def shared_metadata(metadatas: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The metadata entries whose value is the same in every one of ``metadatas``."""
    if not metadatas:
        return {}
    first = metadatas[0]
    return {key: value for key, value in first.items() if all(key in m and m[key] == value for m in metadatas[1:])}


def window_record(members: Sequence[tuple[str, str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The window record of ``members`` (``(id, text, metadata)``, oldest first)."""
    metadata = shared_metadata([m for _, _, m in members])
    metadata.update({MEMBERS: [i for i, _, _ in members], GRANULARITY: "window"})
    return {"text": "\n".join(text for _, text, _ in members), "metadata": metadata}


class ExpandConfig(ComponentConfig):
    """``expand``: replace window records in ranked lists by their member entries."""

    kind: str = "expand"
    lists: list[str] | None = Field(None, description="Lists to expand (default: every list so far; hits without members stay as they are).")
    name: str | None = Field(None, description="Name of the stage in the trace.")


class ExpandStage(Stage):
    """Window hits -> member hits: each list holding windows is replaced, under its own
    name, by the ranking of their members (the working list too when it was that list);
    every hit's provenance then points at its rank in the replaced list."""

    def __init__(self, config: ExpandConfig):
        self.config = config
        self.name = config.name

    def run(self, ctx: PipelineContext) -> None:
        names = self.config.lists or list(ctx.lists)
        missing = [n for n in names if n not in ctx.lists]
        if missing:
            raise ConfigError(f"expand stage: no list(s) {missing}; lists so far: {list(ctx.lists)}", location="pipeline")
        ids = sorted({h.id for n in names for h in ctx.lists[n]})
        members: dict[str, list[str]] = {}
        for rid, record in zip(ids, ctx.records(ids)):
            value = (record.metadata or {}).get(MEMBERS) if record is not None else None
            if isinstance(value, list):
                members[rid] = [str(m) for m in value]
        if not members:
            return
        windowed = [n for n in names if any(h.id in members for h in ctx.lists[n])]
        best_rank: dict[str, int] = {}  # an entry's best rank in the lists without windows
        for other, hits in ctx.lists.items():
            if other in windowed:
                continue
            for rank, hit in enumerate(hits):
                if rank < best_rank.get(hit.id, rank + 1):
                    best_rank[hit.id] = rank
        for name in windowed:
            hits = ctx.lists[name]
            out: list[Hit] = []
            seen: set[str] = set()
            for hit in hits:
                group = members.get(hit.id)
                if group is None:
                    if hit.id not in seen:
                        seen.add(hit.id)
                        out.append(Hit(hit.id, hit.score, hit.raw, hit.source, (Contribution(name, len(out) + 1, float(hit.score)),), hit.record))
                    continue
                fresh = [m for m in group if m not in seen]
                last = len(ids) + len(best_rank)
                order = sorted(range(len(fresh)), key=lambda i: (best_rank.get(fresh[i], last), i))
                for i in order:
                    seen.add(fresh[i])
                    out.append(Hit(fresh[i], hit.score, hit.raw, hit.source, (Contribution(name, len(out) + 1, float(hit.score)),)))
            was_current = ctx.current is hits
            ctx.lists[name] = out
            if was_current:
                ctx.current = out
        ctx.note(self.name, windows=len(members), lists=len(windowed))
