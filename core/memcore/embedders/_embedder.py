"""Embedders and embedding spaces: text -> vectors of one named space.

- :class:`Embedder`, the interface: texts to float32 vectors of a fixed dimension. Besides
  one vector per text, an embedder may offer per-token vectors (late interaction, the
  ``colbert`` index): :meth:`Embedder.embed_document_tokens` and
  :meth:`Embedder.embed_query_tokens`. They are optional; :attr:`Embedder.supports_tokens`
  says whether an embedder implements them. :func:`build_embedder` builds one from a
  settings entry through the registry.
- :class:`Space`: a named vector space, filled by one embedder. Only the Collection embeds.
  A space is declared in settings (``spaces.dense = {embedder = "minilm"}``) or, with no
  embedder, with a fixed ``dim`` for caller-given vectors only. The manifest pins each
  space's embedder, model and dimension. :func:`fill_vectors`, :func:`query_vector` and
  :func:`prepare_query` embed what records and queries lack.
- :class:`HashingEmbedder`, the builtin ``hashing`` embedder (registered by
  :mod:`memcore.default_plugins.embedders`): deterministic feature hashing of words and word
  pairs. NOT semantic: "car" and "automobile" share nothing. It exists so the core runs and
  tests without a model; use the ``minilm`` embedder (``memcore[embed]``) for real retrieval.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
from pydantic import Field

from ..errors import ConfigError, DimensionError, ValidationError
from ..indexes._index import Requirements, SpaceInfo
from ..model._checks import check_finite_vectors
from ..model._query import Query
from ..model._record import Record
from ..model._text import tokenize
from .._plugins._host import get_registry
from .._plugins._registry import ComponentConfig

__all__ = [
    "Embedder",
    "build_embedder",
    "unit_token_rows",
    "Space",
    "fill_vectors",
    "prepare_query",
    "query_vector",
    "HashingEmbedder",
    "HashingEmbedderConfig",
]


class Embedder(ABC):
    """Turns texts into float32 vectors of a fixed dimension.

    ``model_id`` identifies the model so the manifest can pin it: changing the model of a
    space means rebuilding the indexes that use it.

    Token vectors (optional): an embedder that can return one vector per token overrides
    :meth:`embed_document_tokens` (and :meth:`embed_query_tokens` when queries are encoded
    differently, as ColBERT's ``[Q]`` marker and mask padding do). Late-interaction
    indexes build such an embedder themselves (by kind, through the registry) and keep the
    token vectors inside the index: they never go into a collection's spaces.
    """

    dim: int
    model_id: str = ""

    @abstractmethod
    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for texts to store, shape ``(len(texts), dim)``, float32."""

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for query texts (same as documents unless the model is asymmetric)."""
        return self.embed_documents(texts)

    # -- token vectors (optional) ---------------------------------------------------------

    @property
    def supports_tokens(self) -> bool:
        """Whether this embedder implements :meth:`embed_document_tokens`."""
        return type(self).embed_document_tokens is not Embedder.embed_document_tokens

    def embed_document_tokens(self, texts: Sequence[str], *, max_length: int | None = None) -> list[np.ndarray]:
        """Per-token vectors of texts to store: one float32 array ``(n_tokens, dim)`` per text.

        Every row has unit L2 length (so a dot product is a cosine); at most ``max_length``
        rows per text (``None``: the model's own limit), the first tokens kept; never zero
        rows for a text the model accepts. :func:`unit_token_rows` does the normalising and
        truncating for implementers.

        The base class has no token vectors: it raises :class:`memcore.ConfigError`.
        """
        raise ConfigError(
            f"embedder {type(self).__name__} ({self.model_id or 'no model id'}) gives no token vectors; "
            "late interaction needs an embedder implementing embed_document_tokens (e.g. 'minilm' of memcore[embed])"
        )

    def embed_query_tokens(self, texts: Sequence[str], *, max_length: int | None = None) -> list[np.ndarray]:
        """Per-token vectors of query texts, as :meth:`embed_document_tokens` (the default)."""
        return self.embed_document_tokens(texts, max_length=max_length)


def unit_token_rows(matrices: Sequence[np.ndarray], max_length: int | None = None) -> list[np.ndarray]:
    """Token matrices cut to their first ``max_length`` rows, each row scaled to unit length
    (all-zero rows stay zero), as contiguous float32 arrays."""
    out = []
    for matrix in matrices:
        m = np.asarray(matrix, dtype=np.float32)
        if max_length is not None:
            m = m[:max_length]
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        out.append(np.ascontiguousarray(np.divide(m, norms, out=np.zeros_like(m), where=norms > 0)))
    return out


def build_embedder(spec: str | Mapping[str, Any] | Any, *, location: str = "embedder") -> Embedder:
    """An embedder from a settings entry, through the registry of installed plugins.

    ``spec`` is a kind (``"minilm"``), a table with ``kind`` and the embedder's options
    (``{"kind": "minilm", "batch_size": 16}``) or an already-validated config model. Used by
    components that embed for themselves (a late-interaction index builds its token
    embedder this way), so they never import the plugin providing it. Unknown kinds raise
    :class:`memcore.UnknownComponentError`, bad options :class:`memcore.ConfigError` at
    ``location``.
    """
    kind: Any
    if isinstance(spec, str):
        kind, options = spec, {}
    elif isinstance(spec, Mapping):
        options = dict(spec)
        kind = options.pop("kind", None)
    else:
        kind, options = getattr(spec, "kind", None), spec
    if not isinstance(kind, str) or not kind:
        raise ConfigError("an embedder entry needs a 'kind' (a registered embedder name)", location=location)
    registration = get_registry().get("embedders", kind, location=f"{location}.kind")
    config = registration.parse_config(options, location)
    embedder = registration.build(config)
    if not isinstance(embedder, Embedder):
        raise ConfigError(f"embedder {kind!r} built a {type(embedder).__name__}, not a memcore.Embedder", location=location)
    return embedder


# -- spaces --------------------------------------------------------------------------------


@dataclass
class Space:
    """One embedding space: its name, dimension and (optional) embedder."""

    name: str
    dim: int
    embedder: Embedder | None = None
    embedder_kind: str = "none"

    @property
    def info(self) -> SpaceInfo:
        """The description handed to index factories."""
        return SpaceInfo(self.name, self.dim, self.embedder_kind)

    def manifest(self) -> dict[str, Any]:
        """What the store pins about this space."""
        return {"dim": self.dim, "embedder": self.embedder_kind, "model_id": getattr(self.embedder, "model_id", "") if self.embedder else ""}

    def check_pinned(self, pinned: dict[str, Any]) -> None:
        """Refuse to open a collection whose space was built with another model or dimension."""
        mine = self.manifest()
        if pinned != mine:
            raise ConfigError(
                f"space {self.name!r} was created with {pinned}, settings now give {mine}; "
                "vectors from different models are not comparable: declare a new space (and indexes on it) "
                "or restore the original embedder",
                location=f"spaces.{self.name}",
            )

    def _embed(self, texts: Sequence[str], query: bool) -> np.ndarray:
        if self.embedder is None:
            raise ValidationError(f"space {self.name!r} has no embedder: give vectors for it explicitly")
        fn = self.embedder.embed_queries if query else self.embedder.embed_documents
        out = np.asarray(fn(list(texts)), dtype=np.float32)
        if out.shape != (len(texts), self.dim):
            raise DimensionError(f"embedder of space {self.name!r} returned shape {out.shape}, expected {(len(texts), self.dim)}")
        check_finite_vectors(out, f"embedder of space {self.name!r}: output")
        return out

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Document vectors, checked for shape and finiteness."""
        return self._embed(texts, query=False)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Query vectors, checked for shape and finiteness."""
        return self._embed(texts, query=True)

    def check_vector(self, vector: np.ndarray, what: str) -> None:
        """Validate a caller-given vector of this space."""
        if vector.shape != (self.dim,):
            raise DimensionError(f"{what} has dimension {vector.shape[0]}, space {self.name!r} has {self.dim}")

    def check_query_vector(self, vector: np.ndarray) -> None:
        """:meth:`check_vector` for a query's vector of this space (its message built only on failure)."""
        if vector.shape != (self.dim,):
            self.check_vector(vector, f"query vector {self.name!r}")


def fill_vectors(spaces: Mapping[str, Space], records: Sequence[Record], names: Sequence[str]) -> list[Record]:
    """Embed the records' missing vectors of the spaces ``names``, one batch per space.

    Returns the records that got a vector (they are changed in place).
    """
    changed: dict[str, Record] = {}
    for name in names:
        todo = [r for r in records if name not in r.vectors]
        if not todo:
            continue
        for record, vector in zip(todo, spaces[name].embed_documents([r.text for r in todo])):
            record.vectors[name] = vector
            changed[record.id] = record
    return list(changed.values())


def query_vector(spaces: Mapping[str, Space], query: Query, name: str) -> np.ndarray:
    """The query's vector in space ``name``, embedded from its text once and cached on it."""
    if name in query.vectors:
        return query.vectors[name]
    if name not in spaces:
        raise ConfigError(f"embedding space {name!r} is not declared")
    if not (query.text and query.text.strip()):
        raise ValidationError(f"the query has neither text nor a vector for space {name!r}")
    vector: np.ndarray = spaces[name].embed_queries([query.text])[0]  # a row of a checked float32 matrix
    query.vectors[name] = vector
    return vector


def prepare_query(spaces: Mapping[str, Space], query: Query, requires: Requirements) -> Query:
    """Check and complete a query for an index: text when it reads text, vectors of its spaces.

    A query carrying ``extras`` (kind-specific query modes) may omit the text: the index's
    ``validate_query`` decides whether its mode needs it.
    """
    if requires.text and not query.extras and not (query.text and query.text.strip()):
        raise ValidationError("this index searches text: the query text is empty")
    for name in requires.spaces:
        if name in query.vectors and name in spaces:
            spaces[name].check_query_vector(query.vectors[name])
        else:
            query_vector(spaces, query, name)
    return query


# -- the builtin hashing embedder ---------------------------------------------------------


class HashingEmbedderConfig(ComponentConfig):
    """Settings of the ``hashing`` embedder."""

    kind: str = "hashing"
    dim: int = Field(256, ge=8, le=65536, description="Vector dimension (number of hash buckets).")
    bigrams: bool = Field(True, description="Also hash adjacent word pairs.")


class HashingEmbedder(Embedder):
    """Signed feature hashing of lowercase word unigrams (+ bigrams), L2-normalised."""

    def __init__(self, config: HashingEmbedderConfig | None = None):
        self.config = config or HashingEmbedderConfig()
        self.dim = self.config.dim
        self.model_id = f"hashing-v1-{self.dim}{'-bigrams' if self.config.bigrams else ''}"
        self._cache: dict[str, tuple[int, float]] = {}

    def _bucket(self, token: str) -> tuple[int, float]:
        hit = self._cache.get(token)
        if hit is None:
            digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
            value = int.from_bytes(digest, "little")
            hit = (value % self.dim, 1.0 if (value >> 63) & 1 else -1.0)
            if len(self._cache) < 200_000:
                self._cache[token] = hit
        return hit

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Hash each text into a unit vector (all-zero texts stay zero)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = tokenize(text)
            features = words + ([f"{a} {b}" for a, b in zip(words, words[1:])] if self.config.bigrams else [])
            for feature in features:
                col, sign = self._bucket(feature)
                out[row, col] += sign
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out
