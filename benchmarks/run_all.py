"""Engram's performance suite: every benchmark in one command, one report.

How to run (from the repository root, with the project's virtualenv and the `bench` extra,
`pip install -e '.[bench]'`, for the plots):

    .venv/bin/python benchmarks/run_all.py --quick                 # small sizes, ~15-20 minutes
    .venv/bin/python benchmarks/run_all.py --smoke                 # tiny sizes: every stage runs
    .venv/bin/python benchmarks/run_all.py                         # the full run, hours with 1M
    .venv/bin/python benchmarks/run_all.py --only recall,startup   # some stages again
    .venv/bin/python benchmarks/run_all.py --only recall --sizes 1000000
    .venv/bin/python benchmarks/run_all.py --report-only           # rewrite the report only
    .venv/bin/python benchmarks/run_all.py --update-docs           # also docs/benchmarks.md

Output in --out (default benchmarks/results/, or benchmarks/results/quick/ with --quick,
benchmarks/results/smoke/ with --smoke):
`report.md`, `results.json`, PNG plots, and `stages/*.json` (one file per stage, and per store
size for recall and rehydrate). A stage's file is written as soon as it is measured, and the
report is assembled from every stage file present, so a run that stops part-way keeps what it
measured, and `--only` or `--sizes` measure again just that part. `--update-docs` replaces the
section of docs/benchmarks.md between the markers `<!-- run_all:start -->` and
`<!-- run_all:end -->` (added at the end the first time) with the summary; the rest of that
file is left as it is.

Stores are built in bulk (benchmarks/bulkstore.py) under --work (default benchmarks/.work/suite,
git-ignored) and kept: a rerun reuses a store whose build parameters are unchanged (`--rebuild`
builds again). Each stage runs in a process of its own (benchmarks/stages.py), so that peak RSS
figures are its own.

Stages, what they measure, and how long the full run takes on this project's machine (2
cores, 24 GiB) when it is otherwise idle; under the load of other work expect up to 3-4x longer
(a --quick run without versus takes about 12 minutes at a load average of 7-8 on the 2 cores).
`--smoke` runs every stage but versus at sizes too small to measure anything, in a few minutes:
it proves the harness still runs against the code (the slow tests run it,
tests/test_benchmark_suite.py).
The first run builds every store; a rerun skips the builds.

| stage | measures | full run | --quick |
|---|---|---|---|
| startup | `engram --help`, `engram status`, `engram recall` (BM25 only, hybrid) as processes against `python -c pass`; MCP first `tools/list` against a bare SDK server (benchmarks/mcp_cold_start.py) | ~5 min | ~2 min |
| write | durable `remember` p50/p99 and throughput against an fsynced append of the same line (+ one embedding with the near-duplicate check on), in a 10k store | ~5 min | ~2 min |
| recall | `recall(k=10)` p50/p99 against bare tantivy + usearch + one query embedding, and peak RSS, at 10k, 100k and 1M memories (random unit vectors in the embedding cache) | dominated by building the stores' HNSW graphs (connectivity 32, expansion 256, linked on every core: engram/search/vectors.py): the 100k store took 7.4 min to build at 3a3f72e (25-29 min at 5c664d9, one thread at a time), the 1M store about an hour at 1b5bcdc with the graph of then (connectivity 16, expansion 128; not built since with the wider graph); ~1 min to measure each size once built | ~3 min |
| rehydrate | `resume(task=...)` of a task with 10k events, in the same stores (total 20k, 110k, ~1M events); runs stop after a 3-minute budget per size (3 at least) | ~10-20 min, depending on how resume grows | ~1 min |
| reindex | full rebuild of 100k memories with a cold embedding cache, split into reading, BM25 and embedding; a second rebuild with every embedding cached; then `refresh_indexes()` after a real `git pull` of 1k new events | ~40-45 min (embedding 100k texts at ~50 texts/s) | ~4 min |
| sync | `engram sync` with nothing to do and with 1k new events each way, against plain git, in a store of 100k events and 1k commits | ~10-15 min (building the 1k commits included) | ~2 min |
| versus | benchmarks/versus.py, if present (with --quick when this run is --quick) | see its docstring | ~5 min |

In all, a first full run takes about 50 minutes without the 1M store (at 3a3f72e: 10 min for
startup, write, recall and rehydrate at 1k-100k with their stores built, 37 min for reindex and
sync) and several hours with it (plus versus); it needs ~6 GB of memory at its
peak and ~10 GB of disk under --work for the 1M store. Run it stage by
stage if the session that runs it is time-limited, e.g. `--only startup,write,sync`, then
`--only reindex`, then `--only recall,rehydrate --sizes 10000,100000`, then
`--only recall,rehydrate --sizes 1000000`: the report gathers every stage measured so far.

Targets the report checks: every ratio to a floor under 2x; recall and rehydrate not growing
linearly with the store (log-log slope of the median between the smallest and the largest
store under 0.5; a cost linear in the store has slope 1); MCP first `tools/list` within 0.5 s
of the bare SDK server. Figures are medians with the minimum of the runs; ratios are taken
within one process, measured interleaved with their floors.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import speed  # noqa: E402  (benchmarks/speed.py: helpers)

STAGES = ["startup", "write", "recall", "rehydrate", "reindex", "sync", "versus"]
SIZED = {"recall", "rehydrate"}
DOC_START = "<!-- run_all:start -->"
DOC_END = "<!-- run_all:end -->"
TARGET_RATIO = 2.0
TARGET_SLOPE = 0.5
TARGET_MCP_S = 0.5

FULL = {
    "sizes": [10_000, 100_000, 1_000_000],
    "task_events": 10_000,
    "queries": 50,
    "rounds": 7,
    "resume_runs": 15,
    "resume_cli_runs": 5,
    "write_store": 10_000,
    "write_samples": 300,
    "write_throughput": 500,
    "reindex_events": 100_000,
    "pull_events": 1_000,
    "sync_events": 100_000,
    "sync_commits": 1_000,
    "sync_new_events": 1_000,
    "sync_runs": 7,
    "sync_busy_runs": 3,
    "startup_store": 10_000,
    "startup_runs": 15,
    "mcp_runs": 7,
}
SMOKE = {
    "sizes": [300],
    "task_events": 50,
    "queries": 5,
    "rounds": 1,
    "resume_runs": 2,
    "resume_cli_runs": 1,
    "write_store": 200,
    "write_samples": 10,
    "write_throughput": 10,
    "reindex_events": 200,
    "pull_events": 20,
    "sync_events": 300,
    "sync_commits": 5,
    "sync_new_events": 20,
    "sync_runs": 2,
    "sync_busy_runs": 1,
    "startup_store": 200,
    "startup_runs": 2,
    "mcp_runs": 1,
}
QUICK = {
    "sizes": [2_000, 10_000],
    "task_events": 1_000,
    "queries": 30,
    "rounds": 3,
    "resume_runs": 7,
    "resume_cli_runs": 3,
    "write_store": 2_000,
    "write_samples": 80,
    "write_throughput": 80,
    "reindex_events": 2_000,
    "pull_events": 200,
    "sync_events": 10_000,
    "sync_commits": 100,
    "sync_new_events": 200,
    "sync_runs": 5,
    "sync_busy_runs": 1,
    "startup_store": 2_000,
    "startup_runs": 5,
    "mcp_runs": 3,
}


# --------------------------------------------------------------------------------------------
# Running the stages.
# --------------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": mem_gib,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "loadavg": list(os.getloadavg()),
        "note": "shared machine; others' work adds noise",
    }


def sizes_of(run: dict[str, Any]) -> str:
    """ "full", "quick" or "smoke": which sizes a run measured (a run recorded before smoke
    runs existed says only whether it was quick)."""
    return str(run.get("mode") or ("quick" if run["quick"] else "full"))


def stage_file(out: Path, stage: str, size: int | None = None) -> Path:
    return out / "stages" / (f"{stage}-{size}.json" if size is not None else f"{stage}.json")


def run_stage(
    stage: str,
    params: dict[str, Any],
    *,
    work: Path,
    result: Path,
    meta: dict[str, Any],
    rebuild: bool,
) -> bool:
    command = [
        sys.executable,
        str(HERE / "stages.py"),
        stage,
        "--work",
        str(work),
        "--params",
        json.dumps(params),
        "--result",
        str(result) + ".part",
    ]
    if rebuild:
        command.append("--rebuild")
    speed.log(f"== {stage}" + (f" at {fmt_n(params['size'])}" if "size" in params else ""))
    t0 = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, check=False)
    part = Path(str(result) + ".part")
    if done.returncode != 0 or not part.exists():
        speed.log(f"== {stage} failed (exit {done.returncode}); the report says so")
        result.parent.mkdir(parents=True, exist_ok=True)
        result.write_text(
            json.dumps(
                {"error": f"exit status {done.returncode}", **meta, "params": params}, indent=2
            )
            + "\n"
        )
        return False
    data = json.loads(part.read_text())
    data.update(meta, params=params, wall_s=round(time.perf_counter() - t0, 1))
    result.write_text(json.dumps(data, indent=2, default=str) + "\n")
    part.unlink()
    return True


def run_recall_rss(size: int, params: dict[str, Any], work: Path) -> dict[str, Any]:
    """Peak RSS of a process that only recalls, and of one that only runs the floor."""
    out = {}
    for which in ("engram", "floor"):
        tmp = work / f"rss-{which}-{size}.json"
        p = {**params, "size": size, "which": which}
        done = subprocess.run(
            [
                sys.executable,
                str(HERE / "stages.py"),
                "recall_rss",
                "--work",
                str(work),
                "--params",
                json.dumps(p),
                "--result",
                str(tmp),
            ],
            cwd=ROOT,
            check=False,
        )
        if done.returncode == 0:
            out[which] = json.loads(tmp.read_text())
            tmp.unlink()
    return out


def run_versus(out: Path, quick: bool, meta: dict[str, Any]) -> bool:
    script = HERE / "versus.py"
    result = stage_file(out, "versus")
    if not script.exists():
        result.parent.mkdir(parents=True, exist_ok=True)
        result.write_text(
            json.dumps({"skipped": "benchmarks/versus.py is not there", **meta}) + "\n"
        )
        return True
    command = [sys.executable, str(script), "--out", str(out)] + (["--quick"] if quick else [])
    speed.log(f"== versus: {' '.join(command[1:])}")
    t0 = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, check=False)
    data: dict[str, Any] = {
        **meta,
        "exit": done.returncode,
        "wall_s": round(time.perf_counter() - t0, 1),
        "markdown": str(out / "versus.md"),
        "json": str(out / "versus.json"),
    }
    if done.returncode != 0:
        data["error"] = f"benchmarks/versus.py exited {done.returncode}"
    result.write_text(json.dumps(data, indent=2) + "\n")
    return done.returncode == 0


# --------------------------------------------------------------------------------------------
# Reading the results back.
# --------------------------------------------------------------------------------------------


def collect(out: Path) -> dict[str, Any]:
    stages: dict[str, Any] = {}
    for path in sorted((out / "stages").glob("*.json")):
        data = json.loads(path.read_text())
        name = path.stem
        stage, _, size = name.partition("-")
        if stage in SIZED and size.isdigit():
            stages.setdefault(stage, {})[int(size)] = data
        else:
            stages[name] = data
    for stage in SIZED:
        if stage in stages:
            stages[stage] = dict(sorted(stages[stage].items()))
    return stages


def slope(points: list[tuple[float, float]]) -> float | None:
    """Log-log slope between the smallest and the largest store (1 = linear)."""
    pts = sorted(p for p in points if p[0] > 0 and p[1] > 0)
    if len(pts) < 2 or pts[-1][0] == pts[0][0]:
        return None
    (x0, y0), (x1, y1) = pts[0], pts[-1]
    return math.log(y1 / y0) / math.log(x1 / x0)


def fmt_ms(v: float | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:,.1f} ms" if v >= 10 else f"{v:.2f} ms"


def fmt_s(v: float | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v * 1e3:,.0f} ms" if v < 1 else f"{v:,.2f} s"


def fmt_n(n: int | float) -> str:
    n = int(n)
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return f"{n:,}"


def verdict(ok: bool | None) -> str:
    return "-" if ok is None else ("**met**" if ok else "**missed**")


def targets(stages: dict[str, Any]) -> list[list[str]]:
    """Rows: what, Engram, floor, ratio, target, verdict."""
    rows: list[list[str]] = []

    def ratio_row(
        what: str, engram: str, floor: str, r: float | None, limit: float = TARGET_RATIO
    ) -> None:
        ok = None if r is None or math.isnan(r) else r < limit
        rows.append(
            [what, engram, floor, "-" if r is None else f"{r:.2f}x", f"< {limit:g}x", verdict(ok)]
        )

    w = stages.get("write", {})
    for mode, label in (
        ("dup_check_on", "near-duplicate check on"),
        ("dup_check_off", "near-duplicate check off"),
    ):
        m = w.get(mode)
        if not m:
            continue
        ratio_row(
            f"remember p50 ({label})",
            fmt_ms(m["remember"]["median_ms"]),
            fmt_ms(m["floor"]["median_ms"]),
            m["ratio_p50"],
        )
        ratio_row(
            f"remember p99 ({label})",
            fmt_ms(m["remember"]["p99_ms"]),
            fmt_ms(m["floor"]["p99_ms"]),
            m["ratio_p99"],
        )
        ratio_row(
            f"remember throughput ({label})",
            f"{m['throughput_per_s']:,.0f}/s",
            f"{m['floor_throughput_per_s']:,.0f}/s",
            m["ratio_throughput"],
        )
    rec = stages.get("recall", {})
    for size, r in rec.items():
        if "recall" not in r:
            continue
        ratio_row(
            f"recall p50 @ {fmt_n(size)} memories",
            fmt_ms(r["recall"]["median_ms"]),
            fmt_ms(r["floor"]["median_ms"]),
            r["ratio_p50"],
        )
        ratio_row(
            f"recall p99 @ {fmt_n(size)} memories",
            fmt_ms(r["recall"]["p99_ms"]),
            fmt_ms(r["floor"]["p99_ms"]),
            r["ratio_p99"],
        )
    for stage, what, key in (
        ("recall", "recall p50", "recall"),
        ("rehydrate", "rehydrate (warm) p50", "warm"),
    ):
        data = {k: v for k, v in stages.get(stage, {}).items() if key in v}
        if len(data) >= 2:
            x = "size" if stage == "recall" else "events"
            s = slope([(v[x], v[key]["median_ms"]) for v in data.values()])
            lo, hi = min(data), max(data)
            rows.append(
                [
                    f"{what}: growth from {fmt_n(data[lo][x])} to {fmt_n(data[hi][x])}",
                    f"{fmt_ms(data[lo][key]['median_ms'])} -> {fmt_ms(data[hi][key]['median_ms'])}",
                    "linear would be "
                    f"{fmt_ms(data[lo][key]['median_ms'] * data[hi][x] / data[lo][x])}",
                    "-" if s is None else f"slope {s:.2f}",
                    f"slope < {TARGET_SLOPE}",
                    verdict(None if s is None else s < TARGET_SLOPE),
                ]
            )
    st = stages.get("startup", {})
    procs = st.get("processes", {})
    floor = procs.get("python -c pass (floor)")
    for name, label in (
        ("engram --help", "`engram --help` process"),
        ("engram status", "`engram status` process"),
        ("engram recall (BM25 only)", "`engram recall` process, BM25 only"),
        ("engram recall (hybrid)", "`engram recall` process, hybrid"),
    ):
        if name in procs and floor:
            ratio_row(
                label,
                fmt_s(procs[name]["median_s"]),
                fmt_s(floor["median_s"]) + " (`python -c pass`)",
                procs[name]["ratio_to_floor"],
            )
    mcp = st.get("mcp", {})
    if "median_s" in mcp:
        diff = mcp["difference_s"]
        rows.append(
            [
                "MCP: first `tools/list`",
                fmt_s(mcp["median_s"]["engram"]),
                fmt_s(mcp["median_s"]["bare"]) + " (bare SDK server)",
                f"+{diff:.3f} s",
                f"<= +{TARGET_MCP_S} s",
                verdict(diff <= TARGET_MCP_S),
            ]
        )
    ri = stages.get("reindex", {})
    inc = ri.get("incremental")
    if inc:
        ratio_row(
            f"`refresh_indexes()` after a pull of {fmt_n(inc['pulled_events'])} events",
            fmt_s(inc["refresh_indexes_s"]),
            fmt_s(inc["bare_embedding_s"]) + " (bare embedding)",
            inc["ratio"],
        )
    sy = stages.get("sync", {})
    if "noop" in sy:
        n = sy["noop"]
        ratio_row(
            "`engram sync`, nothing to do (process)",
            fmt_s(n["engram_sync_cli"]["median_s"]),
            fmt_s(n["git_fetch_push"]["median_s"]) + " (git fetch + push)",
            n["ratio_cli"],
        )
        ratio_row(
            "`sync()`, nothing to do (in process)",
            fmt_s(n["engram_sync_in_process"]["median_s"]),
            fmt_s(n["git_fetch_push"]["median_s"]) + " (git fetch + push)",
            n["ratio_in_process"],
        )
    if "busy" in sy:
        b = sy["busy"]
        floor_s = b["git_add_commit_pull_push"]["median_s"]
        emb_s = b["bare_embedding_of_received"]["median_s"]
        ratio_row(
            f"`engram sync`, {fmt_n(sy['new_events'])} new events each way",
            fmt_s(b["engram_sync_cli"]["median_s"]),
            f"{fmt_s(floor_s)} git + {fmt_s(emb_s)} embedding",
            b["ratio_git_plus_embedding"],
        )
    return rows


def table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# Plots.
# --------------------------------------------------------------------------------------------


def plots(stages: dict[str, Any], out: Path) -> dict[str, str]:
    """PNG files by topic; empty when matplotlib is missing (the `bench` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np
    except ImportError:
        speed.log("matplotlib is not installed (pip install -e '.[bench]'): no plots")
        return {}
    made: dict[str, str] = {}

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        made[name.removesuffix(".png")] = name

    rec = {k: v for k, v in stages.get("recall", {}).items() if "recall" in v}
    if rec:
        fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
        xs = list(rec)
        for key, label, style in (
            ("recall", "Engram.recall", "o-"),
            ("floor", "floor: tantivy + usearch + embed", "s--"),
        ):
            ax.plot(xs, [rec[x][key]["median_ms"] for x in xs], style, label=f"{label} p50")
            ax.plot(
                xs, [rec[x][key]["p99_ms"] for x in xs], style, alpha=0.45, label=f"{label} p99"
            )
        base = rec[xs[0]]["recall"]["median_ms"]
        ax.plot(
            xs,
            [base * x / xs[0] for x in xs],
            ":",
            color="grey",
            label="linear growth from the first",
        )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("memories in the store")
        ax.set_ylabel("latency (ms)")
        ax.set_title("recall(k=10) latency vs store size")
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
        for which, style in (("engram", "o-"), ("floor", "s--")):
            ys = [rec[x].get("rss", {}).get(which, {}).get("peak_rss_mb") for x in xs]
            if any(y is not None for y in ys):
                ax2.plot(
                    [x for x, y in zip(xs, ys, strict=True) if y],
                    [y for y in ys if y],
                    style,
                    label=f"{which} only: peak RSS",
                )
        ax2.set_xscale("log")
        ax2.set_xlabel("memories in the store")
        ax2.set_ylabel("peak RSS (MB)")
        ax2.set_title("memory footprint of a recalling process")
        ax2.legend(fontsize=7)
        ax2.grid(True, which="both", alpha=0.3)
        save(fig, "recall_vs_size.png")

    reh = {k: v for k, v in stages.get("rehydrate", {}).items() if "warm" in v}
    if reh:
        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        xs = [v["events"] for v in reh.values()]
        ax.plot(xs, [v["warm"]["median_ms"] for v in reh.values()], "o-", label="warm p50")
        ax.plot(xs, [v["warm"]["p99_ms"] for v in reh.values()], "o-", alpha=0.45, label="warm p99")
        ax.plot(
            xs,
            [v["first_call_s"] * 1e3 for v in reh.values()],
            "^--",
            label="first call in a process",
        )
        ax.plot(
            xs,
            [v["cli"]["median_s"] * 1e3 for v in reh.values()],
            "s--",
            label="`engram resume` process (median)",
        )
        base = list(reh.values())[0]["warm"]["median_ms"]
        ax.plot(
            xs,
            [base * x / xs[0] for x in xs],
            ":",
            color="grey",
            label="linear growth from the first",
        )
        ax.set_xscale("log")
        ax.set_yscale("log")
        task = list(reh.values())[0].get("task_events")
        ax.set_xlabel("events in the store")
        ax.set_ylabel("latency (ms)")
        ax.set_title(f"resume(task) of a {task}-event task vs store size")
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
        save(fig, "rehydrate_vs_size.png")

    procs = stages.get("startup", {}).get("processes", {})
    if procs:
        fig, ax = plt.subplots(figsize=(7.5, 3.8))
        names = list(procs)
        ax.barh(names, [procs[n]["median_s"] for n in names], color="tab:blue", label="median")
        ax.plot([procs[n]["min_s"] for n in names], names, "k|", markersize=14, label="min")
        ax.invert_yaxis()
        ax.set_xlabel("seconds from spawn to exit")
        ax.set_title("start-up, as real processes")
        ax.legend(fontsize=7)
        ax.grid(True, axis="x", alpha=0.3)
        save(fig, "startup.png")

    ri = stages.get("reindex", {})
    scenarios = [
        (
            f"full rebuild of {fmt_n(ri.get('events', 0))} memories, cold embedding cache",
            ri["full"]["split_s"],
        )
        if "full" in ri
        else None,
        ("full rebuild, every embedding cached", ri["again"]["split_s"]) if "again" in ri else None,
        (
            f"refresh_indexes() after a git pull of {fmt_n(ri['incremental']['pulled_events'])}",
            ri["incremental"]["split_s"],
        )
        if "incremental" in ri
        else None,
    ]
    scenarios = [s for s in scenarios if s]
    if scenarios:
        parts = [
            "read (projection)",
            "BM25 (tantivy)",
            "embedding (ONNX)",
            "vectors: cache + usearch",
            "other",
        ]
        fig, axes = plt.subplots(len(scenarios), 1, figsize=(7.5, 1.9 * len(scenarios) + 0.4))
        for ax, (title, split) in zip(list(np.atleast_1d(axes)), scenarios, strict=True):
            values = [split.get(part, 0.0) for part in parts]
            ax.barh(
                parts, values, color=["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:grey"]
            )
            for y, v in enumerate(values):
                ax.text(v, y, f" {fmt_s(v)}", va="center", fontsize=7)
            ax.invert_yaxis()
            ax.set_xlim(0, max(values) * 1.25 or 1)
            ax.set_title(f"{title}: {fmt_s(split.get('total', sum(values)))} in all", fontsize=9)
            ax.tick_params(labelsize=7)
        axes_list = list(np.atleast_1d(axes))
        axes_list[-1].set_xlabel("seconds")
        save(fig, "reindex.png")

    w = stages.get("write", {})
    modes = [m for m in ("dup_check_on", "dup_check_off") if m in w]
    if modes:
        fig, ax = plt.subplots(figsize=(7, 3.8))
        labels, values, colors = [], [], []
        for m in modes:
            for key, who, color in (
                ("remember", "remember", "tab:blue"),
                ("floor", "floor", "tab:grey"),
            ):
                for stat in ("median_ms", "p99_ms"):
                    labels.append(
                        f"{m.replace('dup_check_', 'dup ')}\n{who} "
                        f"{'p50' if stat == 'median_ms' else 'p99'}"
                    )
                    values.append(w[m][key][stat])
                    colors.append(color)
        ax.bar(labels, values, color=colors)
        ax.set_ylabel("ms")
        ax.set_title("durable remember vs its floor")
        ax.tick_params(axis="x", labelsize=7)
        save(fig, "write.png")

    sy = stages.get("sync", {})
    if "noop" in sy:
        noop = sy["noop"]
        items = [
            ("engram sync (process), nothing to do", noop["engram_sync_cli"], "tab:blue"),
            ("sync() in process, nothing to do", sy["noop"]["engram_sync_in_process"], "tab:blue"),
            ("git fetch + git push", sy["noop"]["git_fetch_push"], "tab:grey"),
        ]
        if "busy" in sy:
            k = fmt_n(sy["new_events"])
            items += [
                (
                    f"engram sync (process), {k} new each way",
                    sy["busy"]["engram_sync_cli"],
                    "tab:orange",
                ),
                (
                    "git add + commit + pull + push",
                    sy["busy"]["git_add_commit_pull_push"],
                    "tab:grey",
                ),
                (
                    f"bare embedding of the {k} received",
                    sy["busy"]["bare_embedding_of_received"],
                    "tab:grey",
                ),
            ]
        fig, ax = plt.subplots(figsize=(7.5, 3.6))
        ax.barh(
            [i[0] for i in items], [i[1]["median_s"] for i in items], color=[i[2] for i in items]
        )
        for y, item in enumerate(items):
            ax.text(
                item[1]["median_s"], y, f" {fmt_s(item[1]['median_s'])}", va="center", fontsize=7
            )
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel("seconds (median, log scale)")
        ax.set_title(
            f"engram sync vs plain git ({fmt_n(sy.get('events') or 0)} events, "
            f"{sy.get('commits')} commits)",
            fontsize=9,
        )
        ax.tick_params(labelsize=7)
        save(fig, "sync.png")
    return made


# --------------------------------------------------------------------------------------------
# The report.
# --------------------------------------------------------------------------------------------


def details(stages: dict[str, Any]) -> list[str]:
    out: list[str] = []
    w = stages.get("write")
    if w and "error" not in w:
        out += [
            "## Durable write",
            "",
            f"`Engram.remember` in a store of {fmt_n(w['params']['write_store'])} memories "
            f"(default settings: a git commit every 20 events, inside the call that makes "
            f"the 20th); {w['params']['write_samples']} timed calls interleaved with their "
            f"floor, then {w['params']['write_throughput']} back to back for throughput.",
            "",
        ]
        rows = []
        for mode in ("dup_check_on", "dup_check_off"):
            m = w.get(mode)
            if not m:
                continue
            r, f = m["remember"], m["floor"]
            rows.append(
                [
                    mode.replace("_", " "),
                    fmt_ms(r["median_ms"]),
                    fmt_ms(r["min_ms"]),
                    fmt_ms(r["p99_ms"]),
                    fmt_ms(f["median_ms"]),
                    fmt_ms(f["p99_ms"]),
                    f"{m['throughput_per_s']:,.0f}/s",
                    f"{m['floor_throughput_per_s']:,.0f}/s",
                    str(m["commits_seen"]),
                    fmt_ms(m["remember_with_commit"]["median_ms"]),
                ]
            )
        out += [
            table(
                [
                    "",
                    "p50",
                    "min",
                    "p99",
                    "floor p50",
                    "floor p99",
                    "throughput",
                    "floor throughput",
                    "calls that committed",
                    "their p50",
                ],
                rows,
            ),
            "",
            "Floor: "
            + "; ".join(
                f"{k.replace('_', ' ')}: {w[k]['floor_is']}"
                for k in ("dup_check_on", "dup_check_off")
                if k in w
            )
            + ".",
            "",
        ]
    rec = {k: v for k, v in stages.get("recall", {}).items() if "recall" in v}
    if rec:
        out += [
            "## Recall",
            "",
            "`Engram.recall(query, k=10)` on stores built in bulk (speed.py's memory "
            "generator; random unit vectors in the embedding cache, so the vector index "
            "holds random vectors: a worst case for HNSW). Floor: one query embedding + a "
            "bare tantivy query for the same words (stop words left out, as Engram does; "
            "100 hits, ids read) + a bare usearch search (100) on the same index files, the "
            "search Engram makes (exact below `search.exact_below` vectors, else the graph at "
            "Engram's expansion_search, which a saved index does not keep).",
            "",
        ]
        rows = []
        for size, r in rec.items():
            rss = r.get("rss", {})
            rows.append(
                [
                    fmt_n(size),
                    f"{r['events']:,}",
                    fmt_ms(r["recall"]["median_ms"]),
                    fmt_ms(r["recall"]["min_ms"]),
                    fmt_ms(r["recall"]["p99_ms"]),
                    fmt_ms(r["floor"]["median_ms"]),
                    fmt_ms(r["floor"]["p99_ms"]),
                    f"{r['ratio_p50']:.2f}x",
                    f"{r['ratio_p99']:.2f}x",
                    f"{rss.get('engram', {}).get('peak_rss_mb', float('nan')):,.0f} MB",
                    f"{rss.get('floor', {}).get('peak_rss_mb', float('nan')):,.0f} MB",
                    f"{r['first_recall_s']:.2f} s",
                    f"{(r.get('store_build') or {}).get('build_s') or '-'} s",
                ]
            )
        out += [
            table(
                [
                    "memories",
                    "events",
                    "p50",
                    "min",
                    "p99",
                    "floor p50",
                    "floor p99",
                    "ratio p50",
                    "ratio p99",
                    "peak RSS, recall only",
                    "peak RSS, floor only",
                    "first recall in process",
                    "store build",
                ],
                rows,
            ),
            "",
        ]
        parts = list(rec.values())[-1].get("floor_parts", {})
        if parts:
            out += [
                "Floor parts at the largest size (p50): "
                + ", ".join(
                    f"{k.replace('_', ' ')} {fmt_ms(v['median_ms'])}" for k, v in parts.items()
                )
                + ".",
                "",
            ]
    reh = {k: v for k, v in stages.get("rehydrate", {}).items() if "warm" in v}
    if reh:
        first = list(reh.values())[0]
        out += [
            "## Rehydrate",
            "",
            f"`Engram.resume(task=...)` (depth standard, restore selective) of a task with "
            f"{first['task_events']:,} events ({first['task_progress']:,} progress, "
            f"{first['task_checkpoints']} checkpoints) spread evenly through the store.",
            "",
        ]
        rows = [
            [
                f"{v['events']:,}",
                fmt_ms(v["warm"]["median_ms"]),
                fmt_ms(v["warm"]["min_ms"]),
                fmt_ms(v["warm"]["p99_ms"]),
                fmt_s(v["first_call_s"]),
                fmt_s(v["cli"]["median_s"]),
                fmt_s(v["cli"]["min_s"]),
                f"{v['markdown_chars']:,}",
            ]
            for v in reh.values()
        ]
        out += [
            table(
                [
                    "events in store",
                    "warm p50",
                    "warm min",
                    "warm p99",
                    "first call in process",
                    "`engram resume` p50",
                    "min",
                    "chars",
                ],
                rows,
            ),
            "",
        ]
    ri = stages.get("reindex")
    if ri and "error" not in ri:
        out += ["## Reindex", ""]
        rows = []
        for key, label in (
            ("full", "full rebuild, cold embedding cache"),
            ("again", "full rebuild, every embedding cached"),
        ):
            if key in ri:
                s = ri[key]["split_s"]
                rows.append(
                    [
                        label,
                        fmt_s(s["total"]),
                        fmt_s(s["read (projection)"]),
                        fmt_s(s["BM25 (tantivy)"]),
                        fmt_s(s["embedding (ONNX)"]),
                        fmt_s(s["vectors: cache + usearch"]),
                        fmt_s(s["other"]),
                        f"{ri[key]['embedded']:,}",
                    ]
                )
        inc = ri.get("incremental")
        if inc:
            s = inc["split_s"]
            rows.append(
                [
                    f"`refresh_indexes()` after `git pull` of {inc['pulled_events']:,}",
                    fmt_s(s["total"]),
                    fmt_s(s["read (projection)"]),
                    fmt_s(s["BM25 (tantivy)"]),
                    fmt_s(s["embedding (ONNX)"]),
                    fmt_s(s["vectors: cache + usearch"]),
                    fmt_s(s["other"]),
                    f"{inc['embedded']:,}",
                ]
            )
        out += [
            f"A store of {ri['events']:,} memories.",
            "",
            table(
                [
                    "",
                    "total",
                    "read (projection)",
                    "BM25 (tantivy)",
                    "embedding (ONNX)",
                    "vectors: cache + usearch",
                    "other",
                    "texts embedded",
                ],
                rows,
            ),
            "",
        ]
        if "full" in ri:
            out += [f"Embedding ran at {ri['full']['embed_per_s']:,.0f} texts/s.", ""]
        if inc:
            out += [
                f"The pull itself (`git pull --ff-only` from a bare repository by path) took "
                f"{fmt_s(inc['git_pull_s'])}; embedding the same {inc['pulled_events']:,} "
                f"texts bare took {fmt_s(inc['bare_embedding_s'])}.",
                "",
            ]
    st = stages.get("startup")
    if st and "processes" in st:
        floor = st["processes"]["python -c pass (floor)"]["median_s"]
        rows = [
            [
                f"`{name}`" if name.startswith("engram") else name,
                fmt_s(s["median_s"]),
                fmt_s(s["min_s"]),
                f"{s['ratio_to_floor']:.1f}x",
                f"+{fmt_s(s['median_s'] - floor)}",
            ]
            for name, s in st["processes"].items()
        ]
        out += [
            "## Start-up",
            "",
            f"Real processes (the `engram` console script), a store of "
            f"{fmt_n(st['store_memories'])} memories with current indexes, "
            f"{st['params']['startup_runs']} runs each in shuffled order after one "
            "unmeasured run. The bare-library rows are informative floors: the same "
            "libraries doing the same query in a process of their own.",
            "",
            table(["process", "median", "min", "/ python -c pass", "over it"], rows),
            "",
        ]
        mcp = st.get("mcp", {})
        if "median_s" in mcp:
            out += [
                f"MCP server, spawn to first `tools/list` over stdio "
                f"(benchmarks/mcp_cold_start.py, {mcp['runs']} alternating runs): bare SDK "
                f"server {fmt_s(mcp['median_s']['bare'])} (min {fmt_s(mcp['min_s']['bare'])}),"
                f" `engram serve` {fmt_s(mcp['median_s']['engram'])} "
                f"(min {fmt_s(mcp['min_s']['engram'])}): **{mcp['difference_s']:+.3f} s**.",
                "",
            ]
        elif "error" in mcp:
            out += [f"MCP cold start failed: `{mcp['error'][-300:]}`", ""]
    sy = stages.get("sync")
    if sy and "noop" in sy:
        n = sy["noop"]
        rows = [
            [
                "`engram sync` (process), nothing to do",
                fmt_s(n["engram_sync_cli"]["median_s"]),
                fmt_s(n["engram_sync_cli"]["min_s"]),
            ],
            [
                "`sync()` in a warm process, nothing to do",
                fmt_s(n["engram_sync_in_process"]["median_s"]),
                fmt_s(n["engram_sync_in_process"]["min_s"]),
            ],
            [
                "`git fetch` + `git push`, nothing to do",
                fmt_s(n["git_fetch_push"]["median_s"]),
                fmt_s(n["git_fetch_push"]["min_s"]),
            ],
        ]
        if "busy" in sy:
            b = sy["busy"]
            k = fmt_n(sy["new_events"])
            rows += [
                [
                    f"`engram sync` (process), {k} new events each way",
                    fmt_s(b["engram_sync_cli"]["median_s"]),
                    fmt_s(b["engram_sync_cli"]["min_s"]),
                ],
                [
                    "`git add` + `commit` + `pull` + `push` of the same",
                    fmt_s(b["git_add_commit_pull_push"]["median_s"]),
                    fmt_s(b["git_add_commit_pull_push"]["min_s"]),
                ],
                [
                    f"embedding the {k} received texts, bare",
                    fmt_s(b["bare_embedding_of_received"]["median_s"]),
                    fmt_s(b["bare_embedding_of_received"]["min_s"]),
                ],
            ]
        out += [
            "## Git sync",
            "",
            f"A store of {sy['events']:,} events in {sy['commits']:,} commits, its remote a "
            "bare repository by path; the floor runs in a plain git clone of a twin remote "
            "holding the same commits. With new events: as many pending here (their vectors "
            "cached, as after `remember`) as arrive from another clone; `engram sync` "
            "commits, fetches, merges, pushes and indexes what arrived (embedding it).",
            "",
            table(["", "median", "min"], rows),
            "",
        ]
    return out


def write_report(
    out: Path, stages: dict[str, Any], run: dict[str, Any], made: dict[str, str]
) -> str:
    modes = {
        v.get("mode")
        for s in stages.values()
        for v in (s.values() if isinstance(s, dict) and all(isinstance(k, int) for k in s) else [s])
        if isinstance(v, dict)
    }
    commits = sorted(
        {
            v.get("commit")
            for s in stages.values()
            for v in (s.values() if all(isinstance(k, int) for k in s) else [s])
            if isinstance(v, dict) and v.get("commit")
        }
    )
    m = run["machine"]
    lines = [
        "# Engram performance suite",
        "",
        f"Run {run['finished']} ({sizes_of(run)} sizes; stages measured "
        f"in this run: {', '.join(run['ran']) or 'none'}). Commit measured: "
        f"{', '.join(c for c in commits if c) or run['commit']}."
        + (
            " Stages come from runs of different modes: "
            + ", ".join(sorted(str(x) for x in modes))
            + "."
            if len(modes) > 1
            else ""
        ),
        "",
        f"Machine: {m['cpus']} cores ({m['cpu']}), {m['memory_gib']} GiB, Python {m['python']}, "
        f"{m['platform']}; shared with other work, so absolute times are noisy (load average "
        f"{m['loadavg'][0]:.1f} at the start, {run['loadavg_end'][0]:.1f} at the end); ratios "
        "come from interleaved measurements in one process and move much less.",
        "",
        "Command: `" + run["command"] + "`",
        "",
        "## Against the targets",
        "",
        table(["", "Engram", "floor", "ratio", "target", ""], targets(stages)),
        "",
        f"Targets: every ratio under {TARGET_RATIO:g}x its floor (p50 and p99 of the same run); "
        f"recall and rehydrate not growing linearly with the store (log-log slope of the p50 "
        f"between the smallest and the largest store under {TARGET_SLOPE}, where linear is 1); "
        f"MCP first `tools/list` within {TARGET_MCP_S} s of a bare SDK server.",
        "",
    ]
    for name, title in (
        ("recall_vs_size", "Recall vs store size"),
        ("rehydrate_vs_size", "Rehydrate vs store size"),
    ):
        if name in made:
            lines += [f"![{title}]({made[name]})", ""]
    lines += details(stages)
    for name, title in (
        ("write", "Write"),
        ("reindex", "Reindex"),
        ("startup", "Start-up"),
        ("sync", "Sync"),
    ):
        if name in made:
            lines += [f"![{title}]({made[name]})", ""]
    when = []
    for name, s in stages.items():
        for size, v in s.items() if name in SIZED else [(None, s)]:
            if isinstance(v, dict) and v.get("measured"):
                when.append(
                    [
                        name + (f" @ {fmt_n(size)}" if size is not None else ""),
                        v["measured"],
                        v.get("commit", "-"),
                        v.get("mode", "-"),
                        fmt_s(v["wall_s"]) if v.get("wall_s") else "-",
                    ]
                )
    if when:
        lines += [
            "## When each stage was measured",
            "",
            table(["stage", "run started", "commit", "sizes", "wall time (builds included)"], when),
            "",
        ]
    failed = [name for name, s in stages.items() if isinstance(s, dict) and "error" in s] + [
        f"{name} @ {size}"
        for name, s in stages.items()
        if name in SIZED
        for size, v in s.items()
        if "error" in v
    ]
    if failed:
        lines += [
            "## Stages that failed",
            "",
            "; ".join(failed) + " (see the log of the run; measure again with --only)",
            "",
        ]
    vs = stages.get("versus", {})
    if vs.get("skipped"):
        lines += ["## Engram vs mcp-engram", "", vs["skipped"], ""]
    elif vs:
        md = Path(vs.get("markdown", out / "versus.md"))
        if md.exists():
            body = md.read_text().strip()
            body = "\n".join(
                ("##" + line) if line.startswith("#") else line for line in body.splitlines()
            )
            lines += ["## Engram vs mcp-engram (benchmarks/versus.py)", "", body, ""]
        else:
            lines += [
                "## Engram vs mcp-engram",
                "",
                vs.get("error", "benchmarks/versus.py wrote no table"),
                "",
            ]
    text = "\n".join(lines).rstrip() + "\n"
    (out / "report.md").write_text(text)
    return text


def update_docs(
    docs: Path, out: Path, stages: dict[str, Any], run: dict[str, Any], made: dict[str, str]
) -> None:
    rel = os.path.relpath(out, docs.parent)
    m = run["machine"]
    section = [
        DOC_START,
        "### The figures (written by `benchmarks/run_all.py --update-docs`)",
        "",
        f"Report assembled {run['finished']} at commit {run['commit']} on {m['cpus']} shared "
        f"cores, Python {m['python']} ({sizes_of(run)} sizes); each "
        "stage's own commit and time are in the report. Medians with their floors measured in "
        "the same run; the whole report, with minimums and every stage's details: "
        f"[{rel}/report.md]({rel}/report.md).",
        "",
        table(["", "Engram", "floor", "ratio", "target", ""], targets(stages)),
        "",
    ]
    ri = stages.get("reindex", {})
    if ri.get("full"):
        rows = []
        pulled = fmt_n(ri.get("incremental", {}).get("pulled_events", 0))
        for label, part in (
            ("full rebuild, cold embedding cache", ri["full"]),
            ("full rebuild, every text's vector cached", ri.get("again")),
            (f"`refresh_indexes()` after a `git pull` of {pulled} events", ri.get("incremental")),
        ):
            if part:
                split = part["split_s"]
                rows.append(
                    [
                        label,
                        fmt_s(split["total"]),
                        fmt_s(split["read (projection)"]),
                        fmt_s(split["BM25 (tantivy)"]),
                        fmt_s(split["embedding (ONNX)"]),
                        fmt_s(split["vectors: cache + usearch"]),
                    ]
                )
        section += [
            f"Reindex of a store of {fmt_n(ri['events'])} events, split by part:",
            "",
            table(
                [
                    "",
                    "total",
                    "reading (read model)",
                    "BM25 (tantivy)",
                    "embedding (ONNX)",
                    "vector index (cache + usearch)",
                ],
                rows,
            ),
            "",
        ]
    for name in ("recall_vs_size", "rehydrate_vs_size", "reindex", "startup"):
        if name in made:
            section += [f"![{name.replace('_', ' ')}]({rel}/{made[name]})", ""]
    section.append(DOC_END)
    text = docs.read_text()
    block = "\n".join(section)
    if DOC_START in text and DOC_END in text:
        head, rest = text.split(DOC_START, 1)
        _, tail = rest.split(DOC_END, 1)
        text = head + block + tail
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    docs.write_text(text)
    speed.log(f"updated the generated section of {docs}")


# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sized = ap.add_mutually_exclusive_group()
    sized.add_argument("--quick", action="store_true", help="small sizes, to check the harness")
    sized.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, every stage but versus: that the harness runs at all (minutes)",
    )
    ap.add_argument(
        "--out",
        type=Path,
        help="report directory (default benchmarks/results/, "
        "benchmarks/results/quick/ with --quick, benchmarks/results/smoke/ with --smoke)",
    )
    ap.add_argument(
        "--work",
        type=Path,
        default=HERE / ".work" / "suite",
        help="where stores are built and kept (default benchmarks/.work/suite)",
    )
    ap.add_argument("--only", help=f"comma-separated stages to run: {','.join(STAGES)}")
    ap.add_argument("--skip", help="comma-separated stages not to run")
    ap.add_argument("--sizes", help="store sizes for recall and rehydrate, e.g. 10000,100000")
    ap.add_argument("--task-events", type=int, help="events of the task rehydrate resumes")
    ap.add_argument("--rebuild", action="store_true", help="build the stores used again")
    ap.add_argument(
        "--report-only",
        action="store_true",
        help="measure nothing; rewrite the report from the stage files in --out",
    )
    ap.add_argument(
        "--update-docs",
        action="store_true",
        help="replace the generated section of docs/benchmarks.md",
    )
    ap.add_argument(
        "--docs",
        type=Path,
        default=ROOT / "docs" / "benchmarks.md",
        help="the file --update-docs changes",
    )
    args = ap.parse_args(argv)

    params = dict(SMOKE if args.smoke else QUICK if args.quick else FULL)
    mode = "smoke" if args.smoke else "quick" if args.quick else ""
    args.quick = args.quick or args.smoke  # the report reads a smoke run as a quick one
    if args.sizes:
        params["sizes"] = [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.task_events:
        params["task_events"] = args.task_events
    out = (args.out or (HERE / "results" / mode)).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    chosen = [s for s in (args.only.split(",") if args.only else STAGES) if s]
    unknown = set(chosen) - set(STAGES)
    if unknown:
        ap.error(f"unknown stage(s) {', '.join(sorted(unknown))}; choose from {', '.join(STAGES)}")
    if args.skip:
        chosen = [s for s in chosen if s not in args.skip.split(",")]
    if args.smoke:
        chosen = [s for s in chosen if s != "versus"]  # versus has its own --quick
    started = time.time()
    run: dict[str, Any] = {
        "quick": args.quick,
        "mode": mode or "full",
        "machine": machine(),
        "commit": speed.engram_version(),
        "command": " ".join(
            [
                ".venv/bin/python benchmarks/run_all.py",
                *(a for a in (argv if argv is not None else sys.argv[1:])),
            ]
        ),
        "ran": [],
    }
    meta = {
        "commit": run["commit"],
        "mode": mode or "full",
        "measured": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if not args.report_only:
        for stage in chosen:
            if stage == "versus":
                run_versus(out, args.quick, meta)
            elif stage in SIZED:
                for size in params["sizes"]:
                    result = stage_file(out, stage, size)
                    ok = run_stage(
                        stage,
                        {**params, "size": size},
                        work=work,
                        result=result,
                        meta=meta,
                        rebuild=args.rebuild,
                    )
                    if ok and stage == "recall":
                        data = json.loads(result.read_text())
                        data["rss"] = run_recall_rss(size, params, work)
                        result.write_text(json.dumps(data, indent=2, default=str) + "\n")
            else:
                run_stage(
                    stage,
                    params,
                    work=work,
                    result=stage_file(out, stage),
                    meta=meta,
                    rebuild=args.rebuild,
                )
            run["ran"].append(stage)
    run["finished"] = time.strftime("%Y-%m-%d %H:%M")
    run["loadavg_end"] = list(os.getloadavg())
    run["wall_s"] = round(time.time() - started, 1)
    stages = collect(out)
    made = plots(stages, out)
    (out / "results.json").write_text(
        json.dumps(
            {
                "run": run,
                "stages": {
                    k: ({str(s): v for s, v in d.items()} if k in SIZED else d)
                    for k, d in stages.items()
                },
                "targets": targets(stages),
            },
            indent=2,
            default=str,
        )
        + "\n"
    )
    text = write_report(out, stages, run, made)
    if args.update_docs:
        update_docs(args.docs.resolve(), out, stages, run, made)
    print(text)
    speed.log(f"report: {out / 'report.md'} ({run['wall_s']:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
