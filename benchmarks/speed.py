"""Speed of Engram against its floors, as ratios measured in one run on the same data.

How to run (from the repository root, with the project's virtualenv):

    .venv/bin/python benchmarks/speed.py                          # N = 100000 (slow: ~1 hour
                                                                  #   on 2 cores, mostly the build
                                                                  #   and embedding every memory)
    .venv/bin/python benchmarks/speed.py --memories 10000         # a quick look (~10 minutes)
    .venv/bin/python benchmarks/speed.py --memories 10000 --json out.json --keep /tmp/store10k
    .venv/bin/python benchmarks/speed.py --reuse /tmp/store10k    # measure again, no rebuild

Everything lives in a temporary directory (ENGRAM_HOME and HOME point there,
GIT_CONFIG_GLOBAL=/dev/null, GIT_CONFIG_NOSYSTEM=1, ENGRAM_ACTOR is fixed); the real home
directory is never touched. `--keep DIR` leaves the store in DIR; `--reuse DIR` measures a store
kept earlier (the build step is then skipped, so peak RSS does not include building).

What is measured (medians and p95 over many samples, interleaved with their floors so that the
noise of a shared machine hits both alike; only ratios of medians from the same run matter):

1. recall: `Engram.recall(query, k=10)` against its floor = one embedding of the query with the
   same embedder + a bare tantivy query (parse, search limit 100, read the 100 ids) + a bare
   usearch search (limit 100) on the very index files Engram uses. Target: ratio <= 1.5.
2. remember: durable `Engram.remember(...)` with the near-duplicate check on (the default)
   against its floor = an fsynced O_APPEND write of the same JSON line to a file + one embedding
   of the text. Target: ratio <= 3.
3. reindex: when `Engram.reindex()` exists, a first reindex of the built store and a second one
   right after with nothing new. Target: second / first < 5%. When it does not exist, this part
   is reported as skipped (the code runs as soon as the method appears).

Plus the process's peak RSS at each stage, and (unless --no-profile) cProfile summaries of
recall and remember, saved as .prof files next to the store and printed as the top functions.
"""

from __future__ import annotations

import argparse
import cProfile
import faulthandler
import inspect
import io
import json
import os
import pstats
import random
import re
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# --------------------------------------------------------------------------------------------
# Synthetic coding-agent memories: templates + word lists, fixed seed.
# --------------------------------------------------------------------------------------------

COMPONENTS = [
    "payment service",
    "auth middleware",
    "billing worker",
    "search indexer",
    "rate limiter",
    "job scheduler",
    "config loader",
    "CLI parser",
    "migration runner",
    "webhook handler",
    "cache layer",
    "session store",
    "image resizer",
    "email sender",
    "feature flag client",
    "metrics exporter",
    "GraphQL gateway",
    "websocket hub",
    "PDF renderer",
    "audit logger",
    "upload pipeline",
    "notification queue",
    "report generator",
    "tenant router",
    "permission checker",
    "export job",
    "import wizard",
    "retry decorator",
    "health check",
    "dependency injector",
    "plugin loader",
    "template engine",
    "diff viewer",
    "sync daemon",
    "backup task",
    "invoice builder",
    "geocoder",
    "thumbnail cache",
    "OAuth callback",
    "admin dashboard",
    "event bus",
    "outbox relay",
    "schema registry",
    "checkout flow",
    "inventory service",
    "pricing engine",
    "recommendation model",
    "crawler",
    "tokenizer",
    "log shipper",
    "secrets loader",
    "build script",
    "release pipeline",
    "docs site",
    "test harness",
    "fixture factory",
    "ORM layer",
    "query builder",
    "file watcher",
    "LSP server",
]
LIBS = [
    "pytest",
    "mypy",
    "ruff",
    "black",
    "poetry",
    "uv",
    "SQLAlchemy",
    "alembic",
    "FastAPI",
    "Django",
    "Flask",
    "pydantic",
    "celery",
    "redis",
    "postgres",
    "sqlite",
    "kafka",
    "docker",
    "kubernetes",
    "terraform",
    "webpack",
    "vite",
    "React",
    "TypeScript",
    "eslint",
    "jest",
    "cargo",
    "tokio",
    "serde",
    "gRPC",
    "protobuf",
    "nginx",
    "gunicorn",
    "uvicorn",
    "boto3",
    "numpy",
    "pandas",
    "requests",
    "httpx",
    "asyncio",
    "GitHub Actions",
    "pre-commit",
    "sentry",
    "prometheus",
    "grafana",
    "OpenTelemetry",
    "hypothesis",
    "tox",
    "nox",
    "structlog",
    "orjson",
    "attrs",
    "click",
    "typer",
    "jinja2",
    "marshmallow",
    "aiohttp",
    "trio",
    "rich",
    "playwright",
]
VERBS = [
    "parse",
    "load",
    "fetch",
    "sync",
    "flush",
    "resolve",
    "render",
    "validate",
    "normalize",
    "retry",
    "schedule",
    "encode",
    "decode",
    "merge",
    "dispatch",
    "serialize",
    "hydrate",
    "compact",
    "index",
    "migrate",
    "refresh",
    "prune",
    "expand",
    "sign",
    "verify",
    "throttle",
    "debounce",
    "batch",
    "stream",
    "snapshot",
    "restore",
    "rotate",
    "hash",
    "split",
    "join",
]
NOUNS = [
    "config",
    "token",
    "batch",
    "payload",
    "manifest",
    "schema",
    "request",
    "session",
    "cursor",
    "snapshot",
    "invoice",
    "user",
    "event",
    "record",
    "chunk",
    "header",
    "query",
    "tenant",
    "artifact",
    "lockfile",
    "webhook",
    "receipt",
    "ledger",
    "quota",
    "locale",
    "timezone",
    "thumbnail",
    "attachment",
    "cookie",
    "nonce",
    "offset",
    "partition",
    "segment",
    "shard",
    "checkpoint",
    "watermark",
    "backlog",
    "template",
    "policy",
    "role",
]
DIRS = [
    "src",
    "lib",
    "app",
    "pkg",
    "internal",
    "services",
    "core",
    "api",
    "tests",
    "tools",
    "scripts",
    "web",
    "server",
    "worker",
    "common",
    "infra",
]
EXTS = [".py", ".py", ".py", ".ts", ".tsx", ".rs", ".go", ".sql", ".yaml", ".toml", ".sh"]
ERRORS = [
    "a deadlock",
    "a race condition",
    "an off-by-one error",
    "a memory leak",
    "a timezone bug",
    "a stale cache entry",
    "a silent truncation",
    "a flaky timeout",
    "a unicode decode error",
    "an N+1 query",
    "connection pool exhaustion",
    "a double charge",
    "a lost update",
    "a segfault",
    "a file descriptor leak",
    "an infinite retry loop",
    "a float rounding error",
    "a missing index scan",
    "a circular import",
    "a zombie process",
    "an OOM kill",
    "a DST transition bug",
    "a non-deterministic test order",
    "a broken pipe",
]
CONDITIONS = [
    "the input is empty",
    "two workers run at once",
    "the clock jumps backwards",
    "the payload is over 1 MB",
    "the tenant has no default locale",
    "the network is slow",
    "the cache is cold",
    "the migration runs twice",
    "a field is null",
    "the file is a symlink",
    "the list has duplicates",
    "the user is anonymous",
    "retries overlap",
    "the disk is full",
    "the timestamp has no timezone",
    "the header is lowercase",
    "the queue is paused",
    "the test runs in parallel",
    "the job is cancelled half-way",
    "the name has an emoji",
]
REASONS = [
    "it halves the p99 latency",
    "the old one is unmaintained",
    "it keeps the tests hermetic",
    "it avoids a second network round trip",
    "the team already knows it",
    "it makes rollbacks trivial",
    "it removes a global lock",
    "it works offline",
    "it keeps the Docker image small",
    "profiling showed most time in JSON encoding",
    "it gives typed errors at the boundary",
    "it survives a restart mid-batch",
    "the vendor SDK leaks sockets",
    "it is what the on-call runbook assumes",
    "it keeps secrets out of the logs",
    "migrations stay reversible",
]
FIXES = [
    "pin the version",
    "wrap it in a transaction",
    "pass an explicit timezone",
    "sort before comparing",
    "add a unique constraint",
    "set a lower timeout",
    "copy the list before mutating it",
    "use a monotonic clock",
    "close the session in finally",
    "call the idempotent variant",
    "escape the path first",
    "take the advisory lock",
    "read it in chunks",
    "seed the random generator",
    "use the async client",
]
CONVENTIONS = [
    "named in snake_case and prefixed with the module name",
    "validated with pydantic models at the API boundary",
    "logged with structlog and never with print",
    "kept immutable and passed by value",
    "created through the factory in conftest.py",
    "written as dataclasses with slots",
    "returned as typed results instead of raising",
    "documented with a one-line docstring and an example",
    "tested with hypothesis property tests",
    "guarded by a feature flag until rollout",
    "stored as UTC ISO-8601 strings",
    "versioned in the schema registry",
    "reviewed by two people before merging",
    "wrapped in a context manager",
]
TEAMS = ["platform", "payments", "growth", "data", "infra", "mobile", "search", "security"]
TASKS = [
    "release a new version",
    "rotate the signing key",
    "regenerate the API client",
    "rebuild the search index",
    "reproduce the flaky test",
    "profile a slow endpoint",
    "add a database migration",
    "bump a dependency",
    "debug the worker locally",
    "seed the staging database",
    "update the snapshot tests",
    "cut a hotfix branch",
]

KIND_WEIGHTS = {
    "decision": 18,
    "gotcha": 18,
    "convention": 16,
    "fact": 14,
    "procedure": 8,
    "failure": 8,
    "lesson": 8,
    "preference": 5,
    "note": 5,
}


def _ident(rng: random.Random) -> str:
    verb, noun = rng.choice(VERBS), rng.choice(NOUNS)
    return f"{verb}_{noun}" if rng.random() < 0.7 else f"{verb}{noun.capitalize()}"


def _file(rng: random.Random) -> str:
    return (
        f"{rng.choice(DIRS)}/{rng.choice(NOUNS)}/{rng.choice(VERBS)}_{rng.choice(NOUNS)}"
        f"{rng.choice(EXTS)}"
    )


def _fill(rng: random.Random, kind: str) -> str:
    c, c2 = rng.choice(COMPONENTS), rng.choice(COMPONENTS)
    lib, lib2 = rng.sample(LIBS, 2)
    f, _f2, fn = _file(rng), _file(rng), _ident(rng)  # _f2 keeps the seeded draws in step
    err, cond, why, fix = (
        rng.choice(ERRORS),
        rng.choice(CONDITIONS),
        rng.choice(REASONS),
        rng.choice(FIXES),
    )
    n = rng.randint(2, 900)
    ver = f"{rng.randint(0, 9)}.{rng.randint(0, 30)}"
    templates = {
        "decision": [
            f"We decided to use {lib} for the {c} instead of {lib2} because {why}.",
            f"Decision: {fn}() moves from {f} into the {c2}; {why}.",
            f"The {c} keeps its {rng.choice(NOUNS)} state in {lib} with a {n}-second TTL, "
            f"because {why}.",
            f"Chose to {rng.choice(VERBS)} {rng.choice(NOUNS)}s in the {c} rather than in the "
            f"{c2}: {why}.",
        ],
        "gotcha": [
            f"{fn}() in {f} causes {err} when {cond}; {fix}.",
            f"Gotcha: {lib} {ver} changed how {rng.choice(NOUNS)}s are {rng.choice(VERBS)}d, "
            f"which broke the {c} with {err}.",
            f"The {c} test suite hangs when {cond}. Cause: {err} in {f}. Fix: {fix}.",
            f"Never call {fn}() from the {c}: it holds a lock that the {c2} also takes, "
            f"so {err} follows.",
        ],
        "convention": [
            f"In the {c}, {rng.choice(NOUNS)}s are {rng.choice(CONVENTIONS)}.",
            f"Tests for the {c} live in {f} and are {rng.choice(CONVENTIONS)}.",
            f"Convention: every {rng.choice(NOUNS)} handler in {rng.choice(DIRS)}/ is "
            f"{rng.choice(CONVENTIONS)}.",
            f"Helpers like {fn}() belong in {f}, not in the {c}; keep them "
            f"{rng.choice(CONVENTIONS)}.",
        ],
        "fact": [
            f"The {c} talks to {lib} through {f}; its timeout is {n} ms.",
            f"{fn}() returns {rng.choice(NOUNS)}s sorted by {rng.choice(NOUNS)}, oldest first.",
            f"The {c} runs on {lib} {ver} in production and {lib2} locally.",
            f"Staging has {n} tenants; the {c} shards them by {rng.choice(NOUNS)} id.",
        ],
        "procedure": [
            f"To {rng.choice(TASKS)}, run `make {rng.choice(VERBS)}-{rng.choice(NOUNS)}` then "
            f"check the {c} dashboard.",
            f"Steps to {rng.choice(TASKS)}: edit {f}, run {lib} with --{rng.choice(VERBS)}, "
            f"then restart the {c}.",
        ],
        "failure": [
            f"Tried {lib2} for the {c}; it failed because of {err} when {cond}.",
            f"Replacing {fn}() with a {lib} call made the {c} {n}% slower; reverted.",
        ],
        "lesson": [
            f"Next time the {c} shows {err}, check {f} first: last time it was {cond}.",
            f"Lesson: reproduce {err} in the {c} with a failing test before touching {fn}().",
        ],
        "preference": [
            f"The user prefers {lib} over {lib2} for anything touching the {c}.",
            f"Keep functions in the {c} under {n % 60 + 20} lines; the user dislikes long ones.",
        ],
        "note": [
            f"The {rng.choice(TEAMS)} team owns the {c}; ask them before changing {f}.",
            f"Ticket {rng.choice(TEAMS).upper()}-{n} tracks {err} in the {c}.",
        ],
    }
    return rng.choice(templates[kind])


def make_memory(rng: random.Random) -> tuple[str, str, list[str]]:
    kind = rng.choices(list(KIND_WEIGHTS), weights=list(KIND_WEIGHTS.values()))[0]
    text = _fill(rng, kind)
    if rng.random() < 0.25:  # a second sentence now and then, for varied lengths
        text += " " + _fill(rng, rng.choice(list(KIND_WEIGHTS)))
    tags = sorted(
        {rng.choice(COMPONENTS).split()[0].lower(), rng.choice(LIBS).lower().replace(" ", "-")}
    )[: rng.randint(0, 2)]
    return text, kind, tags


def make_queries(rng: random.Random, count: int) -> list[str]:
    shapes = [
        lambda: f"why did we choose {rng.choice(LIBS)} for the {rng.choice(COMPONENTS)}",
        lambda: f"{rng.choice(COMPONENTS)} {rng.choice(ERRORS)}",
        lambda: f"how to {rng.choice(TASKS)}",
        lambda: f"{_ident(rng)} fails when {rng.choice(CONDITIONS)}",
        lambda: f"naming convention for {rng.choice(NOUNS)} in the {rng.choice(COMPONENTS)}",
        lambda: f"{rng.choice(LIBS)} timeout",
        lambda: f"who owns the {rng.choice(COMPONENTS)}",
        lambda: f"flaky test {rng.choice(CONDITIONS)}",
        lambda: f"where do {rng.choice(NOUNS)} helpers live",
        lambda: f"{rng.choice(LIBS)} upgrade broke {rng.choice(NOUNS)} handling",
    ]
    out: list[str] = []
    while len(out) < count:
        q = rng.choice(shapes)()
        if q not in out:
            out.append(q)
    return out


# --------------------------------------------------------------------------------------------
# Measurement helpers.
# --------------------------------------------------------------------------------------------


def last_written_line(store: Any) -> tuple[bytes, int]:
    """The last line the store's writer appended, and how many events wait for a commit."""
    state = json.loads((store.local_dir / "writer.json").read_text())
    path = store.root / state["segment"]
    if not path.exists():  # folded into a compacted file since (the store compacts itself)
        path = max((store.root / "events").rglob("*.jsonl"), key=lambda f: f.stat().st_mtime_ns)
    with open(path, "rb") as fh:
        fh.seek(max(0, path.stat().st_size - 65536))
        tail = fh.read()
    return tail.rstrip(b"\n").rsplit(b"\n", 1)[-1] + b"\n", state["pending"]


def fsynced_append(path: Path, line: bytes) -> None:
    """The floor of a durable write: append one line and fsync it, nothing else."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def ms(ns: float) -> float:
    return ns / 1e6


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def summary(values_ns: list[int]) -> dict[str, float]:
    vals = [ms(v) for v in values_ns]
    return {
        "n": len(vals),
        "median_ms": statistics.median(vals) if vals else float("nan"),
        "p95_ms": pct(vals, 0.95),
        "p99_ms": pct(vals, 0.99),
        "mean_ms": statistics.fmean(vals) if vals else float("nan"),
        "min_ms": min(vals) if vals else float("nan"),
        "max_ms": max(vals) if vals else float("nan"),
    }


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def engram_version() -> str:
    """The commit the measured engram/ came from (read-only git), and whether it had edits."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "engram"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" + uncommitted changes in engram/" if dirty else "")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def setup_env(base: Path) -> None:
    """Point everything Engram and git read at `base`, before Engram is created."""
    home = base / "home"
    home.mkdir(parents=True, exist_ok=True)
    os.environ["ENGRAM_HOME"] = str(base / "engram")
    os.environ["HOME"] = str(home)
    os.environ["XDG_CACHE_HOME"] = str(home / ".cache")
    os.environ["XDG_CONFIG_HOME"] = str(home / ".config")
    os.environ["GIT_CONFIG_GLOBAL"] = "/dev/null"
    os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
    os.environ["ENGRAM_ACTOR"] = "bench <bench@example.com>"
    os.environ.pop("ENGRAM_SESSION", None)


def profile_top(prof: cProfile.Profile, title: str, out: Path, limit: int = 25) -> str:
    prof.dump_stats(str(out))
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.strip_dirs()
    buf.write(f"== {title}: top {limit} by cumulative time, engram/ functions ==\n")
    pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(r"engram/", limit)
    buf.write(f"== {title}: top {limit} by own time, all functions ==\n")
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(limit)
    text = buf.getvalue()
    # keep it readable: drop pstats' header noise and shorten the venv paths
    text = re.sub(r"^\s*(Ordered by|List reduced).*\n", "", text, flags=re.M)
    text = text.replace(str(Path(sys.prefix)), "<venv>")
    return text


# --------------------------------------------------------------------------------------------
# The benchmark.
# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memories", type=int, default=100_000, help="N memories (default 100000)")
    ap.add_argument("--queries", type=int, default=50, help="distinct recall queries")
    ap.add_argument("--rounds", type=int, default=7, help="rounds over all queries")
    ap.add_argument("--remembers", type=int, default=200, help="timed remembers of new texts")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument(
        "--model",
        default=None,
        help="a search.model value for the store (an absolute path for an installed "
        "model: HOME points at the temporary folder); default: the built-in one",
    )
    ap.add_argument("--json", metavar="OUT", help="write the figures to this JSON file")
    ap.add_argument("--keep", metavar="DIR", help="build in DIR and leave it there")
    ap.add_argument("--reuse", metavar="DIR", help="measure a store kept with --keep")
    ap.add_argument("--no-profile", action="store_true", help="skip the cProfile summaries")
    ap.add_argument(
        "--profile-reindex",
        action="store_true",
        help="also profile one more reindex with cProfile (slow at large N)",
    )
    ap.add_argument(
        "--fast-build",
        action="store_true",
        help="while building (never while measuring), read the settings files once "
        "instead of on every remember: same events, about 3x faster",
    )
    args = ap.parse_args(argv)
    faulthandler.enable()  # a native crash (onnxruntime, usearch, tantivy) still says where

    if args.reuse:
        base = Path(args.reuse).resolve()
        if not (base / "engram" / ".git").exists():
            ap.error(f"{base} holds no store built by this script")
    elif args.keep:
        base = Path(args.keep).resolve()
        if base.exists() and any(base.iterdir()):
            ap.error(f"{base} exists and is not empty; use --reuse to measure it")
        base.mkdir(parents=True, exist_ok=True)
    else:
        base = Path(tempfile.mkdtemp(prefix="engram-speed-"))
    setup_env(base)

    # onnxruntime (through fastembed) must be imported before usearch, or the process crashes.
    import numpy as np
    import onnxruntime  # noqa: F401
    import tantivy

    from engram.api import Engram
    from engram.search import usearch_index
    from engram.search.embed import load_embedder
    from engram.search.text import query_words

    results: dict[str, Any] = {
        "memories": args.memories,
        "model": args.model or "builtin",
        "queries": args.queries,
        "rounds": args.rounds,
        "remembers": args.remembers,
        "seed": args.seed,
        "store": str(base),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "rss_mb": {},
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "engram_version": engram_version(),
    }
    rng = random.Random(args.seed)
    has_reindex = callable(getattr(Engram, "reindex", None))
    results["reindex_available"] = has_reindex
    try:
        # ---------------------------------------------------------------- build ----------
        e = Engram()
        store_dir = Path(os.environ["ENGRAM_HOME"])
        if args.reuse:
            log(f"reusing the store in {store_dir}")
            results["build"] = {"reused": True}
            for _ in range(args.memories):  # keep the random stream where a build leaves it
                make_memory(rng)
        else:
            e.init()
            e.config_set("commit.every_events", "10000")  # the most a setting allows
            if args.model:
                e.config_set("search.model", args.model)
            log(f"building {args.memories} memories in {store_dir}")
            t0 = time.perf_counter()
            skipped = 0
            original_settings = Engram.settings
            if args.fast_build:
                frozen: dict[Any, Any] = {}

                def cached_settings(self: Any, store: Any = None) -> Any:
                    key = None if store is None else store.root
                    if key not in frozen:
                        frozen[key] = original_settings(self, store)
                    return frozen[key]

                Engram.settings = cached_settings  # type: ignore[method-assign]
            try:
                for i in range(args.memories):
                    text, kind, tags = make_memory(rng)
                    try:
                        e.remember(text, kind=kind, tags=tags, check_duplicates=False)
                    except Exception as exc:  # e.g. a secret-scan refusal: never expected
                        skipped += 1
                        if skipped < 5:
                            log(f"skipped a memory: {exc}")
                    if (i + 1) % 10_000 == 0 or i + 1 == args.memories:
                        rate = (i + 1) / (time.perf_counter() - t0)
                        log(f"  {i + 1} remembered ({rate:.0f}/s)")
            finally:
                Engram.settings = original_settings  # type: ignore[method-assign]
            t_write = time.perf_counter() - t0
            t1 = time.perf_counter()
            e.commit()
            t_commit = time.perf_counter() - t1
            e.config_set("commit.every_events", "20")  # back to the default for what follows
            results["build"] = {
                "reused": False,
                "fast_build": args.fast_build,
                "write_s": round(t_write, 1),
                "per_remember_ms_no_dup_check": round(t_write / args.memories * 1e3, 3),
                "final_commit_s": round(t_commit, 2),
                "skipped": skipped,
            }
            log(f"built in {t_write:.0f}s (+{t_commit:.1f}s commit)")
        results["rss_mb"]["after_build"] = round(peak_rss_mb(), 1)

        # ------------------------------------------------------- reindex / warm-up ---------
        queries = make_queries(random.Random(args.seed + 1), args.queries)
        if has_reindex:
            sig = str(inspect.signature(Engram.reindex))
            log(f"Engram.reindex{sig} exists: timing a first and a second reindex")
            kwargs: dict[str, Any] = {}
            if "progress" in inspect.signature(Engram.reindex).parameters:
                marks: dict[str, int] = {}

                def progress(stage: str, done: int, total: int) -> None:
                    step = done * 10 // max(total, 1)
                    if marks.get(stage) != step:
                        marks[stage] = step
                        log(f"  reindex {stage}: {done}/{total}")

                kwargs["progress"] = progress
            t0 = time.perf_counter_ns()
            first_out = e.reindex(**kwargs)
            t_first = time.perf_counter_ns() - t0
            log(f"first reindex: {t_first / 1e9:.1f}s")
            t0 = time.perf_counter_ns()
            second_out = e.reindex(**kwargs)
            t_second = time.perf_counter_ns() - t0
            results["reindex"] = {
                "signature": sig,
                "first_s": t_first / 1e9,
                "second_s": t_second / 1e9,
                "ratio": t_second / t_first,
                "target": 0.05,
                "first_result": repr(first_out)[:300],
                "second_result": repr(second_out)[:300],
            }
            log(f"reindex: first {t_first / 1e9:.1f}s, second {t_second / 1e9:.3f}s")
        else:
            results["reindex"] = {
                "skipped": "Engram.reindex() does not exist in engram/api.py "
                "yet; this part runs once it does"
            }
            log("Engram.reindex() does not exist yet: skipping part 3")
        log("warm-up recall (indexes everything not yet indexed)")
        t0 = time.perf_counter()
        e.recall(queries[0], k=10)
        results["warmup_recall_s"] = round(time.perf_counter() - t0, 1)
        log(f"warm-up recall took {results['warmup_recall_s']}s")
        if e.warnings:
            log(f"engram warnings: {e.warnings[:3]}")
        results["rss_mb"]["after_indexing"] = round(peak_rss_mb(), 1)

        store = e.write_store()
        cache = store.local_dir / "cache"
        emb = load_embedder(args.model or "builtin")  # the floor embeds with the same model
        settings = e.settings(store)
        limit = max(settings["recall.candidates"], 10 * 5)

        # -------------------------------------------------------------- recall -------------
        tindex = tantivy.Index.open(str(cache / "text"))
        tindex.reload()
        uindex = usearch_index().Index(ndim=emb.dim, metric="cos", dtype="f32")
        uindex.load(str(cache / "vectors.usearch"))
        results["index_sizes"] = {
            "tantivy_docs": tindex.searcher().num_docs,
            "usearch_vectors": len(uindex),
        }
        log(f"indexes: {results['index_sizes']}")

        def floor_once(q: str) -> tuple[int, int, int, int]:
            t0 = time.perf_counter_ns()
            vec = emb.embed([q])[0]
            t1 = time.perf_counter_ns()
            words = query_words(q)  # the words Engram searches for
            parsed, _ = tindex.parse_query_lenient(" ".join(words), ["body"])
            searcher = tindex.searcher()
            hits = searcher.search(parsed, limit=limit, count=False).hits
            t2 = time.perf_counter_ns()
            ids = [searcher.doc(addr)["id"][0] for _, addr in hits]
            t3 = time.perf_counter_ns()
            matches = uindex.search(vec.astype(np.float32), limit)
            _keys = matches.keys
            t4 = time.perf_counter_ns()
            assert ids is not None and _keys is not None
            return t1 - t0, t2 - t1, t3 - t2, t4 - t3

        log(f"recall: {len(queries)} queries x {args.rounds} rounds (+1 untimed round)")
        for q in queries:  # untimed: page caches, lazy loads
            e.recall(q, k=10)
            floor_once(q)
        rec, flo, f_emb, f_tan, f_ids, f_use = [], [], [], [], [], []
        hit_counts = []
        order_rng = random.Random(args.seed + 2)
        for _ in range(args.rounds):
            for q in order_rng.sample(queries, len(queries)):
                first = order_rng.random() < 0.5
                for which in (0, 1) if first else (1, 0):
                    if which == 0:
                        t0 = time.perf_counter_ns()
                        hits = e.recall(q, k=10)
                        rec.append(time.perf_counter_ns() - t0)
                        hit_counts.append(len(hits))
                    else:
                        a, b, c, d = floor_once(q)
                        f_emb.append(a)
                        f_tan.append(b)
                        f_ids.append(c)
                        f_use.append(d)
                        flo.append(a + b + c + d)
        r_sum, f_sum = summary(rec), summary(flo)
        results["recall"] = {
            "recall": r_sum,
            "floor": f_sum,
            "floor_parts": {
                "embed_query": summary(f_emb),
                "tantivy_parse_search": summary(f_tan),
                "tantivy_read_ids": summary(f_ids),
                "usearch_search": summary(f_use),
            },
            "ratio": r_sum["median_ms"] / f_sum["median_ms"],
            "ratio_floor_without_id_reads": r_sum["median_ms"]
            / statistics.median(
                [ms(a + b + d) for a, b, d in zip(f_emb, f_tan, f_use, strict=True)]
            ),
            "target": 1.5,
            "mean_hits": statistics.fmean(hit_counts),
        }
        results["rss_mb"]["after_recall"] = round(peak_rss_mb(), 1)
        log(f"recall median {r_sum['median_ms']:.2f} ms vs floor {f_sum['median_ms']:.2f} ms")

        # ----------------------------------------------- breakdown (no profiler) ----------
        # Pieces of recall timed on their own, unprofiled, right after the recall figures (before
        # any remember leaves memories waiting for the vector index): where recall's time goes.
        parts: dict[str, list[int]] = {}

        def clock(name: str, fn: Any) -> Any:
            t0 = time.perf_counter_ns()
            out = fn()
            parts.setdefault(name, []).append(time.perf_counter_ns() - t0)
            return out

        search = e.workspace.search(store)
        for q in queries:
            clock("Engram.settings(store) [YAML parse]", lambda: e.settings(store))
            clock("Engram.projection(store) [refresh check]", lambda: e.projection(store))
            text_hits = dict(
                clock(
                    "StoreSearch.text_candidates(100)", lambda q=q: search.text_candidates(q, limit)
                )
            )
            vec = emb.embed([q])[0]
            vhits = clock(
                "StoreSearch.vector_scores(100)",
                lambda q=q, v=vec, t=text_hits: search.vector_scores(
                    emb, settings, v, limit, extra_ids=list(t)
                ),
            )
            ids = list(dict.fromkeys([*text_hits, *vhits]))
            clock(
                f"Projection.memories_by_id(~{len(ids)} fused ids)",
                lambda ids=ids: e.projection(store).memories_by_id(ids),
            )
        key_mbi = [k for k in parts if k.startswith("Projection.memories_by_id")]
        if len(key_mbi) > 1:  # merge the per-size labels
            merged = [v for k in key_mbi for v in parts.pop(k)]
            parts["Projection.memories_by_id(fused ids)"] = merged
        results["breakdown"] = {k: summary(v) for k, v in parts.items()}

        # ------------------------------------------------------------ remember -------------
        # New texts, also when a kept store is measured again (its size differs every time):
        # a repeat of an earlier run's texts would be a near-duplicate, another code path.
        stored = e.projection(store).counts()["memories"]
        new_rng = random.Random(args.seed + 3 + stored)
        run_tag = f"{args.seed}-{stored}"
        texts = []
        for i in range(args.remembers):
            text, kind, tags = make_memory(new_rng)
            texts.append(
                (
                    f"{text} (seen in run {run_tag}-{i}, {_ident(new_rng)} at {_file(new_rng)})",
                    kind,
                    tags,
                )
            )
        floor_file = base / "floor-append.jsonl"

        def floor_remember(line: bytes, text: str) -> tuple[int, int]:
            t0 = time.perf_counter_ns()
            fsynced_append(floor_file, line)
            t1 = time.perf_counter_ns()
            emb.embed([text])
            t2 = time.perf_counter_ns()
            return t1 - t0, t2 - t1

        log(f"remember: {args.remembers} new memories, duplicate check on, default commits")
        line, _ = last_written_line(store)
        for text, _, _ in texts[:5]:  # untimed warm-up of the floor path
            floor_remember(line, text)
        rem, rem_plain, rem_commit, rflo, r_app, r_emb = [], [], [], [], [], []
        duplicates = related = 0
        _, pending_before = last_written_line(store)
        for i, (text, kind, tags) in enumerate(texts):
            remember_first = i % 2 == 0
            if not remember_first:  # floor first, with the previous line (same size class)
                a, b = floor_remember(line, text)
            t0 = time.perf_counter_ns()
            out = e.remember(text, kind=kind, tags=tags)
            dt = time.perf_counter_ns() - t0
            rem.append(dt)
            duplicates += bool(out.duplicate)
            related += bool(out.related)
            line, pending_after = last_written_line(store)
            committed = pending_after <= pending_before
            (rem_commit if committed else rem_plain).append(dt)
            pending_before = pending_after
            if remember_first:
                a, b = floor_remember(line, text)
            r_app.append(a)
            r_emb.append(b)
            rflo.append(a + b)
        m_sum, mf_sum = summary(rem), summary(rflo)
        results["remember"] = {
            "remember": m_sum,
            "floor": mf_sum,
            "remember_without_commit": summary(rem_plain),
            "remember_with_commit": summary(rem_commit),
            "floor_parts": {"fsync_append": summary(r_app), "embed_text": summary(r_emb)},
            "ratio": m_sum["median_ms"] / mf_sum["median_ms"],
            "ratio_mean": m_sum["mean_ms"] / mf_sum["mean_ms"],
            "target": 3.0,
            "duplicates": duplicates,
            "with_related": related,
            "line_bytes": len(line),
        }
        results["rss_mb"]["after_remember"] = round(peak_rss_mb(), 1)
        log(f"remember median {m_sum['median_ms']:.2f} ms vs floor {mf_sum['median_ms']:.2f} ms")

        # ------------------------------------------------------------- profiles ------------
        if not args.no_profile:
            prof_dir = base / "profiles"
            prof_dir.mkdir(exist_ok=True)
            prof = cProfile.Profile()
            prof.enable()
            for q in queries:
                e.recall(q, k=10)
            prof.disable()
            text_r = profile_top(prof, f"recall x{len(queries)}", prof_dir / "recall.prof")
            prof = cProfile.Profile()
            prof_rng = random.Random(args.seed + 4)
            extra = []
            for i in range(50):
                t, k, tg = make_memory(prof_rng)
                extra.append((f"{t} (profiled {run_tag}-{i}, {_ident(prof_rng)})", k, tg))
            prof.enable()
            for t, k, tg in extra:
                e.remember(t, kind=k, tags=tg)
            prof.disable()
            text_m = profile_top(prof, "remember x50", prof_dir / "remember.prof")
            results["profiles"] = {
                "recall": str(prof_dir / "recall.prof"),
                "remember": str(prof_dir / "remember.prof"),
            }
            results["_profile_text"] = text_r + "\n" + text_m
            if args.profile_reindex and has_reindex:
                log("profiling one more reindex (nothing new)")
                prof = cProfile.Profile()
                prof.enable()
                e.reindex()
                prof.disable()
                results["_profile_text"] += "\n" + profile_top(
                    prof, "reindex (nothing new)", prof_dir / "reindex.prof"
                )
                results["profiles"]["reindex"] = str(prof_dir / "reindex.prof")
        results["rss_mb"]["peak_end"] = round(peak_rss_mb(), 1)
        e.close()
    finally:
        if not (args.keep or args.reuse):
            shutil.rmtree(base, ignore_errors=True)

    print_report(results)
    if args.json:
        out = {k: v for k, v in results.items() if not k.startswith("_")}
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
        log(f"figures written to {args.json}")
    return 0


def print_report(r: dict[str, Any]) -> None:
    def row(name: str, s: dict[str, float]) -> str:
        return (
            f"  {name:<44} {s['median_ms']:>10.3f} {s['p95_ms']:>10.3f} {s['mean_ms']:>10.3f}"
            f" {s['n']:>6}"
        )

    def verdict(ratio: float, target: float, strict: bool = False) -> str:
        ok = ratio < target if strict else ratio <= target
        return "OK" if ok else "MISSES TARGET"

    print()
    print(
        f"Engram speed: N={r['memories']} memories, {r['queries']} queries x {r['rounds']} "
        f"rounds, {r['remembers']} remembers, {r['cpus']} CPUs, Python {r['python']}, "
        f"engram {r.get('engram_version', '?')}"
    )
    b = r.get("build", {})
    if not b.get("reused"):
        print(
            f"build: {b['write_s']}s for {r['memories']} remembers without duplicate check "
            f"({b['per_remember_ms_no_dup_check']} ms each), final commit {b['final_commit_s']}s"
        )
    print(
        f"warm-up recall (indexes everything): {r['warmup_recall_s']}s; indexes: {r['index_sizes']}"
    )
    print()
    print(f"  {'(ms)':<44} {'median':>10} {'p95':>10} {'mean':>10} {'n':>6}")
    rc = r["recall"]
    print("recall")
    print(row("Engram.recall(k=10)", rc["recall"]))
    print(row("floor (sum of the parts below)", rc["floor"]))
    for name, s in rc["floor_parts"].items():
        print(row("  " + name, s))
    rm = r["remember"]
    print("remember")
    print(row("Engram.remember (dup check on)", rm["remember"]))
    print(row("  samples without a git commit", rm["remember_without_commit"]))
    if rm["remember_with_commit"]["n"]:
        print(row("  samples with a git commit", rm["remember_with_commit"]))
    print(row("floor (sum of the parts below)", rm["floor"]))
    for name, s in rm["floor_parts"].items():
        print(row("  " + name, s))
    print()
    print("ratios (median / median, same run)")
    print(
        f"  recall   {rc['ratio']:6.2f}  target <= 1.5   {verdict(rc['ratio'], 1.5)}"
        f"   (floor without tantivy id reads: {rc['ratio_floor_without_id_reads']:.2f})"
    )
    print(
        f"  remember {rm['ratio']:6.2f}  target <= 3     {verdict(rm['ratio'], 3.0)}"
        f"   (ratio of means: {rm['ratio_mean']:.2f}; duplicates {rm['duplicates']}, "
        f"with related {rm['with_related']})"
    )
    ri = r["reindex"]
    if "skipped" in ri:
        print(f"  reindex  skipped: {ri['skipped']}")
    else:
        print(
            f"  reindex  {ri['ratio']:6.3f}  target < 0.05  {verdict(ri['ratio'], 0.05, True)}"
            f"   (first {ri['first_s']:.2f}s, second {ri['second_s']:.3f}s)"
        )
        reused = re.search(r"'reused': (\d+)", ri.get("first_result", ""))
        if reused and int(reused.group(1)):
            print(
                f"           the first reindex found {reused.group(1)} embeddings cached "
                "(a store "
                "kept from an earlier run): not a cold first, so this ratio overstates it"
            )
    if r.get("breakdown"):
        print()
        print("where recall's time goes (each piece timed alone, unprofiled, same queries)")
        for name, s in r["breakdown"].items():
            print(row(name, s))
    print()
    print("peak RSS (MB): " + ", ".join(f"{k} {v}" for k, v in r["rss_mb"].items()))
    if r.get("_profile_text"):
        print()
        print(r["_profile_text"])


if __name__ == "__main__":
    sys.exit(main())
