"""On-disk format of one colbert index directory (ColBERTv2's layout, safe formats only).

Files, each written to a temp file beside it, fsynced and ``os.replace``-d in:

- ``plan.json``: format version, token dimension, nbits, the index settings;
- ``doclens.0.json``: tokens per passage slot (one chunk, ``0``);
- compressed indexes: ``centroids.npy`` (C, dim) float32, ``0.codes.npy`` (T,) centroid
  ids in the smallest unsigned dtype that holds C (uint8 / uint16 / uint32; format 1
  stored int32), ``0.residuals.npy`` (T, dim*nbits/8) uint8, ``buckets.json`` (cutoffs and
  weights: per dimension, or pooled as format 1 wrote them; with ``residual_transform =
  "pca"`` the component widths, per-component tables and means), ``avg_residual.json``,
  ``rotation.npy`` (only with the pca and pca-vq transforms: the (dim, dim) float32 rotation),
  ``codebooks.npy`` (only with pca-vq: a codebook per byte position, float32),
  ``ivf.pid.npy`` + ``ivf.lengths.npy`` (centroid -> passage slots);
- uncompressed (small) indexes: ``0.tokens.npy`` (T, dim) float32;
- ``metadata.json``, written last: passage ids by slot, tombstoned slots, counts and the
  shape of every array file, so a mismatched set of files is refused with CorruptError.

``.npy`` files are read with ``allow_pickle=False`` (:func:`memcore.read_npy`); nothing is
pickled. Format 4 (the ``pca-vq`` transform and its ``codebooks.npy``) reads formats 1 to 3
(3: ``pca`` or no transform; 1 and 2: no transform; format 1's int32 codes are narrowed on
load; the next save writes format 4): ``ColbertIndex.readable_versions``, so a collection
loads them instead of rebuilding. In a collection the core checks the version, the config
and a checksum of every file (``index.json``) before :func:`load_engine` runs; the versions
in ``plan.json`` / ``metadata.json`` choose the migration, and a directory of a newer format
(a colbert server's, which no ``index.json`` wraps) is refused with a CorruptError naming both
versions. An index keeps the codec it was trained with
(``buckets.json`` names its transform) even when ``residual_transform`` has changed since:
the setting applies at its next training (or ``memcore index rebuild``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memcore.plugin import CorruptError, atomic_write_bytes, atomic_write_json, npy_bytes, read_json, read_json_object, read_npy

from .codec import ResidualCodec, code_dtype
from .engine import Engine
from .transform import TransformCodec
from .vq import VQTransformCodec

__all__ = ["save_engine", "load_engine", "FORMAT_VERSION", "READABLE_VERSIONS", "PLAN_FILE", "METADATA_FILE"]

FORMAT_VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)
PLAN_FILE = "plan.json"
METADATA_FILE = "metadata.json"
DOCLENS_FILE = "doclens.0.json"
COMPRESSED = {"centroids": "centroids.npy", "codes": "0.codes.npy", "residuals": "0.residuals.npy", "ivf": "ivf.pid.npy", "ivf_lengths": "ivf.lengths.npy"}
RAW = {"tokens": "0.tokens.npy"}
CODEC_FILES = ("buckets.json", "avg_residual.json")
ROTATION_FILE = "rotation.npy"
CODEBOOKS_FILE = "codebooks.npy"
TRANSFORMS = ("none", "pca", "pca-vq")


def save_engine(engine: Engine, directory: Path, model_id: str = "") -> None:
    """Write ``engine`` into ``directory`` (created by the caller); ``metadata.json`` last.

    ``model_id``: the token embedder's model, pinned in ``plan.json``."""
    directory = Path(directory)
    engine.ensure_trained()
    atomic_write_json(
        directory / PLAN_FILE,
        {
            "format_version": FORMAT_VERSION,
            "dim": engine.dim,
            "nbits": engine.config.nbits,
            "model_id": model_id,
            "config": engine.config.model_dump(mode="json"),
        },
    )
    atomic_write_json(directory / DOCLENS_FILE, engine.doclens.tolist())
    shapes: dict[str, list[int]] = {}
    if engine.compressed:
        ivf_offsets, ivf_slots = engine.ivf()
        centroids, engine_codec = engine.trained()
        arrays = {"centroids": centroids, "codes": engine.codes, "residuals": engine.residuals, "ivf": ivf_slots, "ivf_lengths": np.diff(ivf_offsets)}
        names = COMPRESSED
        codec = engine_codec.to_json()
        atomic_write_json(directory / "buckets.json", {k: v for k, v in codec.items() if k != "avg_residual"})
        atomic_write_json(directory / "avg_residual.json", {"avg_residual": codec["avg_residual"]})
        if isinstance(engine_codec, TransformCodec):
            arrays["rotation"] = engine_codec.rotation
        if isinstance(engine_codec, VQTransformCodec):
            arrays["codebooks"] = engine_codec.codebooks
    else:
        arrays, names = {"tokens": engine.raw_tokens()}, RAW
    for key, array in arrays.items():
        atomic_write_bytes(directory / {"rotation": ROTATION_FILE, "codebooks": CODEBOOKS_FILE}.get(key, names.get(key, "")), npy_bytes(array))
        shapes[key] = list(array.shape)
    atomic_write_json(
        directory / METADATA_FILE,
        {
            "format_version": FORMAT_VERSION,
            "num_chunks": 1,
            "num_passages": len(engine.pids),
            "num_live_passages": len(engine),
            "num_embeddings": engine.total_tokens,
            "avg_doclen": float(engine.doclens.mean()) if len(engine.doclens) else 0.0,
            "compressed": engine.compressed,
            "codes_dtype": engine.codes.dtype.name if engine.compressed else None,
            "trained_tokens": engine.trained_tokens,
            "pids": engine.pids,
            "deleted_slots": np.flatnonzero(~engine.alive).tolist(),
            "shapes": shapes,
        },
    )
    stale = set(RAW.values()) if engine.compressed else set(COMPRESSED.values()) | set(CODEC_FILES)
    if "rotation" not in shapes:
        stale.add(ROTATION_FILE)
    if "codebooks" not in shapes:
        stale.add(CODEBOOKS_FILE)
    for name in stale:
        (directory / name).unlink(missing_ok=True)


def load_engine(engine: Engine, directory: Path, model_id: str | None = None) -> None:
    """Replace ``engine``'s contents with what :func:`save_engine` wrote; CorruptError if
    unreadable or saved with another token model (when ``model_id`` is given)."""
    directory = Path(directory)
    where = f"colbert index {engine.name!r} in {directory}"
    plan = read_json_object(directory / PLAN_FILE, where)
    meta = read_json_object(directory / METADATA_FILE, where)
    # the version chooses the migration; checked here as well for a colbert server's directory (no index.json wraps it)
    version = plan.get("format_version")
    if version not in READABLE_VERSIONS or meta.get("format_version") != version:
        raise CorruptError(
            f"{where}: format version {version!r} (metadata.json: {meta.get('format_version')!r}); this memcore-colbert reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))} (a newer one wrote it: upgrade memcore-colbert, or rebuild the index)"
        )
    expected: dict[str, Any] = {"dim": engine.dim}  # the token encoder's (nbits is config: the core compares it)
    if model_id is not None:
        expected["model_id"] = model_id
    for key, value in expected.items():
        if plan.get(key) != value:
            raise CorruptError(f"{where}: saved {key} {plan.get(key)!r} does not match {value!r}")
    try:
        pids = [str(p) for p in meta["pids"]]
        doclens = np.asarray(read_json(directory / DOCLENS_FILE, where), dtype=np.int32).reshape(-1)
        dead = np.asarray(meta["deleted_slots"], dtype=np.int64)
        shapes = meta["shapes"]
        compressed = bool(meta["compressed"])
        trained = int(meta["trained_tokens"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptError(f"{where}: malformed metadata.json ({exc})") from None
    total = int(doclens.sum())
    alive = np.ones(len(pids), dtype=bool)
    if len(dead) and (dead.min() < 0 or dead.max() >= len(pids)):
        raise CorruptError(f"{where}: deleted slots out of range")
    alive[dead] = False
    live = [p for p, a in zip(pids, alive.tolist()) if a]
    if len(doclens) != len(pids) or len(set(live)) != len(live) or (doclens < 1).any():
        raise CorruptError(f"{where}: doclens.0.json, pids and deleted slots do not agree")
    if total != meta.get("num_embeddings"):
        raise CorruptError(f"{where}: doclens add up to {total} tokens, metadata.json says {meta.get('num_embeddings')}")
    engine.reset()
    try:
        if compressed:
            buckets = read_json_object(directory / "buckets.json", where)
            avg = read_json_object(directory / "avg_residual.json", where)
            if buckets.get("nbits") != engine.config.nbits or buckets.get("dim") != engine.dim:
                raise CorruptError(f"{where}: buckets.json does not match nbits {engine.config.nbits} / dim {engine.dim}")
            transform = buckets.get("transform", "none")  # the codec it was trained with (a setting changed since applies at the next training)
            if transform not in TRANSFORMS or (transform == "pca-vq" and version < 4):
                raise CorruptError(f"{where}: unknown residual transform {transform!r} in buckets.json")
            codec: ResidualCodec | TransformCodec
            if transform in ("pca", "pca-vq"):
                rotation = read_npy(directory / ROTATION_FILE, where, dtype=np.float32, shape=(engine.dim, engine.dim))
                if transform == "pca-vq":
                    books = read_npy(directory / CODEBOOKS_FILE, where, dtype=np.float32, shape=shapes["codebooks"])
                    codec = VQTransformCodec.from_json({**buckets, **avg}, rotation, books)  # ValueError when the tables do not fit
                else:
                    codec = TransformCodec.from_json({**buckets, **avg}, rotation)
            else:
                codec = ResidualCodec.from_json({**buckets, **avg})
            centroids = read_npy(directory / COMPRESSED["centroids"], where, dtype=np.float32, shape=shapes["centroids"])
            narrow = code_dtype(len(centroids))
            if version > 1 and meta.get("codes_dtype") != narrow.name:
                raise CorruptError(f"{where}: metadata.json says codes are {meta.get('codes_dtype')!r}, {len(centroids)} centroids need {narrow.name}")
            saved_dtype: npt.DTypeLike = np.int32 if version == 1 else narrow  # (version > 1: the dtype metadata.json names)
            codes = read_npy(directory / COMPRESSED["codes"], where, dtype=saved_dtype, shape=(total,))
            residuals = read_npy(directory / COMPRESSED["residuals"], where, dtype=np.uint8, shape=(total, codec.bytes_per_token))
            ivf_slots = read_npy(directory / COMPRESSED["ivf"], where, dtype=np.int64, shape=shapes["ivf"])
            ivf_lengths = read_npy(directory / COMPRESSED["ivf_lengths"], where, dtype=np.int64, shape=(len(centroids),))
            if centroids.shape[1:] != (engine.dim,) or (total and (codes.min() < 0 or codes.max() >= len(centroids))):
                raise CorruptError(f"{where}: codes and centroids do not agree")
            if int(ivf_lengths.sum()) != len(ivf_slots) or (len(ivf_slots) and (ivf_slots.min() < 0 or ivf_slots.max() >= len(pids))):
                raise CorruptError(f"{where}: ivf.pid.npy and ivf.lengths.npy do not agree")
            engine.centroids, engine.codec, engine.codes, engine.residuals, engine.raw = centroids, codec, codes.astype(narrow, copy=False), residuals, None
        else:
            engine.raw = read_npy(directory / RAW["tokens"], where, dtype=np.float32, shape=(total, engine.dim))
    except (KeyError, TypeError, ValueError) as exc:
        engine.reset()
        raise CorruptError(f"{where}: malformed index files ({exc})") from None
    engine.pids = pids
    engine.alive = alive
    engine.slot_of = {p: i for i, p in enumerate(pids) if engine.alive[i]}
    engine.doclens = doclens
    engine.trained_tokens = trained
    engine._derived()
    if compressed:
        engine._ivf = (np.concatenate(([0], np.cumsum(ivf_lengths))), ivf_slots)
