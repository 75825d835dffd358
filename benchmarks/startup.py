"""Fresh `engram` processes against their floor: Python plus the libraries each command needs.

How to run (from the repository root, with the project's virtualenv):

    .venv/bin/python benchmarks/startup.py                  # 200 memories, 7 runs each
    .venv/bin/python benchmarks/startup.py --memories 1000 --runs 15 --json out.json
    .venv/bin/python benchmarks/startup.py --baseline /tmp/old   # beside an older source tree

A quick command should cost little more than starting Python and importing what it cannot do
without. So each command is timed beside its own floor, a `python -c "import ..."` of exactly
those libraries, measured in the same run:

| command | floor: `python -c pass` plus |
|---|---|
| `engram --help` | click, orjson |
| `engram status` | click, orjson, sqlite3, pygit2 (it reports the store's branch and commits) |
| `engram list` | click, orjson, sqlite3 |
| `engram resume` | click, orjson, sqlite3 |
| `engram recall` (BM25 only: `search.model off`) | click, orjson, sqlite3, tantivy |

The ratio is the command's median over its floor's median (target: at most 2). Everything lives
in a temporary directory: ENGRAM_HOME and HOME point there, git config is blanked, the working
directory is outside any repository. The store holds N synthetic memories (benchmarks/speed.py's
generator) written through the API with the model off; one unmeasured run of every command
first warms the OS file cache and brings the read model and the word index up to date. Runs are
interleaved in a shuffled order, so that the noise of a shared machine hits all alike.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import speed  # noqa: E402  (benchmarks/speed.py: the synthetic memories and queries)

FLOOR = "python -c pass"
BASELINE = " (baseline)"
# Each command, and the libraries its floor imports.
COMMANDS: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "engram --help": (["--help"], ("click", "orjson")),
    "engram status": (["status"], ("click", "orjson", "sqlite3", "pygit2")),
    "engram list": (["list"], ("click", "orjson", "sqlite3")),
    "engram resume": (["resume"], ("click", "orjson", "sqlite3")),
    "engram recall (BM25 only)": (["recall", "QUERY"], ("click", "orjson", "sqlite3", "tantivy")),
}


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:  # a figure for a command that failed would mean nothing
        raise SystemExit(
            f"{' '.join(command)} exited {done.returncode}: "
            f"{(done.stderr or done.stdout).strip()[-500:]}"
        )
    return elapsed


def build_store(home: Path, memories: int) -> None:
    from engram.api import Engram

    engram = Engram()
    engram.init()
    engram.config_set("search.model", "off")
    rng = random.Random(3)
    for _ in range(memories):
        text, kind, tags = speed.make_memory(rng)
        engram.remember(text, kind=kind, tags=tags, check_duplicates=False)
    engram.commit()
    engram.close()


def measure(memories: int, runs: int, baseline: Path | None = None) -> dict[str, object]:
    exe = [sys.executable, "-m", "engram"]
    queries = speed.make_queries(random.Random(5), 8)
    with tempfile.TemporaryDirectory(prefix="engram-startup-") as tmp:
        base = Path(tmp)
        (base / "home").mkdir()
        (base / "gitconfig").write_text("")
        env = {
            **os.environ,
            "HOME": str(base / "home"),
            "ENGRAM_HOME": str(base / "store"),
            "GIT_CONFIG_GLOBAL": str(base / "gitconfig"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "ENGRAM_ACTOR": "Bench <bench@example.com>",
        }
        env.pop("ENGRAM_SESSION", None)
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            build_store(base / "store", memories)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        work = base / "work"
        work.mkdir()

        def argv(name: str, i: int) -> list[str]:
            if name == FLOOR:
                return [sys.executable, "-c", "pass"]
            if name.startswith("floor of "):
                libs = COMMANDS[name.removeprefix("floor of ")][1]
                return [sys.executable, "-c", "import " + ", ".join(libs)]
            args = COMMANDS[name.removesuffix(BASELINE)][0]
            return [*exe, *(queries[i % len(queries)] if a == "QUERY" else a for a in args)]

        # The baseline's commands run the package found in that source tree (PYTHONPATH).
        old_env = {**env, "PYTHONPATH": str(baseline)} if baseline is not None else env
        names = [
            FLOOR,
            *COMMANDS,
            *(f"floor of {c}" for c in COMMANDS),
            *((c + BASELINE for c in COMMANDS) if baseline is not None else ()),
        ]
        for name in names:  # warm the OS file cache and the caches, unmeasured
            timed(argv(name, 0), work, old_env if name.endswith(BASELINE) else env)
        times: dict[str, list[float]] = {name: [] for name in names}
        for i in range(runs):
            order = list(names)
            random.Random(i).shuffle(order)
            for name in order:
                times[name].append(
                    timed(argv(name, i), work, old_env if name.endswith(BASELINE) else env)
                )
    median = {name: statistics.median(values) for name, values in times.items()}
    rows = []
    for name, (_, libs) in COMMANDS.items():
        floor = median[f"floor of {name}"]
        rows.append(
            {
                "command": name,
                "median_ms": round(1000 * median[name], 1),
                "floor": FLOOR if not libs else f"python -c 'import {', '.join(libs)}'",
                "floor_ms": round(1000 * floor, 1),
                "ratio": round(median[name] / floor, 2),
                **(
                    {
                        "baseline_ms": round(1000 * median[name + BASELINE], 1),
                        "baseline_ratio": round(median[name + BASELINE] / floor, 2),
                    }
                    if baseline is not None
                    else {}
                ),
            }
        )
    return {
        "memories": memories,
        "runs": runs,
        "baseline": str(baseline) if baseline else None,
        "python_c_pass_ms": round(1000 * median[FLOOR], 1),
        "loadavg": os.getloadavg(),
        "rows": rows,
        "all_s": {name: [round(v, 4) for v in values] for name, values in times.items()},
    }


def markdown(result: dict[str, object]) -> str:
    lines = [
        f"Store of {result['memories']} memories, medians of {result['runs']} fresh "
        f"processes; `python -c pass` {result['python_c_pass_ms']} ms.",
        "",
        "| command | median | floor (same run) | floor median | ratio |"
        + (" baseline median | baseline ratio |" if result["baseline"] else ""),
        "|---|---|---|---|---|" + ("---|---|" if result["baseline"] else ""),
    ]
    for row in result["rows"]:  # type: ignore[attr-defined]
        lines.append(
            f"| `{row['command']}` | {row['median_ms']} ms | `{row['floor']}` | "
            f"{row['floor_ms']} ms | {row['ratio']}× |"
            + (
                f" {row['baseline_ms']} ms | {row['baseline_ratio']}× |"
                if result["baseline"]
                else ""
            )
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=200)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", type=Path, default=None, help="also write every figure here")
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        metavar="DIR",
        help="also time the same commands from another source tree (e.g. "
        "`git archive REV | tar -x -C DIR`), interleaved with these",
    )
    args = parser.parse_args()
    result = measure(args.memories, args.runs, args.baseline)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
