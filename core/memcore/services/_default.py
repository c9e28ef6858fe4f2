"""Builtin ``default`` service: insert into the chosen indexes, retrieve through the pipeline."""

from __future__ import annotations

from typing import Any, Mapping

from pydantic import Field

from ..errors import ConfigError, ValidationError
from .._plugins._registry import ComponentConfig
from ._service import Service, hit_to_dict


class DefaultServiceConfig(ComponentConfig):
    """Settings of the ``default`` service."""

    kind: str = "default"
    indexes: list[str] | None = Field(None, description="Indexes new items go to (default: all).")
    space: str | None = Field(None, description="Space of a bare vector argument (default: the only space).")


class DefaultService(Service):
    """No policy: every item goes to the configured indexes; retrieval is the pipeline."""

    config: DefaultServiceConfig

    def insert(self, text: str, vector: Any = None, metadata: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
        """Insert one item (``id``, ``links``, ``vectors`` may be passed as keywords; ``scope``
        is bound by the base class)."""
        self.reject_unknown("insert", kwargs, ("id", "links", "vectors"))
        item: dict[str, Any] = {"text": text, "metadata": dict(metadata or {}), **{k: v for k, v in kwargs.items() if v is not None}}
        if vector is not None:
            space = self.vector_space(self.config.space)
            if space in item.get("vectors", {}):
                raise ValidationError(f"the vector of space {space!r} is given twice (vector= and vectors=)")
            item["vectors"] = {**item.get("vectors", {}), space: vector}
        return self.collection.insert([item], indexes=self.config.indexes)[0]

    def insert_many(self, items: list[Any]) -> list[str]:
        """Insert many items in one transaction (texts, dicts, Records); returns their ids."""
        return self.collection.insert(items, indexes=self.config.indexes)

    def retrieve(
        self, query: str | None = None, vector: Any = None, where: Mapping[str, Any] | None = None, k: int = 10, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """Run the pipeline; returns ``[{"id", "text", "score", "metadata"}]``."""
        if self.pipeline is None:
            raise ConfigError("no pipeline is configured", location="pipeline")
        self.reject_unknown("retrieve", kwargs)
        q = self.make_query(query, vector, where, k, self.config.space, scope=self.scope)
        return [hit_to_dict(h) for h in self.pipeline.run(self.collection, q)]
