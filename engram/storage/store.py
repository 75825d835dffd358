"""One store on disk: its layout, the append path, and reading event files back.

A store root (`~/.engram`, or `.engram/` in a project's work tree) holds config.yaml, README.md,
.gitattributes and `events/YYYY/MM/<writer>.jsonl`; per-clone state lives in the git directory
(`engram.base.layout` names every path, `engram.storage.local` holds the writer's state).

One writer, one file: each clone appends to files named after a writer id that no other clone
uses, so two clones never change the same file and plain `git merge` joins them. The writer
remembers the size and last line of the file it appends to; if the file is not exactly as it left
it (a branch switch, a reset, a checkout of an older commit) it starts a new writer file instead
of extending a history another branch may also extend. That is what keeps merges conflict-free.

It also starts a new file whenever HEAD has moved since the file was started (a commit, a merge, a
checkout): so an event file is created by one commit and never changed by a later one. Squash
merges, cherry-picks and rebases copy commits' changes onto other branches; because no change ever
extends a file that an earlier commit created, those copies apply cleanly too, and a later merge
of the original branch meets identical files.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

from ..base.config import ConfigFile, Layer, default_config_text
from ..base.errors import EngramError, NoStoreError
from ..base.files import atomic_write, fsync_dir
from ..base.layout import (  # noqa: F401 (HANDOFFS_DIR: named here for the store's users)
    CONFIG_FILE,
    CONFIG_PARSED,
    EVENT_SUFFIX,
    EVENTS_DIR,
    GITATTRIBUTES_FILE,
    GITATTRIBUTES_LINE,  # noqa: F401 (named here for the store's users)
    HANDOFFS_DIR,
    MAIN_WORKTREE,
    OBSERVED_CLOCK,
    PROJECT_DIR,
    README_FILE,
    TORN_DIR,
    TRACKED,
    local_dir,
)
from . import attributes, gitdir, ledger, lines, shapes
from . import events as ev
from .local import StoreLock, WriterState, lines_before, unwritable
from .shapes import git_c as git_c  # named here for the store's users

StoreKind = Literal["personal", "project"]

LOCK_TIMEOUT_SECONDS = 30.0
# A writer starts a new file past this size, so that a commit (which stores whole files, as git
# does) costs the same at a million events as at a thousand.
MAX_FILE_BYTES = 4 * 1024 * 1024

_README = """\
# Engram store

This directory is an [Engram](https://pypi.org/project/engram/) store: what coding agents learned
(decisions, conventions, gotchas, failures) and where they stopped (tasks, checkpoints, handoffs).

- `events/YYYY/MM/*.jsonl` are the truth: immutable events, one JSON object per line. Each file is
  written by one clone only, so branches and machines merge with plain git, without conflicts.
- `config.yaml` holds the store's settings (`engram config list`).

Do not edit event files by hand: `engram verify` checks them, and `engram log` reads them.
"""


@dataclass(frozen=True)
class Problem:
    """Something wrong in an event file, with where it is."""

    path: str  # relative to the store root
    line: int
    severity: Literal["error", "warning"]
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass
class Chunk:
    """What reading part of an event file found."""

    events: list[tuple[int, ev.Event]] = field(default_factory=list)  # (line number, event)
    problems: list[Problem] = field(default_factory=list)
    consumed: int = 0  # byte offset just past the last complete line
    lines: int = 0  # complete lines up to `consumed`
    tail: bytes = b""  # the last complete line, for detecting rewrites later


def _slug(text: str, limit: int = 20) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].strip("-")
    return slug or "writer"


class Store:
    """A personal or project store. Cheap to construct; touches disk only when asked."""

    def __init__(self, root: Path, kind: StoreKind) -> None:
        self.root = root.absolute()
        self.kind: StoreKind = kind
        self.work_tree = self.root if kind == "personal" else self.root.parent
        self.prefix = "" if kind == "personal" else PROJECT_DIR
        self.events_dir = self.root / EVENTS_DIR
        self._git_dir: Path | None = None
        self._common_dir: Path | None = None
        self._config_cache: tuple[tuple[int, ...] | None, Layer] | None = None
        self.repairs: list[str] = []  # what the last append had to repair, for the caller to tell
        self.symlinks: list[str] = []  # links found under events/ by the last listing
        # The embedding cache of another store to share (a snapshot of this one: engram.git.asof).
        self.shared_embeddings: Path | None = None

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r}, {self.kind!r})"

    # -- locations ---------------------------------------------------------------------------

    @property
    def git_dir(self) -> Path:
        if self._git_dir is None:
            self._git_dir = gitdir.git_dir(self.work_tree)
        return self._git_dir

    @property
    def local_dir(self) -> Path:
        """Per-clone state, inside the git directory so that it is never committed."""
        return local_dir(self.git_dir)

    @property
    def common_dir(self) -> Path:
        """The git directory shared by every work tree of the repository (the git directory
        itself, except in a linked worktree). `git worktree remove` leaves it in place."""
        if self._common_dir is None:
            self._common_dir = gitdir.common_dir(self.git_dir)
        return self._common_dir

    @property
    def worktree_name(self) -> str:
        """The linked worktree's name (its folder in `<common-git-dir>/worktrees/`), or ".main"
        for the main work tree (git never starts a worktree's name with a dot)."""
        return self.git_dir.name if gitdir.is_linked(self.git_dir) else MAIN_WORKTREE

    @property
    def config_file(self) -> ConfigFile:
        return ConfigFile(self.root / CONFIG_FILE)

    def config_layer(self) -> Layer:
        """This store's settings, parsed again only when config.yaml changed."""
        path = self.root / CONFIG_FILE
        try:
            st = path.stat()
            stamp: tuple[int, ...] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
        except FileNotFoundError:
            stamp = None
        cached = self._config_cache
        if cached is None or cached[0] != stamp:
            kept: Path | None = self.local_dir / CONFIG_PARSED
            if not self.local_dir.is_dir():
                kept = None
            read = shapes.config_read(self) or self.config_file.load(
                kept, project=self.kind == "project"
            )
            cached = (
                stamp,
                Layer(read.values, origin=f"{self.kind} store ({path})", warnings=read.warnings),
            )
            self._config_cache = cached
        return cached[1]

    def exists(self) -> bool:
        return self.root.is_dir() and (self.root / CONFIG_FILE).exists()

    def repo_path(self, rel: str) -> str:
        """A store-relative path as a path in the git work tree."""
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def event_files(self) -> list[Path]:
        """Every event file, in a stable order."""
        root = self.root
        return [root / rel for rel in self.event_rels()]

    def event_rels(self) -> list[str]:
        """Every event file as a store-relative path (`events/...`), in a stable order."""
        top = str(self.events_dir)
        if self.events_dir.is_symlink():
            self.symlinks = [EVENTS_DIR]
            return []
        if not os.path.isdir(top):
            return []
        skip = len(str(self.root)) + 1
        found = []
        stack = [top]
        links = []
        while stack:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    if entry.is_symlink():
                        links.append(entry.path[skip:].replace(os.sep, "/"))
                    elif entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif entry.name.endswith(EVENT_SUFFIX) and entry.is_file(follow_symlinks=False):
                        found.append(entry.path[skip:].replace(os.sep, "/"))
        self.symlinks = sorted(links)  # not followed: reported by the readers
        return sorted(found, key=lambda rel: rel.split("/"))  # the order of sorted Paths

    def top_links(self) -> list[str]:
        """The store's own top-level files and folders that are symbolic links (cheap: a few
        `lstat`s, so every command can say so)."""
        return [name for name in TRACKED if (self.root / name).is_symlink()]

    def links(self) -> list[str]:
        """Every symbolic link among the store's own files, store-relative. None is followed:
        writes refuse them, reads skip them, `verify` and `doctor` report them."""
        found = []
        for name in TRACKED:
            top = self.root / name
            if top.is_symlink():
                found.append(name)
                continue
            for folder, dirs, files in os.walk(top):
                for entry in (*dirs, *files):
                    path = Path(folder, entry)
                    if path.is_symlink():
                        found.append(self.rel(path))
        return sorted(found)

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def symlink_in(self, path: Path) -> str | None:
        """The first part of `path` below the store's root that is a symbolic link, if any. A
        link committed into a store (`events/2027/01`, `handoffs/<task>`) would send writes
        out of it; nothing in a store is followed out of it."""
        current = self.root
        for part in path.relative_to(self.root).parts:
            current = current / part
            if current.is_symlink():
                return self.rel(current)
        return None

    # -- creating ----------------------------------------------------------------------------

    def ensure_layout(self) -> list[str]:
        """Create the committed skeleton files that are missing, and bring a .gitattributes
        without Engram's lines for event files up to date (`engram.storage.attributes`);
        return the names of the files written."""
        for name in shapes.misshapen(self):
            shapes.refuse(self, name)
        self.root.mkdir(parents=True, exist_ok=True)
        self.events_dir.mkdir(exist_ok=True)
        created = []
        for name, text in (
            (CONFIG_FILE, default_config_text()),
            (README_FILE, _README),
            (GITATTRIBUTES_FILE, attributes.TEXT),
        ):
            path = self.root / name
            if not path.exists() and not path.is_symlink():
                path.write_text(text, encoding="utf-8")
                created.append(name)
        if self.pin_attributes():
            created.append(GITATTRIBUTES_FILE)
        self.local_dir.mkdir(parents=True, exist_ok=True)
        return created

    def pin_attributes(self) -> bool:
        """Rewrite the store's .gitattributes with Engram's lines for event files, last, if it
        does not hold them (a link is left alone: it is reported, never followed). Returns
        whether the file was written."""
        path = self.root / GITATTRIBUTES_FILE
        if path.is_symlink() or not path.is_file():
            return False
        text = path.read_bytes().decode("utf-8", "replace")
        if attributes.is_pinned(text):
            return False
        atomic_write(
            path, attributes.pinned(text), temp=path.with_name(f".{path.name}.{os.getpid()}.tmp")
        )
        return True

    # -- the write path ----------------------------------------------------------------------

    def lock(self, timeout: float = LOCK_TIMEOUT_SECONDS) -> StoreLock:
        return StoreLock(self, timeout)

    def append(
        self,
        events: Iterable[ev.Event],
        *,
        now: float | None = None,
        fresh: bool = False,
        raw: Sequence[bytes] | None = None,
        skew_us: int | None = None,
    ) -> tuple[str, int]:
        """Append events durably: returns once their lines are written and fsynced, with where
        they went: the file (relative to the store) and the line of the first of them (the
        others follow it, one a line; 0 when the file could not be read back to count).

        Callers hold `self.lock()`; they build events with `next_clock()` under the same lock.
        Substantive events (`events.substantive`) count towards the next batched commit, from
        `now` (default: the time now) when none were pending. `fresh` starts a new writer file
        for them; `raw` gives their lines as they were found (events brought back by
        `engram recover` keep their exact bytes).

        `skew_us` (always so with `raw`): the events come from elsewhere (an import, a
        recovery) with clocks of their own, which this writer's clock follows only up to that
        far ahead of this machine's time; if any is further ahead, the next event written here
        starts a new file (within a file, clocks increase).

        Every line is also noted in the store's ledger in the shared git directory (see
        `engram.lost`), which no git command deletes: until the read model has seen an event,
        that note is how a file git deleted is noticed and brought back.
        """
        batch = list(events)
        if not batch:
            return "", 0
        lines.check_writable(batch)  # never a line its own readers skip
        state = WriterState.load(self)
        head = self.head_id()
        if fresh:
            state.writer = self._new_writer_name()
            state.segment = None
        path = self._writable_path(state, batch[0], head)
        link = self.symlink_in(path)
        if link is not None:
            raise EngramError(
                f"{self.root / link} is a symbolic link inside the store, and "
                f"events are never written through one; remove it "
                f"(`{git_c(self)} rm -- {shlex.quote(self.repo_path(link))}`, "
                "then commit) and try again"
            )
        shapes.refuse_write(self, path)
        data = b"".join(raw) if raw is not None else b"".join(event.to_line() for event in batch)
        new_file = not path.exists()
        if new_file:
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise unwritable(self, exc) from None
        try:
            before = os.fstat(fd).st_size
            first = 1 + lines_before(
                path, before, state if state.segment == self.rel(path) else None
            )
            try:
                written = 0
                while written < len(data):
                    written += os.write(fd, data[written:])
                os.fsync(fd)
            except OSError as exc:
                # Disk full or I/O error part-way: take the partial line back out.
                try:
                    os.ftruncate(fd, before)
                    os.fsync(fd)
                    if new_file and before == 0:
                        path.unlink()  # and the file this write created
                except OSError:
                    pass
                raise unwritable(self, exc) from None
        finally:
            os.close(fd)
        if new_file:
            fsync_dir(path.parent)
            fsync_dir(path.parent.parent)
        last = raw[-1] if raw is not None else batch[-1].to_line()
        ledger.note(self, self.rel(path), data)
        state.segment = self.rel(path)
        state.head = head
        state.size = path.stat().st_size
        state.tail = hashlib.sha1(last).hexdigest()
        state.tail_len = len(last)
        top = max(e.clock for e in batch)
        if raw is not None or skew_us is not None:
            limit = ev.followed(top, skew_us=ev.MAX_SKEW_US if skew_us is None else skew_us)
            if limit < top:
                state.segment = None
            top = limit
        state.clock = max(state.clock, top)
        state.lines = first - 1 + (len(raw) if raw is not None else len(batch)) if first > 0 else 0
        counted = sum(1 for event in batch if ev.substantive(event.kind))
        if counted:
            if state.pending == 0:
                state.pending_since = time.time() if now is None else now
            state.pending += counted
        try:
            state.save(self)
        except OSError:
            pass  # the lines are durable; without this bookkeeping the next append starts anew
        return self.rel(path), first

    def next_clock(self, skew_us: int = ev.MAX_SKEW_US) -> int:
        """The clock for the next event; call under the lock. It follows the clocks read from
        elsewhere up to `skew_us` ahead of this machine's time (the `clock.max_skew`
        setting)."""
        state = WriterState.load(self)
        return ev.next_clock(state.clock, self.observed_clock(), skew_us=skew_us)

    def observed_clock(self) -> int:
        try:
            return int((self.local_dir / OBSERVED_CLOCK).read_text() or 0)
        except (FileNotFoundError, ValueError):
            return 0

    def observe_clock(self, clock: int) -> None:
        """Record the highest clock seen in any event, so that new events sort after it.

        This writer's own events are already counted by its state (`WriterState.clock`): a
        clock no higher than that is not written again, so a write's own refresh costs no
        file."""
        if clock <= self.observed_clock() or clock <= WriterState.load(self).clock:
            return
        self.local_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(self.local_dir / OBSERVED_CLOCK, str(clock).encode(), durable=False)

    def head_id(self) -> str:
        """The commit HEAD points at ("" when unborn; "?" when unreadable), read from the ref
        files: no repository object on the write path."""
        return gitdir.head_id(self.git_dir)

    def _writable_path(self, state: WriterState, first: ev.Event, head: str) -> Path:
        """The file to append to: this writer's file for the event's month, if it is untouched
        and HEAD has not moved since it was started."""
        moment = ev.parse_time(first.time)
        if state.writer is None:
            state.writer = self._new_writer_name()
        path = self._month_path(moment, state.writer)
        if state.segment == self.rel(path):
            if (
                self._as_left(path, state)
                and state.head == head
                and state.size < MAX_FILE_BYTES
                and not self._staged_by_user(path, state)
            ):
                return path
        elif not path.exists():
            return path
        # Not as we left it, someone else's, or committed: never extend a history that may have
        # forked or been copied elsewhere.
        state.writer = self._new_writer_name()
        state.segment = None
        return self._month_path(moment, state.writer)

    def _staged_by_user(self, path: Path, state: WriterState) -> bool:
        """Has someone (`git add -A`) staged this writer's live file since it was started? Its
        staged copy would be committed by the user's next commit, and Engram's own commit of the
        lines after it would then change a committed file: a new file is started instead. Only
        an index changed since the last look is read."""
        stamp = gitdir.index_stamp(self.git_dir)
        if stamp is None or stamp == state.index_stamp:
            return False
        staged = gitdir.staged(self.git_dir, self.repo_path(self.rel(path)))
        if staged is None:
            return False
        state.index_stamp = stamp
        return staged

    def _month_path(self, moment: datetime, writer: str) -> Path:
        return self.events_dir / f"{moment:%Y}" / f"{moment:%m}" / f"{writer}{EVENT_SUFFIX}"

    def _new_writer_name(self) -> str:
        return f"{_slug(ev.machine_name())}-{ev.new_entity_id()[:8]}"

    def _as_left(self, path: Path, state: WriterState) -> bool:
        """Is the file exactly as this writer left it? Repairs a crash's leftovers on the way."""
        try:
            size = path.stat().st_size
        except (FileNotFoundError, NotADirectoryError):  # a file where a folder was: refused
            return False
        if size < state.size or not self._tail_matches(path, state):
            return False
        if size > state.size:
            self._repair_tail(path, state)
        return True

    def _tail_matches(self, path: Path, state: WriterState) -> bool:
        if state.size == 0:
            return True
        if not 0 < state.tail_len <= state.size:
            return False  # bookkeeping that cannot be right: start a new file
        with open(path, "rb") as handle:
            handle.seek(state.size - state.tail_len)
            return hashlib.sha1(handle.read(state.tail_len)).hexdigest() == state.tail

    def _repair_tail(self, path: Path, state: WriterState) -> None:
        """Bytes past where we left the file: a crash between write and bookkeeping.

        Complete valid events stay (they were fsynced; the caller may have been told nothing,
        but they are real). A torn line is moved aside to `<git-dir>/engram/torn/` and the file
        is truncated back to its last complete line.
        """
        with open(path, "rb") as handle:
            handle.seek(state.size)
            extra = handle.read()
        keep = 0
        last_line = b""
        for line in extra.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break
            if lines.classify(line[:-1]).problem is not None:
                break
            keep += len(line)
            last_line = line
        if keep:
            state.size += keep
            state.lines = 0  # lines that are not counted: the next append counts them
            state.tail = hashlib.sha1(last_line).hexdigest()
            state.tail_len = len(last_line)
        if state.size < path.stat().st_size:
            torn_dir = self.local_dir / TORN_DIR
            torn_dir.mkdir(parents=True, exist_ok=True)
            aside = torn_dir / f"{path.stem}.{time.strftime('%Y%m%dT%H%M%S')}.{os.getpid()}.bad"
            aside.write_bytes(extra[keep:])
            with open(path, "r+b") as handle:
                handle.truncate(state.size)
                os.fsync(handle.fileno())
            self.repairs.append(
                f"{self.rel(path)}: set aside a torn last line ({len(extra) - keep} bytes) "
                f"left by a crash, in {aside}"
            )

    # -- the read path -----------------------------------------------------------------------

    def read_file(self, path: Path, start: int = 0, first_line: int = 1) -> Chunk:
        """Parse an event file from byte offset `start` (which must begin a line)."""
        rel = self.rel(path)
        chunk = Chunk(consumed=start, lines=first_line - 1)
        with open(path, "rb") as handle:
            if start:
                handle.seek(start)
            data = handle.read()
        pos = 0
        number = first_line - 1
        size = len(data)
        while pos < size:
            end = data.find(b"\n", pos)
            if end < 0:
                chunk.problems.append(
                    Problem(
                        rel,
                        number + 1,
                        "warning",
                        "torn last line (a crash mid-write); not read; the next write to this "
                        "file or `engram doctor --fix` sets it aside",
                    )
                )
                break
            number += 1
            line = data[pos:end]
            pos = end + 1
            chunk.consumed = start + pos
            chunk.lines = number
            chunk.tail = line + b"\n"
            found = lines.classify(line, number)
            if found.problem is not None:
                chunk.problems.append(Problem(rel, number, "error", found.problem))
                continue
            event = found.event
            assert event is not None
            chunk.events.append((number, event))
        return chunk

    def read_all(self) -> tuple[list[ev.Event], list[Problem]]:
        """Every event in the store, deduped by id and ordered by (clock, id). Reads every file."""
        seen: dict[str, ev.Event] = {}
        problems: list[Problem] = []
        for path in self.event_files():
            chunk = self.read_file(path)
            problems.extend(chunk.problems)
            for _, event in chunk.events:
                seen.setdefault(event.id, event)
        return sorted(seen.values(), key=lambda e: e.sort_key), problems


NO_STORE = (  # where either store would do
    "no Engram store yet; run `engram init` (personal) or `engram init --project` (inside a "
    "git repository)"
)


def require(store: Store | None, kind: StoreKind) -> Store:
    if store is None or not store.exists():
        if kind == "project":
            raise NoStoreError(
                "no project store here; run `engram init --project` at the top of the repository"
            )
        raise NoStoreError("no personal store yet; run `engram init` to create one")
    return store
