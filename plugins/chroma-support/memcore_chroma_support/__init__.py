"""memcore-chroma-support: what memcore's Chroma-backed plugins share (a library, not a plugin).

memcore-chroma (index kind ``chroma``) and memcore-poincare (index kind ``poincare``,
service ``hyperamy``) both keep their data in Chroma collections. Plugins never import
each other, so the code they share lives in this distribution, which both depend on and
which registers nothing (no ``memcore`` entry point):

- :class:`ChromaConnection`, :func:`open_client`: the connection settings (embedded or a
  Chroma server) and the client they open;
- :class:`CollectionHome`: where an index's collection lives across saves, loads,
  rebuilds and drops;
- :func:`chroma_server`: a real ``chroma run`` on a free 127.0.0.1 port (tests, benchmarks;
  the pytest fixture is in :mod:`memcore_chroma_support.testing`).

Importing this package imports no chromadb.
"""

from __future__ import annotations

from .connection import ChromaConnection, chroma_error_types, close_client, import_chromadb, open_client
from .home import CHROMA_DIR, STATE_FILE, CollectionHome, chunks
from .server import chroma_executable, chroma_server, free_port

__all__ = [
    "ChromaConnection",
    "open_client",
    "close_client",
    "import_chromadb",
    "chroma_error_types",
    "CollectionHome",
    "chunks",
    "STATE_FILE",
    "CHROMA_DIR",
    "chroma_server",
    "chroma_executable",
    "free_port",
]
__version__ = "0.1.0"
