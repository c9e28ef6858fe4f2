"""The factory strings this plugin accepts: a small grammar with bounded parameters.

faiss' ``index_factory`` accepts strings that build indexes which later abort the process
(``HNSW0``: a faiss assertion, SIGABRT, on the first add). A collection stores its index
definitions, so such a string would abort every later open too. Only strings of this
grammar reach faiss, with every number inside bounds that faiss handles:

    factory   := (transform ",")* main
    transform := PCA[W][R]<d> | OPQ<m>[_<d>] | RR<d> | L2norm
    main      := Flat
               | HNSW<M> [("," | "_") storage]
               | IVF<nlist>[_HNSW<M>] "," storage
               | storage
    storage   := Flat | SQ4 | SQ6 | SQ8 | SQfp16 | PQ<m>[x<nbits>]

Bounds: 2 <= M <= 256, 1 <= nlist <= 65536, 4 <= nbits <= 12, and against the vector
dimension (:func:`check_dimension`): transform outputs at most the input dimension, PQ
and OPQ sub-quantizers divide the dimension they see.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["FactorySpec", "parse_factory", "check_dimension", "HNSW_M", "IVF_NLIST", "PQ_NBITS"]

HNSW_M = (2, 256)
"""Allowed HNSW neighbours per node (M = 1 divides by log(1) = 0 in faiss' level sampling)."""
IVF_NLIST = (1, 65536)
"""Allowed IVF inverted lists."""
PQ_NBITS = (4, 12)
"""Allowed bits per PQ code (below 4 faiss fails at search on 2-d sub-vectors; training needs 39 * 2**nbits vectors)."""

_TRANSFORM = re.compile(r"^(?:(?P<pca>PCAW?R?)(?P<pca_d>\d+)|OPQ(?P<opq_m>\d+)(?:_(?P<opq_d>\d+))?|RR(?P<rr_d>\d+)|(?P<l2norm>L2norm))$")
_STORAGE = r"(?:Flat|SQ4|SQ6|SQ8|SQfp16|PQ\d+(?:x\d+)?)"
_MAIN = re.compile(
    rf"^(?:(?P<flat>Flat)|HNSW(?P<hnsw_m>\d+)(?:[,_](?P<hnsw_storage>{_STORAGE}))?"
    rf"|IVF(?P<nlist>\d+)(?:_HNSW(?P<quantizer_m>\d+))?,(?P<ivf_storage>{_STORAGE})|(?P<storage>{_STORAGE}))$"
)
_PQ = re.compile(r"^PQ(?P<m>\d+)(?:x(?P<nbits>\d+))?$")


@dataclass(frozen=True)
class FactorySpec:
    """A parsed factory string: its transforms ``(kind, m, d)`` and the PQ ``(m, nbits)`` of its storage."""

    text: str
    transforms: tuple[tuple[str, int, int], ...]
    pq: tuple[int, int] | None
    exact_vectors: bool = False
    """True when the index keeps the vectors as given (no transform, ``Flat`` storage): its
    distances are exact, only the candidates it visits are approximate."""


def _number(text: str, what: str, low: int, high: int) -> int:
    value = int(text)
    if text != str(value) or not low <= value <= high:
        raise ValueError(f"{what} must be an integer from {low} to {high} without leading zeros, got {text!r}")
    return value


def _pq(storage: str | None) -> tuple[int, int] | None:
    match = _PQ.match(storage or "")
    if match is None:
        return None
    m = _number(match["m"], "PQ sub-quantizers", 1, 65536)
    nbits = _number(match["nbits"], "PQ bits", *PQ_NBITS) if match["nbits"] else 8
    return m, nbits


def parse_factory(text: str) -> FactorySpec:
    """Parse and bound-check a factory string (ValueError with the reason when refused)."""
    if not isinstance(text, str) or not text or text != text.strip() or len(text) > 200:
        raise ValueError(f"factory must be a non-empty string of at most 200 characters without surrounding spaces, got {text!r}")
    parts = text.split(",")
    split = -2 if len(parts) >= 2 and _MAIN.match(",".join(parts[-2:])) else -1  # IVF<n>,<storage> spans two parts
    pre, main = parts[:split], ",".join(parts[split:])
    transforms = []
    for part in pre:
        t = _TRANSFORM.match(part)
        if t is None:
            raise ValueError(f"unsupported factory component {part!r}; transforms: PCA<d>, PCAW<d>, PCAR<d>, PCAWR<d>, OPQ<m>[_<d>], RR<d>, L2norm")
        if t["pca"]:
            transforms.append(("PCA", 0, _number(t["pca_d"], "PCA output dimension", 1, 65536)))
        elif t["opq_m"]:
            m = _number(t["opq_m"], "OPQ sub-quantizers", 1, 65536)
            transforms.append(("OPQ", m, _number(t["opq_d"], "OPQ output dimension", 1, 65536) if t["opq_d"] else 0))
        elif t["rr_d"]:
            transforms.append(("RR", 0, _number(t["rr_d"], "RR output dimension", 1, 65536)))
        else:
            transforms.append(("L2norm", 0, 0))
    match = _MAIN.match(main)
    if match is None:
        raise ValueError(
            f"unsupported factory {main!r}; use Flat, HNSW<M>[,storage], IVF<nlist>[_HNSW<M>],storage or a storage "
            "(Flat, SQ4, SQ6, SQ8, SQfp16, PQ<m>[x<nbits>]), optionally after PCA<d>/OPQ<m>/RR<d>/L2norm transforms"
        )
    for key in ("hnsw_m", "quantizer_m"):
        if match[key] is not None:
            _number(match[key], "HNSW M", *HNSW_M)
    if match["nlist"] is not None:
        _number(match["nlist"], "IVF nlist", *IVF_NLIST)
    storage = match["hnsw_storage"] or match["ivf_storage"] or match["storage"]
    pq = _pq(storage)
    return FactorySpec(text, tuple(transforms), pq, exact_vectors=not transforms and storage in (None, "Flat"))


def check_dimension(spec: FactorySpec, dim: int) -> None:
    """Check the parsed factory against the vector dimension (ValueError when faiss would fail or abort)."""
    d = dim
    for kind, m, out in spec.transforms:
        if out and out > d:
            raise ValueError(f"{kind} cannot raise the dimension from {d} to {out}")
        if kind == "OPQ":
            d_out = out or d
            if d_out % m:
                raise ValueError(f"OPQ{m} needs a dimension divisible by {m}, got {d_out}")
        d = out or d
    if spec.pq is not None:
        m, _ = spec.pq
        if m > d or d % m:
            raise ValueError(f"PQ{m} needs a dimension divisible by {m}, got {d}")
