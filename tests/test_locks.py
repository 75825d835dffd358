"""The file lock between processes: held by one process, waited for by another, freed when its
holder dies, and the same lock as the `filelock` package's on the same file."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import filelock
import pytest

from engram.base.locks import FileLock, LockTimeout

HOLD = """
import sys, time
from engram.base.locks import FileLock
lock = FileLock(sys.argv[1], timeout=5)
lock.acquire()
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def holder(path: Path, seconds: float) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


def test_a_lock_held_by_another_process_times_out_then_is_taken_once_it_ends(
    tmp_path: Path,
) -> None:
    path = tmp_path / "write.lock"
    child = holder(path, 1.5)
    try:
        with pytest.raises(LockTimeout):
            FileLock(path, timeout=0.2).acquire()
        started = time.monotonic()
        with FileLock(path, timeout=10):
            waited = time.monotonic() - started
    finally:
        child.wait(timeout=10)
    assert 0.5 < waited < 9  # it waited for the holder to finish, not for the timeout


def test_a_lock_is_freed_when_its_holder_is_killed(tmp_path: Path) -> None:
    path = tmp_path / "write.lock"
    child = holder(path, 60)
    child.kill()
    child.wait(timeout=10)
    with FileLock(path, timeout=2):
        pass


def test_it_excludes_the_filelock_package_on_the_same_file_both_ways(tmp_path: Path) -> None:
    path = tmp_path / "index.lock"
    child = holder(path, 60)
    try:
        with pytest.raises(filelock.Timeout):
            filelock.FileLock(str(path), timeout=0.2, thread_local=False).acquire()
    finally:
        child.kill()
        child.wait(timeout=10)
    other = filelock.FileLock(str(path), timeout=1, thread_local=False)
    other.acquire()
    try:
        with pytest.raises(LockTimeout):
            FileLock(path, timeout=0.2).acquire()
    finally:
        other.release()
    with FileLock(path, timeout=1):
        pass


def test_two_locks_in_one_process_exclude_each_other(tmp_path: Path) -> None:
    path = tmp_path / "write.lock"
    with FileLock(path, timeout=1):
        with pytest.raises(LockTimeout):
            FileLock(path, timeout=0.1).acquire()
    with FileLock(path, timeout=1):  # released: taken again at once
        pass


def test_a_second_embedder_of_the_same_store_steps_aside_then_waits_its_turn(
    tmp_path: Path,
) -> None:
    """The embedding backlog's lock: a recall that must not wait embeds nothing while another
    process embeds for the store; one that waits embeds once that process is done."""
    from engram.search.backlog import EMBED_LOCK, Backlog
    from engram.search.embed import EmbeddingCache, load_embedder

    cache = EmbeddingCache(tmp_path / "embeddings.sqlite3")
    texts = ["gotcha: the upload worker retries forever on a 409", "decision: ULIDs for event ids"]
    backlog = Backlog("store", load_embedder("builtin"), cache, texts)
    child = holder(tmp_path / EMBED_LOCK, 1.5)
    try:
        assert backlog.run(wait=False) == 0
        started = time.monotonic()
        assert backlog.run(wait=True) == 2
        waited = time.monotonic() - started
    finally:
        child.wait(timeout=10)
        cache.close()
    assert waited > 0.3  # it waited for the other embedder rather than embedding beside it
