"""Real processes writing at the same time: to one clone (serialised by the lock), and to two
clones that are then merged with plain git."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import git, make_repo

from engram.api import Engram

WRITER = Path(__file__).with_name("writer.py")


def start_writers(jobs: list[tuple[Path, int, str]]) -> list[subprocess.Popen[str]]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    return [
        subprocess.Popen(
            [sys.executable, str(WRITER), str(directory), str(count), label],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for directory, count, label in jobs
    ]


def acknowledged(procs: list[subprocess.Popen[str]]) -> list[str]:
    ids = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        ids.extend(out.split())
    return ids


def test_processes_writing_to_one_clone_lose_and_duplicate_nothing(project: Path) -> None:
    procs = start_writers([(project, 40, f"writer{i}") for i in range(4)])
    ids = acknowledged(procs)
    assert len(ids) == 160
    engram = Engram(cwd=project, use="project")
    found = [m.id for m in engram.memories(limit=None)]
    assert sorted(found) == sorted(ids)
    report = engram.verify()
    assert report.ok, report
    assert report.stores[0].events == 161  # and store.created
    # Every line is whole: the lock kept appends from interleaving.
    for path in engram.write_store().event_files():
        assert path.read_bytes().endswith(b"\n")


def test_two_clones_written_at_once_merge_with_plain_git(tmp_path: Path) -> None:
    seed = make_repo(tmp_path / "seed")
    Engram(cwd=seed).init(project=True)
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(tmp_path / "origin.git"))
    a, b = tmp_path / "a", tmp_path / "b"
    for clone in (a, b):
        git(tmp_path, "clone", "-q", str(tmp_path / "origin.git"), str(clone))
    procs = start_writers([(a, 30, "a1"), (a, 30, "a2"), (b, 30, "b1"), (b, 30, "b2")])
    ids = acknowledged(procs)
    Engram(cwd=a).commit()
    Engram(cwd=b).commit()
    git(a, "push", "-q", "origin", "main")
    git(b, "fetch", "-q", "origin")
    assert "CONFLICT" not in git(b, "merge", "--no-edit", "origin/main")
    git(b, "push", "-q", "origin", "main")
    git(a, "pull", "-q", "--no-rebase", "origin", "main")
    for clone in (a, b):
        engram = Engram(cwd=clone, use="project")
        found = [m.id for m in engram.memories(limit=None)]
        assert sorted(found) == sorted(ids)
        assert engram.verify().ok
