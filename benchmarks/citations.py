"""What checking freshness costs recall: p50 with and without it, at 100,000 memories.

    .venv/bin/python benchmarks/citations.py                 # 100k memories (builds the store once)
    .venv/bin/python benchmarks/citations.py --memories 10000 # quicker

A personal store of N memories is built in bulk (benchmarks/bulkstore.py, random vectors in the
embedding cache) under --work, and a code repository of 400 files next to it. The memories the
queries recall (every one of them, so that each result is judged: the worst case) and 10,000
others are given two citations each (`memory.updated` events, pinned to the repository's first
commit); a second commit then changes a quarter of the files, so a share of the results is
stale and re-ranked. Recall runs from inside the repository, interleaved in random order with
the same recall with the freshness check replaced by nothing (`engram.domain.freshness.rerank`
returning its input), so that the noise of a shared machine hits both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bulkstore  # noqa: E402
import onnxruntime  # noqa: E402,F401  (before usearch, see engram.search.usearch_index)
import speed  # noqa: E402
from bulkstore import StoreSpec  # noqa: E402

HERE = Path(__file__).resolve().parent
FILES = 400


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def code_repository(path: Path) -> tuple[str, dict[str, str]]:
    """A repository of FILES files; its first commit and each file's blob id there."""
    if not (path / ".git").exists():
        path.mkdir(parents=True, exist_ok=True)
        git(path, "init", "-q", "-b", "main")
        for number in range(FILES):
            target = path / f"src/pkg{number % 20}/mod{number}.py"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(f"def handler_{number}():\n    return {number}\n")
        git(path, "add", "-A")
        git(path, "-c", "user.name=bench", "-c", "user.email=b@x", "commit", "-q", "-m", "code")
    first = git(path, "rev-list", "--max-parents=0", "HEAD")
    blobs = {}
    for line in git(path, "ls-tree", "-r", first).splitlines():
        meta, name = line.split("\t", 1)
        blobs[name] = meta.split()[2]
    return first, blobs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--work", type=Path, default=HERE / ".work" / "citations")
    ap.add_argument("--result", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.result is not None:
        args.result = args.result.resolve()  # the run changes into the code repository

    spec = StoreSpec(name=f"citations-{args.memories}", memories=args.memories)
    built = bulkstore.ensure_store(args.work, spec)
    code = built.base / "code"
    first, blobs = code_repository(code)
    os.chdir(code)

    from engram.api import Engram
    from engram.domain import freshness
    from engram.search.embed import load_embedder

    load_embedder("builtin")
    rng = random.Random(7)
    queries = speed.make_queries(random.Random(1), args.queries)
    marker = built.base / "cited.json"
    e = Engram(use="personal")
    if not marker.exists():
        hit_ids = {h.memory.id for q in queries for h in e.recall(q, k=10)}
        others = [m.id for m in e.memories(limit=None)]
        cited = sorted(hit_ids | set(rng.sample(others, min(10_000, len(others)))))
        names = sorted(blobs)
        events = [
            (
                "memory.updated",
                {
                    "memory": ident,
                    "citations": [
                        {"path": p, "commit": first, "blob": blobs[p]} for p in rng.sample(names, 2)
                    ],
                },
            )
            for ident in cited
        ]
        bulkstore.append_bulk(e.write_store(), events, rng=rng)
        e.commit(subject="bench: citations")
        e.close()
        for name in names[: FILES // 4]:  # a quarter of the files change
            (code / name).write_text((code / name).read_text() + "# changed\n")
        git(code, "-c", "user.name=bench", "-c", "user.email=b@x", "commit", "-qam", "change")
        marker.write_text(json.dumps({"cited": len(cited), "recalled": len(hit_ids)}) + "\n")
        e = Engram(use="personal")
    info = json.loads(marker.read_text())

    real = freshness.rerank

    def unchecked(workspace: object, hits: list, **_: object) -> list:
        return list(hits)

    def once(check: bool, q: str) -> tuple[int, int, int]:
        freshness.rerank = real if check else unchecked  # type: ignore[assignment]
        t0 = time.perf_counter_ns()
        hits = e.recall(q, k=10)
        took = time.perf_counter_ns() - t0
        stale = sum(1 for h in hits if h.freshness is not None and h.freshness.stale)
        judged = sum(1 for h in hits if h.freshness is not None)
        return took, judged, stale

    for q in queries:  # untimed: page caches, lazy loads
        once(True, q)
        once(False, q)
    timings: dict[bool, list[int]] = {True: [], False: []}
    judged = stale = 0
    order = random.Random(3)
    for _ in range(args.rounds):
        for q in order.sample(queries, len(queries)):
            for check in order.sample([True, False], 2):
                took, j, s = once(check, q)
                timings[check].append(took)
                if check:
                    judged, stale = judged + j, stale + s
    freshness.rerank = real  # type: ignore[assignment]
    on, off = speed.summary(timings[True]), speed.summary(timings[False])
    extra = [a - b for a, b in zip(sorted(timings[True]), sorted(timings[False]), strict=True)]
    out = {
        "memories": args.memories,
        "queries": len(queries),
        "rounds": args.rounds,
        "cited_memories": info["cited"],
        "results_judged": judged,
        "results_stale": stale,
        "recall_with_check": on,
        "recall_without_check": off,
        "p50_extra_ms": on["median_ms"] - off["median_ms"],
        "median_paired_extra_ms": statistics.median(extra) / 1e6,
        "engram": speed.engram_version(),
        "loadavg": list(os.getloadavg()),
    }
    speed.log(
        f"recall @ {args.memories}: p50 {on['median_ms']:.2f} ms with the check, "
        f"{off['median_ms']:.2f} ms without ({judged} results judged, {stale} stale)"
    )
    text = json.dumps(out, indent=2) + "\n"
    if args.result is not None:
        args.result.write_text(text)
    print(text)
    e.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
