"""What a create-index request may choose, and what only the server decides.

The server's operator fixes the token embedder (its kind, model, device, sequence length,
dimension) and the settings that size memory or training (``--embedder``, ``--config``).
A request's ``config`` may choose only settings whose cost is bounded whatever their value:
the residual coding and the search parameters. Anything else is refused with a
:class:`~memcore.ValidationError` (HTTP 400) that names the setting and nothing of the server.
"""

from __future__ import annotations

from typing import Any, Mapping

from memcore.plugin import ValidationError

__all__ = ["REQUEST_SETTINGS", "SERVER_SETTINGS", "request_options"]

REQUEST_SETTINGS = frozenset(
    {
        "nbits",
        "buckets",
        "residual_transform",
        "doc_maxlen",
        "query_maxlen",
        "kmeans_niters",
        "seed",
        "defer_training",
        "retrain_growth",
        "compact_fraction",
        "ncells",
        "centroid_score_threshold",
        "ndocs",
        "exhaustive_below",
    }
)
"""Index settings a create-index request may set. Each is bounded by the index settings'
own validation (``doc_maxlen`` <= 8192, ``kmeans_niters`` <= 100, ``nbits`` in 1/2/4, ``seed``
in 0..2**31-1...), and the tokens a passage holds are bounded by the request body size."""

SERVER_SETTINGS = frozenset({"embedder", "ncentroids", "max_centroids", "kmeans_points_per_centroid", "train_min_tokens", "max_raw_tokens"})
"""Index settings only the server's own settings choose: the embedder (each distinct one is
another model in memory) and the settings that size training and uncompressed memory."""

_IGNORED = frozenset({"kind", "checkpoint"})
"""Accepted and dropped: ``kind`` is always colbert; ``checkpoint`` is ColBERT's model path,
named by the server's embedder here."""


def request_options(options: Mapping[str, Any] | None, server_embedder: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of a request's ``config`` the server accepts; ValidationError for the rest.

    ``embedder`` is accepted only when it equals the server's own (a client may send the
    settings it was configured with); any other value is refused, never loaded.
    """
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise ValidationError("config must be an object of index settings")
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key in _IGNORED:
            continue
        if key == "embedder":
            if _same_embedder(value, server_embedder):
                continue
            raise ValidationError(
                f"config.embedder: this server encodes every index with its own embedder (kind {server_embedder.get('kind')!r}); "
                "leave config.embedder out (the server's operator chooses it with --embedder / --config)"
            )
        if key in SERVER_SETTINGS:
            raise ValidationError(f"config.{key} is chosen by the server's operator, not by a request; leave it out")
        if key not in REQUEST_SETTINGS:
            raise ValidationError(f"config.{str(key)[:64]!r} is not a setting a request may choose (allowed: {', '.join(sorted(REQUEST_SETTINGS))})")
        out[key] = value
    return out


def _same_embedder(value: Any, server_embedder: Mapping[str, Any]) -> bool:
    if isinstance(value, str):
        value = {"kind": value}
    return isinstance(value, Mapping) and dict(value) == dict(server_embedder)
