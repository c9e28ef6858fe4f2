"""``hierarchical``: memory in tiers with capacities and a migration policy, per scope.

Layouts (``layout``): ``two_tier`` (stm -> ltm), ``three_tier`` (stm -> mtm -> ltm) and
``functional`` (episodic -> semantic, and procedural on its own; an entry goes to the tier
named by its ``memory_type`` metadata, default episodic). Each tier is an index
``hierarchical.<tier>`` over the same stored records (kind ``tier_index``, default an
``exact`` vector index): data is stored once, tiers are index memberships.

When a tier holds more than its capacity, the policy (``migration``) picks what leaves:
``fifo`` (entered the tier first), ``age`` (oldest record), or ``heat`` (coldest:
``heat = a * visits + b * words / 100 + c * exp(-(now - last_visit) / tau_s)``, visits
counted on every retrieval hit). What leaves moves to the next tier with
:meth:`memcore.Collection.move`: one commit per tier step (the moved entries, their new
tier state and the tier's sequence number together), so after a crash each entry is in
exactly one tier. A tier without a next tier and with a capacity must say what leaves it:
``forget = "delete"`` deletes it and counts it in ``forgotten`` (an explicit policy);
otherwise a capacity there is a configuration error.

**Per scope.** Capacities apply to each scope on its own (``insert(...,
scope={"user_id": "alice"})``): the service counts and picks victims among the entries the
bound scope sees (the core narrows the tiers' ids to it), so one user's inserts never
migrate or forget another user's entries, and alice's tiers are the ones she would have
alone. An unscoped call is unrestricted (its tiers hold every entry); what it moves or
forgets keeps its state in the entry's own scope (one commit per scope of the moved entries).

Per-record state (tier, entry order, visits, last visit) lives in the store, namespace
``hierarchical``, kept per bound scope by the core (forgotten with the scope; a record
deleted by id takes its state with it).

**Writes around the tiers.** ``update`` changes an entry in place (it stays in its tier).
``upsert`` is refused: a new entry enters the tiers only through ``insert``, which migrates
what overflows.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Mapping, cast

from memcore.plugin import ComponentConfig, Scope, Service, ServiceProblem, ValidationError
from pydantic import Field, model_validator

from . import hierarchical_check
from .common import HeatWeights, heat, hit_result, now, top

__all__ = ["HierarchicalConfig", "HierarchicalMemory", "LAYOUTS"]

LAYOUTS: dict[str, dict[str, str | None]] = {
    "two_tier": {"stm": "ltm", "ltm": None},
    "three_tier": {"stm": "mtm", "mtm": "ltm", "ltm": None},
    "functional": {"episodic": "semantic", "semantic": None, "procedural": None},
}
"""Tier -> the tier what overflows it moves to (None: the last)."""
DEFAULT_CAPACITY = {"stm": 20, "mtm": 200, "episodic": 200}
NS = "hierarchical"
INSERT_KEYWORDS = ("id", "links", "vectors")
"""What ``insert`` accepts besides text, vector and metadata (``scope`` is bound by the base class)."""


class HierarchicalConfig(ComponentConfig):
    """Settings of ``hierarchical``."""

    kind: str = "hierarchical"
    layout: Literal["two_tier", "three_tier", "functional"] = Field("three_tier", description="Tiers and where overflow goes.")
    capacities: dict[str, int | None] = Field(
        default_factory=dict, description="Tier -> capacity (None: unbounded). Default stm 20, mtm 200, episodic 200, others unbounded."
    )
    migration: Literal["fifo", "heat", "age"] = Field("fifo", description="Which entries leave an over-full tier.")
    forget: Literal["never", "delete"] = Field(
        "never", description="What leaves a full last tier: never (a capacity there is an error) or delete (counted in 'forgotten')."
    )
    heat: HeatWeights = Field(default_factory=HeatWeights, description="Weights of the heat policy.")
    space: str = Field("default", description="Embedding space of the tier indexes.")
    tier_index: dict[str, Any] = Field(
        default_factory=lambda: {"kind": "exact", "metric": "cosine"}, description="Index entry used for every tier (its space is filled in)."
    )
    tier_weights: dict[str, float] = Field(default_factory=dict, description="Score multiplier per tier at retrieval (default 1).")
    llm: str | None = Field(None, description="Unused (no LLM step).")

    @model_validator(mode="after")
    def _check(self) -> "HierarchicalConfig":
        tiers = LAYOUTS[self.layout]
        unknown = sorted(set(self.capacities) - set(tiers))
        if unknown:
            raise ValueError(f"capacities name unknown tiers {unknown}; layout {self.layout} has {list(tiers)}")
        for tier, nxt in tiers.items():
            if nxt is None and self.capacity(tier) is not None and self.forget == "never":
                raise ValueError(f'tier {tier!r} is the last one: a capacity there needs forget = "delete" (nothing is dropped silently)')
        return self

    def capacity(self, tier: str) -> int | None:
        """The capacity of a tier."""
        return self.capacities.get(tier, DEFAULT_CAPACITY.get(tier))


class HierarchicalMemory(Service):
    """Tiers over one collection; overflow migrates by the configured policy."""

    config: HierarchicalConfig
    uses_pipeline = False
    capacity_limited = True  # forget = "delete" drops what leaves the last tier

    @classmethod
    def required_indexes(cls, config: ComponentConfig) -> dict[str, dict[str, Any]]:
        """One index per tier: ``hierarchical.<tier>``."""
        own = cast(HierarchicalConfig, config)  # memcore validates a service's settings with its registered model
        return {f"{NS}.{t}": {**own.tier_index, "space": own.space} for t in LAYOUTS[own.layout]}

    @property
    def tiers(self) -> dict[str, str | None]:
        """Tier -> next tier."""
        return LAYOUTS[self.config.layout]

    def _entry_tier(self, metadata: Mapping[str, Any]) -> str:
        if self.config.layout != "functional":
            return next(iter(self.tiers))
        kind = str(metadata.get("memory_type", "episodic"))
        if kind not in self.tiers:
            raise ValidationError(f"memory_type {kind!r} is not a tier of the functional layout: {list(self.tiers)}")
        return kind

    def insert(self, text: str, vector: Any = None, metadata: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
        """Insert into the entry tier (``id``, ``links``, ``vectors`` as keywords), then
        migrate what overflows the bound scope's tiers."""
        self.reject_unknown("insert", kwargs, INSERT_KEYWORDS)
        meta = dict(metadata or {})
        tier = self._entry_tier(meta)
        item: dict[str, Any] = {"text": text, "metadata": meta, **{k: v for k, v in kwargs.items() if v is not None}}
        if vector is not None:
            item["vectors"] = {**item.get("vectors", {}), self.config.space: vector}
        rid = self.collection.ids_of([item])[0]
        if self.collection.get_state(NS, f"r:{rid}") is not None and self.collection.get_many([rid])[0] is not None:
            # an idempotent retry: the entry is in its tier already (maybe a later one), nothing moves
            self.collection.insert([item], indexes=[])  # DuplicateIdError for other content under that id; else writes nothing
            return rid
        seq = int(self.collection.get_state(NS, "seq", 0)) + 1
        at = now()
        entry = {"tier": tier, "entered": seq, "created": at, "visits": 0, "last": at, "words": len(text.split())}
        self.collection.insert([item], indexes=[f"{NS}.{tier}"], state={(NS, "seq"): seq, (NS, f"r:{rid}"): entry})  # one commit
        self._migrate(tier)
        return rid

    def _by_scope(self, ids: list[str]) -> list[tuple[Scope | None, list[str]]]:
        """``ids`` grouped by their record's own scope: an entry's state lives in its own
        scope's namespace, and a broader call (unscoped, or alice's over alice's runs) sees
        the entries of narrower scopes too."""
        groups: dict[str, tuple[Scope | None, list[str]]] = {}
        for rid, record in zip(ids, self.collection.records(ids)):
            own = record.scope if record is not None and record.scope is not None and not record.scope.is_empty() else None
            groups.setdefault(json.dumps(own.as_dict() if own else {}, sort_keys=True, default=str), (own, []))[1].append(rid)
        return list(groups.values())

    def _victims(self, tier: str, n: int) -> list[str]:
        ids = self.collection.ids(index=f"{NS}.{tier}")
        states: dict[str, Any] = {}
        for own, group in self._by_scope(ids):
            with self.collection.scoped(own):
                states.update({i: self.collection.get_state(NS, f"r:{i}") or {} for i in group})
        if self.config.migration == "fifo":
            key = lambda i: (states[i].get("entered", 0), i)  # noqa: E731
        elif self.config.migration == "age":
            key = lambda i: (states[i].get("created", 0.0), i)  # noqa: E731
        else:
            at = now()
            key = lambda i: (heat(self.config.heat, states[i].get("visits", 0), states[i].get("words", 0) / 100.0, states[i].get("last", 0.0), at), i)  # noqa: E731
        return sorted(ids, key=key)[:n]

    def _migrate(self, tier: str | None) -> None:
        """Move what overflows ``tier`` (and then each next tier) down: one commit per tier
        step and scope of the moved entries (each with its state, kept in its own scope)."""
        while tier is not None:
            cap = self.config.capacity(tier)
            over = self.collection.count(index=f"{NS}.{tier}") - cap if cap is not None else 0
            if over <= 0:
                return
            nxt = self.tiers[tier]
            for own, victims in self._by_scope(self._victims(tier, over)):
                with self.collection.scoped(own):
                    self._step(tier, nxt, victims)
            if nxt is None:
                return
            tier = nxt

    def _step(self, tier: str, nxt: str | None, victims: list[str]) -> None:
        """One commit: ``victims`` (entries of the bound scope) leave ``tier`` for ``nxt``, or
        are deleted from the last tier (forget = "delete", checked by the config)."""
        if nxt is None:
            forgotten = int(self.collection.get_state(NS, "forgotten", 0)) + len(victims)
            self.collection.delete(victims, state={**{(NS, f"r:{rid}"): None for rid in victims}, (NS, "forgotten"): forgotten})
            return
        seq = int(self.collection.get_state(NS, "seq", 0))
        state: dict[tuple[str, str], Any] = {}
        for rid in victims:
            seq += 1
            state[(NS, f"r:{rid}")] = {**(self.collection.get_state(NS, f"r:{rid}") or {}), "tier": nxt, "entered": seq}
        state[(NS, "seq")] = seq
        self.collection.move(victims, f"{NS}.{tier}", f"{NS}.{nxt}", state=state)

    def retrieve(
        self, query: str | None = None, vector: Any = None, where: Mapping[str, Any] | None = None, k: int = 10, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """Search every tier of the bound scope, weight by tier, count a visit on each returned entry."""
        self.reject_unknown("retrieve", kwargs)
        q = self.make_query(query, vector, where, k, self.config.space)
        results = []
        for tier in self.tiers:
            index = f"{NS}.{tier}"
            if self.collection.count(index=index) == 0:
                continue
            weight = self.config.tier_weights.get(tier, 1.0)
            for h in self.collection.retrieve(q, index=index):
                r = hit_result(h)
                r["score"] *= weight
                results.append(r)
        out = top(results, k)
        if out:
            at = now()
            changes = {}
            for r in out:
                st = self.collection.get_state(NS, f"r:{r['id']}")
                if st is not None:
                    changes[(NS, f"r:{r['id']}")] = {**st, "visits": st.get("visits", 0) + 1, "last": at}
            if changes:
                self.collection.set_state(changes)
        return out

    def delete(self, ids: list[str]) -> int:
        """Delete entries with their per-record state, in one commit (``scope=`` is bound by
        the base class and never reaches this method)."""
        ids = list(dict.fromkeys(ids))
        return self.collection.delete(ids, state={(NS, f"r:{rid}"): None for rid in ids})

    def upsert(self, items: Any) -> list[str]:
        """Refused: a new entry enters the tiers through ``insert`` (which migrates what
        overflows), an existing one changes through ``update``."""
        raise ValidationError("hierarchical does not upsert: use insert() for new entries (tiers migrate what overflows) and update(id, ...) to change one")

    def check(self) -> list[ServiceProblem]:
        """Inconsistencies between the state and the tiers, every scope (:mod:`.hierarchical_check`)."""
        return hierarchical_check.check(self)

    def repair(self) -> list[ServiceProblem]:
        """Fix what :meth:`check` finds (:mod:`.hierarchical_check`); returns the problems fixed."""
        return hierarchical_check.repair(self)

    def report(self) -> dict[str, Any]:
        """Entries per tier and how many were forgotten (of the bound scope)."""
        return {**{t: self.collection.count(index=f"{NS}.{t}") for t in self.tiers}, "forgotten": int(self.collection.get_state(NS, "forgotten", 0))}
