"""Vector search with usearch (cosine). Keys are the memories' own ids as integers."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..base.files import atomic_write, temp_path
from ..storage.events import CROCKFORD
from . import usearch_index

# Below this many vectors a query is compared with every one of them (a few milliseconds at
# tens of thousands of 384-d vectors) rather than walked through the HNSW graph, which can
# leave a memory unreachable. The default of `search.exact_below`.
EXACT_BELOW = 10_000
# The HNSW graph beyond it: links per vector (usearch's "connectivity", M), the breadth of the
# search that links a new vector (expansion_add) and of a query's search (expansion_search).
# Chosen from `benchmarks/hnsw_recall.py` on real embeddings (docs/search.md).
CONNECTIVITY = 32
EXPANSION_ADD = 256
EXPANSION_SEARCH = 128
# Linking vectors into the graph. usearch's parallel insert strands a few of the vectors it
# links (two inserts racing: one links through the other before that one has its lowest level,
# and no search reaches it afterwards): 14 of 100,000 random and 6 of 100,000 clustered vectors on
# two threads, 5 to 41 of 3,000 clustered ones on eight threads, none on one. Only vectors of
# the insert itself were ever stranded: no vector already in the graph lost its way in, in any
# batch measured, and the stranded ones, linked again, stayed reachable through later inserts. So
# a batch of `SERIAL_BELOW` or more is linked on every core, then each of its vectors is searched
# for with its own vector (`unreachable_keys`) and those not found are linked again one thread at
# a time (`relink`), at any size of the graph: one below `search.exact_below` is not searched
# yet, but will be once the store grows. The whole graph is not searched: at 100,000 random
# vectors that took 39 s on two cores, checking 1,000 new ones 0.36 s of their 4.6 s. There,
# 100,000 vectors were linked in 368 s against 710 s by one thread, and 1,000 more into them in
# 4.7 s against 8.9 s. Below `SERIAL_BELOW`, threads gained a few milliseconds at most and lost
# as much on easy vectors (docs/benchmarks.md, "Linking the graph on every core").
LINK_THREADS = (
    len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
)
SERIAL_BELOW = 32
# The reachability check: a vector is reachable when a search with it returns it among the
# `REACH_K` nearest; `BATCH` vectors are searched per call (bounding the answers' memory), first
# with a narrow expansion (`QUICK_EXPANSION`).
REACH_K = 10
BATCH = 8192
DUPLICATE = 1e-6  # cosine distance under which two vectors are the same text's
QUICK_EXPANSION = 16
NEARNESS_KEPT = 200_000  # vectors whose nearness to ordinary text one index keeps in memory
_CROCKFORD = CROCKFORD.lower()  # entity ids are lower case
# Crockford digits to the digits int(..., 32) reads; every other ASCII character to one it refuses.
_TO_DIGITS = {code: "!" for code in range(128)}
_TO_DIGITS |= {ord(c): "0123456789abcdefghijklmnopqrstuv"[i] for i, c in enumerate(_CROCKFORD)}
_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]  # 10 bits -> two characters


def key_of(memory_id: str) -> int:
    """A memory id (12 base32 characters, 60 bits) as the integer usearch keys it by."""
    if memory_id.isascii():
        try:
            return int(memory_id.translate(_TO_DIGITS), 32)
        except ValueError:
            pass
    raise KeyError(memory_id)


def id_of(key: int) -> str:
    pairs = _PAIRS
    return (
        pairs[(key >> 50) & 1023]
        + pairs[(key >> 40) & 1023]
        + pairs[(key >> 30) & 1023]
        + pairs[(key >> 20) & 1023]
        + pairs[(key >> 10) & 1023]
        + pairs[key & 1023]
    )


class VectorIndex:
    """A usearch index plus a small sidecar saying which model filled it and whether fully.

    The sidecar also records the index file's size and modification time as saved: a file
    changed by anything but a save (damage, a copy from elsewhere) is rebuilt, never searched.
    """

    def __init__(self, path: Path, identity: str, dim: int) -> None:
        self.path = path
        self.meta_path = path.with_suffix(".json")
        self.identity = identity
        self.dim = dim
        self.rebuilt = False
        self.index = self._open()
        # How near ordinary text each stored vector lies (`nearness`), worked out once.
        self._near: dict[str, float] = {}

    def _new(self) -> Any:  # a usearch Index: usearch ships no types
        # A saved graph keeps the connectivity it was built with; the expansions are this one's.
        return usearch_index().Index(
            ndim=self.dim,
            metric="cos",
            dtype="f32",
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
            expansion_search=EXPANSION_SEARCH,
        )

    def rebuild_graph(self) -> Linked:
        """Build the graph again from the vectors it holds (nothing is embedded again)."""
        keys = np.asarray(self.index.keys, dtype=np.uint64)
        stored = np.asarray(self.index.get(keys), dtype=np.float32).reshape(len(keys), -1)
        index = self._new()
        linked = link(index, keys, stored)
        self.index = index
        return linked

    def _open(self) -> Any:
        try:
            meta = json.loads(self.meta_path.read_text())
            if (
                meta.get("identity") == self.identity
                and meta.get("dim") == self.dim
                and meta.get("complete")
                and meta.get("file") == file_stamp(self.path)
            ):
                index = self._new()
                index.load(str(self.path))
                if len(index) == meta.get("count"):
                    return index
        except (OSError, ValueError, RuntimeError, AttributeError, TypeError):
            pass  # missing, corrupt or for another model: rebuilt from the embedding cache
        self.rebuilt = True
        return self._new()

    def update(self, upserts: dict[str, np.ndarray], deletes: Iterable[str]) -> Linked:
        """Remove `deletes`, and add or replace `upserts` (see `link`). A memory already in the
        graph with the very same vector is left where it is: a read model built again (a new
        Engram version, a damaged cache) hands every vector back, and linking 100,000 of them
        into the graph again took longer than embedding them had."""
        index = self.index
        for memory_id in [*deletes, *upserts]:
            self._near.pop(memory_id, None)
        for memory_id in deletes:
            key = key_of(memory_id)
            if index.contains(key):
                index.remove(key)
        if not upserts:
            return Linked()
        keys = np.array([key_of(m) for m in upserts], dtype=np.uint64)
        vectors = np.stack(list(upserts.values())).astype(np.float32)
        changed = np.ones(len(keys), dtype=bool)
        if len(index):
            present = np.atleast_1d(np.asarray(index.contains(keys), dtype=bool))
            if present.any():
                stored = index.get(keys[present])
                rows = stored if isinstance(stored, tuple) else list(stored.reshape(-1, self.dim))
                same = np.array(
                    [
                        row is not None and np.array_equal(np.asarray(row, np.float32), new)
                        for row, new in zip(rows, vectors[present], strict=True)
                    ],
                    dtype=bool,
                )
                changed[np.flatnonzero(present)[same]] = False
                for key in keys[present][~same]:
                    index.remove(int(key))
        linked = link(index, keys[changed], vectors[changed])
        return dataclasses.replace(linked, kept=len(keys) - int(changed.sum()))

    def save(self) -> None:
        """Write the index then its sidecar, each by rename: a crash leaves the old pair or a
        mismatch that the next open detects (and rebuilds)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = temp_path(self.path)  # usearch writes the file itself
        self.index.save(str(tmp))
        os.replace(tmp, self.path)
        meta = {
            "identity": self.identity,
            "dim": self.dim,
            "count": len(self.index),
            "complete": True,
            "file": file_stamp(self.path),
        }
        atomic_write(self.meta_path, json.dumps(meta), durable=False)

    def search(
        self, vector: np.ndarray, limit: int, exact_below: int = EXACT_BELOW
    ) -> list[tuple[str, float]]:
        """The `limit` nearest memories: compared with every vector (exact, so none is
        unreachable) while the index holds fewer than `exact_below`, from the HNSW graph
        (approximate) beyond."""
        if len(self.index) == 0:
            return []
        matches = self.index.search(
            vector.astype(np.float32),
            min(limit, len(self.index)),
            exact=len(self.index) < exact_below,
            threads=1,
        )
        # As Python numbers first: one conversion for all, not a NumPy scalar each.
        similarities = (1.0 - np.asarray(matches.distances, dtype=np.float64)).tolist()
        return [
            (id_of(key), similarity)
            for key, similarity in zip(matches.keys.tolist(), similarities, strict=True)
        ]

    def vectors_for(self, memory_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors of those memories that are in the index."""
        if not memory_ids or len(self.index) == 0:
            return {}
        keys = np.array([key_of(m) for m in memory_ids], dtype=np.uint64)
        found = self.index.get(keys)
        if isinstance(found, np.ndarray) and found.ndim == 1:
            found = (found,)
        return {
            m: np.asarray(v, dtype=np.float32)
            for m, v in zip(memory_ids, found, strict=True)
            if v is not None
        }

    def nearness(self, memory_ids: Sequence[str], background: np.ndarray) -> dict[str, float]:
        """How near ordinary text the stored vectors of those memories in the index lie: the
        `ranking.nearest_mean` of their similarities to `background` (the model's fixed
        background, the same for every call). Each is worked out once, while its vector
        stays the same: recall asks this of every candidate of every query."""
        from .ranking import nearness

        wanted = [m for m in memory_ids if m not in self._near]
        found = self.vectors_for(wanted) if wanted else {}
        if found:
            if len(self._near) > NEARNESS_KEPT:
                self._near.clear()
            self._near.update(nearness(found, background))
        return {m: self._near[m] for m in memory_ids if m in self._near}

    def vector(self, memory_id: str) -> np.ndarray | None:
        key = key_of(memory_id)
        if not self.index.contains(key):
            return None
        return np.asarray(self.index.get(key), dtype=np.float32)

    def __len__(self) -> int:
        return len(self.index)

    def ids(self) -> Sequence[str]:
        return [id_of(int(k)) for k in self.index.keys]


@dataclass(frozen=True)
class Linked:
    """What linking a batch of vectors into the graph took."""

    count: int = 0  # vectors linked
    threads: int = 1
    unreachable: int = 0  # of them, not found by a search with their own vector
    left: int = 0  # still not found after being linked again one thread at a time
    kept: int = 0  # already in the graph with the very same vector: left where they were


def link(
    index: Any, keys: np.ndarray, vectors: np.ndarray, *, threads: int | None = None
) -> Linked:
    """Add vectors to a usearch index's graph, none of them left unreachable.

    By default on every core (`LINK_THREADS`) for a batch of `SERIAL_BELOW` or more, by one thread
    for a smaller one. After a parallel insert each new vector is searched for with its own
    vector, and those not found are linked again one thread at a time (see `LINK_THREADS`)."""
    count = len(keys)
    if count == 0:
        return Linked()
    if threads is None:
        threads = LINK_THREADS if count >= SERIAL_BELOW else 1
    index.add(keys, vectors, threads=threads)
    if threads == 1:
        return Linked(count)
    lost = unreachable_keys(index, keys=keys, threads=threads)
    left = relink(index, lost) if lost else []
    return Linked(count, threads, len(lost), len(left))


def relink(index: Any, keys: Sequence[int]) -> list[int]:
    """Remove these vectors from the graph and add them again one thread at a time, which links
    each from the graph as it is now; returns those still unreachable."""
    again = np.asarray(keys, dtype=np.uint64)
    stored = np.asarray(index.get(again), dtype=np.float32).reshape(len(again), -1)
    for key in again:
        index.remove(int(key))
    index.add(again, stored, threads=1)
    return unreachable_keys(index, keys=again)


def unreachable_keys(
    index: Any,
    *,
    k: int = REACH_K,
    batch: int = BATCH,
    threads: int = 0,
    keys: np.ndarray | None = None,
) -> list[int]:
    """The keys of a usearch index that a graph search with their own vector does not return
    among the `k` nearest (`threads=0`: every core), searching as queries do.

    Two passes: every vector with a narrow search (`QUICK_EXPANSION`, several times cheaper),
    then those it did not find again with the index's own expansion: a vector found by the
    narrow search is found by the wider one."""
    keys = np.asarray(index.keys if keys is None else keys, dtype=np.uint64)
    if len(keys) == 0:
        return []
    wide = int(index.expansion_search)
    if wide <= QUICK_EXPANSION:
        return _unreachable(index, keys, k=k, batch=batch, threads=threads)
    index.expansion_search = QUICK_EXPANSION
    try:
        doubtful = _unreachable(index, keys, k=k, batch=batch, threads=threads)
    finally:
        index.expansion_search = wide
    if not doubtful:
        return []
    return _unreachable(
        index, np.asarray(doubtful, dtype=np.uint64), k=k, batch=batch, threads=threads
    )


def _unreachable(index: Any, keys: np.ndarray, *, k: int, batch: int, threads: int) -> list[int]:
    k = min(k, len(index))
    out: list[int] = []
    for start in range(0, len(keys), batch):
        chunk = keys[start : start + batch]
        vectors = np.asarray(index.get(chunk), dtype=np.float32).reshape(len(chunk), -1)
        found = index.search(vectors, k, threads=threads)
        returned = np.asarray(found.keys, dtype=np.uint64).reshape(len(chunk), -1)
        distances = np.asarray(found.distances, dtype=np.float32).reshape(len(chunk), -1)
        missing = ~(returned == chunk[:, None]).any(axis=1)
        # Crowded out by exact copies of itself (the same text in several memories) is found.
        # One query gets usearch's Matches (no counts), several its BatchMatches.
        counts = np.asarray(getattr(found, "counts", [returned.shape[1]]))
        crowded = (distances <= DUPLICATE).all(axis=1) & (counts == k)
        out.extend(int(key) for key in chunk[missing & ~crowded])
    return out


def file_stamp(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return [st.st_size, st.st_mtime_ns]
