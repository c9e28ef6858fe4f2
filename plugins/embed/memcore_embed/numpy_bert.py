"""A torch-free forward pass of all-MiniLM-L6-v2 (a 6-layer BERT) in plain numpy.

Weights come from the model folder's ``model.safetensors`` (``safetensors.numpy``, no
pickle) and text is tokenised by the ``tokenizers`` library from its ``tokenizer.json``,
so the vectors equal sentence-transformers' (cosine >= 0.9999) without torch installed.

Everything stays float32 (a float64 scalar would upcast whole arrays). Speed comes from:

- texts sorted by token count and batched by length, so padding is small;
- the query/key/value projections fused into one matmul, the attention scale folded into
  the query weights;
- the attention softmax and the GELU computed in place, split over a few threads (numpy
  releases the GIL inside ufuncs; the matmuls already run on every core through BLAS).
"""

from __future__ import annotations

import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence, TypedDict, TypeVar

import numpy as np
import numpy.typing as npt

__all__ = ["NumpyBert", "erf"]

_F = np.float32

# Abramowitz & Stegun 7.1.26 constants (|error| <= 1.5e-7, below float32 resolution of GELU's output)
_P = _F(0.3275911)
_A1, _A2, _A3, _A4, _A5 = (_F(0.254829592), _F(-0.284496736), _F(1.421413741), _F(-1.453152027), _F(1.061405429))
_ONE, _HALF = _F(1.0), _F(0.5)
_INV_SQRT2 = _F(0.7071067811865476)


def erf(x: np.ndarray) -> np.ndarray:
    """Vectorised float32 error function (Abramowitz & Stegun 7.1.26, |error| <= 1.5e-7)."""
    x = np.asarray(x, dtype=_F)
    sign = np.sign(x)
    a = np.abs(x)
    t = _ONE / (_ONE + _P * a)
    poly = ((((_A5 * t + _A4) * t + _A3) * t + _A2) * t + _A1) * t
    result: np.ndarray = sign * (_ONE - poly * np.exp(-a * a))
    return result


def _gelu_blocked(x: np.ndarray, block: int = 16384) -> None:
    """:func:`_gelu_inplace` over cache-sized blocks of ``x`` (contiguous): every pass stays in L2."""
    flat = x.reshape(-1)
    for start in range(0, flat.shape[0], block):
        _gelu_inplace(flat[start : start + block])


def _gelu_inplace(x: np.ndarray) -> None:
    """Exact (erf) GELU, ``x * 0.5 * (1 + erf(x / sqrt 2))``, written into ``x``; float32 only."""
    a = x * _INV_SQRT2  # erf argument
    s = np.sign(a)
    np.abs(a, out=a)
    t = _P * a
    t += _ONE
    np.reciprocal(t, out=t)
    poly = _A5 * t
    poly += _A4
    poly *= t
    poly += _A3
    poly *= t
    poly += _A2
    poly *= t
    poly += _A1
    poly *= t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    poly *= a  # 1 - erf(|a|)
    np.subtract(_ONE, poly, out=poly)  # erf(|a|)
    poly *= s  # erf(a)
    poly += _ONE
    poly *= _HALF
    x *= poly


def _softmax_inplace(scores: np.ndarray) -> None:
    """Softmax over the last axis, written into ``scores`` (float32)."""
    peak = scores.max(axis=-1, keepdims=True)
    scores -= peak
    np.exp(scores, out=scores)
    total = scores.sum(axis=-1, keepdims=True)
    np.reciprocal(total, out=total)
    scores *= total


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: np.float32) -> np.ndarray:
    """LayerNorm over the last axis (float32, new array)."""
    mean = x.mean(axis=-1, keepdims=True)
    x = x - mean
    var = np.einsum("ij,ij->i", x, x)[:, None]
    var *= _F(1.0 / x.shape[-1])
    var += eps
    np.sqrt(var, out=var)
    np.reciprocal(var, out=var)
    x *= var
    x *= gamma
    x += beta
    return x


_T = TypeVar("_T")
_Matrix = npt.NDArray[np.float32]


class _Layer(TypedDict):
    """The float32 weights of one encoder layer (matrices transposed for ``x @ w``)."""

    qkv_w: _Matrix
    qkv_b: _Matrix
    o_w: _Matrix
    o_b: _Matrix
    ln1: tuple[_Matrix, _Matrix]
    i_w: _Matrix
    i_b: _Matrix
    f_w: _Matrix
    f_b: _Matrix
    ln2: tuple[_Matrix, _Matrix]


_Consumer = Callable[[list[int], np.ndarray, np.ndarray, np.ndarray], None]
"""What :meth:`NumpyBert._run` hands each batch to: ``(chunk, matrix, lengths, states)``."""


class _Pool:
    """Runs an in-place elementwise function over row chunks on a few threads."""

    def __init__(self, threads: int):
        self.threads = max(1, threads)
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def _get(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="memcore-minilm")
            return self._executor

    def each(self, func: Callable[[_T], object], items: Iterable[_T]) -> None:
        """Call ``func(item)`` for every item, on the pool's threads."""
        listed = list(items)
        if self.threads == 1 or len(listed) < 2:
            for item in listed:
                func(item)
            return
        for _ in self._get().map(func, listed):
            pass

    def map_rows(self, func: Callable[[np.ndarray], object], array: np.ndarray, min_rows: int = 2) -> None:
        """Apply ``func(chunk)`` in place over chunks of the first axis of ``array``."""
        n = array.shape[0]
        if self.threads == 1 or n < min_rows * self.threads or array.size < 65536:
            func(array)
            return
        executor = self._get()
        bounds = np.linspace(0, n, self.threads + 1).astype(int)
        futures = [executor.submit(func, array[lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo]
        for future in futures:
            future.result()


_SERIAL = _Pool(1)

_NO_TOKENS: _Matrix = np.zeros((0, 0), dtype=_F)
"""Placeholder of :meth:`NumpyBert.token_vectors`' result before its batch runs."""

_thread_state = threading.local()
_BlasSetter = Callable[[int], int]
_blas_setter: list[_BlasSetter | None] = []


def _blas_local_threads() -> _BlasSetter | None:
    """OpenBLAS' ``openblas_set_num_threads_local`` (per calling thread), or None.

    Found in the OpenBLAS that numpy wheels bundle (``numpy.libs``); None elsewhere (MKL,
    Accelerate, an old OpenBLAS): batches then run one after the other.
    """
    if not _blas_setter:
        _blas_setter.append(_find_blas_setter())
    return _blas_setter[0]


def _find_blas_setter() -> _BlasSetter | None:
    import ctypes
    import glob

    folder = Path(np.__file__).resolve().parent.parent / "numpy.libs"
    for path in sorted(glob.glob(str(folder / "lib*openblas*.so*"))):
        try:
            lib = ctypes.CDLL(path)
            setter = lib.openblas_set_num_threads_local
        except (OSError, AttributeError):
            continue
        setter.argtypes = [ctypes.c_int]
        setter.restype = ctypes.c_int
        return setter
    return None


def _single_threaded_blas() -> None:
    """Make BLAS calls from the current (worker) thread single-threaded, once per thread."""
    if not getattr(_thread_state, "single", False):
        setter = _blas_local_threads()
        if setter is not None:
            setter(1)
        _thread_state.single = True


def _default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class NumpyBert:
    """all-MiniLM-L6-v2 (any BERT encoder in a sentence-transformers folder) in numpy.

    ``encode(texts)`` gives mean-pooled sentence vectors; ``token_vectors(texts)`` the
    last hidden states per token (unpadded, ``[CLS]``/``[SEP]`` included).
    """

    def __init__(self, folder: str | os.PathLike[str], max_seq_length: int | None = None, threads: int | None = None):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        folder = Path(folder)
        config = json.loads((folder / "config.json").read_text())
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.layers_n = int(config["num_hidden_layers"])
        if config.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"unsupported activation {config.get('hidden_act')!r} (only exact gelu)")
        self.eps = _F(config.get("layer_norm_eps", 1e-12))
        if max_seq_length is None:
            st_config = folder / "sentence_bert_config.json"
            max_seq_length = int(json.loads(st_config.read_text()).get("max_seq_length", 256)) if st_config.is_file() else 256
        self.max_seq_length = min(int(max_seq_length), int(config["max_position_embeddings"]))
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=self.max_seq_length)
        weights = load_file(str(folder / "model.safetensors"))
        self._load(weights)
        self._pool = _Pool(threads or _default_threads())

    def _load(self, raw: dict[str, np.ndarray]) -> None:
        w: dict[str, _Matrix] = {}
        for key, value in raw.items():
            for prefix in ("bert.", "model."):
                if key.startswith(prefix):
                    key = key[len(prefix) :]
            w[key] = np.ascontiguousarray(value, dtype=_F)
        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.token_type = w["embeddings.token_type_embeddings.weight"][0]
        self.emb_ln = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        head_dim = self.hidden // self.heads
        scale = _F(1.0 / np.sqrt(head_dim))
        self.layers: list[_Layer] = []
        for i in range(self.layers_n):
            p = f"encoder.layer.{i}."
            q_w = w[p + "attention.self.query.weight"] * scale
            q_b = w[p + "attention.self.query.bias"] * scale
            qkv_w = np.concatenate([q_w, w[p + "attention.self.key.weight"], w[p + "attention.self.value.weight"]], axis=0)
            qkv_b = np.concatenate([q_b, w[p + "attention.self.key.bias"], w[p + "attention.self.value.bias"]])
            self.layers.append(
                {
                    "qkv_w": np.ascontiguousarray(qkv_w.T),
                    "qkv_b": qkv_b,
                    "o_w": np.ascontiguousarray(w[p + "attention.output.dense.weight"].T),
                    "o_b": w[p + "attention.output.dense.bias"],
                    "ln1": (w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]),
                    "i_w": np.ascontiguousarray(w[p + "intermediate.dense.weight"].T),
                    "i_b": w[p + "intermediate.dense.bias"],
                    "f_w": np.ascontiguousarray(w[p + "output.dense.weight"].T),
                    "f_b": w[p + "output.dense.bias"],
                    "ln2": (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
                }
            )

    # -- tokenisation and batching -------------------------------------------------------
    def tokenize(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Token ids per text (with ``[CLS]``/``[SEP]``, truncated to ``max_seq_length``)."""
        return [np.asarray(e.ids, dtype=np.int64) for e in self.tokenizer.encode_batch(list(texts))]

    def _batches(self, ids: list[np.ndarray], batch_size: int) -> Iterator[tuple[list[int], np.ndarray, np.ndarray]]:
        """Yield (positions, id matrix, lengths) for texts grouped by length (longest first)."""
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            width = len(ids[chunk[0]])
            matrix = np.zeros((len(chunk), width), dtype=np.int64)
            lengths = np.array([len(ids[i]) for i in chunk], dtype=np.int64)
            for row, i in enumerate(chunk):
                matrix[row, : len(ids[i])] = ids[i]
            yield chunk, matrix, lengths

    # -- the forward pass ----------------------------------------------------------------
    def forward(self, ids: np.ndarray, lengths: np.ndarray, *, parallel: bool = True) -> np.ndarray:
        """Last hidden states, shape ``(B, T, hidden)`` float32, for padded ids and each row's length.

        Attention runs per text over its own tokens only (no padding inside the softmax);
        rows past a text's length hold padding states that callers ignore.
        """
        batch, width = ids.shape
        heads, head_dim, hidden = self.heads, self.hidden // self.heads, self.hidden
        x = self.word[ids.reshape(-1)]
        x += np.tile(self.position[:width], (batch, 1))
        x += self.token_type
        x = _layer_norm(x, *self.emb_ln, self.eps)
        pool = self._pool if parallel else _SERIAL
        sizes = [int(n) for n in lengths]
        for layer in self.layers:
            qkv = x @ layer["qkv_w"]
            qkv += layer["qkv_b"]
            qkv = np.ascontiguousarray(qkv.reshape(batch, width, 3, heads, head_dim).transpose(2, 0, 3, 1, 4))  # (3, B, H, T, d)
            context: np.ndarray = np.zeros((batch, heads, width, head_dim), dtype=_F)
            for b, n in enumerate(sizes):  # BLAS runs here, on the calling thread (its own threads inside)
                scores = np.matmul(qkv[0, b, :, :n], qkv[1, b, :, :n].transpose(0, 2, 1))  # (H, n, n); scale is in q
                pool.map_rows(_softmax_inplace, scores, min_rows=1)  # pure ufuncs: worker threads never call BLAS
                np.matmul(scores, qkv[2, b, :, :n], out=context[b, :, :n])
            context = context.transpose(0, 2, 1, 3).reshape(batch * width, hidden)
            attn = context @ layer["o_w"]
            attn += layer["o_b"]
            attn += x
            x = _layer_norm(attn, *layer["ln1"], self.eps)
            inner = x @ layer["i_w"]
            inner += layer["i_b"]
            pool.map_rows(_gelu_blocked, inner)
            out = inner @ layer["f_w"]
            out += layer["f_b"]
            out += x
            x = _layer_norm(out, *layer["ln2"], self.eps)
        return x.reshape(batch, width, hidden)

    def encode(self, texts: Sequence[str], batch_size: int = 32, normalize: bool = True) -> np.ndarray:
        """Mean-pooled sentence vectors ``(len(texts), hidden)`` float32, optionally unit length."""
        ids = self.tokenize(texts)
        out = np.zeros((len(ids), self.hidden), dtype=_F)

        def pool_batch(chunk: list[int], matrix: np.ndarray, lengths: np.ndarray, states: np.ndarray) -> None:
            weights = (np.arange(matrix.shape[1])[None, :] < lengths[:, None]).astype(_F)
            summed = np.einsum("bt,bth->bh", weights, states)
            counts = np.maximum(weights.sum(axis=1, keepdims=True), _F(1e-9))
            out[chunk] = summed / counts

        self._run(ids, batch_size, pool_batch)
        if normalize:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out /= np.maximum(norms, _F(1e-12))
        return out

    def token_vectors(self, texts: Sequence[str], batch_size: int = 32) -> list[np.ndarray]:
        """Last hidden state per token, one ``(n_tokens, hidden)`` float32 array per text."""
        ids = self.tokenize(texts)
        result: list[np.ndarray] = [_NO_TOKENS] * len(ids)  # every slot is filled by a batch

        def keep(chunk: list[int], matrix: np.ndarray, lengths: np.ndarray, states: np.ndarray) -> None:
            for row, i in enumerate(chunk):
                result[i] = np.ascontiguousarray(states[row, : len(ids[i])])

        self._run(ids, batch_size, keep)
        return result

    def _run(self, ids: list[np.ndarray], batch_size: int, consume: _Consumer) -> None:
        """Forward every batch and hand ``(chunk, matrix, lengths, states)`` to ``consume``.

        With several batches, several threads and OpenBLAS' per-thread switch available,
        whole batches run in parallel on the pool's threads, each with single-threaded
        BLAS (robust on a loaded machine: no BLAS threads spinning against each other);
        otherwise batches run one after the other, BLAS using its own threads.
        """
        batches = list(self._batches(ids, batch_size))
        if len(batches) > 1 and self._pool.threads > 1 and _blas_local_threads() is not None:

            def work(batch: tuple[list[int], np.ndarray, np.ndarray]) -> None:
                _single_threaded_blas()
                chunk, matrix, lengths = batch
                consume(chunk, matrix, lengths, self.forward(matrix, lengths, parallel=False))

            self._pool.each(work, batches)
            return
        for chunk, matrix, lengths in batches:
            consume(chunk, matrix, lengths, self.forward(matrix, lengths))
