"""The stages of the benchmark suite, each run in a process of its own by benchmarks/run_all.py.

    .venv/bin/python benchmarks/stages.py STAGE --work DIR --params JSON --result FILE

A process per stage (and per store size) keeps peak RSS figures apart and lets a stage be run
again alone. Every stage points HOME, ENGRAM_HOME and git's configuration at its own store
under --work (see bulkstore.py); nothing outside --work is touched.

Timing conventions (speed.py's): engram and its floor are measured interleaved, in random
order, so that the noise of a shared machine hits both alike; ratios are taken of medians (and
of p99s) from the same process.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bulkstore  # noqa: E402
import onnxruntime  # noqa: E402,F401  (before usearch, see engram.search.usearch_index)
import speed  # noqa: E402
from bulkstore import StoreSpec  # noqa: E402
from speed import log, summary  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def peak_rss_mb() -> float:
    return speed.peak_rss_mb()


def children_peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0


def engram_exe() -> list[str]:
    script = Path(sys.executable).parent / "engram"
    return [str(script)] if script.exists() else [sys.executable, "-m", "engram"]


def run_process(
    command: list[str],
    *,
    cwd: Path | None = None,
    check: bool = True,
) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - t0
    if check and done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} exited {done.returncode}: "
            f"{(done.stderr or done.stdout).strip()[-500:]}"
        )
    return elapsed, done


def seconds_summary(values: list[float]) -> dict[str, float]:
    """Medians and min of process timings, in seconds."""
    return {
        "n": len(values),
        "median_s": statistics.median(values),
        "min_s": min(values),
        "max_s": max(values),
        "all_s": [round(v, 4) for v in values],
    }


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def main_store_spec(p: dict[str, Any], size: int) -> StoreSpec:
    """The store recall and rehydrate share: `size` memories plus one long task."""
    task = p["task_events"]
    return StoreSpec(
        f"main-{size}-t{task}", memories=size, task_events=task, other_tasks=max(2, size // 5000)
    )


def new_texts(count: int, tag: str, seed: int) -> list[tuple[str, str, list[str]]]:
    """Memories never written before (a run tag in each), from speed.py's generator."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        text, kind, tags = speed.make_memory(rng)
        out.append(
            (
                f"{text} (seen in run {tag}-{i}, {speed._ident(rng)} at {speed._file(rng)})",
                kind,
                tags,
            )
        )
    return out


# --------------------------------------------------------------------------------------------
# Durable write.
# --------------------------------------------------------------------------------------------


def stage_write(work: Path, p: dict[str, Any]) -> dict[str, Any]:
    from engram.api import Engram
    from engram.search.embed import load_embedder

    built = bulkstore.ensure_store(
        work, StoreSpec(f"write-{p['write_store']}", memories=p["write_store"])
    )
    e = Engram()
    store = e.write_store()
    e.recall("warm up the indexes", k=10)
    emb = load_embedder("builtin")
    floor_file = built.base / "floor-append.jsonl"
    tag = time.strftime("%Y%m%d%H%M%S")

    def floor_op(line: bytes, text: str, embed: bool) -> int:
        t0 = time.perf_counter_ns()
        speed.fsynced_append(floor_file, line)
        if embed:
            emb.embed([text])
        return time.perf_counter_ns() - t0

    out: dict[str, Any] = {
        "store": {
            "memories_before": e.projection(store).counts()["memories"],
            "spec": built.spec.record(),
        }
    }
    for mode, check in (("dup_check_on", True), ("dup_check_off", False)):
        texts = new_texts(
            p["write_samples"] + p["write_throughput"] + 5,
            f"{tag}-{mode}",
            seed=hash((tag, mode)) & 0xFFFF,
        )
        line, pending_before = speed.last_written_line(store)
        for text, _, _ in texts[:5]:
            floor_op(line, text, check)
        rem, flo, with_commit = [], [], []
        order = random.Random(7)
        for text, kind, tags in texts[5 : 5 + p["write_samples"]]:
            first = order.random() < 0.5
            if first:
                flo.append(floor_op(line, text, check))
            t0 = time.perf_counter_ns()
            e.remember(text, kind=kind, tags=tags, check_duplicates=check)
            dt = time.perf_counter_ns() - t0
            rem.append(dt)
            line, pending_after = speed.last_written_line(store)
            if pending_after <= pending_before:
                with_commit.append(dt)
            pending_before = pending_after
            if not first:
                flo.append(floor_op(line, text, check))
        # Throughput: back to back, commits included, then the floor the same way.
        batch = texts[5 + p["write_samples"] :]
        t0 = time.perf_counter()
        for text, kind, tags in batch:
            e.remember(text, kind=kind, tags=tags, check_duplicates=check)
        t_engram = time.perf_counter() - t0
        line, _ = speed.last_written_line(store)
        t0 = time.perf_counter()
        for text, _, _ in batch:
            floor_op(line, text, check)
        t_floor = time.perf_counter() - t0
        r, f = summary(rem), summary(flo)
        out[mode] = {
            "remember": r,
            "floor": f,
            "commits_seen": len(with_commit),
            "remember_with_commit": summary(with_commit),
            "throughput_per_s": len(batch) / t_engram,
            "floor_throughput_per_s": len(batch) / t_floor,
            "ratio_p50": ratio(r["median_ms"], f["median_ms"]),
            "ratio_p99": ratio(r["p99_ms"], f["p99_ms"]),
            "ratio_throughput": ratio(len(batch) / t_floor, len(batch) / t_engram),
            "floor_is": "fsynced append of the same line" + (" + one embedding" if check else ""),
            "line_bytes": len(line),
        }
        log(
            f"write {mode}: remember p50 {r['median_ms']:.2f} ms vs floor "
            f"{f['median_ms']:.2f} ms; {out[mode]['throughput_per_s']:.0f}/s vs "
            f"{out[mode]['floor_throughput_per_s']:.0f}/s"
        )
    out["warnings"] = e.warnings[:5]
    out["peak_rss_mb"] = peak_rss_mb()
    e.close()
    return out


# --------------------------------------------------------------------------------------------
# Recall.
# --------------------------------------------------------------------------------------------


class Floor:
    """Bare tantivy + usearch + one query embedding, on the index files Engram uses."""

    def __init__(self, cache: Path, limit: int) -> None:
        import tantivy

        from engram.search import usearch_index
        from engram.search.embed import load_embedder
        from engram.search.vectors import EXACT_BELOW, EXPANSION_SEARCH

        self.emb = load_embedder("builtin")
        self.tindex = tantivy.Index.open(str(cache / "text"))
        self.tindex.reload()
        self.uindex = usearch_index().Index(ndim=self.emb.dim, metric="cos", dtype="f32")
        self.uindex.load(str(cache / "vectors.usearch"))
        # The search Engram makes: exact below `search.exact_below` vectors, else the graph at
        # Engram's breadth (a saved index does not keep it).
        self.uindex.expansion_search = EXPANSION_SEARCH
        self.exact = len(self.uindex) < EXACT_BELOW
        self.limit = limit

    def sizes(self) -> dict[str, int]:
        return {
            "tantivy_docs": self.tindex.searcher().num_docs,
            "usearch_vectors": len(self.uindex),
        }

    def once(self, q: str) -> tuple[int, int, int]:
        import numpy as np

        from engram.search.text import query_words

        t0 = time.perf_counter_ns()
        vec = self.emb.embed([q])[0]
        t1 = time.perf_counter_ns()
        # The words Engram searches for (stop words left out): the same query, done bare.
        parsed, _ = self.tindex.parse_query_lenient(" ".join(query_words(q)), ["body"])
        searcher = self.tindex.searcher()
        hits = searcher.search(parsed, limit=self.limit, count=False).hits
        ids = [searcher.doc(addr)["id"][0] for _, addr in hits]
        t2 = time.perf_counter_ns()
        keys = self.uindex.search(
            vec.astype(np.float32), self.limit, exact=self.exact, threads=1
        ).keys
        t3 = time.perf_counter_ns()
        assert ids is not None and keys is not None
        return t1 - t0, t2 - t1, t3 - t2


def stage_recall(work: Path, p: dict[str, Any]) -> dict[str, Any]:
    from engram.api import Engram

    size = p["size"]
    built = bulkstore.ensure_store(work, main_store_spec(p, size))
    rss_start = peak_rss_mb()
    e = Engram()
    store = e.write_store()
    queries = speed.make_queries(random.Random(p.get("seed", 1)), p["queries"])
    from engram.search.embed import load_embedder

    load_embedder("builtin")  # the model's load is start-up's business, not the first query's
    t0 = time.perf_counter()
    e.recall(queries[0], k=10)
    first = time.perf_counter() - t0
    settings = e.settings(store)
    floor = Floor(store.local_dir / "cache", max(settings["recall.candidates"], 50))
    for q in queries:  # untimed: page caches, lazy loads
        e.recall(q, k=10)
        floor.once(q)
    rec, flo, parts = [], [], {"embed_query": [], "tantivy": [], "usearch": []}
    order = random.Random(3)
    for _ in range(p["rounds"]):
        for q in order.sample(queries, len(queries)):
            first_engram = order.random() < 0.5
            for which in (0, 1) if first_engram else (1, 0):
                if which == 0:
                    t0 = time.perf_counter_ns()
                    e.recall(q, k=10)
                    rec.append(time.perf_counter_ns() - t0)
                else:
                    a, b, c = floor.once(q)
                    parts["embed_query"].append(a)
                    parts["tantivy"].append(b)
                    parts["usearch"].append(c)
                    flo.append(a + b + c)
    r, f = summary(rec), summary(flo)
    counts = e.projection(store).counts()
    out = {
        "size": size,
        "memories": counts["memories"],
        "events": counts["events"],
        "event_files": counts["files"],
        "index_sizes": floor.sizes(),
        "first_recall_s": first,
        "recall": r,
        "floor": f,
        "floor_parts": {k: summary(v) for k, v in parts.items()},
        "ratio_p50": ratio(r["median_ms"], f["median_ms"]),
        "ratio_p99": ratio(r["p99_ms"], f["p99_ms"]),
        "peak_rss_mb_both": peak_rss_mb(),
        "rss_mb_before_open": rss_start,
        "store_build": {
            k: built.info.get(k)
            for k in ("build_s", "write_s", "commit_s", "prefill_s", "reindex_s")
        },
        "warnings": e.warnings[:5],
    }
    log(
        f"recall @ {size}: p50 {r['median_ms']:.2f} ms (floor {f['median_ms']:.2f}), "
        f"p99 {r['p99_ms']:.2f} ms (floor {f['p99_ms']:.2f})"
    )
    e.close()
    return out


def stage_recall_rss(work: Path, p: dict[str, Any]) -> dict[str, Any]:
    """Peak RSS of a process that only recalls (or only runs the floor), after the queries."""
    from engram.api import Engram

    built = bulkstore.load_built(work, main_store_spec(p, p["size"]))
    if built is None:
        raise RuntimeError("the store is not built; run the recall stage first")
    speed.setup_env(built.base)
    base = peak_rss_mb()
    queries = speed.make_queries(random.Random(p.get("seed", 1)), p["queries"])
    if p["which"] == "engram":
        e = Engram()
        for q in queries:
            e.recall(q, k=10)
    else:
        e = Engram()
        floor = Floor(e.write_store().local_dir / "cache", 100)
        for q in queries:
            floor.once(q)
    return {"which": p["which"], "peak_rss_mb": peak_rss_mb(), "rss_mb_after_imports": base}


# --------------------------------------------------------------------------------------------
# Rehydrate.
# --------------------------------------------------------------------------------------------


def stage_rehydrate(work: Path, p: dict[str, Any]) -> dict[str, Any]:
    from engram.api import Engram

    size = p["size"]
    built = bulkstore.ensure_store(work, main_store_spec(p, size))
    task = built.task_id
    assert task
    e = Engram()
    t0 = time.perf_counter()
    first = e.resume(task=task)
    t_first = time.perf_counter() - t0
    # Runs stop early past a time budget (at least 3 warm and 2 process runs are made), so a
    # resume that grows with the store cannot hold a run up for hours at 1M events.
    budget = p.get("resume_budget_s", 180)
    warm: list[int] = []
    started = time.perf_counter()
    while len(warm) < p["resume_runs"] and (
        len(warm) < 3 or time.perf_counter() - started < budget
    ):
        t0 = time.perf_counter_ns()
        e.resume(task=task)
        warm.append(time.perf_counter_ns() - t0)
    counts = e.projection(e.write_store()).counts()
    task_obj = e.task(task)
    cli: list[float] = []
    started = time.perf_counter()
    while len(cli) < p["resume_cli_runs"] and (
        len(cli) < 2 or time.perf_counter() - started < budget
    ):
        elapsed, _ = run_process([*engram_exe(), "resume", "--task", task], cwd=built.base / "home")
        cli.append(elapsed)
    w = summary(warm)
    out = {
        "size": size,
        "events": counts["events"],
        "memories": counts["memories"],
        "task_events": len(e.projection(e.write_store()).events(task=task, limit=None)),
        "task_progress": len(task_obj.progress),
        "task_checkpoints": len(task_obj.checkpoints),
        "first_call_s": t_first,
        "warm": w,
        "cli": seconds_summary(cli),
        "markdown_chars": len(first.markdown),
        "truncated": first.truncated,
        "peak_rss_mb": peak_rss_mb(),
        "warnings": e.warnings[:5],
    }
    log(
        f"rehydrate @ {counts['events']} events: first {t_first * 1e3:.0f} ms, warm p50 "
        f"{w['median_ms']:.1f} ms, CLI {statistics.median(cli):.2f} s"
    )
    e.close()
    return out


# --------------------------------------------------------------------------------------------
# Reindex: a full rebuild, then the incremental update after a real `git pull`.
# --------------------------------------------------------------------------------------------


class Split:
    """Time spent in the phases of a reindex, by wrapping the methods that do them (in this
    process only): reading the event files into the read model, BM25, embedding, vectors."""

    def __init__(self) -> None:
        from engram.readmodel.projection import Projection
        from engram.search.embed import Embedder
        from engram.search.retrieval import StoreSearch

        self.totals: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self._undo: list[Callable[[], None]] = []
        self._wrap(Projection, "refresh", "read (projection)")
        self._wrap(StoreSearch, "sync_text", "BM25 (tantivy)")
        self._wrap(StoreSearch, "sync_vectors", "vectors (all)")
        self._wrap(Embedder, "embed", "embedding (ONNX)")

    def _wrap(self, cls: type, name: str, label: str) -> None:
        original = getattr(cls, name)
        totals, counts = self.totals, self.counts

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                totals[label] = totals.get(label, 0.0) + time.perf_counter() - t0
                counts[label] = counts.get(label, 0) + 1

        setattr(cls, name, timed)
        self._undo.append(lambda: setattr(cls, name, original))

    def reset(self) -> None:
        self.totals.clear()
        self.counts.clear()

    def result(self, total: float) -> dict[str, float]:
        t = dict(self.totals)
        embedding = t.get("embedding (ONNX)", 0.0)
        out = {
            "read (projection)": t.get("read (projection)", 0.0),
            "BM25 (tantivy)": t.get("BM25 (tantivy)", 0.0),
            "embedding (ONNX)": embedding,
            "vectors: cache + usearch": max(0.0, t.get("vectors (all)", 0.0) - embedding),
        }
        out["other"] = max(0.0, total - sum(out.values()))
        out["total"] = total
        return out

    def close(self) -> None:
        for undo in self._undo:
            undo()


def stage_reindex(work: Path, p: dict[str, Any]) -> dict[str, Any]:
    from engram.api import Engram
    from engram.search.embed import load_embedder

    n = p["reindex_events"]
    spec = StoreSpec(f"reindex-{n}", memories=n, prefill_vectors=False)
    built = bulkstore.ensure_store(work, spec)
    store_dir = built.store_dir
    cache = store_dir / ".git" / "engram" / "cache" / "embeddings.sqlite3"
    out: dict[str, Any] = {"events": n}
    split = Split()
    e = Engram()
    load_embedder("builtin")  # the model's load time is not the reindex's
    if not p.get("skip_full"):
        for suffix in ("", "-wal", "-shm"):  # a cold embedding cache: every text is embedded
            Path(str(cache) + suffix).unlink(missing_ok=True)
        log(f"reindex: full rebuild of {n} events with a cold embedding cache")
        marks: dict[str, int] = {}

        def progress(stage: str, done: int, todo: int) -> None:
            tenth = done * 10 // max(todo, 1)
            if marks.get(stage) != tenth:
                marks[stage] = tenth
                log(f"  embedded {done}/{todo}")

        split.reset()
        t0 = time.perf_counter()
        report = e.reindex(progress=progress)
        total = time.perf_counter() - t0
        out["full"] = {
            "split_s": split.result(total),
            "embedded": report.embedded,
            "reused": report.reused,
            "memories": report.memories,
        }
        out["full"]["embed_per_s"] = report.embedded / max(
            out["full"]["split_s"]["embedding (ONNX)"], 1e-9
        )
        log(f"reindex full: {total:.1f}s {out['full']['split_s']}")
        split.reset()
        t0 = time.perf_counter()
        report = e.reindex()
        total = time.perf_counter() - t0
        out["again"] = {
            "split_s": split.result(total),
            "embedded": report.embedded,
            "reused": report.reused,
        }
        log(f"reindex again (every text cached): {total:.1f}s")
    e.close()
    out["incremental"] = incremental(built, p, split)
    split.close()
    out["peak_rss_mb"] = peak_rss_mb()
    return out


def ensure_remote(built: bulkstore.Built) -> tuple[Path, Path, str]:
    """A bare repository by path as the store's origin, and another plain clone of it.

    Returns (remote, other clone, base commit): the store's HEAD when this was set up."""
    git = bulkstore.git
    store_dir = built.store_dir
    remote = built.base / "remote.git"
    other = built.base / "other"
    record = built.base / "remote-base.txt"
    if not record.exists():
        shutil.rmtree(remote, ignore_errors=True)
        shutil.rmtree(other, ignore_errors=True)
        git(built.base, "clone", "--quiet", "--bare", str(store_dir), str(remote))
        if "origin" in git(store_dir, "remote").split():
            git(store_dir, "remote", "remove", "origin")
        git(store_dir, "remote", "add", "origin", str(remote))
        git(store_dir, "fetch", "--quiet", "origin")
        git(store_dir, "branch", "--quiet", "--set-upstream-to=origin/main", "main")
        git(built.base, "clone", "--quiet", str(remote), str(other))
        record.write_text(git(store_dir, "rev-parse", "HEAD") + "\n")
    return remote, other, record.read_text().strip()


def reset_to(base: str, *clones: Path, remotes: tuple[Path, ...] = ()) -> None:
    git = bulkstore.git
    for remote in remotes:
        git(remote, "update-ref", "refs/heads/main", base)
    for clone in clones:
        git(clone, "reset", "--quiet", "--hard", base)
        git(clone, "clean", "--quiet", "-fd", "events")
        git(clone, "fetch", "--quiet", "origin")


def push_from_other(other: Path, count: int, tag: str, *, remotes: tuple[Path, ...]) -> list[str]:
    """`count` new memories written on another clone, committed and pushed with plain git."""
    from engram.storage.store import Store

    git = bulkstore.git
    rng = random.Random(tag)
    events = [
        ("memory.created", bulkstore.memory_data(rng, bulkstore._entity_id(rng)))
        for _ in range(count)
    ]
    for _, data in events:
        data["content"] += f" (from the other clone, run {tag})"
    bulkstore.append_bulk(Store(other, "personal"), events, rng=rng)
    git(other, "add", "events")
    git(
        other,
        "-c",
        "user.name=other",
        "-c",
        "user.email=other@example.com",
        "commit",
        "--quiet",
        "-m",
        f"engram: {count} events from another clone",
    )
    for remote in remotes:
        git(other, "push", "--quiet", "--force", str(remote), "HEAD:refs/heads/main")
    return [data["content"] for _, data in events]


def incremental(built: bulkstore.Built, p: dict[str, Any], split: Split) -> dict[str, Any]:
    from engram.api import Engram
    from engram.search.embed import load_embedder

    remote, other, base = ensure_remote(built)
    store_dir = built.store_dir
    count = p["pull_events"]
    tag = time.strftime("%Y%m%d%H%M%S")
    reset_to(base, store_dir, other, remotes=(remote,))
    e = Engram()
    e.refresh_indexes()  # current before the pull (after any reset of an earlier run)
    emb = load_embedder("builtin")
    # The floor is embedding as many new texts bare, once before (other texts) and once after
    # (the same texts): the mean of the two, so that a slow moment of the machine is shared.
    t0 = time.perf_counter()
    emb.embed([text for text, _, _ in new_texts(count, f"{tag}-floor", seed=len(tag))])
    t_before = time.perf_counter() - t0
    texts = push_from_other(other, count, tag, remotes=(remote,))
    t_pull, _ = run_process(["git", "pull", "--quiet", "--ff-only"], cwd=store_dir)
    split.reset()
    t0 = time.perf_counter()
    report = e.refresh_indexes()
    total = time.perf_counter() - t0
    split_s = split.result(total)
    t0 = time.perf_counter()
    emb.embed(texts)
    t_embed = (t_before + time.perf_counter() - t0) / 2
    out = {
        "pulled_events": count,
        "git_pull_s": t_pull,
        "refresh_indexes_s": total,
        "split_s": split_s,
        "embedded": report.embedded,
        "events_added": report.events_added,
        "bare_embedding_s": t_embed,
        "ratio": ratio(total, t_embed),
        "floor_is": f"a bare embedding of {count} new texts (mean of one before the pull, "
        "other texts, and one after, the same texts)",
    }
    log(
        f"incremental after a pull of {count}: refresh_indexes {total:.2f}s "
        f"(bare embedding {t_embed:.2f}s, git pull {t_pull:.2f}s)"
    )
    e.close()
    reset_to(base, store_dir, other, remotes=(remote,))
    Engram().refresh_indexes()
    return out


# --------------------------------------------------------------------------------------------
# Start-up.
# --------------------------------------------------------------------------------------------

BARE_BM25 = """\
import re, sys, tantivy
index = tantivy.Index.open(sys.argv[1])
words = re.findall(r"\\w+", sys.argv[2].lower())
parsed, _ = index.parse_query_lenient(" ".join(words), ["body"])
searcher = index.searcher()
hits = searcher.search(parsed, limit=100, count=False).hits
ids = [searcher.doc(a)["id"][0] for _, a in hits]
"""

BARE_HYBRID = (
    BARE_BM25
    + """\
import numpy as np
from engram.search import usearch_index
from engram.search.embed import load_embedder
emb = load_embedder("builtin")
vec = emb.embed([sys.argv[4]])[0]
u = usearch_index().Index(ndim=emb.dim, metric="cos", dtype="f32")
u.load(sys.argv[3])
keys = u.search(vec.astype(np.float32), 100).keys
"""
)


def stage_startup(work: Path, p: dict[str, Any]) -> dict[str, Any]:
    from engram.api import Engram

    built = bulkstore.ensure_store(
        work, StoreSpec(f"startup-{p['startup_store']}", memories=p["startup_store"])
    )
    cwd = built.base / "home"
    cache = built.store_dir / ".git" / "engram" / "cache"
    queries = speed.make_queries(random.Random(5), 8)
    # The bare queries search the words Engram searches for (stop words left out).
    from engram.search.text import query_words

    words = [" ".join(query_words(q)) for q in queries]
    exe = engram_exe()
    py = sys.executable

    def set_model(value: str) -> None:
        e = Engram()
        if e.config_get("search.model") != value:
            e.config_set("search.model", value)
        e.recall("make the indexes current", k=1)
        e.close()

    commands: dict[str, Callable[[int], list[str]]] = {
        "python -c pass (floor)": lambda i: [py, "-c", "pass"],
        "engram --help": lambda i: [*exe, "--help"],
        "engram status": lambda i: [*exe, "status"],
    }
    bm25 = {
        "engram recall (BM25 only)": lambda i: [*exe, "recall", queries[i % len(queries)]],
        "bare tantivy query in a process": lambda i: [
            py,
            "-c",
            BARE_BM25,
            str(cache / "text"),
            words[i % len(queries)],
        ],
    }
    hybrid = {
        "engram recall (hybrid)": lambda i: [*exe, "recall", queries[i % len(queries)]],
        "bare tantivy + ONNX + usearch in a process": lambda i: [
            py,
            "-c",
            BARE_HYBRID,
            str(cache / "text"),
            words[i % len(queries)],
            str(cache / "vectors.usearch"),
            queries[i % len(queries)],
        ],
    }
    floor_key = "python -c pass (floor)"
    times: dict[str, list[float]] = {}

    def measure(group: dict[str, Callable[[int], list[str]]]) -> None:
        group = {floor_key: commands[floor_key], **group}
        for make in group.values():  # warm the OS file cache, unmeasured
            run_process(make(0), cwd=cwd)
        for i in range(p["startup_runs"]):
            names = list(group)
            random.Random(i).shuffle(names)
            for name in names:
                elapsed, _ = run_process(group[name](i), cwd=cwd)
                times.setdefault(name, []).append(elapsed)

    set_model("builtin")
    measure({k: v for k, v in commands.items() if k != floor_key})
    set_model("off")
    try:
        measure(bm25)
    finally:
        set_model("builtin")
    measure(hybrid)
    procs = {name: seconds_summary(values) for name, values in times.items()}
    floor = procs[floor_key]["median_s"]
    for s in procs.values():
        s["ratio_to_floor"] = ratio(s["median_s"], floor)
        s["over_floor_s"] = s["median_s"] - floor
    out: dict[str, Any] = {"store_memories": p["startup_store"], "processes": procs}
    log("startup: " + ", ".join(f"{k} {v['median_s']:.3f}s" for k, v in procs.items()))

    mcp_json = built.base / "mcp_cold_start.json"
    elapsed, done = run_process(
        [
            py,
            str(ROOT / "benchmarks" / "mcp_cold_start.py"),
            "--runs",
            str(p["mcp_runs"]),
            "--json",
            str(mcp_json),
        ],
        cwd=ROOT,
        check=False,
    )
    if done.returncode == 0 and mcp_json.exists():
        mcp = json.loads(mcp_json.read_text())
        out["mcp"] = {
            "runs": mcp["runs"],
            "median_s": mcp["median_seconds"],
            "min_s": {k: min(v) for k, v in mcp["all_seconds"].items()},
            "all_s": mcp["all_seconds"],
            "difference_s": mcp["difference_seconds"],
            "target_s": mcp["target_seconds"],
            "ok": mcp["ok"],
        }
        log(
            f"MCP first tools/list: engram {mcp['median_seconds']['engram']:.3f}s, bare "
            f"{mcp['median_seconds']['bare']:.3f}s"
        )
    else:
        out["mcp"] = {"error": (done.stderr or done.stdout).strip()[-800:]}
    return out


# --------------------------------------------------------------------------------------------
# Git: engram sync against plain git fetch + push.
# --------------------------------------------------------------------------------------------


def stage_sync(work: Path, p: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    from engram.api import Engram
    from engram.domain.syncing import sync
    from engram.search.embed import EmbeddingCache, content_hash, load_embedder
    from engram.search.retrieval import embedding_text

    git = bulkstore.git
    spec = StoreSpec(
        f"sync-{p['sync_events']}-c{p['sync_commits']}",
        memories=p["sync_events"],
        commits=p["sync_commits"],
    )
    built = bulkstore.ensure_store(work, spec)
    store_dir = built.store_dir
    remote, other, base = ensure_remote(built)
    # The floor's twin: a plain git clone of a twin remote, holding the same commits.
    remote_plain = built.base / "remote-plain.git"
    plain = built.base / "plain"
    if not plain.exists():
        shutil.rmtree(remote_plain, ignore_errors=True)
        git(built.base, "clone", "--quiet", "--bare", str(remote), str(remote_plain))
        git(built.base, "clone", "--quiet", str(remote_plain), str(plain))
    reset_to(base, store_dir, other, plain, remotes=(remote, remote_plain))
    cwd = built.base / "home"
    exe = engram_exe()
    e = Engram()
    e.refresh_indexes()
    e.close()
    commits = int(git(store_dir, "rev-list", "--count", "HEAD"))
    identity = ["-c", "user.name=plain", "-c", "user.email=plain@example.com"]

    def plain_fetch_push() -> float:
        t1, _ = run_process(["git", "fetch", "--quiet", "origin"], cwd=plain)
        t2, _ = run_process(["git", "push", "--quiet", "origin", "HEAD:refs/heads/main"], cwd=plain)
        return t1 + t2

    runs = p["sync_runs"]
    # 1. Nothing to do.
    noop_cli, noop_floor, noop_api = [], [], []
    run_process([*exe, "sync"], cwd=cwd)  # warm-up, unmeasured
    plain_fetch_push()
    for i in range(runs):
        if i % 2:
            noop_floor.append(plain_fetch_push())
        elapsed, _ = run_process([*exe, "sync"], cwd=cwd)
        noop_cli.append(elapsed)
        if not i % 2:
            noop_floor.append(plain_fetch_push())
    api = Engram()
    sync(api)
    for _ in range(runs):
        t0 = time.perf_counter()
        sync(Engram())
        noop_api.append(time.perf_counter() - t0)
    api.close()
    log(
        f"sync, nothing to do: CLI {statistics.median(noop_cli):.2f}s, in-process "
        f"{statistics.median(noop_api):.2f}s, git fetch + push "
        f"{statistics.median(noop_floor):.2f}s"
    )

    # 2. 1k new events each way: pending here (as if remembered, their vectors cached), and
    #    arriving from another clone. The twin gets the same file and the same remote commits.
    count = p["sync_new_events"]
    emb = load_embedder("builtin")
    busy_cli, busy_floor, busy_embed = [], [], []
    for i in range(p["sync_busy_runs"]):
        reset_to(base, store_dir, other, plain, remotes=(remote, remote_plain))
        warm = Engram()
        warm.refresh_indexes()
        store = warm.write_store()
        tag = f"{time.strftime('%Y%m%d%H%M%S')}-{i}"
        incoming = push_from_other(other, count, tag, remotes=(remote, remote_plain))
        rng = random.Random(f"local-{tag}")
        local = [
            ("memory.created", bulkstore.memory_data(rng, bulkstore._entity_id(rng)))
            for _ in range(count)
        ]
        for _, data in local:
            data["content"] += f" (written here, run {tag})"
        path = bulkstore.append_bulk(store, local, rng=rng)
        cache = EmbeddingCache(store.local_dir / "cache" / "embeddings.sqlite3")
        vectors = bulkstore.random_unit_vectors(np.random.default_rng(i), count, emb.dim)
        cache.put(
            emb.identity,
            {
                content_hash(embedding_text(d["kind"], d.get("tags") or [], d["content"])): v
                for (_, d), v in zip(local, vectors, strict=True)
            },
        )
        cache.close()
        warm.refresh_indexes()  # the local events are read and indexed, as after remember
        warm.close()
        twin = plain / path.relative_to(store_dir)
        twin.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, twin)
        elapsed, done = run_process([*exe, "sync", "--json"], cwd=cwd)
        busy_cli.append(elapsed)
        result = json.loads(done.stdout)[0]
        t_add, _ = run_process(["git", "add", "events"], cwd=plain)
        t_commit, _ = run_process(
            ["git", *identity, "commit", "--quiet", "-m", "1k events"], cwd=plain
        )
        t_pull, _ = run_process(
            ["git", *identity, "pull", "--quiet", "--no-rebase", "--no-edit", "origin", "main"],
            cwd=plain,
        )
        t_push, _ = run_process(
            ["git", "push", "--quiet", "origin", "HEAD:refs/heads/main"], cwd=plain
        )
        busy_floor.append(t_add + t_commit + t_pull + t_push)
        t0 = time.perf_counter()
        emb.embed(incoming)
        busy_embed.append(time.perf_counter() - t0)
        log(
            f"sync, {count} new each way: CLI {elapsed:.2f}s (received {result['received']}, "
            f"pushed {result['pushed']}, merge {result['merge']}); git add + commit + pull + "
            f"push {busy_floor[-1]:.2f}s; embedding the {count} received texts "
            f"{busy_embed[-1]:.2f}s"
        )
    reset_to(base, store_dir, other, plain, remotes=(remote, remote_plain))
    done_engram = Engram()
    done_engram.refresh_indexes()
    done_engram.close()
    cli_s, floor_s = seconds_summary(noop_cli), seconds_summary(noop_floor)
    api_s = seconds_summary(noop_api)
    out = {
        "events": built.info.get("events"),
        "commits": commits,
        "new_events": count,
        "noop": {
            "engram_sync_cli": cli_s,
            "engram_sync_in_process": api_s,
            "git_fetch_push": floor_s,
            "ratio_cli": ratio(cli_s["median_s"], floor_s["median_s"]),
            "ratio_in_process": ratio(api_s["median_s"], floor_s["median_s"]),
        },
    }
    if busy_cli:
        b, f, m = (
            seconds_summary(busy_cli),
            seconds_summary(busy_floor),
            seconds_summary(busy_embed),
        )
        out["busy"] = {
            "engram_sync_cli": b,
            "git_add_commit_pull_push": f,
            "bare_embedding_of_received": m,
            "ratio_git_only": ratio(b["median_s"], f["median_s"]),
            "ratio_git_plus_embedding": ratio(b["median_s"], f["median_s"] + m["median_s"]),
        }
    out["peak_rss_mb"] = peak_rss_mb()
    out["children_peak_rss_mb"] = children_peak_rss_mb()
    return out


STAGES: dict[str, Callable[[Path, dict[str, Any]], dict[str, Any]]] = {
    "write": stage_write,
    "recall": stage_recall,
    "recall_rss": stage_recall_rss,
    "rehydrate": stage_rehydrate,
    "reindex": stage_reindex,
    "startup": stage_startup,
    "sync": stage_sync,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stage", choices=sorted(STAGES))
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--params", default="{}")
    ap.add_argument("--result", type=Path, required=True)
    ap.add_argument("--rebuild", action="store_true")
    args = ap.parse_args()
    import faulthandler

    faulthandler.enable()
    params = json.loads(args.params)
    if args.rebuild:
        original = bulkstore.ensure_store

        def rebuilding(work: Path, spec: StoreSpec, *, rebuild: bool = False) -> Any:
            return original(work, spec, rebuild=True)

        bulkstore.ensure_store = rebuilding  # type: ignore[assignment]
    t0 = time.perf_counter()
    out = STAGES[args.stage](args.work.resolve(), params)
    out["stage_seconds"] = round(time.perf_counter() - t0, 1)
    args.result.parent.mkdir(parents=True, exist_ok=True)
    args.result.write_text(json.dumps(out, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
