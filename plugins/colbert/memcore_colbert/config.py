"""Settings of the ``colbert`` and ``colbert_remote`` indexes and their query modes.

Plain pydantic models: importing this module imports neither faiss nor any model.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Mapping, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from memcore.plugin import ComponentConfig

__all__ = [
    "ColbertIndexConfig",
    "ColbertRemoteConfig",
    "ColbertQueryMode",
    "SearchParams",
    "plaid_defaults",
    "SMALL_K_NDOCS",
]

_T = TypeVar("_T")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ColbertIndexConfig(ComponentConfig):
    """Settings of the in-process ``colbert`` index (``[indexes.<name>] kind = "colbert"``).

    Storage follows ColBERTv2 (plan, centroids, compressed residuals, inverted lists,
    doclens); search follows PLAID (candidate cells, pruned centroid interaction, full
    centroid interaction, exact late interaction on decompressed residuals).
    """

    kind: str = "colbert"
    embedder: dict[str, Any] = Field(
        default_factory=lambda: {"kind": "minilm"},
        description='Token embedder, built through the registry: {kind = "minilm"} or any embedder implementing '
        'embed_document_tokens (e.g. the deterministic {kind = "token_hashing"}).',
    )
    doc_maxlen: int = Field(220, ge=1, le=8192, description="Tokens kept per passage (ColBERT default 220).")
    query_maxlen: int = Field(32, ge=1, le=8192, description="Tokens kept per query (ColBERT default 32).")
    nbits: Literal[1, 2, 4] = Field(2, description="Bits per residual dimension (ColBERTv2 buckets: 2**nbits).")
    buckets: Literal["per_dim", "pooled"] = Field(
        "pooled",
        description="Residual bucket cutoffs and weights: quantiles of each dimension (per_dim) or of all coordinates pooled (pooled, ColBERTv2's choice).",
    )
    residual_transform: Literal["none", "pca", "pca-vq"] = Field(
        "pca-vq",
        description="Residual coding: none (ColBERTv2: every dimension nbits), pca (a learned rotation to the residuals' principal axes, "
        "bits allocated by variance, Lloyd-Max buckets per component) or pca-vq (pca's layout, a k-means codebook per byte); same bytes per token.",
    )
    ncentroids: int | None = Field(None, ge=2, description="k-means centroids; default ColBERT's 2**floor(log2(16*sqrt(tokens))), capped by max_centroids.")
    max_centroids: int = Field(65536, ge=2, description="Upper bound of the default number of centroids (65,536: codes fit uint16).")
    kmeans_niters: int = Field(4, ge=1, le=100, description="k-means iterations (ColBERT default 4).")
    kmeans_points_per_centroid: int = Field(64, ge=8, description="Token vectors sampled per centroid to train k-means.")
    train_min_tokens: int = Field(
        4096,
        ge=16,
        description="Below this many token vectors the index keeps them uncompressed and searches exhaustively; "
        "the add that crosses it trains centroids and compresses.",
    )
    defer_training: bool = Field(
        True,
        description="Past train_min_tokens, keep adding uncompressed and train once, on the original vectors, at the first search or save "
        "(or past max_raw_tokens): a collection filled in batches (populate, rebuild) then trains once instead of training on its "
        "first batch and re-training from decompressed vectors.",
    )
    max_raw_tokens: int = Field(
        524288, ge=16, description="With defer_training: the add that brings the uncompressed token vectors past this trains at once (bounds the fp32 memory)."
    )
    retrain_growth: float = Field(4.0, gt=1.0, description="Re-train centroids and buckets when the live tokens exceed this multiple of the tokens trained on.")
    compact_fraction: float = Field(0.2, gt=0.0, le=1.0, description="Compact (drop tombstoned passages) above this fraction of dead tokens.")
    ncells: int | None = Field(None, ge=1, description="Centroids probed per query token (PLAID default by k: 1 / 2 / 4).")
    centroid_score_threshold: float | None = Field(None, ge=-1.0, le=1.0, description="Centroid pruning threshold (PLAID default by k: 0.5 / 0.45 / 0.4).")
    ndocs: int | None = Field(
        None, ge=1, description="Passages kept after pruned centroid scoring (default by k: 512 / 1024 / max(4k, 4096); ColBERT's are 256 / 1024 / ...)."
    )
    exhaustive_below: int = Field(256, ge=0, description="Collections (or allowed-id sets) of at most this many passages are scored exhaustively.")
    seed: int = Field(
        0, ge=0, le=2**31 - 1, description="Seed of sampling and k-means (0 to 2**31-1: faiss takes a 32-bit signed seed, numpy no negative one)."
    )

    @field_validator("embedder", mode="before")
    @classmethod
    def _embedder_entry(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"kind": value}
        if isinstance(value, Mapping):
            if not isinstance(value.get("kind"), str) or not value.get("kind"):
                raise ValueError("the token embedder needs a 'kind' (a registered embedder name)")
            return dict(value)
        return value


class ColbertRemoteConfig(ComponentConfig):
    """Settings of ``colbert_remote``: a client of ``memcore colbert serve``."""

    kind: str = "colbert_remote"
    url: str = Field(..., min_length=1, description="Base URL of the server, e.g. http://127.0.0.1:8893")
    index_name: str = Field(..., min_length=1, description="Server-side index name ({workspace}_{kb}_{table}).")
    timeout: float = Field(30.0, gt=0, description="Seconds per HTTP request.")
    config: dict[str, Any] = Field(default_factory=dict, description="Index settings sent when the client creates the index (doc_maxlen, nbits, embedder...).")
    batch_size: int = Field(256, ge=1, description="Passages per add request.")
    api_key_env: str | None = Field(
        None,
        description="Name of the environment variable holding the server's API key, read at each request (sent as 'Authorization: Bearer'); "
        "None: no key. Prefer it to api_key: settings are saved with the memory, the variable's value never is.",
    )
    api_key: SecretStr | None = Field(
        None, exclude=True, description="The API key itself (not saved with the memory's settings, never logged); api_key_env is preferred."
    )

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        if not _ENV_NAME.match(value):
            raise ValueError("api_key_env is the NAME of an environment variable (letters, digits, '_'), not the key itself; export the key in that variable")
        return value

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        value = value.rstrip("/")
        if not value.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        return value


class ColbertQueryMode(BaseModel):
    """Per-query settings read from ``Query.extras["colbert"]`` (all optional).

    ``exhaustive`` scores every passage (decompressed) instead of the PLAID stages: the
    accuracy reference. The others override the index's PLAID parameters for this query.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    exhaustive: bool = False
    ncells: int | None = Field(None, ge=1)
    centroid_score_threshold: float | None = Field(None, ge=-1.0, le=1.0)
    ndocs: int | None = Field(None, ge=1)


class SearchParams(BaseModel):
    """The resolved PLAID parameters of one search."""

    model_config = ConfigDict(frozen=True)

    ncells: int
    centroid_score_threshold: float
    ndocs: int
    exhaustive: bool = False


SMALL_K_NDOCS = 512
"""``ndocs`` for k <= 10. ColBERT uses 256, tuned for its own token vectors. MiniLM's sit far
from their centroids (mean squared residual 0.39 on SciFact, 8,192 centroids), so the
centroid-only stages rank less well and need a longer shortlist (``ndocs / 4`` = 128
passages scored exactly, not 64) to keep the true top 10 (docs/plugins/colbert.md, full corpus)."""


def plaid_defaults(k: int) -> tuple[int, float, int]:
    """The PLAID parameters chosen by k: (ncells, centroid_score_threshold, ndocs). ColBERT's,
    but for ndocs at k <= 10 (:data:`SMALL_K_NDOCS`)."""
    if k <= 10:
        return 1, 0.5, SMALL_K_NDOCS
    if k <= 100:
        return 2, 0.45, 1024
    return 4, 0.4, max(4 * k, 4096)


_NO_MODE = ColbertQueryMode()
"""A query without a mode: every setting from the index (or the PLAID defaults)."""


def resolve_params(config: ColbertIndexConfig, k: int, mode: ColbertQueryMode | None) -> SearchParams:
    """Query mode > index settings > PLAID defaults by k."""
    ncells, threshold, ndocs = plaid_defaults(k)
    mode = mode if mode is not None else _NO_MODE
    return SearchParams(
        ncells=_first(ncells, mode.ncells, config.ncells),
        centroid_score_threshold=_first(threshold, mode.centroid_score_threshold, config.centroid_score_threshold),
        ndocs=max(_first(ndocs, mode.ndocs, config.ndocs), k),
        exhaustive=bool(mode.exhaustive),
    )


def _first(default: _T, *values: _T | None) -> _T:
    """The first of ``values`` that is not None (``default`` when all are)."""
    return next((v for v in values if v is not None), default)
