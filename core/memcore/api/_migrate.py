"""Copy a whole memory from one store to another (``memcore migrate``), generic over :class:`Store`.

What is copied: every record (id, text, metadata, scope, timestamps, vectors of every space,
links) with its index membership, every state namespace (index definitions, space pins,
service state, the memory's settings document with the target's store entry in it), and the
record history when both stores keep one. What is not: the op log (the target logs its own
writes) and the in-process index files (each index is rebuilt from the target store when
the target memory is first opened).

Atomicity: the first batch written to the target marks it incomplete (state
``memory/migration``); the mark is removed by the last one, after the copy was verified.
``memcore.open`` refuses a memory that carries the mark. The CLI adds the directory case:
a memory directory is built under a temporary name and renamed into place at the end.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Collection, Mapping

import numpy as np

from .._util.progress import progress_for
from .._plugins._registry import Registry
from ..errors import ConfigError, CorruptError, ValidationError
from ..model._record import Record, Scope
from ..stores._store import Store, WriteBatch
from ._stored import KEY, NAMESPACE

__all__ = ["MARKER", "MigrationReport", "migrate_store", "check_complete", "is_empty", "clear_store", "check_drop", "indexes_out_of_place"]

MARKER = (NAMESPACE, "migration")
"""The state key of a memory a migration is still writing (or failed writing)."""

_STATE_BATCH = 500


@dataclass
class MigrationReport:
    """What :func:`migrate_store` copied and what its verification found."""

    records: int = 0
    vectors: dict[str, int] = field(default_factory=dict)
    links: int = 0
    indexes: dict[str, dict[str, int]] = field(default_factory=dict)
    """``{index: {"source": members, "target": members}}``."""
    scopes: list[dict[str, Any]] = field(default_factory=list)
    """``[{"scope": {...}, "source": n, "target": n}]``, one per distinct record scope."""
    state_keys: int = 0
    history: int | None = None
    """Versions copied; None when not copied (``history_note`` says why)."""
    history_note: str | None = None
    sample: dict[str, Any] = field(default_factory=lambda: {"checked": 0, "mismatched": []})
    seconds: float = 0.0

    @property
    def verified(self) -> bool:
        """True when every count matched and every sampled record is equal."""
        return (
            not self.sample["mismatched"]
            and all(s["source"] == s["target"] for s in self.scopes)
            and all(c["source"] == c["target"] for c in self.indexes.values())
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe form (``memcore migrate --json``)."""
        return {
            "records": self.records,
            "vectors": dict(self.vectors),
            "links": self.links,
            "indexes": dict(self.indexes),
            "scopes": list(self.scopes),
            "state_keys": self.state_keys,
            "history": self.history,
            "history_note": self.history_note,
            "sample": dict(self.sample),
            "verified": self.verified,
            "seconds": round(self.seconds, 3),
        }


def is_empty(store: Store) -> bool:
    """True when ``store`` holds no record and no state (a memory never written)."""
    return store.count() == 0 and not store.state_namespaces()


def check_complete(store: Store) -> None:
    """CorruptError when ``store`` carries the mark of a migration that did not finish."""
    mark = store.get_state(*MARKER)
    if isinstance(mark, Mapping) and not mark.get("complete", False):
        raise CorruptError(
            f"this memory is an incomplete copy made by `memcore migrate` (from {mark.get('source', '?')}, started "
            f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(float(mark.get('started', 0))))}): run the migration again with --replace"
        )


def check_drop(source: Store, names: Collection[str]) -> frozenset[str]:
    """``names`` (indexes to leave out of a copy) as a set, each one a stored index of ``source``.

    :raises ValidationError: naming those that are not."""
    dropped = frozenset(names)
    unknown = sorted(dropped - set(source.state_items("indexes")))
    if unknown:
        raise ValidationError(f"no index {', '.join(map(repr, unknown))} in the source memory to drop")
    return dropped


def indexes_out_of_place(source: Store, target_kind: str, registry: Registry, dropped: Collection[str] = ()) -> list[str]:
    """The stored indexes of ``source`` (but ``dropped``) that cannot live in a store of kind
    ``target_kind`` (their kind's config declares other ``store_kinds``), each described as
    ``"name (kind K, lives in a S store)"``. A kind that is not installed is not judged here
    (the copy keeps its definition; opening the copy reports it as before)."""
    found = []
    for name, recorded in sorted(source.state_items("indexes").items()):
        definition = registry.canonical_kinds(recorded)
        kind = definition.get("kind") if isinstance(definition, Mapping) else None
        if name in dropped or not isinstance(kind, str) or kind not in registry.entries["indexes"]:
            continue
        kinds = registry.entries["indexes"][kind].config_model.store_kinds
        if kinds and target_kind not in kinds:
            found.append(f"{name} (kind {kind}, lives in a {' or '.join(sorted(kinds))} store)")
    return found


def clear_store(store: Store, *, batch_size: int = 1000) -> None:
    """Delete every record, index membership and state key of ``store`` (``--replace``)."""
    ids = store.ids()
    for start in range(0, len(ids), batch_size):
        store.apply(WriteBatch(deletes=ids[start : start + batch_size]))
    indexes = list(store.state_items("indexes"))
    state = {(ns, key): None for ns in store.state_namespaces() for key in store.state_items(ns)}
    if indexes or state:
        store.apply(WriteBatch(drop_indexes=indexes, state=state))


def migrate_store(
    source: Store,
    target: Store,
    *,
    settings_store: Mapping[str, Any] | None = None,
    source_label: str = "another store",
    batch_size: int = 500,
    sample: int = 200,
    seed: int = 0,
    drop_indexes: Collection[str] = (),
) -> MigrationReport:
    """Copy everything of ``source`` into the empty ``target`` and verify it.

    ``settings_store``: the target's store entry (without secrets, see
    :func:`memcore.api._stored.settings_document`) written into the copied settings document
    in place of the source's. ``source_label`` (no secrets) names the source in the
    incomplete mark. ``drop_indexes``: stored indexes left out of the copy (their definition
    and membership). Raises ValidationError when ``target`` is not empty or a
    dropped index is not one of the source's, CorruptError when the verification fails (the
    target then keeps its incomplete mark)."""
    if target.read_only:
        raise ValidationError("the target store is open read-only")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValidationError(f"batch_size must be a positive int, not {batch_size!r}")
    if not is_empty(target):
        raise ValidationError("the target memory is not empty: give an empty one (or replace it: --replace)")
    dropped = check_drop(source, drop_indexes)
    started = time.time()
    report = MigrationReport()
    target.apply(WriteBatch(state={MARKER: {"complete": False, "source": source_label, "started": started}}))
    scopes = _copy_records(source, target, report, batch_size, dropped)
    report.state_keys = _copy_state(source, target, settings_store, batch_size, dropped)
    _copy_history(source, target, report, batch_size)
    _verify(source, target, report, scopes, sample, seed, dropped)
    report.seconds = time.time() - started
    if not report.verified:
        raise CorruptError(f"the copy differs from the source ({_differences(report)}); the target stays marked incomplete")
    target.apply(WriteBatch(state={MARKER: None}))
    return report


def _copy_records(
    source: Store, target: Store, report: MigrationReport, batch_size: int, dropped: frozenset[str]
) -> Counter[tuple[str | None, str | None, str | None]]:
    """Records with their membership (but of ``dropped`` indexes), in the source's insertion
    order; a link to a record not yet copied is written by a second pass (link targets must exist)."""
    written: set[str] = set()
    deferred: list[Record] = []
    scopes: Counter[tuple[str | None, str | None, str | None]] = Counter()
    total = source.count()
    with progress_for("copying records", total) as update:
        for chunk in source.iter_records(batch_size=batch_size):
            ids = [r.id for r in chunk]
            here = set(ids)
            members = source.memberships(ids)
            add: dict[str, list[str]] = {}
            upserts = []
            for record in chunk:
                for index in sorted(members.get(record.id, set()) - dropped):
                    add.setdefault(index, []).append(record.id)
                if any(link.target not in written and link.target not in here for link in record.links):
                    deferred.append(record)
                    record = Record(record.id, record.text, record.metadata, record.vectors, (), record.scope, record.created_at, record.updated_at)
                upserts.append(record)
                scope = record.scope or Scope()
                scopes[(scope.user_id, scope.agent_id, scope.run_id)] += 1
                for space in record.vectors:
                    report.vectors[space] = report.vectors.get(space, 0) + 1
                report.links += len(record.links)
            target.apply(WriteBatch(upserts=upserts, add_membership=add))
            written.update(ids)
            report.records += len(chunk)
            update(len(chunk))
    for start in range(0, len(deferred), batch_size):
        part = deferred[start : start + batch_size]
        target.apply(WriteBatch(upserts=part))
        report.links += sum(len(r.links) for r in part)
    return scopes


def _copy_state(source: Store, target: Store, settings_store: Mapping[str, Any] | None, batch_size: int, dropped: frozenset[str]) -> int:
    """Every state key, the settings document's store entry replaced by the target's, the
    ``dropped`` indexes' definitions left out."""
    try:
        namespaces = source.state_namespaces()
    except NotImplementedError as exc:
        raise ConfigError(f"the source store cannot list its state ({exc}): it cannot be migrated") from None
    items: dict[tuple[str, str], Any] = {}
    for namespace in namespaces:
        for key, value in source.state_items(namespace).items():
            if (namespace, key) == MARKER or (namespace == "indexes" and key in dropped):
                continue
            if (namespace, key) == (NAMESPACE, KEY) and settings_store is not None and isinstance(value, Mapping):
                value = _with_store(value, settings_store)
            items[(namespace, key)] = value
    keys = list(items)
    for start in range(0, len(keys), batch_size):
        target.apply(WriteBatch(state={k: items[k] for k in keys[start : start + batch_size]}))
    return len(keys)


def _with_store(document: Mapping[str, Any], store: Mapping[str, Any]) -> dict[str, Any]:
    """The settings document with ``store`` as its store entry (``store`` holds the secrets'
    places under ``omitted``, as :func:`memcore.api._stored.settings_document` lists them)."""
    out = dict(document)
    entry = dict(store)
    omitted = [p for p in out.get("omitted", []) if not str(p).startswith("store")] + list(entry.pop("omitted", []))
    out["store"] = entry
    if omitted:
        out["omitted"] = omitted
    else:
        out.pop("omitted", None)
    return out


def _copy_history(source: Store, target: Store, report: MigrationReport, batch_size: int) -> None:
    if not source.keeps_history:
        report.history_note = "the source store keeps no history"
        return
    if not target.keeps_history:
        report.history_note = "the target store keeps no history: the source's versions were not copied"
        return
    ids = source.history_ids()
    copied = 0
    with progress_for("copying history", len(ids)) as update:
        for start in range(0, len(ids), batch_size):
            part = ids[start : start + batch_size]
            versions = [v for rid in part for v in source.history(rid)]
            target.import_history(versions)
            copied += len(versions)
            update(len(part))
    report.history = copied


def _verify(
    source: Store,
    target: Store,
    report: MigrationReport,
    scopes: Counter[tuple[str | None, str | None, str | None]],
    sample: int,
    seed: int,
    dropped: frozenset[str],
) -> None:
    """Counts per scope and per index (but ``dropped``) on both sides, and a random sample of
    records compared field by field."""
    for key in sorted(scopes, key=lambda s: tuple(v or "" for v in s)):
        scope = Scope(*key)
        wanted = None if scope.is_empty() else scope
        report.scopes.append({"scope": scope.as_dict(), "source": source.count(scope=wanted), "target": target.count(scope=wanted)})
    if not scopes:
        report.scopes.append({"scope": {}, "source": source.count(), "target": target.count()})
    for index in sorted((set(source.state_items("indexes")) | _member_indexes(source)) - dropped):
        report.indexes[index] = {"source": source.count(index=index), "target": target.count(index=index)}
    ids = source.ids()
    chosen = random.Random(seed).sample(ids, min(sample, len(ids))) if sample > 0 else []
    mismatched = []
    for start in range(0, len(chosen), 200):
        part = chosen[start : start + 200]
        for rid, a, b in zip(part, source.get(part), target.get(part)):
            if not _same(a, b):
                mismatched.append(rid)
        got_a, got_b = source.memberships(part), target.memberships(part)
        mismatched.extend(rid for rid in part if got_a.get(rid, set()) - dropped != got_b.get(rid, set()) and rid not in mismatched)
    report.sample = {"checked": len(chosen), "mismatched": mismatched}


def _member_indexes(store: Store) -> set[str]:
    """Index names that have members (an index without a definition: a raw store's)."""
    names: set[str] = set()
    ids = store.ids(limit=10_000)
    for members in store.memberships(ids).values():
        names |= members
    return names


def _same(a: Record | None, b: Record | None) -> bool:
    """Two reads of one record are equal: text, metadata, scope, timestamps, links, and
    every vector byte for byte."""
    if a is None or b is None:
        return a is b
    if (a.text, a.metadata, a.scope or Scope(), a.created_at, a.updated_at) != (b.text, b.metadata, b.scope or Scope(), b.created_at, b.updated_at):
        return False
    if sorted(map(_link_key, a.links)) != sorted(map(_link_key, b.links)) or set(a.vectors) != set(b.vectors):
        return False
    return all(_same_vector(a.vectors[s], b.vectors[s]) for s in a.vectors)


def _link_key(link: Any) -> tuple[str, str, float]:
    return (link.target, link.relation, float(link.weight))


def _same_vector(a: np.ndarray, b: np.ndarray) -> bool:
    x, y = np.ascontiguousarray(a, dtype=np.float32), np.ascontiguousarray(b, dtype=np.float32)
    return x.shape == y.shape and x.tobytes() == y.tobytes()


def _differences(report: MigrationReport) -> str:
    parts = [f"scope {s['scope'] or '(none)'}: {s['source']} != {s['target']}" for s in report.scopes if s["source"] != s["target"]]
    parts += [f"index {name}: {c['source']} != {c['target']}" for name, c in report.indexes.items() if c["source"] != c["target"]]
    if report.sample["mismatched"]:
        parts.append(f"{len(report.sample['mismatched'])} of {report.sample['checked']} sampled records differ")
    return "; ".join(parts[:5])
