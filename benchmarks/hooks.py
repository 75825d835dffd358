"""How long each Claude Code hook takes, as Claude Code runs it, on a store of N memories.

    .venv/bin/python benchmarks/hooks.py                     # N = 10000, 60 runs per hook
    .venv/bin/python benchmarks/hooks.py --memories 1000 --runs 20   # a quick look
    .venv/bin/python benchmarks/hooks.py --json benchmarks/results/hooks.json

The store is built in bulk by benchmarks/bulkstore.py (kept under benchmarks/.work/ for reruns:
N memories and one task with 200 events, random vectors in the embedding cache) and its indexes
built once. Each hook is then run as the installed command runs it, a new process each time
(`<python> -I -m engram.hooks <hook>`, the payload on stdin, in a git repository that uses the
store), interleaved with the floor, `python -I -c pass`:

- `capture` (PostToolUse, Edit): a file folded into the session's journal;
- `capture` (PostToolUseFailure, Bash): a failed command, scanned for secrets, folded;
- `prompt` (UserPromptSubmit): a recall by words of a prompt made of the store's vocabulary
  (benchmarks/speed.py's queries), the memories above the threshold added within the budget;
- `session-start` (SessionStart): the brief resume;
- `precompact` (PreCompact): a checkpoint of the task, with the captured working set.

It prints p50, p95 and max per hook (and the floor's), and writes them as JSON with --json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bulkstore  # noqa: E402
import speed  # noqa: E402

WORK = Path(__file__).resolve().parent / ".work"
SESSION = "bench-session-0001"


def payloads(repo: Path, rng: random.Random, queries: list[str]) -> dict[str, Any]:
    """A function per measured hook giving the next run's payload."""
    base = {
        "session_id": SESSION,
        "cwd": str(repo),
        "permission_mode": "default",
        "transcript_path": str(repo / "transcript.jsonl"),
    }

    def edit() -> dict[str, Any]:
        path = repo / "src" / f"module_{rng.randrange(40)}.py"
        return {
            **base,
            "hook_event_name": "PostToolUse",
            "tool_name": "Edit",
            "tool_input": {"file_path": str(path), "old_string": "a", "new_string": "b"},
            "tool_response": {"filePath": str(path)},
        }

    def failure() -> dict[str, Any]:
        test = f"tests/test_{rng.randrange(20)}.py"
        return {
            **base,
            "hook_event_name": "PostToolUseFailure",
            "tool_name": "Bash",
            "tool_input": {"command": f"python -m pytest -q {test}"},
            "error": "Exit code 1\nF..\nE   AssertionError: expected 200, got 500\n"
            "1 failed, 2 passed in 0.40s",
            "is_interrupt": False,
        }

    def prompt() -> dict[str, Any]:
        return {**base, "hook_event_name": "UserPromptSubmit", "prompt": rng.choice(queries)}

    return {
        "capture (PostToolUse, Edit)": ("capture", edit),
        "capture (PostToolUseFailure, Bash)": ("capture", failure),
        "prompt (UserPromptSubmit)": ("prompt", prompt),
        "session-start (SessionStart)": (
            "session-start",
            lambda: {**base, "hook_event_name": "SessionStart", "source": "startup"},
        ),
        "precompact (PreCompact)": (
            "precompact",
            lambda: {**base, "hook_event_name": "PreCompact", "trigger": "auto"},
        ),
    }


def run(command: list[str], payload: dict[str, Any] | None, cwd: Path) -> tuple[int, str]:
    started = time.perf_counter_ns()
    done = subprocess.run(
        command,
        input=json.dumps(payload) if payload is not None else "",
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )
    took = time.perf_counter_ns() - started
    if done.returncode != 0 or done.stderr:
        raise SystemExit(f"{command[-1]} failed: {done.stderr.strip()[:500]}")
    return took, done.stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=60, help="runs per hook (default 60)")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = ap.parse_args(argv)

    spec = bulkstore.StoreSpec(
        name=f"hooks-{args.memories}", memories=args.memories, task_events=200
    )
    built = bulkstore.ensure_store(WORK, spec)
    from engram.api import Engram

    repo = built.base / "project"
    if not (repo / ".git").exists():
        repo.mkdir(parents=True, exist_ok=True)
        bulkstore.git(repo, "init", "-q")
        (repo / "README.md").write_text("a project\n")
        bulkstore.git(repo, "add", "-A")
        bulkstore.git(
            repo, "-c", "user.name=bench", "-c", "user.email=b@x", "commit", "-q", "-m", "initial"
        )
    with Engram(cwd=repo) as engram:
        engram.refresh_indexes()  # the indexes are current, as after any command
        engram.config_set("commit.every_events", "10000")  # checkpoints wait for a batch
    load_before = os.getloadavg()
    rng = random.Random(7)
    queries = speed.make_queries(rng, 200)
    hooks = payloads(repo, rng, queries)
    python = [sys.executable, "-I"]
    floor: list[int] = []
    times: dict[str, list[int]] = {name: [] for name in hooks}
    added = 0
    for hook, make in hooks.values():  # one warm-up run each (page cache, pyc files)
        run([*python, "-m", "engram.hooks", hook], make(), repo)
    for _ in range(args.runs):
        floor.append(run([*python, "-c", "pass"], None, repo)[0])
        for name, (hook, make) in hooks.items():
            took, out = run([*python, "-m", "engram.hooks", hook], make(), repo)
            times[name].append(took)
            added += hook == "prompt" and bool(out.strip())
    result = {
        "memories": args.memories,
        "runs": args.runs,
        "commit": speed.engram_version(),
        "python": sys.version.split()[0],
        "measured": time.strftime("%Y-%m-%d %H:%M"),
        "floor": speed.summary(floor),
        "hooks": {name: speed.summary(values) for name, values in times.items()},
        "prompts_with_context": added,
        "load_average": {"before": load_before[0], "after": os.getloadavg()[0]},
    }
    print(
        f"{args.memories} memories, {args.runs} runs per hook, commit {result['commit']}, "
        f"load average {load_before[0]:.1f} -> {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores"
    )
    print("| hook | p50 | p95 | max |")
    print("|---|---|---|---|")
    for name, figures in [
        *result["hooks"].items(),
        ("`python -I -c pass` (floor)", result["floor"]),
    ]:
        print(
            f"| {name} | {figures['median_ms']:.0f} ms | {figures['p95_ms']:.0f} ms | "
            f"{figures['max_ms']:.0f} ms |"
        )
    print(f"prompts given context: {added} of {args.runs}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
