"""memcore-mmr: maximal marginal relevance diversification for memcore pipelines.

Registers, through the ``register_stages`` hook, the stage kind ``mmr``: it re-selects
the working list greedily by ``lambda * relevance - (1 - lambda) * redundancy``, where
relevance is the cosine between the query and a hit (or the hit's normalised score) and
redundancy the largest similarity to the hits already selected. Similarities come from
the hits' stored vectors in one embedding space (read in one batch, so MMR works after a
BM25 or graph recall too), with token Jaccard for records without a vector there.
Only numpy is needed (it comes with memcore).
"""

from __future__ import annotations

import memcore
from memcore.plugin import Register, StageFactory

from .config import MMRConfig
from .select import mmr_select
from .similarity import CandidateSimilarity
from .stage import MMRStage
from .tokens import TokenSets, tokenize

__all__ = ["MMRStage", "MMRConfig", "mmr_select", "CandidateSimilarity", "TokenSets", "tokenize", "register_stages"]
__version__ = "0.1.0"


@memcore.hookimpl
def register_stages(register: Register[StageFactory]) -> None:
    """Register the stage kind ``mmr``."""
    register("mmr", MMRStage, MMRConfig)
