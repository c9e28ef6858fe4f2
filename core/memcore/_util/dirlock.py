"""An advisory ``flock`` on a directory, held while its files are written or read.

Several processes may keep their own copy of an index in one folder (the postgres store
shares a memory between processes, each saving its in-process indexes where the memory
lives). A save takes the folder's lock exclusively and a load takes it shared, so two saves
never interleave their files and a load never reads half of one. The lock is on the folder
itself: no lock file is left behind, and the kernel drops it when its holder dies.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

__all__ = ["directory_lock"]


@contextmanager
def directory_lock(directory: Path, *, shared: bool = False) -> Iterator[None]:
    """Hold an exclusive (or ``shared``) ``flock`` on ``directory`` for the ``with`` block,
    waiting for the holders of a conflicting lock. A directory that cannot be opened or locked
    (gone, or a file system without locks) is not locked: the caller's own checks still apply."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        except OSError:  # no locks on this file system (ENOLCK): go on unlocked, as above
            pass
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
