"""``vector_hash``: TiM-style memory of "thoughts" in an LSH index.

With ``extract = true`` (default) ``insert(text)`` stores the text once (no index), extracts
(subject, relation, object) triples from it -- the LLM named by ``llm`` with the prompt and
robust parser of :mod:`memcore.triples`, or the rule-based fallback ``rule_svo`` --
refactors each triple to a sentence and stores each sentence as a record in the ``lsh``
index, embedded, with the source's metadata (its ``dia_ids``...) plus ``source`` (the
stored text's id) and ``triple``. A text without any triple goes to the index itself, so
nothing is dropped. With ``extract = false`` the text (already a thought, e.g. the
``to_refactor`` adapter of the LoCoMo pipeline) is stored and hashed as is, with the
caller's vector if given.

``retrieve`` ranks by LSH similarity (the ``lsh`` index's candidates re-scored by cosine).
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from memcore import ComponentConfig, Service
from memcore import TRIPLE_FALLBACK, parse_triples, refactor_triple, rule_triples, triple_prompt
from pydantic import Field

from .common import hit_result

__all__ = ["VectorHashConfig", "VectorHashMemory"]

INDEX = "vector_hash.lsh"
_SPEAKER = re.compile(r"^\s*(?:\([^)]*\))?\s*([A-Z][\w .'-]{0,40}):\s+(.*)$")


class VectorHashConfig(ComponentConfig):
    """Settings of ``vector_hash``."""

    kind: str = "vector_hash"
    space: str = Field("default", description="Embedding space of the thoughts.")
    bits: int = Field(10, ge=1, le=64, description="LSH bits per table.")
    tables: int = Field(16, ge=1, le=64, description="LSH tables.")
    extract: bool = Field(True, description="Extract triples from inserted text (false: the text is a thought already).")
    max_triples: int = Field(10, ge=1, le=50, description="Triples kept per inserted text.")
    llm: str | None = Field("default", description="LLM of the triple extraction (undeclared 'default': the rule_svo fallback).")


class VectorHashMemory(Service):
    """Thoughts (triple sentences) hashed by LSH."""

    uses_pipeline = False

    @classmethod
    def required_indexes(cls, config: VectorHashConfig) -> dict[str, dict[str, Any]]:
        """One ``lsh`` index over the configured space."""
        return {INDEX: {"kind": "lsh", "space": config.space, "bits": config.bits, "tables": config.tables}}

    def insert(self, text: str, vector: Any = None, metadata: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
        """Store one text; with ``extract`` its triples' sentences go to the LSH index."""
        meta = dict(metadata or {})
        if not self.config.extract:
            item: dict[str, Any] = {"text": text, "metadata": meta, **kwargs}
            if vector is not None:
                item["vectors"] = {self.config.space: vector}
            return self.collection.insert([item], indexes=[INDEX])[0]
        turns = []
        for line in text.splitlines() or [text]:
            m = _SPEAKER.match(line)
            speaker = m.group(1).strip() if m else str(meta.get("speaker") or "someone")
            turns.append((speaker, m.group(2) if m else line))
        n = self.config.max_triples
        triples = self.run_llm_step(
            "triple_extraction",
            lambda llm: parse_triples(llm.complete(triple_prompt(text)), n),
            lambda: [t for speaker, said in turns for t in rule_triples(speaker, said, n)][:n],
            TRIPLE_FALLBACK,
        )
        source = self.collection.insert([{"text": text, "metadata": meta, **kwargs}], indexes=[])[0]
        thoughts = [{"text": refactor_triple(t), "metadata": {**meta, "source": source, "triple": list(t)}} for t in triples if refactor_triple(t)]
        if not thoughts:  # nothing extracted: the text itself is the thought
            thoughts = [{"text": text, "metadata": {**meta, "source": source}}]
        self.collection.insert(thoughts, indexes=[INDEX])
        return source

    def retrieve(
        self, query: str | None = None, vector: Any = None, metadata: Mapping[str, Any] | None = None, k: int = 10, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """The thoughts most similar to the query (text embedded, or the given vector)."""
        q = self.make_query(query, vector, metadata, k, self.config.space)
        return [hit_result(h) for h in self.collection.retrieve(q, index=INDEX)]
