"""One `engram reindex` of a store at a time.

A reindex removes a store's caches (read model, word index, vector index) and builds them again;
two at once would each remove what the other is building. The second waits for the first on an
advisory lock in the cache folder (`<git-dir>/engram/cache/reindex.lock`), then rebuilds from
the event files as they are then; neither fails.

While it runs, a mark in the cache folder (`reindexing.json`) says so; one killed half-way
leaves it, and the next reindex goes on from the vector index it last saved
(`engram.domain.indexing`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..base import layout
from .ledger import locked

if TYPE_CHECKING:
    from .store import Store

REINDEX_LOCK = "reindex.lock"  # in the cache folder: one reindex of a store at a time


@contextlib.contextmanager
def reindexing(store: Store) -> Iterator[None]:
    """Hold the store's reindex lock: a second `engram reindex` waits for the first (each
    removes and rebuilds the caches the other would be building)."""
    folder = layout.cache_dir(store.local_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle = open(folder / REINDEX_LOCK, "ab")  # noqa: SIM115 (held for the block)
    except OSError:
        yield  # a read-only store: its caches are in memory, nothing to share
        return
    with handle, locked(handle):  # the ledger's flock, which skips where there is none
        yield


def stopped_reindex(store: Store) -> bool:
    """Did a reindex of the store begin and not finish, with none running now?"""
    folder = layout.cache_dir(store.local_dir)
    if not (folder / layout.REINDEX_MARK).exists():
        return False
    try:
        import fcntl
    except ImportError:  # no advisory locks here: the mark alone says it
        return True
    try:
        handle = open(folder / REINDEX_LOCK, "ab")  # noqa: SIM115 (closed below)
    except OSError:
        return True
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # a reindex holds the lock: it is running now
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return True
