"""Reads survive event files vanishing under them (a compaction or a checkout in another
process), and two `engram reindex` at once serialise."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from engram.api import Engram
from engram.base import layout
from engram.readmodel.projection import Projection
from engram.storage.reindexing import REINDEX_LOCK
from tests.conftest import git, run_engram


def written(project: Path, count: int) -> set[str]:
    """`count` memories, each in a committed file of its own; the month compacts."""
    engram = Engram(cwd=project, use="project")
    engram.config_set("compact.files", "0")
    ids = set()
    for n in range(count):
        ids.add(
            engram.remember(
                f"memory {n}: the build cache is keyed by lockfile {n}", check_duplicates=False
            ).id
        )
        engram.commit()
    return ids


def test_a_compaction_between_the_scan_and_the_reads_is_rescanned(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = written(project, 6)
    store = Engram(cwd=project, use="project").project
    assert store is not None
    Projection(store).reset()  # the next read reads every file
    before = len(store.event_rels())
    scan = Projection._scan
    compacted: list[str] = []

    def scan_then_compact(self: Projection, known: Any) -> Any:
        found = scan(self, known)
        if not compacted:  # a compaction in another process, right after the first scan
            done = run_engram("compact", cwd=project)
            compacted.append(done.stdout + done.stderr)
            assert done.returncode == 0 and "folded" in done.stdout, compacted
        return found

    monkeypatch.setattr(Projection, "_scan", scan_then_compact)
    engram = Engram(cwd=project, use="project")
    assert {m.id for m in engram.memories(limit=None)} == ids
    assert compacted and len(store.event_rels()) < before  # the files really went
    [status] = engram.status()
    assert status.lost.events == 0


def test_files_vanishing_after_two_scans_in_a_row_are_rescanned_until_they_stay(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = written(project, 3)
    store = Engram(cwd=project, use="project").project
    assert store is not None
    Projection(store).reset()
    scan = Projection._scan
    rounds = []

    def scan_then_checkout(self: Projection, known: Any) -> Any:
        if len(rounds) == 2:  # the files come back (a checkout), then the scan
            rounds.append(1)
            git(project, "checkout", "--", ".engram")
        found = scan(self, known)
        if len(rounds) < 2:  # a file goes right after each of two scans
            rounds.append(1)
            os.unlink(found[0][sorted(found[0])[0]])
        return found

    monkeypatch.setattr(Projection, "_scan", scan_then_checkout)
    assert {m.id for m in Engram(cwd=project, use="project").memories(limit=None)} == ids
    assert len(rounds) == 3


def test_a_second_reindex_waits_for_the_first_and_neither_dies(project: Path) -> None:
    ids = written(project, 3)
    store = Engram(cwd=project, use="project").project
    assert store is not None
    lock = layout.cache_dir(store.local_dir) / REINDEX_LOCK
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "ab") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # a reindex under way
        waiting = subprocess.Popen(
            [sys.executable, "-m", "engram", "reindex"],
            cwd=project,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(3)
        assert waiting.poll() is None  # it waits rather than rebuilding under the other
        fcntl.flock(held.fileno(), fcntl.LOCK_UN)
    out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, out + err
    both = [
        subprocess.Popen(
            [sys.executable, "-m", "engram", "reindex"],
            cwd=project,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for proc in both:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, out + err
    assert {m.id for m in Engram(cwd=project, use="project").memories(limit=None)} == ids


@pytest.mark.slow
def test_commands_under_a_concurrent_compaction_loop_never_die(project: Path) -> None:
    ids = written(project, 4)
    stop = project / ".git" / "stop-compacting"
    loop = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, subprocess, sys\n"
            f"while not os.path.exists({str(stop)!r}):\n"
            "    subprocess.run([sys.executable, '-m', 'engram', 'compact'],\n"
            "                   capture_output=True)\n",
        ],
        cwd=project,
    )
    failures = []
    try:
        for n in range(12):
            done = run_engram("remember", f"written under compaction {n}: queue {n}", cwd=project)
            if done.returncode != 0:
                failures.append(done.stderr)
            done = run_engram("commit", cwd=project)
            for args in (("list", "--all"), ("reindex",) if n % 4 == 0 else ("status",)):
                done = run_engram(*args, cwd=project)
                if done.returncode != 0 or "Traceback" in done.stderr:
                    failures.append(f"{args}: {done.stderr}")
    finally:
        stop.touch()
        loop.wait(timeout=120)
    assert failures == []
    listed = run_engram("list", "--all", "--json", cwd=project).stdout
    assert all(i in listed for i in ids)
    assert listed.count("written under compaction") == 12
