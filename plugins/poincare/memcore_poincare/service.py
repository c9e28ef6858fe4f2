"""The ``hyperamy`` service: an emotional memory over one ``poincare`` index.

``insert(text, vector=None, metadata=None, v=..., T=..., born=..., links=..., id=...)``
stores an item as a particle: its intensity ``v``, temperature ``T`` and birth time go
into the record's metadata under the service's own keys (``hyperamy_v``, ``hyperamy_T``,
``hyperamy_born``), links into ``record.links``. ``retrieve(query, vector, metadata, k,
v=..., T=..., t_now=..., cone_width=..., max_neighbors=..., neighbor_penalty=...)`` runs
the four-step search with time evolution at ``t_now`` (default now); results have the
unified shape (id, text, score = -distance, metadata without the service's keys).

Scopes are bound by the base class (``insert(..., scope=...)``, ``retrieve(...,
scope=...)``): a particle carries the caller's scope and a search sees only the caller's
particles. ``upsert`` is refused (a particle's ``v``/``T``/``born`` come from ``insert``);
``update`` changes a particle's text, metadata or vectors and keeps its ``v``, ``T`` and
``born``.
"""

from __future__ import annotations

import math
import time
from typing import Any, Mapping, cast

from memcore.plugin import ComponentConfig, Record, Service, ValidationError

from .config import QUERY_MODE_KEY, HyperAmyServiceConfig

__all__ = ["HyperAmyService", "V_KEY", "T_KEY", "BORN_KEY"]

V_KEY, T_KEY, BORN_KEY = "hyperamy_v", "hyperamy_T", "hyperamy_born"
_OWN = (V_KEY, T_KEY, BORN_KEY)
_SEARCH_OPTIONS = ("t_now", "cone_width", "max_neighbors", "neighbor_penalty", "born")
INSERT_KEYWORDS = ("v", "T", "born", "links", "id")
"""What ``insert`` accepts besides text, vector and metadata (``scope`` is bound by the base class)."""
RETRIEVE_KEYWORDS = ("v", "T", *_SEARCH_OPTIONS)
"""What ``retrieve`` accepts besides query, vector, metadata and k."""


def _finite(name: str, value: Any, minimum: float | None = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or (minimum is not None and value < minimum):
        bound = f" >= {minimum:g}" if minimum is not None else ""
        raise ValidationError(f"{name} must be a finite number{bound}, got {value!r}")
    return float(value)


def _own_free(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of caller metadata, refused when it names one of the service's own keys."""
    meta = dict(metadata or {})
    clash = sorted(set(meta) & set(_OWN))
    if clash:
        raise ValidationError(f"metadata keys {clash} are reserved by the hyperamy service: pass v=, T=, born= instead")
    return meta


class HyperAmyService(Service):
    """Insert emotion particles; retrieve them by direction, intensity and time."""

    config: HyperAmyServiceConfig

    @classmethod
    def required_indexes(cls, config: ComponentConfig) -> dict[str, dict[str, Any]]:
        """One ``poincare`` index reading the service's metadata keys."""
        own = cast(HyperAmyServiceConfig, config)  # memcore validates a service's settings with its registered model
        options = {k: v for k, v in own.index_options.items() if k not in ("kind", "v_key", "T_key", "born_key", "default_v", "default_T")}
        if own.space is not None:
            options.setdefault("space", own.space)
        return {
            own.index: {
                "kind": "poincare",
                **options,
                "v_key": V_KEY,
                "T_key": T_KEY,
                "born_key": BORN_KEY,
                "default_v": own.default_v,
                "default_T": own.default_T,
            }
        }

    def insert(self, text: str, vector: Any = None, metadata: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
        """Store one particle; ``v``, ``T``, ``born`` (default now), ``links``, ``id`` as keywords."""
        meta = _own_free(metadata)
        self.reject_unknown("insert", kwargs, INSERT_KEYWORDS)
        meta[V_KEY] = _finite("v", kwargs.get("v", self.config.default_v))
        meta[T_KEY] = _finite("T", kwargs.get("T", self.config.default_T))
        meta[BORN_KEY] = _finite("born", kwargs["born"], None) if kwargs.get("born") is not None else time.time()
        item: dict[str, Any] = {"text": text, "metadata": meta}
        for key in ("links", "id"):
            if kwargs.get(key) is not None:
                item[key] = kwargs[key]
        if vector is not None:
            item["vectors"] = {self.vector_space(self.config.space): vector}
        return self.collection.insert([item], indexes=[self.config.index])[0]

    def retrieve(
        self, query: str | None = None, vector: Any = None, where: Mapping[str, Any] | None = None, k: int = 10, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """The ``k`` closest particles at ``t_now``; ``v``/``T`` set the query particle."""
        self.reject_unknown("retrieve", kwargs, RETRIEVE_KEYWORDS)
        mode = {key: kwargs[key] for key in ("v", "T", *_SEARCH_OPTIONS) if kwargs.get(key) is not None}
        q = self.make_query(query, vector, where, k, self.config.space, scope=self.scope, extras={QUERY_MODE_KEY: mode})
        hits = self.collection.retrieve(q, index=self.config.index, k=k)
        out = []
        for hit in hits:
            record = hit.record
            out.append(
                {
                    "id": hit.id,
                    "text": record.text if record else None,
                    "score": float(hit.score),
                    "metadata": {key: value for key, value in (record.metadata if record else {}).items() if key not in _OWN},
                }
            )
        return out

    def upsert(self, items: Any) -> list[str]:
        """Refused: a particle's intensity, temperature and birth are set by ``insert``."""
        raise ValidationError("hyperamy does not upsert: use insert(text, v=..., T=..., born=...) for a particle and update(id, ...) to change one")

    def update(self, id: str, **fields: Any) -> Record:
        """Change a particle's ``text``, ``metadata`` (``merge_metadata``) or ``vectors``;
        its ``v``, ``T`` and ``born`` stay."""
        self.reject_unknown("update", fields, ("text", "metadata", "merge_metadata", "vectors"))
        if fields.get("metadata") is not None:
            metadata = _own_free(fields["metadata"])
            if not fields.get("merge_metadata"):
                own = self.collection.get(id).metadata
                metadata.update({key: own[key] for key in _OWN if key in own})
            fields["metadata"] = metadata
        return self.collection.update(id, **fields)
