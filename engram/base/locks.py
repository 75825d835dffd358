"""An exclusive lock on a file between processes, with a timeout: `flock(2)` where the system has
it, the `filelock` package elsewhere.

`filelock` costs about 30 ms to import (logging, secrets, its own settings), more than a
BM25-only recall spends on its work, and on POSIX it takes the same `flock(2)` lock this does:
the two exclude each other on the same file, so processes of either kind share a lock safely.
The lock belongs to the open file: it is freed when its holder releases it, closes the file or
dies. Not re-entrant: holding a lock and asking for it again in the same process waits.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


class LockTimeout(Exception):
    """Another process held the lock for the whole timeout."""


class FileLock:
    """`with FileLock(path, timeout):` holds an exclusive lock on `path` (created if missing).
    `acquire` raises `LockTimeout` after `timeout` seconds, `OSError` when the file cannot be
    opened (a read-only file system, no permission)."""

    def __init__(
        self, path: str | os.PathLike[str], timeout: float, poll: float = 0.01, mode: int = 0o644
    ) -> None:
        self.path = Path(path)
        self.timeout = timeout
        self.poll = poll
        self.mode = mode  # of the lock file, when this creates it
        self._fd: int | None = None
        self._fallback: Any = None

    def acquire(self) -> None:
        try:
            import fcntl
        except ImportError:
            self._acquire_fallback()
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, self.mode)
        deadline = time.monotonic() + self.timeout
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise LockTimeout(str(self.path)) from None
                    time.sleep(self.poll)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def _acquire_fallback(self) -> None:
        import filelock

        lock = filelock.FileLock(
            str(self.path), timeout=self.timeout, poll_interval=self.poll, thread_local=False
        )
        try:
            lock.acquire()
        except filelock.Timeout:
            raise LockTimeout(str(self.path)) from None
        self._fallback = lock

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the only descriptor frees its flock
        elif self._fallback is not None:
            lock, self._fallback = self._fallback, None
            lock.release()

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
