"""HNSW's recall against exact search, on real embeddings, for usearch's graph settings.

The texts are what a personal store holds: every LoCoMo dialogue turn, observation, event and
session summary of the given file, the coding-recall memories (development set and holdout), and
coding memories of fictional projects generated from templates up to ``--size``. They are embedded
once with the built-in model, as memories are (``kind (tags): text``), and the vectors cached in
``--cache`` (``/tmp`` by default), so a second run takes seconds.

For each index size and each setting (connectivity, expansion_add, expansion_search) it builds a
usearch index and reports:

- ``recall@100``: the share of exact search's top 100 that the graph returns (a result as near
  as exact search's 100th counts, so that near-identical memories tied at the cut do not count
  against it), over ``--probes`` queries (the LoCoMo questions and the coding-recall queries,
  embedded as queries), mean and minimum;
- ``unreachable``: vectors not returned in their own top 10 when searched with themselves (what
  ``engram doctor`` checks);
- the time to build the index and a query's p50 (k=100, one thread), against exact search, and
  the time of the whole self-search check (every core).

``--check-at 100000`` also times the check on an index of that size (the real vectors and noisy
copies of them, at the first setting).

How to run::

    .venv/bin/python benchmarks/hnsw_recall.py ../shared/data/locomo-dev.json \\
        ../shared/data/coding-recall-dev.json --size 20000
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

HOLDOUT = Path(__file__).resolve().parent / "data" / "coding-recall-holdout.json"

_PROJECTS = [
    "halyard",
    "quillon",
    "marrow",
    "bitterns",
    "ostrava",
    "pellucid",
    "wicket",
    "sorrel",
    "tamarack",
    "vesper",
    "lumen-ops",
    "brackish",
    "corvid",
    "ferrule",
    "gantry",
    "hollis",
    "isobar",
    "juniper",
    "kelpie",
    "larch",
]
_TOOLS = [
    "Redis",
    "RabbitMQ",
    "Elasticsearch",
    "Jenkins",
    "GitLab CI",
    "Nginx",
    "Vue",
    "Angular",
    "Spring Boot",
    "Rails",
    "Laravel",
    "Flask",
    "FastAPI",
    "Prometheus",
    "Grafana",
    "Kubernetes",
    "Docker Compose",
    "MySQL",
    "MongoDB",
    "SQLite",
    "Webpack",
    "Vite",
    "Jest",
    "Mocha",
    "Gradle",
    "Maven",
    "Ansible",
    "Pulumi",
    "Sentry",
    "Datadog",
    "Postgres",
    "Kafka",
    "Terraform",
    "pytest",
    "Celery",
    "gRPC",
    "GraphQL",
    "React",
]
_KINDS = ["decision", "gotcha", "failure", "procedure", "convention", "fact", "preference"]
_OPENINGS = [
    "we chose {t} for the {area} layer after comparing it with {u}",
    "{t} silently drops {thing} when the {area} config is reloaded",
    "the {area} job failed because {t} ran out of {resource}",
    "to rotate the {area} credentials, restart {t} then re-run the seeder",
    "every {area} module keeps its {t} settings in one file per environment",
    "the {area} service talks to {t} on the internal network only",
    "the team prefers {t} over {u} for {area} work",
    "upgrading {t} broke the {area} tests until we pinned {u}",
    "the {area} dashboard reads from {t}, not from {u}",
    "never call {t} from the {area} request path; queue it through {u}",
    "{t} in the {area} stack needs {resource} limits set explicitly",
    "migrating {area} from {u} to {t} took two sprints",
]
_REASONS = [
    "because {u} could not keep up with {thing}",
    "so that {thing} survive a restart",
    "after an outage lost {thing}",
    "since {t} already runs in staging",
    "which halved the {area} latency",
    "until the {resource} leak in {u} is fixed",
    "as the on-call runbook says",
    "to keep {thing} out of the logs",
    "",
]
_AREAS = [
    "billing",
    "search",
    "auth",
    "reporting",
    "ingest",
    "notifications",
    "admin",
    "export",
    "scheduler",
    "upload",
    "cache",
    "metrics",
    "checkout",
    "onboarding",
    "sync",
    "audit",
]
_THINGS = [
    "queued messages",
    "open connections",
    "pending writes",
    "scheduled tasks",
    "log lines",
    "session keys",
    "retries",
    "webhooks",
    "cache entries",
    "user uploads",
]
_RESOURCES = ["memory", "disk", "file handles", "threads", "connections", "CPU"]


def generated(count: int, seed: int = 11) -> list[str]:
    """Coding memories of fictional projects: an opening, a reason, in the memory text format."""
    rng = random.Random(seed)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < count:
        t, u = rng.sample(_TOOLS, 2)
        fill = {
            "t": t,
            "u": u,
            "area": rng.choice(_AREAS),
            "thing": rng.choice(_THINGS),
            "resource": rng.choice(_RESOURCES),
        }
        text = rng.choice(_OPENINGS).format(**fill)
        reason = rng.choice(_REASONS).format(**fill)
        text = f"{rng.choice(_PROJECTS)}: {text}{' ' + reason if reason else ''}."
        if text in seen:
            continue
        seen.add(text)
        out.append(f"{rng.choice(_KINDS)}: {text}")
    return out


def locomo_texts(path: Path) -> tuple[list[str], list[str]]:
    """(memory texts, questions) of a LoCoMo file."""
    texts: list[str] = []
    questions: list[str] = []
    for sample in json.loads(path.read_text("utf-8")):
        for turns in sample["conversation"].values():
            if isinstance(turns, list):
                texts += [f"fact: {t['speaker']}: {t['text']}" for t in turns]
        for session in sample.get("observation", {}).values():
            for facts in session.values():
                texts += [f"fact: {fact[0]}" for fact in facts if fact and isinstance(fact[0], str)]
        for session in sample.get("event_summary", {}).values():
            for name, events in session.items():
                if name != "date" and isinstance(events, list):
                    texts += [f"note: {e}" for e in events if isinstance(e, str)]
        texts += [
            f"note: {s}" for s in sample.get("session_summary", {}).values() if isinstance(s, str)
        ]
        questions += [qa["question"] for qa in sample["qa"] if qa.get("question")]
    return texts, questions


def coding_texts(paths: Sequence[Path]) -> tuple[list[str], list[str]]:
    texts: list[str] = []
    questions: list[str] = []
    for path in paths:
        data = json.loads(path.read_text("utf-8"))
        for m in data["memories"]:
            tags = m.get("tags") or []
            label = f"{m['kind']} ({', '.join(sorted(tags))})" if tags else m["kind"]
            texts.append(f"{label}: {m['text']}")
        questions += [q["query"] for q in data["queries"] if q.get("query")]
    return texts, questions


def embedded(cache: Path, texts: Sequence[str], *, query: bool) -> np.ndarray:
    """Vectors of `texts`, embedded once: each chunk of 1,024 is kept in `cache` (a directory)
    under a digest of its texts, so an interrupted run resumes where it stopped."""
    import hashlib

    cache.mkdir(parents=True, exist_ok=True)
    embedder = None
    parts = []
    started = time.perf_counter()
    for start in range(0, len(texts), 1024):
        chunk = list(texts[start : start + 1024])
        digest = hashlib.sha256(("q" if query else "d").join(chunk).encode()).hexdigest()[:16]
        kept = cache / f"{digest}.npy"
        if kept.exists():
            parts.append(np.load(kept))
            continue
        if embedder is None:
            from engram.search.embed import load_embedder

            embedder = load_embedder("builtin")
        vectors = (
            np.stack([embedder.embed_query(t) for t in chunk]) if query else embedder.embed(chunk)
        ).astype(np.float32)
        np.save(kept, vectors)
        parts.append(vectors)
        print(
            f"  embedded {start + len(chunk)}/{len(texts)} ({time.perf_counter() - started:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
    return np.concatenate(parts)


def build(
    vectors: np.ndarray, connectivity: int, expansion_add: int, threads: int = 1
) -> tuple[object, float]:
    from usearch.index import Index

    index = Index(
        ndim=vectors.shape[1],
        metric="cos",
        dtype="f32",
        connectivity=connectivity,
        expansion_add=expansion_add,
    )
    started = time.perf_counter()
    index.add(np.arange(len(vectors), dtype=np.uint64), vectors, threads=threads)
    return index, time.perf_counter() - started


def measure(
    index: object,
    vectors: np.ndarray,
    probes: np.ndarray,
    expansion_search: int,
) -> dict[str, float]:
    idx: object = index
    idx.expansion_search = expansion_search  # type: ignore[attr-defined]
    recalls, hnsw_ms, exact_ms = [], [], []
    for vector in probes:
        started = time.perf_counter()
        found = idx.search(vector, 100, threads=1)  # type: ignore[attr-defined]
        hnsw_ms.append(1000 * (time.perf_counter() - started))
        started = time.perf_counter()
        truth = idx.search(vector, 100, exact=True, threads=1)  # type: ignore[attr-defined]
        exact_ms.append(1000 * (time.perf_counter() - started))
        # Ties at the 100th place (near-identical memories) count as found whichever is returned.
        cut = float(truth.distances[-1]) + 1e-6
        recalls.append(min(100, int((found.distances <= cut).sum())) / 100)
    started = time.perf_counter()
    own = idx.search(vectors, 10, threads=1)  # type: ignore[attr-defined]
    check_s = time.perf_counter() - started
    keys = np.asarray(own.keys)
    unreachable = int((~(keys == np.arange(len(vectors))[:, None]).any(axis=1)).sum())
    return {
        "recall_mean": float(np.mean(recalls)),
        "recall_min": float(np.min(recalls)),
        "hnsw_p50_ms": float(np.median(hnsw_ms)),
        "exact_p50_ms": float(np.median(exact_ms)),
        "unreachable": unreachable,
        "self_check_s": check_s,
    }


def check_at(vectors: np.ndarray, size: int, setting: str) -> dict[str, float]:
    """Time `engram doctor`'s reachability check on an index of `size` vectors: the real ones
    and copies of them moved a little (as many distinct memories on the same topics)."""
    from engram.search.vectors import unreachable_keys

    rng = np.random.default_rng(9)
    rows = [vectors]
    while sum(len(r) for r in rows) < size:
        noisy = vectors + 0.02 * rng.standard_normal(vectors.shape).astype(np.float32)
        rows.append(noisy / np.linalg.norm(noisy, axis=1, keepdims=True))
    part = np.concatenate(rows)[:size]
    connectivity, expansion_add, expansion_search = (int(x) for x in setting.split(":"))
    index, build_s = build(part, connectivity, expansion_add, threads=0)
    index.expansion_search = expansion_search  # type: ignore[attr-defined]
    started = time.perf_counter()
    lost = unreachable_keys(index)
    row = {
        "size": size,
        "connectivity": connectivity,
        "expansion_add": expansion_add,
        "expansion_search": expansion_search,
        "build_s": build_s,
        "unreachable": len(lost),
        "self_check_s": time.perf_counter() - started,
    }
    print(
        f"{size:>6} M={connectivity:<3} ef_add={expansion_add:<4} ef={expansion_search:<4} "
        f"unreachable {len(lost)}  build {build_s:.1f} s  self-check "
        f"{row['self_check_s']:.1f} s",
        flush=True,
    )
    return row


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("locomo", type=Path)
    parser.add_argument("coding", type=Path, nargs="+")
    parser.add_argument("--size", type=int, default=20_000, help="texts in all (largest index)")
    parser.add_argument("--sizes", default="10000,20000")
    parser.add_argument(
        "--settings",
        default="16:128:64,16:128:100,16:128:200,32:128:100,32:256:200",
        help="connectivity:expansion_add:expansion_search,...",
    )
    parser.add_argument("--probes", type=int, default=200)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/engram-hnsw-recall"))
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--check-at",
        type=int,
        default=0,
        help="also time the reachability check at this index size",
    )
    args = parser.parse_args(argv)

    texts, questions = locomo_texts(args.locomo)
    more, asked = coding_texts([*args.coding, HOLDOUT] if HOLDOUT.exists() else args.coding)
    texts += more
    questions += asked
    texts += generated(max(0, args.size - len(texts)))
    args.cache.mkdir(parents=True, exist_ok=True)
    # Shuffled, so that every size mixes chat and coding memories as a store does.
    order = list(range(len(texts)))
    random.Random(3).shuffle(order)
    vectors = embedded(args.cache, texts, query=False)[order]
    rng = random.Random(5)
    chosen = rng.sample(questions, min(args.probes, len(questions)))
    probes = embedded(args.cache, chosen, query=True)

    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        part = vectors[:size]
        built: dict[tuple[int, int], tuple[object, float]] = {}
        for setting in args.settings.split(","):
            connectivity, expansion_add, expansion_search = (int(x) for x in setting.split(":"))
            key = (connectivity, expansion_add)
            if key not in built:
                built[key] = build(part, connectivity, expansion_add)
            index, build_s = built[key]
            row = {
                "size": size,
                "connectivity": connectivity,
                "expansion_add": expansion_add,
                "expansion_search": expansion_search,
                "build_s": build_s,
                **measure(index, part, probes, expansion_search),
            }
            rows.append(row)
            print(
                f"{size:>6} M={connectivity:<3} ef_add={expansion_add:<4} "
                f"ef={expansion_search:<4} recall@100 mean {row['recall_mean']:.4f} "
                f"min {row['recall_min']:.2f}  unreachable {row['unreachable']:>3}  "
                f"build {build_s:5.1f} s  hnsw p50 {row['hnsw_p50_ms']:.2f} ms  "
                f"exact p50 {row['exact_p50_ms']:.2f} ms  self-check "
                f"{row['self_check_s']:.2f} s",
                flush=True,
            )
    if args.check_at:
        rows.append(check_at(vectors, args.check_at, args.settings.split(",")[0]))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
