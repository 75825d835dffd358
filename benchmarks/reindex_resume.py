"""A reindex killed half-way, and the one after it: how much of the work is kept.

Builds (or reuses) a synthetic store with `bulkstore` (random vectors in the embedding cache, so
no reindex embeds anything and linking the HNSW graph is nearly all of it), then, each as its
own `engram reindex` process:

1. a whole reindex, timed;
2. a reindex killed with SIGKILL at `--kill-at` of that time;
3. the next reindex, timed: it goes on from the vector index the killed one last saved;
4. a reindex from scratch again, whose vector index must hold the same memories as 3's.

Usage:
    python benchmarks/reindex_resume.py [--memories 50000] [--kill-at 0.7] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bulkstore  # noqa: E402


def reindex(*, kill_after: float | None = None) -> tuple[float, str]:
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "engram", "reindex"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if kill_after is not None:
        try:
            out, err = proc.communicate(timeout=kill_after)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
            return time.monotonic() - started, "killed"
        raise SystemExit(f"the reindex ended before it could be killed: {out}{err}")
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"engram reindex failed: {err.strip()}")
    return time.monotonic() - started, out.strip()


def vector_ids(store: Path) -> set[str]:
    from engram.search.vectors import VectorIndex

    cache = next(store.glob("**/engram/cache/vectors.json")).parent
    meta = json.loads((cache / "vectors.json").read_text())
    return set(VectorIndex(cache / "vectors.usearch", meta["identity"], meta["dim"]).ids())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=50_000)
    parser.add_argument("--kill-at", type=float, default=0.7)
    parser.add_argument("--work", type=Path, default=Path("/tmp/engram-bench"))
    args = parser.parse_args()
    built = bulkstore.ensure_store(
        args.work, bulkstore.StoreSpec(f"resume-{args.memories}", args.memories)
    )
    os.chdir(built.base)
    whole, said = reindex()
    print(f"whole reindex: {whole:.1f}s ({said})", flush=True)
    killed, _ = reindex(kill_after=args.kill_at * whole)
    print(f"killed after {killed:.1f}s", flush=True)
    resumed, said = reindex()
    print(f"next reindex: {resumed:.1f}s ({said})", flush=True)
    kept = vector_ids(built.store_dir)
    again, said = reindex()
    print(f"from scratch again: {again:.1f}s ({said})", flush=True)
    same = vector_ids(built.store_dir) == kept
    print(
        json.dumps(
            {
                "memories": args.memories,
                "whole_s": round(whole, 1),
                "killed_after_s": round(killed, 1),
                "resumed_s": round(resumed, 1),
                "resumed_over_whole": round(resumed / whole, 3),
                "scratch_again_s": round(again, 1),
                "same_memories_in_the_index": same,
            }
        )
    )
    if not same:
        raise SystemExit("the resumed reindex's vector index differs from a reindex from scratch")


if __name__ == "__main__":
    main()
