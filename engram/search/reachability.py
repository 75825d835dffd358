"""Vectors the HNSW graph cannot reach: found, and repaired.

HNSW links each vector to a few neighbours as it is added; later insertions can leave a vector
with no way in, and then no search of the graph returns it, not even a search with its own
vector. Such a memory is found only when its words match too, so a paraphrase never finds it.

The check searches the graph with every stored vector (in batches, on every core) and calls a
vector *unreachable* when its own key is not among the `REACH_K` nearest returned, unless those
are all exact copies of it (memories with the same text). The repair removes the unreachable
vectors and adds them again, which links them from the graph as it is now; any still unreachable
after that is repaired by building the graph again from the stored vectors (no text is embedded
again). Below `search.exact_below` vectors recall does not use the graph (it compares the query
with every vector), so there is nothing to check.

The search and the linking again are `vectors.unreachable_keys` and `vectors.relink`, which also
follow every insert made on several threads: this module checks and repairs a saved index as a
whole, for `engram doctor` and `engram reindex --check`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..base.layout import VECTOR_INDEX
from .vectors import VectorIndex, id_of, key_of, relink, unreachable_keys

SAMPLE = 20_000  # vectors `engram doctor` and `reindex --check` search in a larger index


@dataclass(frozen=True)
class Reachability:
    """What the check found in one saved vector index, and what the repair did."""

    vectors: int
    checked: bool  # False below `search.exact_below`: recall compares with every vector
    unreachable: tuple[str, ...]  # memory ids the graph does not return for their own vector
    seconds: float
    readded: int = 0
    rebuilt: bool = False
    left: int = 0  # still unreachable after the repair
    checked_count: int = 0  # vectors searched (fewer than `vectors` when sampled)


def check(vectors: VectorIndex, exact_below: int, sample: int | None = None) -> Reachability:
    """Every vector, or with `sample` at most that many drawn at random (a diagnosis of a large
    index: each run looks at other vectors, and the repair checks them all)."""
    import time

    started = time.perf_counter()
    count = len(vectors)
    if count < max(exact_below, 1):
        return Reachability(count, False, (), 0.0)
    keys = np.asarray(vectors.index.keys, dtype=np.uint64)
    if sample is not None and count > sample:
        keys = np.random.default_rng().choice(keys, sample, replace=False)
    missing = unreachable_keys(vectors.index, keys=keys)
    return Reachability(
        count,
        True,
        tuple(id_of(k) for k in missing),
        round(time.perf_counter() - started, 3),
        checked_count=len(keys),
    )


def repair(vectors: VectorIndex, exact_below: int) -> Reachability:
    """Find the unreachable vectors, add them again, and build the graph again if any is still
    unreachable; saves the index when it changed."""
    import time

    started = time.perf_counter()
    found = check(vectors, exact_below)
    if not found.unreachable:
        return found
    keys = [key_of(m) for m in found.unreachable]
    relink(vectors.index, keys)
    left = unreachable_keys(vectors.index)
    rebuilt = False
    if left:
        vectors.rebuild_graph()
        left = unreachable_keys(vectors.index)
        rebuilt = True
    vectors.save()
    return Reachability(
        found.vectors,
        True,
        found.unreachable,
        round(time.perf_counter() - started, 3),
        readded=len(keys),
        rebuilt=rebuilt,
        left=len(left),
    )


def saved_index(cache: Path) -> VectorIndex | None:
    """The saved vector index of a cache directory as it is (its model named by its sidecar),
    or None when there is none sound to check (a damaged one is the cache check's)."""
    meta_path = (cache / VECTOR_INDEX).with_suffix(".json")
    try:
        meta = json.loads(meta_path.read_text())
        identity, dim = meta["identity"], int(meta["dim"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(identity, str):
        return None
    vectors = VectorIndex(cache / VECTOR_INDEX, identity, dim)
    return None if vectors.rebuilt else vectors


def unreachable_note(cache: Path, exact_below: int, store: str) -> str | None:
    """One line for `engram reindex --check` when the saved index has unreachable vectors."""
    vectors = saved_index(cache)
    if vectors is None:
        return None
    found = check(vectors, exact_below, SAMPLE)
    if not found.unreachable:
        return None
    return (
        f"{len(found.unreachable)} of {found.checked_count} vectors"
        f"{' checked' if found.checked_count < found.vectors else ''} cannot be reached "
        f"through the vector index's graph: `engram doctor --fix --{store}` links them again"
    )
