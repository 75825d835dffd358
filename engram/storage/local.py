"""A clone's local state of its store: where its writer stands, and the write lock.

Both live in the git directory (`<git-dir>/engram/`, `layout.LOCAL_DIR`), never committed.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from ..base.errors import EngramError
from ..base.files import atomic_write
from ..base.layout import WRITE_LOCK, WRITER_STATE

if TYPE_CHECKING:
    from pathlib import Path

    from .store import Store


@dataclass
class WriterState:
    """Where this clone's writer stands. Kept in `<git-dir>/engram/writer.json`
    (`layout.WRITER_STATE`).

    It is written after every append without fsync: if it is lost, the next append merely
    starts a new writer file, which is always safe.
    """

    writer: str | None = None
    segment: str | None = None  # store-relative path of the file last appended to
    head: str | None = None  # the commit HEAD pointed at when the segment was started
    size: int = 0
    tail: str = ""
    tail_len: int = 0
    clock: int = 0
    pending: int = 0  # substantive events written since the last commit
    pending_since: float = 0.0  # when the first of them was written
    index_stamp: str = ""  # git's index (mtime:size) when last looked at for the live file
    lines: int = 0  # lines of the segment when it was left at `size` (0: count them)

    @classmethod
    def load(cls, store: Store) -> WriterState:
        try:
            raw: Any = orjson.loads((store.local_dir / WRITER_STATE).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return cls()
        return cls.from_raw(raw) or cls()  # damaged: a new writer file is always safe

    @classmethod
    def from_raw(cls, raw: Any) -> WriterState | None:
        """The state `raw` (parsed writer.json) holds, or None if it is not a sound one."""
        if not isinstance(raw, dict):
            return None
        kept = {k: v for k, v in raw.items() if k in _WRITER_FIELDS}
        if any(not isinstance(v, _WRITER_FIELDS[k]) for k, v in kept.items()):
            return None
        return cls(**kept)

    def save(self, store: Store) -> None:
        store.local_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(store.local_dir / WRITER_STATE, orjson.dumps(self.__dict__), durable=False)


_OPTIONAL_TEXT = (str, type(None))
_WRITER_FIELDS: dict[str, Any] = {
    "writer": _OPTIONAL_TEXT,
    "segment": _OPTIONAL_TEXT,
    "head": _OPTIONAL_TEXT,
    "size": int,
    "tail": str,
    "tail_len": int,
    "clock": int,
    "pending": int,
    "pending_since": (int, float),
    "index_stamp": str,
    "lines": int,
}


class StoreLock:
    """Serialises writers on one clone. The OS frees it when its process dies."""

    def __init__(self, store: Store, timeout: float) -> None:
        self.store = store
        self.timeout = timeout
        self._lock: Any = None

    def __enter__(self) -> Store:
        from ..base.locks import FileLock, LockTimeout

        try:
            self.store.local_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise unwritable(self.store, exc) from None
        self._lock = FileLock(self.store.local_dir / WRITE_LOCK, self.timeout, poll=0.002)
        try:
            self._lock.acquire()
        except LockTimeout:
            raise EngramError(
                f"another Engram process has held the write lock of {self.store.root} for "
                f"{self.timeout:.0f}s; wait for it to finish or stop it"
            ) from None
        except OSError as exc:
            raise unwritable(self.store, exc) from None
        return self.store

    def __exit__(self, *exc: object) -> None:
        if self._lock is not None:
            self._lock.release()


def unwritable(store: Store, exc: OSError) -> EngramError:
    reason, remedy = {
        errno.EROFS: ("its file system is read-only", "remount it read-write"),
        errno.EACCES: (
            "permission denied",
            f"give yourself write access (chmod -R u+w {store.root})",
        ),
        errno.EPERM: (
            "permission denied",
            f"give yourself write access (chmod -R u+w {store.root})",
        ),
        errno.ENOSPC: ("the disk is full", "free some space"),
        errno.EDQUOT: ("the disk quota is used up", "free some space"),
        errno.EFBIG: ("a file size limit was reached", "raise it (ulimit -f)"),
    }.get(exc.errno or 0, (exc.strerror or str(exc), "fix that"))
    return EngramError(
        f"cannot write to the store at {store.root}: {reason}; {remedy}, "
        "then retry (nothing was written; reads still work)"
    )


def lines_before(path: Path, size: int, state: WriterState | None) -> int:
    """How many lines the first `size` bytes of the file hold: what the writer's state says
    when it left the file at that size, else counted (a file is at most MAX_FILE_BYTES). Only
    for receipts: if the file cannot be read back, the line is not known (-1), and the write
    goes on."""
    if size == 0:
        return 0
    if state is not None and state.size == size and state.lines > 0:
        return state.lines
    count = 0
    try:
        with open(path, "rb") as handle:
            left = size
            while left > 0:
                chunk = handle.read(min(1 << 20, left))
                if not chunk:
                    break
                count += chunk.count(b"\n")
                left -= len(chunk)
    except OSError:
        return -1
    return count
