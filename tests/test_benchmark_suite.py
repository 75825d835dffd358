"""The performance suite still runs against the code: every stage of benchmarks/run_all.py at
its smoke sizes (seconds each), so that a change to the library that breaks a benchmark (an
import moved, a method renamed) fails here rather than hours into a full run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_every_stage_of_the_performance_suite_runs_and_is_reported(tmp_path: Path) -> None:
    out, work = tmp_path / "out", tmp_path / "work"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "run_all.py"),
            "--smoke",
            "--out",
            str(out),
            "--work",
            str(work),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    stages = {path.stem: json.loads(path.read_text()) for path in (out / "stages").glob("*.json")}
    assert set(stages) == {"startup", "write", "recall-300", "rehydrate-300", "reindex", "sync"}
    failed = {name: data["error"] for name, data in stages.items() if "error" in data}
    assert not failed, f"stages that failed: {failed}\n{done.stderr[-3000:]}"
    assert all(data["mode"] == "smoke" for data in stages.values())
    report = (out / "report.md").read_text()
    assert "(smoke sizes;" in report
    for row in (
        "| remember p50 (near-duplicate check on) |",
        "| recall p50 @ 300 memories |",
        "| `engram status` process |",
        "| MCP: first `tools/list` |",
        "| `refresh_indexes()` after a pull of 20 events |",
        "| `engram sync`, 20 new events each way |",
    ):
        assert row in report, f"{row} missing from the report"
