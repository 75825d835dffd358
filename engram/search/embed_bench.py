"""How fast and how big a cold embed is: `python -m engram.search.embed_bench [--texts 2000]`.

Embeds texts shaped like memories (10 to 120 words, one in thirty 300 to 700 words, each with a
file reference) with the configured kind of model, none of them cached, and prints texts per
second and the peak resident memory of the process, after the model is loaded and at the end;
with `--queries N`, first the median and p95 time of embedding N questions one at a time (what
each recall pays), and with `--long`, the peak of one call on texts that all fill the window.
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import sys
import time

WORDS = (  # noqa: SIM905 (a list literal would take 30 lines)
    "the a to of in for on with is was be by that this it from as at use run test build deploy "
    "queue database postgres redis cache index vector search model token batch memory commit "
    "branch merge push pull rebase conflict handoff task session agent store event file line "
    "error fix retry timeout service api endpoint request response client server config setting "
    "value default user project repository docker container image kubernetes staging production "
    "release version python rust typescript function class method module import package "
    "dependency lock write read sync fetch clone worktree hook lint format check ci pipeline job "
    "worker thread process signal crash restart log metric alert latency billing invoice "
    "payment webhook idempotent migration schema table column row query plan"
).split()


def memory_texts(count: int, *, seed: int = 7) -> list[str]:
    """`count` texts of mixed length, the same for the same seed."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        words = rng.randint(300, 700) if rng.random() < 1 / 30 else rng.randint(10, 120)
        body = " ".join(rng.choice(WORDS) for _ in range(words)).capitalize()
        out.append(f"{body} (note {i}, see src/{rng.choice(WORDS)}.py:{rng.randint(1, 900)}).")
    return out


def peak_mib() -> float:
    """Peak resident memory of this process so far (ru_maxrss is KiB on Linux)."""
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def main(argv: list[str] | None = None) -> int:
    from .embed import load_embedder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=2000, help="how many texts (2000)")
    parser.add_argument("--model", default="builtin", help="a search.model value (builtin)")
    parser.add_argument(
        "--queries", type=int, default=0, help="time this many one-question embeddings first (0)"
    )
    parser.add_argument(
        "--long",
        action="store_true",
        help="texts of 700 to 900 words each: every one fills the window",
    )
    args = parser.parse_args(argv)
    texts = memory_texts(args.texts)
    if args.long:
        rng = random.Random(11)
        texts = [
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(700, 900)))
            for _ in range(args.texts)
        ]
    started = time.perf_counter()
    embedder = load_embedder(args.model)
    loaded = time.perf_counter() - started
    embedder.embed(["warm up"])
    if args.queries:
        rng = random.Random(3)
        times = []
        for _ in range(args.queries):
            words = [rng.choice(WORDS) for _ in range(rng.randint(4, 14))]
            question = "how do we " + " ".join(words)
            began = time.perf_counter()
            embedder.embed_query(question + "?")
            times.append((time.perf_counter() - began) * 1000)
        times.sort()
        print(
            f"{args.queries} queries embedded one at a time: p50 "
            f"{statistics.median(times):.1f} ms, p95 {times[int(len(times) * 0.95)]:.1f} ms"
        )
    after_load = peak_mib()
    started = time.perf_counter()
    embedder.embed(texts)
    seconds = time.perf_counter() - started
    print(f"model {embedder.identity}: loaded in {loaded:.1f} s, peak {after_load:.0f} MiB")
    print(
        f"{len(texts)} texts in {seconds:.1f} s: {len(texts) / seconds:.0f} texts/s; "
        f"peak {peak_mib():.0f} MiB (+{peak_mib() - after_load:.0f} MiB for embedding)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
