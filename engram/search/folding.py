"""Folding the memories marked as changed into a store's saved vector index.

A mark is cleaned only once the index holding its vector is saved, and a long fold (a reindex
of a large store links vectors into the graph for minutes or hours) saves what it has done as
it goes: a process killed half-way leaves the last saved index and the marks of everything not
in it, so the next one goes on from there rather than lose memories from the index or start
again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .embed import Embedder, EmbeddingCache, embed_with_cache
from .hits import memory_embedding_text

if TYPE_CHECKING:
    from ..readmodel.projection import Projection
    from .retrieval import SyncReport

# A long fold saves the index at least this often, so a process killed half-way loses no more
# than this much of it; never more than a tenth of its time (a save of a million vectors takes
# seconds).
CHECKPOINT_SECONDS = 60.0
FOLD_BATCH = 512  # memories folded into the index at a time

Marks = list[tuple[str, int]]  # (memory id, generation) of the dirty marks folded


def fold(
    projection: Projection,
    embeddings: EmbeddingCache,
    embedder: Embedder,
    index: Any,  # a VectorIndex
    report: SyncReport,
    progress: Callable[[int], None] | None,
    save: Callable[[Marks], bool],
) -> None:
    """Fold every memory marked for the vector index into `index`, `FOLD_BATCH` at a time;
    `save(marks)` saves the index and cleans those marks (False: it could not save), at the end
    and every `CHECKPOINT_SECONDS` of a long fold. Memories marked while it runs, with an id
    before the one it is at, wait for the next fold."""
    folded: Marks = []  # marks whose vectors are in the index but not yet saved
    cursor = ""
    saved_at, save_cost = time.monotonic(), 0.0
    while True:
        marks = projection.dirty("vec", limit=FOLD_BATCH, after=cursor)
        if not marks:
            break
        cursor = marks[-1][0]
        ids = [m for m, _ in marks]
        found = projection.memories_by_id(ids)
        live = [found[i] for i in ids if i in found]
        vectors, embedded = embed_with_cache(
            embedder, embeddings, [memory_embedding_text(m) for m in live]
        )
        report.embedded += embedded
        report.reused += len(live) - embedded
        linked = index.update(
            {m.id: vectors[row] for row, m in enumerate(live)},
            [i for i in ids if i not in found],
        )
        folded.extend(marks)
        report.indexed_vectors += len(live)
        report.kept += linked.kept
        if progress is not None:
            progress(len(live))
        if time.monotonic() - saved_at >= max(CHECKPOINT_SECONDS, 10 * save_cost):
            started = time.monotonic()
            if not save(folded):
                return
            folded = []
            saved_at = time.monotonic()
            save_cost = saved_at - started
    if folded or not index.meta_path.exists():
        save(folded)


def fill_in_memory(
    projection: Projection,
    embeddings: EmbeddingCache,
    embedder: Embedder,
    index: Any,  # a VectorIndex
    report: SyncReport,
) -> None:
    """Fill a copy of the vector index in memory, for a read-only store whose saved index is
    missing or stale, from the embedding cache where it can; memories changed since are
    compared directly at query time."""
    ids = projection.all_memory_ids()
    for start in range(0, len(ids), FOLD_BATCH):
        found = projection.memories_by_id(ids[start : start + FOLD_BATCH])
        live = list(found.values())
        vectors, embedded = embed_with_cache(
            embedder, embeddings, [memory_embedding_text(m) for m in live]
        )
        report.embedded += embedded
        index.update({m.id: vectors[row] for row, m in enumerate(live)}, [])
