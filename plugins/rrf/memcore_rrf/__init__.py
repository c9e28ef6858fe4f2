"""memcore-rrf: rank and score fusion strategies for memcore.

Registers, through the ``register_fusions`` hook:

- ``rrf`` -- reciprocal rank fusion, ``sum over lists of weight / (k + rank)`` (``k``,
  per-list ``weights``): the default fusion of the core's ``fuse`` stage,
  ``Collection.retrieve_multi``, the ``advanced`` preset and the ``hybrid`` service, so
  without this plugin they raise :class:`memcore.UnknownComponentError` with its
  ``pip install`` hint (the core itself only has ``concat``);
- ``weighted`` -- weighted score fusion, each list normalised on its own (minmax, zscore,
  dbsf or none), summed;
- ``dbsf`` -- distribution-based score fusion (3-sigma normalisation per list), summed;
- ``union`` -- the union of the lists, each id scored by its best normalised score.

Every fused hit keeps its rank and score in each input list in ``Hit.provenance``; ties
are broken by id. Usable wherever a fusion is named: the ``fuse`` pipeline stage
(``{kind = "fuse", fusion = {kind = "dbsf"}}``). Only numpy is needed (it comes with memcore).
"""

from __future__ import annotations

import memcore
from memcore.plugin import FusionFactory, Register

from .config import DBSFConfig, ScoreFusionConfig, UnionConfig, WeightedConfig
from .fusions import DistributionBasedFusion, UnionFusion, WeightedFusion
from .normalize import NORMALIZERS, NormalizeOptions
from .rank_fusion import RRFConfig, ReciprocalRankFusion
from .score_fusion import AGGREGATORS, ScoreFusion

__all__ = [
    "ReciprocalRankFusion",
    "RRFConfig",
    "WeightedFusion",
    "WeightedConfig",
    "DistributionBasedFusion",
    "DBSFConfig",
    "UnionFusion",
    "UnionConfig",
    "ScoreFusion",
    "ScoreFusionConfig",
    "NORMALIZERS",
    "NormalizeOptions",
    "AGGREGATORS",
    "register_fusions",
]
__version__ = "0.1.0"


@memcore.hookimpl
def register_fusions(register: Register[FusionFactory]) -> None:
    """Register the fusion kinds ``rrf``, ``weighted``, ``dbsf`` and ``union``."""
    register("rrf", ReciprocalRankFusion, RRFConfig)
    register("weighted", WeightedFusion, WeightedConfig)
    register("dbsf", DistributionBasedFusion, DBSFConfig)
    register("union", UnionFusion, UnionConfig)
