"""The doctor's check that every memory is reachable by meaning: no vector of the saved index is
one its HNSW graph never returns (see `engram.search.reachability`), and its repair.
"""

from __future__ import annotations

from ...base import layout
from ...storage.store import Store
from .cache_checks import cache_lock
from .report import Finding, Host, flag


def check_vectors(engram: Host, store: Store) -> list[Finding]:
    from ...search.reachability import SAMPLE, check, saved_index

    settings = engram.settings(store)
    if settings["search.model"] == "off":
        return []
    cache = layout.cache_dir(store.local_dir)
    if not (cache / layout.VECTOR_META).exists():
        return []
    with cache_lock(store):
        vectors = saved_index(cache)
        if vectors is None:
            return []  # missing or damaged: the cache check says so
        found = check(vectors, settings["search.exact_below"], SAMPLE)
    if not found.unreachable:
        return []
    count = len(found.unreachable)
    return [
        Finding(
            "vector-reach",
            "warning",
            f"{count} of {found.checked_count} memories"
            f"{' checked' if found.checked_count < found.vectors else ''} cannot be "
            f"found by meaning: the vector "
            f"index's graph does not return {'it' if count == 1 else 'them'} even for "
            f"{'its' if count == 1 else 'their'} own vector (first: "
            f"{', '.join(found.unreachable[:3])})",
            f"`engram doctor --fix {flag(store)}` links them into the graph again",
            path=str(cache / layout.VECTOR_INDEX),
            auto=True,
        )
    ]


def repair_vectors(engram: Host, store: Store) -> list[str]:
    from ...search.reachability import repair, saved_index

    settings = engram.settings(store)
    cache = layout.cache_dir(store.local_dir)
    with cache_lock(store):
        vectors = saved_index(cache)
        if vectors is None:
            return []
        done = repair(vectors, settings["search.exact_below"])
    if not done.unreachable:
        return []
    how = "added again and built the graph again" if done.rebuilt else "added again"
    line = f"{how} {len(done.unreachable)} vectors the graph could not reach ({done.seconds:.1f}s)"
    if done.left:
        line += f"; {done.left} still cannot be reached: run `engram reindex {flag(store)}`"
    return [line]
