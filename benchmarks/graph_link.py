"""Linking vectors into the HNSW graph: one thread against every core with its reachability check.

What `engram/search/vectors.py` does when it links a batch (`link`): one thread (as Engram did up
to df5825d, `--threads 1` below) or every core, followed by a search for each new vector with its
own vector and the linking again, one thread at a time, of those not found. Vectors are random
unit 384-d ones (the built-in model's size) or clustered ones: clusters of about 100 vectors,
each its centre plus noise of 0.05 per dimension (cosine about 0.999 to the centre), the near
copies that strand vectors in a parallel insert.

For each kind it reports:

- a build of `--size` vectors as a reindex makes it (`VectorIndex.update` in batches of 512, as
  `sync_vectors` hands them over; with `--builds update,rebuild` also in one call, as
  `VectorIndex.rebuild_graph` does), with one thread and with the new path: seconds, vectors the
  check found and linked again, vectors still unreachable afterwards by a full check of the graph
  (`unreachable_keys`), and that full check's time;
- the full check itself on the built graph (`unreachable_keys` of every vector: a narrow pass,
  then the vectors it missed searched as queries are);
- 1k new vectors linked into a copy of the built graph, in batches of 512 as a refresh hands them
  over, one thread against the new path, `--runs` times interleaved (medians);
- a batch of each size in `--batches` linked into a copy, both ways (medians), to place
  `SERIAL_BELOW`;
- with `--check-only`, a graph of `--size` built in one call by the new path and the full check
  of it (how the check grows to 1M vectors).

`--stranded BASE:BATCH:THREADS:TRIALS` asks only whose vectors a parallel insert strands: the
vectors of the insert itself, or vectors already in the graph (see `stranded`).

Each full check is timed twice: its narrow pass alone (expansion 16, every vector), then both
passes as `link` and `engram doctor` run them. A graph built the new way is saved in a temporary
directory (its path is printed); `--reuse DIR` measures the check, the parts of an intake and
the intakes again on it, without building.

How to run::

    .venv/bin/python benchmarks/graph_link.py --size 100000 --kinds random,clustered
    .venv/bin/python benchmarks/graph_link.py --size 100000 --kinds random --reuse DIR
    .venv/bin/python benchmarks/graph_link.py --size 1000000 --kinds random --check-only
    .venv/bin/python benchmarks/graph_link.py --stranded 20000:5000:8:5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engram.search import vectors as vector_module  # noqa: E402
from engram.search.vectors import (  # noqa: E402
    LINK_THREADS,
    Linked,
    VectorIndex,
    id_of,
    unreachable_keys,
)

DIM = 384
SYNC_BATCH = 512  # memories `Retrieval.sync_vectors` hands `VectorIndex.update` at a time
INTAKE = 1000  # new vectors linked into the saved graph, as after a pull of 1k new memories


def unit_vectors(kind: str, count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "random":
        rows = rng.standard_normal((count, DIM), dtype=np.float32)
    else:
        centres = rng.standard_normal((max(1, count // 100), DIM), dtype=np.float32)
        rows = centres[rng.integers(0, len(centres), count)]
        rows += 0.05 * rng.standard_normal((count, DIM), dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def empty_index(where: Path) -> VectorIndex:
    return VectorIndex(where / "vectors.usearch", "bench", DIM)


def with_threads(threads: int, work: Callable[[], Any], *, any_batch: bool = False) -> Any:
    """Run `work` with `LINK_THREADS` set: 1 is the one-thread path, no check. `any_batch`: a
    batch smaller than `SERIAL_BELOW` takes the same path (to see where that bound belongs)."""
    saved = vector_module.LINK_THREADS, vector_module.SERIAL_BELOW
    vector_module.LINK_THREADS = threads
    if any_batch:
        vector_module.SERIAL_BELOW = 1
    try:
        return work()
    finally:
        vector_module.LINK_THREADS, vector_module.SERIAL_BELOW = saved


def by_update(index: VectorIndex, keys: np.ndarray, rows: np.ndarray) -> list[Linked]:
    done = []
    for start in range(0, len(keys), SYNC_BATCH):
        part = range(start, min(start + SYNC_BATCH, len(keys)))
        done.append(index.update({id_of(int(keys[i])): rows[i] for i in part}, []))
    return done


def build(kind: str, rows: np.ndarray, threads: int, how: str, where: Path) -> dict[str, Any]:
    keys = np.arange(len(rows), dtype=np.uint64)
    index = empty_index(where)
    started = time.perf_counter()
    if how == "update":
        linked = with_threads(threads, lambda: by_update(index, keys, rows))
    else:  # what `rebuild_graph` does once it has read the stored vectors back
        linked = [with_threads(threads, lambda: vector_module.link(index.index, keys, rows))]
    seconds = time.perf_counter() - started
    row = {
        "kind": kind,
        "size": len(rows),
        "how": how,
        "threads": threads,
        "seconds": round(seconds, 2),
        "found_and_relinked": sum(x.unreachable for x in linked),
        "left_by_its_check": sum(x.left for x in linked),
        "load": os.getloadavg()[0],
        "then_full_check": full_check(index.index),
    }
    print(json.dumps(row), flush=True)
    if threads > 1:
        index.save()  # the graph 1k new vectors are linked into
    return row


def full_check(index: Any) -> dict[str, Any]:
    """The check of every vector: its narrow pass alone, then both passes as `link` runs them."""
    wide = index.expansion_search
    index.expansion_search = vector_module.QUICK_EXPANSION  # one pass, the narrow one
    started = time.perf_counter()
    try:
        doubtful = unreachable_keys(index)
    finally:
        index.expansion_search = wide
    narrow = time.perf_counter() - started
    started = time.perf_counter()
    lost = unreachable_keys(index)
    return {
        "vectors": len(index),
        "narrow_pass_s": round(narrow, 2),
        "missed_by_narrow_pass": len(doubtful),
        "both_passes_s": round(time.perf_counter() - started, 2),
        "unreachable": len(lost),
        "load": os.getloadavg()[0],
    }


def parts(kind: str, saved: VectorIndex, pool: np.ndarray, runs: int) -> None:
    """1k new vectors linked the new way, by part: the parallel insert, the check of the new
    vectors, the linking again of those it found."""
    found: dict[str, list[float]] = {"insert_s": [], "check_s": [], "relink_s": [], "found": []}
    for run in range(runs):
        copy = saved.index.copy()
        rows = pool[run * INTAKE : (run + 1) * INTAKE]
        keys = np.arange(
            len(saved) + run * INTAKE, len(saved) + (run + 1) * INTAKE, dtype=np.uint64
        )
        started = time.perf_counter()
        copy.add(keys, rows, threads=LINK_THREADS)
        checked = time.perf_counter()
        lost = unreachable_keys(copy, keys=keys, threads=LINK_THREADS)
        relinked = time.perf_counter()
        if lost:
            assert vector_module.relink(copy, lost) == []
        done = time.perf_counter()
        found["insert_s"].append(checked - started)
        found["check_s"].append(relinked - checked)
        found["relink_s"].append(done - relinked)
        found["found"].append(len(lost))
    medians = {name: round(statistics.median(v), 3) for name, v in found.items()}
    row = {"kind": kind, "into": len(saved), "new": INTAKE, **medians, "runs": runs}
    print(json.dumps(row | {"load": os.getloadavg()[0]}), flush=True)


def stranded(kind: str, base: int, batch: int, threads: int, trials: int) -> None:
    """Whose vectors a parallel insert strands: a graph of `base` vectors linked by one thread
    (none unreachable), then in each trial, on a copy, a batch of `batch` more by usearch's
    parallel insert alone (no check), the whole graph checked; the stranded new ones linked
    again, a second batch inserted the same way, and the whole graph checked again."""
    drawn = unit_vectors(kind, base + 2 * batch * trials, seed=11)
    graph = empty_index(Path(tempfile.gettempdir()) / "graph-link-stranded").index  # never saved
    vector_module.link(graph, np.arange(base, dtype=np.uint64), drawn[:base], threads=1)
    assert unreachable_keys(graph) == []
    for trial in range(trials):
        copy = graph.copy()
        first = base + 2 * batch * trial
        second = first + batch
        copy.add(np.arange(first, second, dtype=np.uint64), drawn[first:second], threads=threads)
        lost = np.asarray(unreachable_keys(copy), dtype=np.int64)
        row: dict[str, Any] = {
            "kind": kind,
            "graph": base,
            "batch": batch,
            "threads": threads,
            "old_stranded": int((lost < base).sum()),
            "new_stranded": int((lost >= base).sum()),
        }
        if len(lost):
            row["left_after_linking_again"] = len(
                vector_module.relink(copy, [int(k) for k in lost])
            )
        end = second + batch
        copy.add(np.arange(second, end, dtype=np.uint64), drawn[second:end], threads=threads)
        lost = np.asarray(unreachable_keys(copy), dtype=np.int64)
        row["then_a_second_batch_stranded"] = {
            "of_the_graph": int((lost < base).sum()),
            "of_the_first_batch": int(((lost >= first) & (lost < second)).sum()),
            "of_the_second_batch": int((lost >= second).sum()),
        }
        print(json.dumps(row), flush=True)


def link_into(saved: VectorIndex, rows: np.ndarray, threads: int, first_key: int) -> float:
    holder = empty_index(saved.path.parent / "scratch")  # never saved
    holder.index = saved.index.copy()
    keys = np.arange(first_key, first_key + len(rows), dtype=np.uint64)
    started = time.perf_counter()
    linked = with_threads(threads, lambda: by_update(holder, keys, rows), any_batch=True)
    seconds = time.perf_counter() - started
    assert sum(x.left for x in linked) == 0
    return seconds


def intake(kind: str, saved: VectorIndex, pool: np.ndarray, runs: int, batches: list[int]) -> None:
    """New vectors from `pool` (drawn as the saved ones were, after them) linked into copies."""
    size = len(saved)
    for count in [INTAKE, *batches]:
        times: dict[int, list[float]] = {1: [], LINK_THREADS: []}
        for run in range(runs):
            start = run * INTAKE
            rows = pool[start : start + count]
            for threads in (1, LINK_THREADS):  # interleaved, the same vectors
                times[threads].append(link_into(saved, rows, threads, size + start))
        one, many = statistics.median(times[1]), statistics.median(times[LINK_THREADS])
        print(
            json.dumps(
                {
                    "kind": kind,
                    "into": size,
                    "new": count,
                    "one_thread_s": round(one, 3),
                    f"{LINK_THREADS}_threads_and_check_s": round(many, 3),
                    "ratio": round(many / one, 2),
                    "runs": runs,
                    "load": os.getloadavg()[0],
                }
            ),
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--kinds", default="random,clustered")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batches", default="16,32,64,128,256")
    parser.add_argument("--builds", default="update", help="update, rebuild or both")
    parser.add_argument("--check-only", action="store_true")
    parser.add_argument("--reuse", type=Path, help="a graph this script saved: no builds")
    parser.add_argument(
        "--stranded",
        metavar="BASE:BATCH:THREADS:TRIALS",
        help="only whose vectors a parallel insert strands (see `stranded`), e.g. 20000:5000:8:5",
    )
    args = parser.parse_args()
    if args.stranded:
        base, batch, threads, trials = (int(x) for x in args.stranded.split(":"))
        for kind in args.kinds.split(","):
            stranded(kind, base, batch, threads, trials)
        return
    batches = [int(b) for b in args.batches.split(",") if b]
    assert all(b <= INTAKE for b in batches)
    print(f"threads: {LINK_THREADS}", flush=True)
    for kind in args.kinds.split(","):
        drawn = unit_vectors(kind, args.size + (0 if args.check_only else INTAKE * args.runs), 7)
        rows, pool = drawn[: args.size], drawn[args.size :]
        where = args.reuse or Path(tempfile.mkdtemp(prefix=f"graph-link-{kind}-"))
        print(json.dumps({"kind": kind, "graph": str(where)}), flush=True)
        if args.check_only:
            index = empty_index(where)
            keys = np.arange(len(rows), dtype=np.uint64)
            started = time.perf_counter()
            linked = vector_module.link(index.index, keys, rows)
            built = {
                "kind": kind,
                "size": len(rows),
                "threads": linked.threads,
                "build_and_check_s": round(time.perf_counter() - started, 1),
                "found_and_relinked": linked.unreachable,
                "left_by_its_check": linked.left,
            }
            print(json.dumps(built | {"then_full_check": full_check(index.index)}), flush=True)
            index.save()
            continue
        if not args.reuse:
            for how in args.builds.split(","):
                for threads in (1, LINK_THREADS):
                    build(kind, rows, threads, how, where)
        saved = VectorIndex(where / "vectors.usearch", "bench", DIM)
        assert len(saved) == args.size, "no graph of that size saved there"
        if args.reuse:
            print(json.dumps({"kind": kind, "full_check": full_check(saved.index)}), flush=True)
        parts(kind, saved, pool, args.runs)
        intake(kind, saved, pool, args.runs, batches)


if __name__ == "__main__":
    main()
