"""A session's capture journal: one JSON file in the store's local state, never committed.

`<git-dir>/engram/capture/<session>.json` holds what the hooks captured for one client session:

- `files`: each file the agent edited or wrote, relative to the store's work tree, with how
  often and when first and last (a file outside the work tree is only counted, in `outside`);
- `failures`: failure candidates, commands that exited non-zero, with their exit status, the
  first lines of output and a count (an identical failure again folds into the same one);
- `commands`: how many commands succeeded; `skipped`: events that could not be read, in the
  batches that recorded something here (a skipped event alone never writes a journal);
- `shown`: the memories the prompt hook already put in front of the agent (id -> version).

Writes replace the file atomically under a lock of its own (not the store's write lock: a
hook never waits for a commit). The file is read strictly: one that is not the journal's shape
is set aside as `<session>.json.bad` and a new one started, so a damaged journal never stops
a hook. Sizes are bounded (MAX_FILES, MAX_FAILURES, MAX_SHOWN): the oldest entries go first; the
journal of a session untouched for KEEP_DAYS is removed when a new session starts one.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ...base.errors import EngramError
from ...base.files import atomic_write
from ...base.layout import CAPTURE_DIR
from .events import SESSION, Captured

VERSION = 1
MAX_FILES = 200
MAX_FAILURES = 50
MAX_SHOWN = 500
MAX_BYTES = 1_048_576  # a journal larger than this is not read
LOCK_SECONDS = 2.0
KEEP_DAYS = 30.0  # a session's journal untouched this long is removed


def now_text() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def empty(session: str) -> dict[str, Any]:
    stamp = now_text()
    return {
        "version": VERSION,
        "session": session,
        "started": stamp,
        "updated": stamp,
        "files": {},
        "outside": 0,
        "failures": [],
        "commands": 0,
        "folded": 0,
        "skipped": 0,
        "shown": {},
    }


def journal_dir(local_dir: Path) -> Path:
    return local_dir / CAPTURE_DIR


def journal_path(local_dir: Path, session: str) -> Path:
    if not SESSION.fullmatch(session):
        session = "s-" + hashlib.sha256(session.encode("utf-8", "replace")).hexdigest()[:16]
    return journal_dir(local_dir) / f"{session}.json"


def _valid(data: Any) -> bool:
    """Whether `data` has the journal's shape (every field of its type)."""
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return False
    counts = ("outside", "commands", "folded", "skipped")
    if not all(isinstance(data.get(k), int) and data[k] >= 0 for k in counts):
        return False
    if not all(isinstance(data.get(k), str) for k in ("session", "started", "updated")):
        return False
    files, failures, shown = data.get("files"), data.get("failures"), data.get("shown")
    if not isinstance(files, dict) or not isinstance(failures, list) or not isinstance(shown, dict):
        return False
    for _path, entry in files.items():
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("count"), int)
            or not all(isinstance(entry.get(k), str) for k in ("first", "last", "tool"))
        ):
            return False
    for entry in failures:
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("count"), int)
            or not isinstance(entry.get("exit_code"), int)
            or not all(
                isinstance(entry.get(k), str)
                for k in ("id", "key", "command", "output", "first", "last")
            )
            or not isinstance(entry.get("redacted", False), bool)
            or not isinstance(entry.get("task", ""), str)
        ):
            return False
    return all(isinstance(v, int) for v in shown.values())


def read(path: Path) -> dict[str, Any] | None:
    """The journal at `path`, or None when there is none or it is not a journal."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError:
        return None
    if len(raw) > MAX_BYTES:
        return None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return data if _valid(data) else None


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """`path` locked for this process (freed by the OS if it dies); waits LOCK_SECONDS at
    most, then raises EngramError: a hook gives up rather than hold up its client."""
    from ...base.locks import FileLock, LockTimeout

    lock = FileLock(path, timeout=LOCK_SECONDS, poll=0.005, mode=0o600)
    try:
        lock.acquire()
    except LockTimeout:
        raise EngramError(f"{path} stayed locked for {LOCK_SECONDS:.0f}s") from None
    try:
        yield
    finally:
        lock.release()


@contextmanager
def editing(local_dir: Path, session: str) -> Iterator[dict[str, Any]]:
    """The session's journal, to change in place; written back (atomically) at the end."""
    path = journal_path(local_dir, session)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path.with_name(path.name + ".lock")):
        data = read(path)
        if data is None:
            if path.exists():  # damaged or foreign: kept for a look, never read again
                os.replace(path, path.with_name(path.name + ".bad"))
            else:
                prune(path.parent)
            data = empty(session)
        yield data
        data["updated"] = now_text()
        atomic_write(
            path, json.dumps(data, ensure_ascii=False, separators=(",", ":")), durable=False
        )


def prune(folder: Path, *, days: float = KEEP_DAYS) -> int:
    """Remove the journals (and their locks) of sessions untouched for `days`: run when a
    new session starts its journal. Returns how many journals went."""
    cutoff = time.time() - days * 86400
    gone = 0
    for path in folder.iterdir():
        if not path.name.endswith((".json", ".json.lock", ".json.bad")):
            continue
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
                gone += path.name.endswith(".json")
        except OSError:
            continue
    return gone


def relative_path(work_tree: Path, cwd: str | None, path: str) -> str | None:
    """`path` (absolute, or relative to `cwd`) relative to `work_tree`, `/`-separated; None
    when it is outside it. Paths are compared as written and absolute (no link is followed
    here: the checkpoint checks each file again when it takes it)."""
    base = Path(cwd) if cwd and Path(cwd).is_absolute() else work_tree
    full = Path(os.path.normpath(os.path.join(base, path)))
    for top in dict.fromkeys([Path(os.path.abspath(work_tree)), work_tree.resolve()]):
        try:
            relative = full.relative_to(top)
        except ValueError:
            continue
        text = PurePosixPath(*relative.parts).as_posix()
        return text if text not in ("", ".") else None
    return None


def add(data: dict[str, Any], item: Captured, *, work_tree: Path) -> str:
    """Fold `item` into the journal `data`; what happened, in a word: "file", "outside",
    "failure", "folded" or "command"."""
    stamp = now_text()
    if item.kind == "file":
        relative = relative_path(work_tree, item.cwd, item.path)
        if relative is None:
            data["outside"] += 1
            return "outside"
        files = data["files"]
        entry = files.pop(relative, None)  # re-inserted: the dict keeps the latest last
        if entry is not None:
            data["folded"] += 1
            entry.update(count=entry["count"] + 1, last=stamp, tool=item.tool or entry["tool"])
        else:
            entry = {"tool": item.tool, "count": 1, "first": stamp, "last": stamp}
        files[relative] = entry
        while len(files) > MAX_FILES:
            files.pop(next(iter(files)))
        return "folded" if entry["count"] > 1 else "file"
    if not item.failed:
        data["commands"] += 1
        return "command"
    key = hashlib.sha256(
        json.dumps([item.command, item.exit_code, item.output]).encode()
    ).hexdigest()[:16]
    failures = data["failures"]
    for at, entry in enumerate(failures):
        if entry["key"] == key:
            data["folded"] += 1
            entry.update(count=entry["count"] + 1, last=stamp)
            failures.append(failures.pop(at))
            return "folded"
    number = max([int(e["id"][1:]) for e in failures if e["id"][1:].isdigit()] or [0]) + 1
    failures.append(
        {
            "id": f"c{number}",
            "key": key,
            "command": item.command,
            "exit_code": item.exit_code,
            "output": item.output,
            "count": 1,
            "first": stamp,
            "last": stamp,
            "redacted": item.redacted,
        }
    )
    del failures[:-MAX_FAILURES]
    return "failure"


@dataclass(frozen=True)
class SessionCapture:
    """What was captured for one session, as `engram capture --stats` shows it."""

    session: str
    started: str
    updated: str
    files: tuple[str, ...]
    failures: tuple[dict[str, Any], ...]
    commands: int
    folded: int
    skipped: int
    outside: int
    shown: int

    @classmethod
    def of(cls, data: dict[str, Any]) -> SessionCapture:
        return cls(
            session=data["session"],
            started=data["started"],
            updated=data["updated"],
            files=tuple(data["files"]),
            failures=tuple({k: v for k, v in f.items() if k != "key"} for f in data["failures"]),
            commands=data["commands"],
            folded=data["folded"],
            skipped=data["skipped"],
            outside=data["outside"],
            shown=len(data["shown"]),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "started": self.started,
            "updated": self.updated,
            "files": list(self.files),
            "failures": list(self.failures),
            "commands": self.commands,
            "folded": self.folded,
            "skipped": self.skipped,
            "outside": self.outside,
            "shown": self.shown,
        }


def sessions(local_dir: Path) -> list[SessionCapture]:
    """Every session's capture in this clone, most recently updated first."""
    folder = journal_dir(local_dir)
    found = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        data = read(path)
        if data is not None:
            found.append(SessionCapture.of(data))
    return sorted(found, key=lambda s: (s.updated, s.session), reverse=True)


def session(local_dir: Path, session_id: str) -> SessionCapture | None:
    data = read(journal_path(local_dir, session_id))
    return SessionCapture.of(data) if data is not None else None


def failure_line(failure: dict[str, Any]) -> str:
    """A failure candidate as one working-set command line."""
    times = f", {failure['count']} times" if failure["count"] > 1 else ""
    first = failure["output"].splitlines()[0] if failure["output"] else ""
    said = f": {first}" if first else ""
    return f"{failure['command']}  # failed (exit {failure['exit_code']}{times}){said}"
