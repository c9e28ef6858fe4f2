"""Reading a BEIR-layout folder: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``.

- ``corpus.jsonl``: one ``{"_id", "title"?, "text"}`` object per line;
- ``queries.jsonl``: one ``{"_id", "text"}`` object per line (other fields ignored);
- ``qrels/<split>.tsv``: tab-separated ``query-id corpus-id score`` with a header line
  (a first line whose score column is not a number is taken as the header).

Every problem is a :class:`memcore.MemcoreError` naming the file and line: a missing file
(:class:`NotFoundError`), bad JSON or a missing field (:class:`ValidationError`), a corpus
id used twice for different documents (:class:`DuplicateIdError`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DuplicateIdError, NotFoundError, ValidationError
from .._util.jsonl import read_jsonl
from ..model._record import Record

__all__ = ["BeirData", "load_beir", "read_qrels", "corpus_records"]


@dataclass
class BeirData:
    """A loaded BEIR split: the corpus (dicts with ``_id``, ``title``, ``text``, file
    order), the queries (id -> text, file order) and the qrels (query id -> doc id -> grade)."""

    corpus: list[dict[str, str]]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    split: str = "test"
    path: Path | None = None
    missing_queries: list[str] = field(default_factory=list)

    def judged_queries(self) -> list[tuple[str, str]]:
        """``(id, text)`` of every query that has a relevant document (rel > 0) in the qrels,
        in the order of ``queries.jsonl``."""
        judged = {q for q, rels in self.qrels.items() if any(rel > 0 for rel in rels.values())}
        return [(qid, text) for qid, text in self.queries.items() if qid in judged]


def _need(path: Path, what: str) -> Path:
    if not path.is_file():
        raise NotFoundError(f"{what} not found: {path} (a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/<split>.tsv)")
    return path


def _field(item: dict[str, Any], name: str, where: str, *, required: bool = True) -> str:
    value = item.get(name)
    if value is None and not required:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and name == "_id":
        value = str(value)
    if not isinstance(value, str):
        raise ValidationError(f"{where}: field {name!r} must be a string" + (" (it is missing)" if value is None else ""))
    return value


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """Query id -> doc id -> integer grade, from a BEIR qrels TSV."""
    qrels: dict[str, dict[str, int]] = {}
    first = True
    with open(path, encoding="utf-8-sig") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            header, first = first, False
            parts = line.rstrip("\r\n").split("\t")
            if len(parts) != 3:
                raise ValidationError(f"{path}:{number}: expected 3 tab-separated columns (query-id, corpus-id, score), got {len(parts)}")
            qid, doc, grade = (p.strip() for p in parts)
            try:
                value = float(grade)
            except ValueError:
                if header:
                    continue  # the header line
                raise ValidationError(f"{path}:{number}: score {grade!r} is not a number") from None
            if value != int(value):
                raise ValidationError(f"{path}:{number}: score {grade!r} is not an integer grade")
            if not qid or not doc:
                raise ValidationError(f"{path}:{number}: empty query-id or corpus-id")
            qrels.setdefault(qid, {})[doc] = int(value)
    return qrels


def load_beir(data_dir: str | Path, split: str = "test") -> BeirData:
    """Load a BEIR folder's corpus, queries and the qrels of ``split``."""
    root = Path(data_dir)
    if not root.is_dir():
        raise NotFoundError(f"BEIR folder not found: {root}")
    qrels_path = _need(root / "qrels" / f"{split}.tsv", f"qrels of split {split!r}")
    corpus: list[dict[str, str]] = []
    seen: dict[str, tuple[str, str]] = {}
    for _, where, item in read_jsonl(_need(root / "corpus.jsonl", "corpus")):
        doc_id = _field(item, "_id", where)
        title, text = _field(item, "title", where, required=False), _field(item, "text", where, required=False)
        if doc_id in seen:
            if seen[doc_id] != (title, text):
                raise DuplicateIdError(f"{where}: corpus id {doc_id!r} is used twice for different documents")
            continue
        seen[doc_id] = (title, text)
        corpus.append({"_id": doc_id, "title": title, "text": text})
    queries: dict[str, str] = {}
    for _, where, item in read_jsonl(_need(root / "queries.jsonl", "queries")):
        queries[_field(item, "_id", where)] = _field(item, "text", where)
    qrels = read_qrels(qrels_path)
    missing = sorted(q for q in qrels if q not in queries)
    return BeirData(corpus, queries, qrels, split, root, missing)


def corpus_records(data: BeirData) -> tuple[list[Record], int]:
    """One record per corpus document: id ``_id``, text ``title + " " + text``, metadata
    ``{"title": title}``; documents with neither title nor text are skipped (counted)."""
    records = []
    skipped = 0
    for doc in data.corpus:
        text = f"{doc['title']} {doc['text']}".strip()
        if not text:
            skipped += 1
            continue
        records.append(Record.create(text, id=doc["_id"], metadata={"title": doc["title"]}))
    return records, skipped
