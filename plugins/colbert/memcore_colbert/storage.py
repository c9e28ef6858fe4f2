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

``.npy`` files are read with ``allow_pickle=False``; nothing is pickled. Format 4 (the
``pca-vq`` transform and its ``codebooks.npy``) reads formats 1 to 3 (3: ``pca`` or no
transform; 1 and 2: no transform; format 1's int32 codes are narrowed on load; the next
save writes format 4); a directory of a newer format is refused
with a CorruptError naming both versions. An index keeps the codec it was trained with
(``buckets.json`` names its transform) even when ``residual_transform`` has changed since:
the setting applies at its next training (or ``memcore index rebuild``).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memcore.plugin import CorruptError, atomic_write_bytes, atomic_write_json

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


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


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
        atomic_write_bytes(directory / {"rotation": ROTATION_FILE, "codebooks": CODEBOOKS_FILE}.get(key, names.get(key, "")), _npy_bytes(array))
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


def _json(path: Path, where: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CorruptError(f"{where}: cannot read {path.name}: {exc}") from None


def _npy(path: Path, where: str, shape: object, dtype: npt.DTypeLike) -> np.ndarray:
    try:
        array: np.ndarray = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise CorruptError(f"{where}: cannot read {path.name}: {exc}") from None
    if list(array.shape) != shape or array.dtype != np.dtype(dtype):
        raise CorruptError(f"{where}: {path.name} holds {array.dtype}{list(array.shape)}, metadata.json says {dtype}{shape}")
    return array


def load_engine(engine: Engine, directory: Path, model_id: str | None = None) -> None:
    """Replace ``engine``'s contents with what :func:`save_engine` wrote; CorruptError if
    unreadable or saved with another token model (when ``model_id`` is given)."""
    directory = Path(directory)
    where = f"colbert index {engine.name!r} in {directory}"
    plan = _json(directory / PLAN_FILE, where)
    meta = _json(directory / METADATA_FILE, where)
    if not isinstance(plan, dict) or not isinstance(meta, dict):
        raise CorruptError(f"{where}: plan.json / metadata.json are not JSON objects")
    version = plan.get("format_version")
    if version not in READABLE_VERSIONS or meta.get("format_version") != version:
        raise CorruptError(
            f"{where}: format version {version!r} (metadata.json: {meta.get('format_version')!r}); this memcore-colbert reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))} (a newer one wrote it: upgrade memcore-colbert, or rebuild the index)"
        )
    expected: dict[str, Any] = {"dim": engine.dim, "nbits": engine.config.nbits}
    if model_id is not None:
        expected["model_id"] = model_id
    for key, value in expected.items():
        if plan.get(key) != value:
            raise CorruptError(f"{where}: saved {key} {plan.get(key)!r} does not match {value!r}")
    try:
        pids = [str(p) for p in meta["pids"]]
        doclens = np.asarray(_json(directory / DOCLENS_FILE, where), dtype=np.int32).reshape(-1)
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
            buckets = _json(directory / "buckets.json", where)
            avg = _json(directory / "avg_residual.json", where)
            if buckets.get("nbits") != engine.config.nbits or buckets.get("dim") != engine.dim:
                raise CorruptError(f"{where}: buckets.json does not match nbits {engine.config.nbits} / dim {engine.dim}")
            transform = buckets.get("transform", "none")  # the codec it was trained with (a setting changed since applies at the next training)
            if transform not in TRANSFORMS or (transform == "pca-vq" and version < 4):
                raise CorruptError(f"{where}: unknown residual transform {transform!r} in buckets.json")
            codec: ResidualCodec | TransformCodec
            if transform in ("pca", "pca-vq"):
                rotation = _npy(directory / ROTATION_FILE, where, [engine.dim, engine.dim], np.float32)
                if transform == "pca-vq":
                    books = _npy(directory / CODEBOOKS_FILE, where, shapes.get("codebooks"), np.float32)
                    codec = VQTransformCodec.from_json({**buckets, **avg}, rotation, books)  # ValueError when the tables do not fit
                else:
                    codec = TransformCodec.from_json({**buckets, **avg}, rotation)
            else:
                codec = ResidualCodec.from_json({**buckets, **avg})
            centroids = _npy(directory / COMPRESSED["centroids"], where, shapes.get("centroids"), np.float32)
            narrow = code_dtype(len(centroids))
            if version > 1 and meta.get("codes_dtype") != narrow.name:
                raise CorruptError(f"{where}: metadata.json says codes are {meta.get('codes_dtype')!r}, {len(centroids)} centroids need {narrow.name}")
            saved_dtype: npt.DTypeLike = np.int32 if version == 1 else narrow  # (version > 1: the dtype metadata.json names)
            codes = _npy(directory / COMPRESSED["codes"], where, [total], saved_dtype)
            residuals = _npy(directory / COMPRESSED["residuals"], where, [total, codec.bytes_per_token], np.uint8)
            ivf_slots = _npy(directory / COMPRESSED["ivf"], where, shapes.get("ivf"), np.int64)
            ivf_lengths = _npy(directory / COMPRESSED["ivf_lengths"], where, [len(centroids)], np.int64)
            if centroids.shape[1:] != (engine.dim,) or (total and (codes.min() < 0 or codes.max() >= len(centroids))):
                raise CorruptError(f"{where}: codes and centroids do not agree")
            if int(ivf_lengths.sum()) != len(ivf_slots) or (len(ivf_slots) and (ivf_slots.min() < 0 or ivf_slots.max() >= len(pids))):
                raise CorruptError(f"{where}: ivf.pid.npy and ivf.lengths.npy do not agree")
            engine.centroids, engine.codec, engine.codes, engine.residuals, engine.raw = centroids, codec, codes.astype(narrow, copy=False), residuals, None
        else:
            engine.raw = _npy(directory / RAW["tokens"], where, [total, engine.dim], np.float32)
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
