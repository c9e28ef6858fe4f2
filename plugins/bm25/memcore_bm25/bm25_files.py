"""On-disk format of the ``bm25`` index: pickle-free, every file swapped in atomically.

A saved index is a flat directory:

- ``seg-<gen>.*``: the base segment of merge generation ``<gen>`` — bm25s's own files
  (``data/indices/indptr.csc.index.npy``, ``vocab.index.json``, ``params.index.json`` and,
  for BM25L/BM25+, ``nonoccurrence_array.index.npy``, written by ``BM25.save`` with
  ``allow_pickle=False``) plus ``ids.json``, the documents' term counts
  ``terms/tfs/offsets.npy`` and ``tf_columns.npy``, the term frequency of each score-matrix
  entry.
  They are written once per merge: into a temporary folder first, then each file is
  fsynced and moved in with ``os.replace``; a later save of the same generation skips them.
- ``bm25.json``: the pointer and everything small — settings, the generation in use,
  tombstoned base rows, terms added since the merge, the fresh documents (id and term
  counts). Written last with :func:`memcore.indexes._index.atomic_write_json`; files of older
  generations are deleted after it.

``bm25.json`` also records the format and the settings, for a reader of the files; the
core's ``index.json`` checks the format version and the settings (and a checksum of every
file) before ``load``. Loading checks that the files agree with each other (shapes,
vocabulary, ids, bm25s's parameters); any mismatch is a :class:`memcore.CorruptError`.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from memcore.plugin import CorruptError, read_json, read_json_object, read_npy

from .bm25_scoring import NONOCCURRENCE_METHODS, Scorer
from .bm25_segments import BaseSegment

__all__ = ["STATE_FILE", "save_base", "load_base", "read_state", "remove_stale", "base_files"]

STATE_FILE = "bm25.json"
_BM25S_NAMES = {
    "data_name": "data.csc.index.npy",
    "indices_name": "indices.csc.index.npy",
    "indptr_name": "indptr.csc.index.npy",
    "vocab_name": "vocab.index.json",
    "params_name": "params.index.json",
    "nnoc_name": "nonoccurrence_array.index.npy",
}
_OWN_NAMES = {"ids": "ids.json", "terms": "terms.npy", "tfs": "tfs.npy", "offsets": "offsets.npy", "tf_columns": "tf_columns.npy"}
_ARRAYS = ("terms", "tfs", "offsets", "tf_columns")


def _name(gen: str, suffix: str) -> str:
    return f"seg-{gen}.{suffix}"


def base_files(gen: str, method: str) -> list[str]:
    """The file names of base generation ``gen``."""
    suffixes = [v for k, v in _BM25S_NAMES.items() if k != "nnoc_name" or method in NONOCCURRENCE_METHODS]
    return [_name(gen, s) for s in suffixes + list(_OWN_NAMES.values())]


def _fsync(path: Path) -> None:
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def save_base(directory: Path, base: BaseSegment, method: str) -> None:
    """Write the files of ``base`` unless this directory already holds its generation."""
    names = base_files(base.gen, method)
    if all((directory / n).is_file() for n in names):
        return
    tmp = directory / f".bm25-{base.gen}-{uuid.uuid4().hex[:8]}.tmp"
    tmp.mkdir()
    try:
        base.retriever.save(tmp, **{k: _name(base.gen, v) for k, v in _BM25S_NAMES.items()}, show_progress=False)
        (tmp / _name(base.gen, _OWN_NAMES["ids"])).write_text(json.dumps(base.ids, ensure_ascii=False), encoding="utf-8")
        for key in _ARRAYS:
            with open(tmp / _name(base.gen, _OWN_NAMES[key]), "wb") as fh:
                np.save(fh, np.asarray(getattr(base, key)), allow_pickle=False)
        for name in names:
            _fsync(tmp / name)
        for name in names:
            os.replace(tmp / name, directory / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load_base(directory: Path, gen: str, scorer: Scorer, where: str) -> BaseSegment:
    """Read base generation ``gen`` (score matrix memory-mapped); CorruptError when inconsistent."""
    import bm25s

    try:
        retriever = bm25s.BM25.load(directory, **{k: _name(gen, v) for k, v in _BM25S_NAMES.items()}, mmap=True, allow_pickle=False, show_progress=False)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CorruptError(f"{where}: cannot read base segment {gen}: {exc}") from None
    ids = read_json(directory / _name(gen, _OWN_NAMES["ids"]), where)
    arrays = {key: read_npy(directory / _name(gen, _OWN_NAMES[key]), where, mmap=True) for key in _ARRAYS}
    params = (retriever.method, float(retriever.k1), float(retriever.b), float(retriever.delta))
    if params != (scorer.method, scorer.k1, scorer.b, scorer.delta):  # bm25s's own params.index.json against the settings
        raise CorruptError(
            f"{where}: base segment {gen} was built with method/k1/b/delta {params}, the index uses {(scorer.method, scorer.k1, scorer.b, scorer.delta)}"
        )
    terms, tfs, offsets, tf_columns = (arrays[key] for key in _ARRAYS)
    scores = retriever.scores
    n_vocab = int(scores["indptr"].shape[0]) - 1
    ok = (
        isinstance(ids, list)
        and all(isinstance(i, str) for i in ids)
        and len(set(ids)) == len(ids)
        and scores["num_docs"] == len(ids)
        and offsets.ndim == terms.ndim == tfs.ndim == 1
        and offsets.shape[0] == len(ids) + 1
        and terms.shape == tfs.shape == tf_columns.shape == scores["indices"].shape
        and int(offsets[0]) == 0
        and int(offsets[-1]) == terms.shape[0]
        and bool(np.all(np.diff(offsets) >= 0))
        and sorted(retriever.vocab_dict.values()) == list(range(n_vocab))
        and (terms.size == 0 or (int(terms.min()) >= 0 and int(terms.max()) < n_vocab and int(tfs.min()) >= 1))
    )
    if not ok:
        raise CorruptError(f"{where}: the files of base segment {gen} do not agree with each other")
    return BaseSegment(retriever, ids, terms, tfs, offsets, tf_columns, gen=gen)


def read_state(directory: Path, where: str) -> dict[str, Any]:
    """The parsed ``bm25.json`` (CorruptError when missing, unreadable or not a JSON object)."""
    return read_json_object(directory / STATE_FILE, where)


def remove_stale(directory: Path, keep_gen: str | None) -> None:
    """Delete base files of other generations and leftover temporary folders."""
    keep = f"seg-{keep_gen}." if keep_gen else None
    for path in directory.iterdir():
        try:
            if path.name.startswith("seg-") and (keep is None or not path.name.startswith(keep)):
                path.unlink()
            elif path.name.startswith(".bm25-") and path.name.endswith(".tmp") and path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass  # a file still in use elsewhere is removed by a later save
