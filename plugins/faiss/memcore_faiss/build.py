"""Building faiss indexes from a :class:`FaissIndexConfig`, and what each kind can do.

:func:`make_layout` builds one empty index from the factory string (a bad string is a
:class:`memcore.ConfigError`) and records its traits in a :class:`Layout`: the search
family (``hnsw``/``ivf``/``other``), whether it takes ids natively (IVF) or needs an
``IndexIDMap2`` wrapper, whether ``remove_ids`` works (else tombstones), whether it needs
training and from how many vectors. :meth:`Layout.new_index` then builds empty indexes
of that layout with the configured parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memcore.plugin import ConfigError

from .config import FaissIndexConfig
from .defaults import DEFAULT_EF_CONSTRUCTION
from .grammar import check_dimension, parse_factory
from .training import default_train_sample, skip_polysemous

__all__ = ["Layout", "make_layout", "import_faiss", "DEFAULT_MIN_TRAIN", "TRAIN_POINTS_PER_CENTROID"]

TRAIN_POINTS_PER_CENTROID = 39
"""faiss warns when k-means gets fewer than 39 points per centroid."""

DEFAULT_MIN_TRAIN = 1000
"""min_train of trainable indexes without centroids (scalar quantizers, PCA...)."""


def import_faiss() -> Any:
    """The faiss module (imported on first use only: it costs ~0.3 s)."""
    try:
        import faiss
    except ImportError as exc:  # pragma: no cover - the dependency is declared
        raise ConfigError(f"the faiss index needs faiss-cpu: pip install -c constraints.txt faiss-cpu ({exc})") from None
    return faiss


@dataclass(frozen=True)
class Layout:
    """What a factory string builds and how the index drives it."""

    faiss: Any
    config: FaissIndexConfig
    dim: int
    metric_type: int
    family: str  # "hnsw" | "ivf" | "other"
    native_ids: bool  # add_with_ids works without an IDMap wrapper (IVF)
    removable: bool  # remove_ids works; otherwise tombstones + compaction
    positional: bool  # no remove_ids (HNSW...): labels are faiss' own positions, no IDMap wrapper
    needs_training: bool
    min_train: int
    location: str
    train_sample: int = 0
    """At most this many vectors train the index (see :mod:`.training`); 0 when it needs no training."""

    def new_index(self) -> Any:
        """A new empty index of this layout: IVF as is (native ids), positional kinds as is,
        everything else inside an ``IndexIDMap2``."""
        faiss = self.faiss
        base = faiss.index_factory(self.dim, self.config.factory, self.metric_type)
        self.configure(base)
        if self.positional:
            return base
        if self.native_ids:
            ivf = faiss.extract_index_ivf(base)
            ivf.set_direct_map_type(faiss.DirectMap.Hashtable)  # reconstruct(label) for exact paths
            return base
        return faiss.IndexIDMap2(base)

    def new_flat(self) -> Any:
        """An exact IDMap2(Flat) with the same metric: the buffer of an untrained index."""
        faiss = self.faiss
        return faiss.IndexIDMap2(faiss.IndexFlat(self.dim, self.metric_type))

    def inner(self, index: Any) -> Any:
        """The index inside the IDMap2 wrapper (``index`` itself when not wrapped)."""
        return self.faiss.downcast_index(index.index) if isinstance(index, self.faiss.IndexIDMap2) else index

    def configure(self, base: Any) -> None:
        """Apply efConstruction, efSearch, nprobe and the generic ``params`` to ``base``, and
        turn off polysemous training (:func:`.training.skip_polysemous`)."""
        faiss = self.faiss
        cfg = self.config
        skip_polysemous(faiss, base)
        core = _core(faiss, base)
        if hasattr(core, "hnsw"):
            core.hnsw.efConstruction = cfg.ef_construction if cfg.ef_construction is not None else DEFAULT_EF_CONSTRUCTION
        if cfg.ef_search is not None and hasattr(core, "hnsw"):
            core.hnsw.efSearch = cfg.ef_search
        if cfg.nprobe is not None and self.family == "ivf":
            faiss.extract_index_ivf(base).nprobe = cfg.nprobe
        if cfg.params:
            space = faiss.ParameterSpace()
            for name, value in cfg.params.items():
                try:
                    space.set_index_parameter(base, name, float(value))
                except RuntimeError as exc:
                    raise ConfigError(f"faiss cannot set {name}={value} on {cfg.factory!r}: {_last_line(exc)}", location=f"{self.location}.params") from None

    def reapply(self, index: Any) -> None:
        """Apply the search-time settings to a loaded index (the config is the source of truth)."""
        base = self.inner(index)
        core = _core(self.faiss, base)
        if self.config.ef_search is not None and hasattr(core, "hnsw"):
            core.hnsw.efSearch = self.config.ef_search
        if self.config.nprobe is not None and self.family == "ivf":
            self.faiss.extract_index_ivf(base).nprobe = self.config.nprobe
        if self.config.params:
            space = self.faiss.ParameterSpace()
            for name, value in self.config.params.items():
                space.set_index_parameter(base, name, float(value))


def _core(faiss: Any, base: Any) -> Any:
    """The index under any IndexPreTransform chain, downcast to its concrete class."""
    core = faiss.downcast_index(base)
    while isinstance(core, faiss.IndexPreTransform):
        core = faiss.downcast_index(core.index)
    return core


def _last_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def _min_train_floor(faiss: Any, core: Any) -> tuple[int, int]:
    """(hard minimum, recommended) number of training vectors for ``core``."""
    centroids = []
    try:
        centroids.append(int(faiss.extract_index_ivf(core).nlist))
    except RuntimeError:
        pass
    for holder in (core, getattr(core, "storage", None)):
        if holder is None:
            continue
        holder = faiss.downcast_index(holder) if isinstance(holder, faiss.Index) else holder
        pq = getattr(holder, "pq", None)
        if pq is not None:
            centroids.append(int(pq.ksub))
    if not centroids:
        return 1, DEFAULT_MIN_TRAIN
    return max(centroids), TRAIN_POINTS_PER_CENTROID * max(centroids)


def make_layout(config: FaissIndexConfig, dim: int, name: str) -> Layout:
    """Build one empty index from ``config.factory`` and describe it (ConfigError if faiss refuses)."""
    location = f"indexes.{name}"
    try:
        check_dimension(parse_factory(config.factory), dim)
    except ValueError as exc:
        raise ConfigError(f"{config.factory!r} for dimension {dim}: {exc}", location=f"{location}.factory") from None
    faiss = import_faiss()
    metric_type = faiss.METRIC_L2 if config.metric == "l2" else faiss.METRIC_INNER_PRODUCT
    try:
        base = faiss.index_factory(dim, config.factory, metric_type)
    except RuntimeError as exc:
        raise ConfigError(
            f"faiss cannot build {config.factory!r} (metric {config.metric}, dimension {dim}): {_last_line(exc)}",
            location=f"{location}.factory",
        ) from None
    core = _core(faiss, base)
    if core.metric_type != metric_type or base.metric_type != metric_type:
        raise ConfigError(
            f"faiss builds {config.factory!r} with the L2 metric only, not metric {config.metric!r} "
            '(use metric = "l2": on normalised vectors it ranks like cosine)',
            location=f"{location}.metric",
        )
    try:
        faiss.extract_index_ivf(base)
        family = "ivf"
    except RuntimeError:
        family = "hnsw" if isinstance(core, faiss.IndexHNSW) else "other"
    if config.ef_search is not None and family != "hnsw":
        raise ConfigError(f"ef_search applies to HNSW indexes, not {config.factory!r}", location=f"{location}.ef_search")
    if config.ef_construction is not None and family != "hnsw":
        raise ConfigError(f"ef_construction applies to HNSW indexes, not {config.factory!r}", location=f"{location}.ef_construction")
    if config.nprobe is not None and family != "ivf":
        raise ConfigError(f"nprobe applies to IVF indexes, not {config.factory!r}", location=f"{location}.nprobe")
    native_ids = family == "ivf"
    wrapped = base if native_ids else faiss.IndexIDMap2(base)
    try:  # probe: HNSW, NSG... raise "not implemented" even when empty
        wrapped.remove_ids(faiss.IDSelectorRange(0, 0))
        removable = True
    except RuntimeError:
        removable = False
    needs_training = not base.is_trained
    floor, recommended = _min_train_floor(faiss, core)
    min_train = config.min_train if config.min_train is not None else recommended
    if needs_training and min_train < floor:
        raise ConfigError(
            f"min_train={min_train} is below the {floor} centroids {config.factory!r} trains (faiss recommends {recommended})",
            location=f"{location}.min_train",
        )
    train_sample = config.train_sample if config.train_sample is not None else default_train_sample(floor)
    if needs_training and train_sample < floor:
        raise ConfigError(
            f"train_sample={train_sample} is below the {floor} centroids {config.factory!r} trains",
            location=f"{location}.train_sample",
        )
    layout = Layout(
        faiss=faiss,
        config=config,
        dim=dim,
        metric_type=metric_type,
        family=family,
        native_ids=native_ids,
        removable=removable,
        positional=not native_ids and not removable,
        needs_training=needs_training,
        min_train=min_train if needs_training else 0,
        location=location,
        train_sample=train_sample if needs_training else 0,
    )
    layout.configure(base)  # checks ``params`` once, with a clear error
    return layout
