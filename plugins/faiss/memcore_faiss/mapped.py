"""Opening a saved faiss file memory-mapped: a reopen reads almost nothing.

``faiss.read_index`` copies the whole file into memory: at 100k x 384 an HNSW32 file
(180 MB: the graph and its own copy of the vectors) took 0.35-0.5 s to read back, most of
a reopen. Read with ``IO_FLAG_MMAP_IFC`` (faiss versions that have it; 1.15.1 here), the
flat codes (the vectors of ``IndexFlat``, an HNSW's storage, PQ/SQ codes, an IVF index's
lists) and the HNSW graph's neighbour lists become views of a read-only mapping of the file
(measured 8-20 ms for that file).

A view cannot grow or change (faiss aborts the process on a resize of a viewed vector), so
an index loaded this way is *mapped* until its first write: :meth:`MappedFile.owned`
then reads the same file into memory the ordinary way (what every load cost before) and
the index swaps it in. The file is opened once by descriptor and both reads go through
``/proc/self/fd/N``: they see the same inode even when a later save has replaced the file
(saves write a new file and rename it over the old one; the old inode lives on while it
is open or mapped, and its content is what was loaded).

The mapping's pages are asked for ahead (``MADV_POPULATE_READ``, Linux 5.14+: ~6 ms for
150 MB in the page cache) for the vectors, as the ``exact`` index does for its file: the
first filtered query that gathers scattered rows would otherwise pay a page fault per row.

Only where ``/proc/self/fd`` exists (Linux) and faiss has the flag; elsewhere the file is
read into memory as before.
"""

from __future__ import annotations

import ctypes
import os
import sys
import weakref
from pathlib import Path
from typing import Any


from memcore.plugin import get_logger

__all__ = ["MappedFile", "open_mapped", "populate", "mapped_spans"]

log = get_logger("memcore.faiss")

_FD_DIR = Path("/proc/self/fd")
MADV_POPULATE_READ = 22
"""Linux' ``MADV_POPULATE_READ`` (5.14+): map the pages in now, read-faulting them."""
_PAGE = 4096


class MappedFile:
    """The descriptor of a faiss file an index was read from memory-mapped."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.fd: int | None = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        self._closer = weakref.finalize(self, os.close, self.fd)

    def source(self) -> str:
        """A name of the opened inode (whatever the path names now)."""
        return str(_FD_DIR / str(self.fd))

    def owned(self, faiss: Any) -> Any:
        """The same index read into memory (owned, writable)."""
        return faiss.read_index(self.source())

    def close(self) -> None:
        """Close the descriptor (the mapping faiss holds stays valid until the index goes)."""
        self._closer()
        self.fd = None


def open_mapped(faiss: Any, path: Path) -> tuple[Any, MappedFile] | None:
    """``faiss.read_index`` of ``path`` memory-mapped plus its :class:`MappedFile`, or None
    when this platform or faiss cannot (the caller then reads it the ordinary way).
    ``RuntimeError`` from faiss (an unreadable file) is raised as is."""
    flag = getattr(faiss, "IO_FLAG_MMAP_IFC", None)
    if flag is None or not _FD_DIR.is_dir():
        return None
    handle = MappedFile(path)
    try:
        index = faiss.read_index(handle.source(), flag)
    except BaseException:
        handle.close()
        raise
    return index, handle


_madvise: Any = None


def _libc_madvise() -> Any:
    global _madvise
    if _madvise is None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            func = libc.madvise
            func.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            func.restype = ctypes.c_int
            _madvise = func
        except (OSError, AttributeError):
            _madvise = False
    return _madvise


def populate(span: tuple[int, int]) -> bool:
    """Map in the pages of ``span`` (address, bytes: within a file mapping) now, where the
    kernel can (``MADV_POPULATE_READ``); False when it cannot (they are then faulted in on use)."""
    address, nbytes = span
    if not sys.platform.startswith("linux") or nbytes <= 0:
        return False
    madvise = _libc_madvise()
    if not madvise:
        return False
    start = address & ~(_PAGE - 1)
    if madvise(start, address + nbytes - start, MADV_POPULATE_READ) != 0:
        log.debug("faiss.populate_failed", errno=ctypes.get_errno())
        return False
    return True


def _span(faiss: Any, vector: Any, itemsize: int) -> tuple[int, int] | None:
    """(address, bytes) of a faiss ``MaybeOwnedVector`` that is a view (None: owned or empty)."""
    if getattr(vector, "is_owned", True) or not vector.size():
        return None
    view = faiss.rev_swig_ptr(vector.data(), vector.size())
    return int(view.ctypes.data), vector.size() * itemsize


def mapped_spans(faiss: Any, index: Any) -> list[tuple[int, int]]:
    """(address, bytes) of what a mapped read left as views of the file: flat codes (vectors,
    PQ/SQ codes, an IVF quantizer's centroids), HNSW neighbour lists, the codes of an IVF
    index's inverted lists (one span from the first to the last), found through ID maps, pre-transforms,
    HNSW storage and IVF quantizers. Empty for an index in memory."""
    out: list[tuple[int, int] | None] = []
    pending = [index]
    while pending:
        node = faiss.downcast_index(pending.pop())
        if isinstance(node, (faiss.IndexIDMap, faiss.IndexIDMap2, faiss.IndexPreTransform)):
            pending.append(node.index)
        elif isinstance(node, faiss.IndexHNSW):
            out.append(_span(faiss, node.hnsw.neighbors, 4))
            if node.storage is not None:
                pending.append(node.storage)
        elif isinstance(node, faiss.IndexIVF):
            pending.append(node.quantizer)
            out.append(_lists_span(faiss, node))
        elif isinstance(node, faiss.IndexFlatCodes):
            out.append(_span(faiss, node.codes, 1))
    return [span for span in out if span is not None]


def _lists_span(faiss: Any, ivf: Any) -> tuple[int, int] | None:
    """One span over the mapped codes of the inverted lists of ``ivf`` (the bulk of them)."""
    lists = faiss.downcast_InvertedLists(ivf.invlists)
    if not isinstance(lists, faiss.ArrayInvertedLists):
        return None
    spans = [_span(faiss, lists.codes.at(i), 1) for i in range(lists.nlist)]
    found = [span for span in spans if span is not None]
    if not found:
        return None
    low = min(address for address, _ in found)
    return low, max(address + nbytes for address, nbytes in found) - low
