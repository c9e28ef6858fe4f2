"""``hierarchical``'s consistency check and repair (``Service.check`` / ``Service.repair``).

What "consistent" means, per scope (its state namespace and the records of exactly that
scope): each entry is in exactly one tier index; each entry has its state ``r:<id>`` whose
``tier`` names that index; no ``r:<id>`` outlives its entry; the counter ``seq`` is at least
every entry's ``entered``; no tier holds more than its capacity.

:func:`repair`: an entry in two tiers stays in the one its state names (else the later
tier of the layout), an entry without state gets one (entered now), a state that names
the wrong tier is corrected, a state without its entry goes, ``seq`` moves up, and an
over-full tier migrates what overflows (the service's own policy). No record is deleted
except by that migration when the last tier's policy is ``forget = "delete"``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memcore.plugin import Record, Scope, ServiceProblem

if TYPE_CHECKING:
    from .hierarchical import HierarchicalMemory

__all__ = ["check", "repair"]


def _fields(scope: Scope | None) -> dict[str, Any]:
    return scope.as_dict() if scope is not None else {}


def _scopes(service: "HierarchicalMemory") -> list[Scope | None]:
    """Every scope with hierarchical state or entries in a tier (unbound read)."""
    from .hierarchical import NS

    out: dict[str, Scope | None] = {"[]": None}
    for scope in service.state_scopes(NS):
        out[repr(sorted(_fields(scope).items()))] = scope
    collection = service.collection
    with collection.scoped(None):
        ids = list(dict.fromkeys(i for tier in service.tiers for i in collection.ids(index=f"{NS}.{tier}")))
        for record in collection.records(ids):
            if record is not None and record.scope is not None and not record.scope.is_empty():
                out.setdefault(repr(sorted(_fields(record.scope).items())), record.scope)
    return list(out.values())


def _audit(service: "HierarchicalMemory", scope: Scope | None) -> tuple[list[ServiceProblem], dict[str, list[str]], dict[str, Any]]:
    """The bound scope's problems, the tier memberships to drop ({index: ids}) and the state changes."""
    from .hierarchical import NS

    collection = service.collection
    own = _fields(scope)
    problems: list[ServiceProblem] = []
    leave: dict[str, list[str]] = {}
    changes: dict[str, Any] = {}
    order = list(service.tiers)
    tiers_of: dict[str, list[str]] = {}
    records: dict[str, Record] = {}
    for tier in order:
        ids = collection.ids(index=f"{NS}.{tier}")
        for record in collection.records(ids):
            if record is not None and _fields(record.scope) == own:
                tiers_of.setdefault(record.id, []).append(tier)
                records[record.id] = record
    state = collection.state_items(NS)
    seq = int(state.get("seq", 0) or 0)
    top = max((int((v or {}).get("entered", 0) or 0) for k, v in state.items() if k.startswith("r:") and isinstance(v, dict)), default=0)

    def problem(kind: str, message: str, ids: list[str]) -> None:
        problems.append(ServiceProblem(kind, message, scope, tuple(ids)))

    next_seq = max(seq, top)
    for rid, tiers in tiers_of.items():
        entry = state.get(f"r:{rid}")
        named = entry.get("tier") if isinstance(entry, dict) else None
        keep = named if named in tiers else tiers[-1]
        if len(tiers) > 1:
            problem("entry_in_two_tiers", f"entry {rid} is in tiers {tiers}", [rid])
            for tier in tiers:
                if tier != keep:
                    leave.setdefault(f"{NS}.{tier}", []).append(rid)
        if not isinstance(entry, dict):
            problem("entry_without_state", f"entry {rid} (tier {keep}) has no state", [rid])
            next_seq += 1
            created = records[rid].created_at
            words = len(records[rid].text.split())
            changes[f"r:{rid}"] = {"tier": keep, "entered": next_seq, "created": created, "visits": 0, "last": created, "words": words}
        elif named != keep:
            problem("entry_state_mismatch", f"entry {rid} is in tier {keep} but its state says {named!r}", [rid])
            changes[f"r:{rid}"] = {**entry, "tier": keep}
    gone = [k[2:] for k in state if k.startswith("r:") and k[2:] not in tiers_of]
    if gone:
        present = {r.id for r in collection.records(gone) if r is not None and _fields(r.scope) == own}
        for rid in gone:
            what = "is in no tier" if rid in present else "does not exist"
            problem("state_of_missing_entry", f"state r:{rid} names an entry that {what}", [rid])
            changes[f"r:{rid}"] = None
    if seq < top:
        problem("counter_behind", f"seq {seq} < the highest entered {top}", ["seq"])
    if next_seq != seq:
        changes["seq"] = next_seq
    counts = {tier: sum(1 for tiers in tiers_of.values() if tier in tiers) for tier in order}  # the scope's own entries
    for tier in order:
        cap = service.config.capacity(tier)
        if cap is not None and counts[tier] > cap:
            problem("tier_over_capacity", f"tier {tier} holds {counts[tier]} entries, capacity {cap}", [tier])
    return problems, leave, changes


def check(service: "HierarchicalMemory") -> list[ServiceProblem]:
    """Every scope's problems (reads only)."""
    problems: list[ServiceProblem] = []
    for scope in _scopes(service):
        with service.collection.scoped(scope):
            problems += _audit(service, scope)[0]
    return problems


def repair(service: "HierarchicalMemory") -> list[ServiceProblem]:
    """Fix every scope's problems (per scope: memberships with the state in one commit, then
    the migration of over-full tiers); returns them."""
    from .hierarchical import NS

    fixed: list[ServiceProblem] = []
    collection = service.collection
    for scope in _scopes(service):
        with collection.scoped(scope):
            problems, leave, changes = _audit(service, scope)
            if not problems:
                continue
            state = {(NS, key): value for key, value in changes.items()}
            for i, (index, ids) in enumerate(leave.items()):
                collection.remove_from_index(index, ids, state=state if i == 0 else None)
            if not leave and state:
                collection.set_state(state)
            for tier in service.tiers:
                service._migrate(tier)
            fixed += problems
    return fixed
