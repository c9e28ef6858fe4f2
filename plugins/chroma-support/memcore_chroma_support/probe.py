"""The child process of :func:`memcore_chroma_support.manifest.probe_folder`.

``python -m memcore_chroma_support.probe FOLDER COLLECTION`` opens the embedded Chroma
folder, counts the collection, reads up to :data:`SAMPLE` of its vectors and queries each
one (nearest neighbour: itself, at distance ~0). Prints one JSON line and exits 0 when all of
that works; a Chroma error exits 1 with the message on stderr, a crash of Chroma's native
code ends the child with a signal -- either way the parent calls the folder damaged.
"""

from __future__ import annotations

import json
import sys

SAMPLE = 64


def main(folder: str, name: str) -> int:
    """Run the probe; the process exit status."""
    import numpy as np

    from .connection import ChromaConnection, close_client, open_client

    client = open_client(ChromaConnection(), folder)
    collection = client.get_collection(name=name, embedding_function=None)
    count = int(collection.count())
    rows = collection.get(limit=SAMPLE, include=["embeddings"])
    vectors = np.asarray(rows["embeddings"], dtype=np.float32) if len(rows["ids"]) else np.zeros((0, 0), np.float32)
    if len(rows["ids"]) != min(count, SAMPLE) or not np.isfinite(vectors).all():
        print(f"count {count} but {len(rows['ids'])} rows read, or non-finite vectors", file=sys.stderr)
        return 1
    if len(vectors):
        found = collection.query(query_embeddings=vectors, n_results=1, include=["distances"])
        worst = max((d[0] if d else float("inf")) for d in found["distances"])
        if not worst < 1e-3:
            print(f"a stored vector is not its own nearest neighbour (distance {worst})", file=sys.stderr)
            return 1
    close_client(client)
    print(json.dumps({"count": count, "checked": len(rows["ids"])}))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1], sys.argv[2]))
    except Exception as exc:  # noqa: BLE001 - any Chroma error: the folder cannot be used
        print(f"{type(exc).__name__}: {' '.join(str(exc).split())}", file=sys.stderr)
        sys.exit(1)
