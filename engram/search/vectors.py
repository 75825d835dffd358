"""Vector search with usearch (cosine). Keys are the memories' own ids as integers."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
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
# Vectors are linked into the graph one thread at a time: usearch's parallel insert leaves a few
# vectors no search reaches (1 in 3,000, 4 to 7 in 20,000 clustered vectors, none with one
# thread) for about twice the time, which embedding the same vectors dwarfs.
INSERT_THREADS = 1
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

    def rebuild_graph(self) -> None:
        """Build the graph again from the vectors it holds (nothing is embedded again)."""
        keys = np.asarray(self.index.keys, dtype=np.uint64)
        stored = np.asarray(self.index.get(keys), dtype=np.float32).reshape(len(keys), -1)
        index = self._new()
        if len(keys):
            index.add(keys, stored, threads=INSERT_THREADS)
        self.index = index

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

    def update(self, upserts: dict[str, np.ndarray], deletes: Iterable[str]) -> None:
        """Remove `deletes`, and add or replace `upserts`. A memory already in the graph with the
        very same vector is left where it is: a read model built again (a new Engram version,
        a damaged cache) hands every vector back, and linking 100,000 of them into the graph
        again took longer than embedding them had."""
        index = self.index
        for memory_id in [*deletes, *upserts]:
            self._near.pop(memory_id, None)
        for memory_id in deletes:
            key = key_of(memory_id)
            if index.contains(key):
                index.remove(key)
        if not upserts:
            return
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
        if changed.any():
            index.add(keys[changed], vectors[changed], threads=INSERT_THREADS)

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
        return [
            (id_of(int(key)), 1.0 - float(distance))
            for key, distance in zip(matches.keys, matches.distances, strict=True)
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


def file_stamp(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return [st.st_size, st.st_mtime_ns]
