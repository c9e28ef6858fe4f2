"""``FusionContract``: the behaviour every :class:`memcore.Fusion` must have."""

from __future__ import annotations

import copy
import math
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import pytest

from ..errors import ValidationError
from ..model._checks import validate_k
from ..retrieval._fusion import Fusion
from ..model._query import Contribution, Hit
from ..model._query import Query
from ..model._record import Scope
from ..retrieval._pipeline import Pipeline

if TYPE_CHECKING:
    from ..collection._collection import Collection

__all__ = ["FusionContract", "make_ranked_lists", "fused"]


def fused(
    collection: "Collection",
    indexes: Sequence[str],
    query: Query | str | Mapping[str, Any],
    *,
    fusion: str | Mapping[str, Any] = "rrf",
    k: int = 10,
    depth: int | None = None,
    where: Mapping[str, Any] | None = None,
    scope: Scope | Mapping[str, Any] | None = None,
    with_records: bool = True,
) -> list[Hit]:
    """The fused hits of several indexes for one query: a :class:`memcore.Pipeline` of one
    ``recall`` stage per index (``depth`` hits each, default ``max(k, 50)``, each list named
    after its index) then a ``fuse`` stage (``fusion``: a registered kind or a table), cut to
    ``k`` -- what the ``advanced`` preset runs, for tests of a fusion or an index."""
    depth = validate_k(depth if depth is not None else max(validate_k(k), 50))
    if not indexes:
        raise ValidationError("fused needs at least one index")
    stages: list[dict[str, Any]] = [{"kind": "recall", "index": name, "k": depth} for name in indexes]
    stages.append({"kind": "fuse", "fusion": fusion if isinstance(fusion, str) else dict(fusion), "k": k})
    pipeline = Pipeline.from_config(stages, collection.registry)
    return pipeline.run(collection, query, k=k, where=where, scope=scope, with_records=with_records)


def make_ranked_lists(seed: int = 0, sizes: tuple[int, ...] = (8, 6, 10), pool: int = 16) -> dict[str, list[Hit]]:
    """Named ranked lists over a shared pool of ids (overlapping), best first, unique ids each.

    Each list has its own score scale (similarities, distances as negatives, raw BM25-like
    numbers) and hits carry the provenance a recall stage gives them.
    """
    rng = np.random.default_rng(seed)
    names = ["dense", "sparse", "graph", "extra", "more"]
    lists: dict[str, list[Hit]] = {}
    for i, size in enumerate(sizes):
        name = names[i] if i < len(names) else f"list{i}"
        ids = [f"d{j}" for j in rng.choice(pool, size=min(size, pool), replace=False)]
        scale = (1.0, -3.0, 12.0, 0.5, 7.0)[i % 5]
        base = np.sort(rng.random(len(ids)))[::-1]
        scores = (base if scale > 0 else base - 1.0) * abs(scale)
        lists[name] = [
            Hit(rid, float(s), raw=float(s), source=name, provenance=(Contribution(name, rank, float(s)),))
            for rank, (rid, s) in enumerate(zip(ids, scores), start=1)
        ]
    return lists


def _key(hits: list[Hit]) -> list[tuple[Any, ...]]:
    return [(h.id, float(h.score), tuple((c.source, c.rank, c.score) for c in h.provenance)) for h in hits]


class FusionContract:
    """Contract tests for a fusion strategy. Subclass it and provide ONE fixture, ``fusion``:
    the :class:`memcore.Fusion` to check::

        from memcore.testing import FusionContract

        class TestMyFusion(FusionContract):
            @pytest.fixture
            def fusion(self):
                return MyFusion(MyFusionConfig())

    Checked: at most ``k`` hits, scores best first, unique ids taken from the inputs, each
    fused hit's ``provenance`` lists exactly the input lists containing its id with its
    1-based rank and score there, empty input gives empty output, the result is
    deterministic, the inputs are not modified, and one list keeps its own order
    (``single_list_keeps_order``, default True).
    """

    single_list_keeps_order: bool = True

    @pytest.fixture
    def fusion(self) -> Fusion:
        """Override: return the Fusion under test."""
        pytest.fail(f"{type(self).__name__} must define the fixture 'fusion' (see FusionContract)")

    def input_lists(self, seed: int = 0) -> dict[str, list[Hit]]:
        """The lists the suite fuses (overridable)."""
        return make_ranked_lists(seed)

    def test_is_a_fusion(self, fusion: Fusion) -> None:
        assert isinstance(fusion, Fusion)

    @pytest.mark.parametrize("k", [1, 3, 10, 100])
    def test_output_at_most_k_sorted_unique(self, fusion: Fusion, k: Any) -> None:
        for seed in range(3):
            lists = self.input_lists(seed)
            fused = fusion.fuse(lists, k)
            assert isinstance(fused, list)
            assert len(fused) <= k
            assert all(isinstance(h, Hit) for h in fused)
            scores = [float(h.score) for h in fused]
            assert all(math.isfinite(s) for s in scores)
            assert all(a >= b for a, b in zip(scores, scores[1:])), f"not sorted by score: {scores}"
            ids = [h.id for h in fused]
            assert len(ids) == len(set(ids)), f"duplicate ids: {ids}"
            union = {h.id for hits in lists.values() for h in hits}
            assert set(ids) <= union
            if k >= 3:
                assert fused, "fusion of non-empty lists returned nothing"

    def test_provenance_lists_every_contributing_list(self, fusion: Fusion) -> None:
        for seed in range(3):
            lists = self.input_lists(seed)
            for hit in fusion.fuse(lists, 100):
                expected = {(name, rank): float(h.score) for name, hits in lists.items() for rank, h in enumerate(hits, start=1) if h.id == hit.id}
                assert isinstance(hit.provenance, tuple)
                assert all(isinstance(c, Contribution) for c in hit.provenance)
                got = [(c.source, c.rank) for c in hit.provenance]
                assert len(got) == len(set(got)), f"{hit.id}: repeated contribution {got}"
                assert set(got) == set(expected), f"{hit.id}: provenance {got}, expected {sorted(expected)}"
                for c in hit.provenance:
                    assert float(c.score) == pytest.approx(expected[(c.source, c.rank)])

    def test_empty_input_gives_empty_output(self, fusion: Fusion) -> None:
        assert fusion.fuse({}, 10) == []
        assert fusion.fuse({"a": [], "b": []}, 10) == []

    def test_one_empty_list_among_others(self, fusion: Fusion) -> None:
        lists = self.input_lists(1)
        with_empty = {**lists, "empty": []}
        fused = fusion.fuse(with_empty, 100)
        assert all(c.source != "empty" for h in fused for c in h.provenance)
        assert {h.id for h in fused} <= {h.id for hits in lists.values() for h in hits}

    def test_single_list(self, fusion: Fusion) -> None:
        lists = self.input_lists(2)
        name, hits = next(iter(lists.items()))
        fused = fusion.fuse({name: hits}, 100)
        assert {h.id for h in fused} <= {h.id for h in hits}
        if self.single_list_keeps_order:
            assert [h.id for h in fused] == [h.id for h in hits][: len(fused)]

    def test_deterministic(self, fusion: Fusion) -> None:
        lists = self.input_lists(0)
        first = fusion.fuse(lists, 10)
        second = fusion.fuse(copy.deepcopy(lists), 10)
        third = fusion(lists, 10)
        assert _key(first) == _key(second) == _key(third)

    def test_does_not_modify_inputs(self, fusion: Fusion) -> None:
        lists = self.input_lists(0)
        before = {name: _key(hits) for name, hits in lists.items()}
        fusion.fuse(lists, 5)
        assert {name: _key(hits) for name, hits in lists.items()} == before
