"""The ``bm25`` index against a fresh bm25s index over the same live documents.

The reference is bm25s used the documented way (``bm25s.tokenize`` with stopwords and a
PyStemmer stemmer, ``BM25(k1, b, method).index``), rebuilt from scratch over the live
texts. The index must give the same documents with the same scores after ``merge()``
and, by design, between merges too; docs/architecture.md §9's tolerances (nDCG@10 within 0.002, top-10
overlap >= 0.95) are checked on a corpus whose fresh segment is near the merge threshold.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from memcore.plugin import IndexContext
from memcore import Query, Record
from memcore.testing.data import unique_word

from memcore_bm25.bm25 import BM25Config, BM25Index

ENGLISH = (
    "run running runs runner memory memories remember remembered garden gardens gardening "
    "travel travelled travels coffee coffees city cities paint painting painted"
).split()
STOP = "the and of to in is it that was for".split()


def zipf_texts(n: int, seed: int, vocab: int = 1500) -> list[str]:
    """``n`` texts of 3-40 words drawn from a Zipfian vocabulary (pseudo-words, inflected
    English words, stopwords)."""
    rng = np.random.default_rng(seed)
    words = ENGLISH + STOP + [unique_word(i) for i in range(vocab)]
    p = 1.0 / np.arange(1, len(words) + 1) ** 1.05
    p /= p.sum()
    order = rng.permutation(len(words))  # stopwords and English words at random ranks
    lengths = rng.integers(3, 41, size=n)
    return [" ".join(words[order[j]] for j in rng.choice(len(words), size=m, p=p)) for m in lengths]


class Reference:
    """A fresh bm25s index over ``docs`` (id -> text), built the documented way."""

    def __init__(self, docs: dict[str, str], config: BM25Config):
        import bm25s
        import Stemmer

        self.ids = list(docs)
        self.stemmer = Stemmer.Stemmer(config.stemmer) if config.stemmer else None
        self.stopwords = config.stopwords if isinstance(config.stopwords, str) or config.stopwords is None else list(config.stopwords)
        tokens = bm25s.tokenize(list(docs.values()), stopwords=self.stopwords, stemmer=self.stemmer, show_progress=False)
        self.retriever = bm25s.BM25(k1=config.k1, b=config.b, method=config.method, delta=config.delta)
        self.retriever.index(tokens, show_progress=False)
        inverse = {i: t for t, i in tokens.vocab.items()}
        self.doc_terms = [{inverse[i] for i in doc} for doc in tokens.ids]

    def matches(self, text: str) -> dict[str, float]:
        """Every document sharing a term with ``text`` -> its bm25s score."""
        import bm25s

        terms = bm25s.tokenize([text], stopwords=self.stopwords, stemmer=self.stemmer, return_ids=False, show_progress=False)[0]
        known = [t for t in terms if t in self.retriever.vocab_dict]
        if not known:
            return {}
        scores = self.retriever.get_scores(known)
        wanted = set(known)
        return {rid: float(scores[i]) for i, rid in enumerate(self.ids) if self.doc_terms[i] & wanted}

    def top(self, text: str, k: int) -> list[str]:
        """The ``k`` best ids (ties broken by id)."""
        found = self.matches(text)
        return sorted(found, key=lambda rid: (-found[rid], rid))[:k]


def make_index(**options) -> BM25Index:
    return BM25Index(BM25Config(**options), IndexContext("bm25"))


def records(docs: dict[str, str]) -> list[Record]:
    return [Record.create(text, id=rid) for rid, text in docs.items()]


def queries_for(docs: dict[str, str], n: int, seed: int) -> list[tuple[str, str]]:
    """(query text, target id): three words from a random live document."""
    rng = np.random.default_rng(seed)
    ids = sorted(docs)
    out = []
    for rid in rng.choice(ids, size=n, replace=False):
        words = docs[rid].split()
        out.append((" ".join(rng.choice(words, size=min(3, len(words)), replace=False)), rid))
    return out


def assert_same_as_reference(index: BM25Index, docs: dict[str, str], texts: list[str]) -> None:
    reference = Reference(docs, index.config)
    for text in texts:
        expected = reference.matches(text)
        hits = index.search(Query(text=text), len(docs) + 5)
        got = {h.id: h.score for h in hits}
        assert set(got) == set(expected), f"{text!r}: different documents"
        for rid, score in expected.items():
            assert got[rid] == pytest.approx(score, rel=1e-5, abs=1e-6), f"{text!r}: {rid}"
        assert [h.id for h in hits] == sorted(got, key=lambda rid: (-got[rid], rid))


def churn(index: BM25Index, docs: dict[str, str], seed: int, adds: int, removes: int, replaces: int) -> None:
    """Add, remove and replace documents in ``index`` and mirror it in ``docs``."""
    rng = np.random.default_rng(seed)
    new = {f"n{seed}-{i}": t for i, t in enumerate(zipf_texts(adds, seed + 1))}
    for rid, text in new.items():  # one record at a time, as an agent inserts turns
        index.add([Record.create(text, id=rid)])
    docs.update(new)
    gone = [str(x) for x in rng.choice(sorted(docs), size=removes, replace=False)]
    index.remove(gone + ["never-added"])
    for rid in gone:
        del docs[rid]
    changed = {str(rid): t for rid, t in zip(rng.choice(sorted(docs), size=replaces, replace=False), zipf_texts(replaces, seed + 2))}
    index.add(records(changed))
    docs.update(changed)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"method": "bm25l"},
        {"method": "bm25+", "delta": 1.0},
        {"method": "robertson", "k1": 1.5, "b": 0.9},
        {"method": "atire", "stemmer": "none", "stopwords": "none"},
    ],
    ids=["lucene", "bm25l", "bm25plus", "robertson", "atire-plain"],
)
def test_equal_to_fresh_bm25s_between_and_after_merges(options):
    index = make_index(merge_threshold=10_000, **options)
    docs = {f"d{i}": t for i, t in enumerate(zipf_texts(300, seed=1))}
    index.add(records(docs))
    texts = [q for q, _ in queries_for(docs, 15, seed=2)] + ["running gardens", "the of and", "zzzunknown words"]
    assert_same_as_reference(index, docs, texts)  # everything in the fresh segment
    index.merge()
    assert index.stats()["fresh"] == 0 and index.pending == 0
    assert_same_as_reference(index, docs, texts)  # bm25s scores the merged base itself
    churn(index, docs, seed=3, adds=40, removes=25, replaces=10)
    assert index.pending > 0 and len(index) == len(docs)
    assert_same_as_reference(index, docs, texts)  # base rescored live + fresh segment + tombstones
    index.merge()
    assert index.pending == 0 and index.stats()["base"] == len(docs)
    assert_same_as_reference(index, docs, texts)


@pytest.mark.parametrize("options", [{}, {"method": "bm25l"}], ids=["lucene", "bm25l"])
def test_fresh_segment_scores_follow_every_write_between_searches(options):
    """The fresh segment keeps each term's scores between searches (what bm25s computes at
    build time): every write in between -- add, remove, replace, a remove alone -- must give
    the scores of a fresh bm25s index over the documents live then, for the same queries."""
    index = make_index(merge_threshold=10_000, **options)
    docs = {f"d{i}": t for i, t in enumerate(zipf_texts(200, seed=11))}
    index.add(records(docs))
    texts = [q for q, _ in queries_for(docs, 12, seed=12)] + ["running gardens"]
    for _ in range(2):  # the second pass reads the kept scores
        assert_same_as_reference(index, docs, texts)
    churn(index, docs, seed=13, adds=15, removes=10, replaces=5)
    assert index.merges == 0
    assert_same_as_reference(index, docs, texts)
    gone = sorted(docs)[:3]  # a remove alone: no new document, only the statistics change
    index.remove(gone)
    for rid in gone:
        del docs[rid]
    assert_same_as_reference(index, docs, texts)
    rid = sorted(docs)[0]  # a replace by a text of the same length: same count and total length
    docs[rid] = " ".join(reversed(docs[rid].split()))
    index.add(records({rid: docs[rid]}))
    assert_same_as_reference(index, docs, texts)


def ndcg_at_10(ranking: list[str], relevant: str) -> float:
    """nDCG@10 with one relevant document of grade 1 (ideal DCG = 1)."""
    for rank, rid in enumerate(ranking[:10]):
        if rid == relevant:
            return 1.0 / math.log2(rank + 2)
    return 0.0


def test_between_merges_within_design_tolerances():
    """docs/architecture.md §9 with the default threshold, the fresh segment just below it."""
    index = make_index()
    docs = {f"d{i}": t for i, t in enumerate(zipf_texts(2000, seed=5))}
    index.add(records(docs))
    index.merge()
    merges = index.merges
    churn(index, docs, seed=6, adds=900, removes=60, replaces=30)
    assert index.pending <= index.merge_threshold  # no merge yet: base + fresh + tombstones
    queries = queries_for(docs, 60, seed=7)
    reference = Reference(docs, index.config)
    ours_ndcg, ref_ndcg, overlaps = [], [], []
    for text, target in queries:
        ours = [h.id for h in index.search(Query(text=text), 10)]
        theirs = reference.top(text, 10)
        ours_ndcg.append(ndcg_at_10(ours, target))
        ref_ndcg.append(ndcg_at_10(theirs, target))
        overlaps.append(len(set(ours) & set(theirs)) / max(1, len(theirs)))
    assert index.merges == merges, "a search merged although the threshold was not reached"
    assert abs(np.mean(ours_ndcg) - np.mean(ref_ndcg)) <= 0.002
    assert np.mean(overlaps) >= 0.95


def test_documents_without_terms_count_in_the_average_length():
    index = make_index(merge_threshold=10_000)
    docs = {"e1": "the and of", "e2": "!!", "x": "coffee in the city", "y": "the city of coffee and tea cities"}
    index.add(records(docs))
    assert_same_as_reference(index, docs, ["coffee", "city tea", "the"])
    index.merge()
    assert_same_as_reference(index, docs, ["coffee", "city tea", "the"])
    index.remove(["x", "y"])
    index.merge()  # a base segment without a single term
    assert len(index) == 2 and index.search(Query(text="coffee"), 5) == []
    index.add([Record.create("coffee again", id="z")])
    assert [h.id for h in index.search(Query(text="coffee"), 5)] == ["z"]
