"""The read model: a SQLite cache of a store's events and the state folded from them.

Derived state, never truth: it lives in `<git-dir>/engram/cache/`, can be deleted at any time,
and rebuilds itself from the event files. Freshness comes from the files themselves: for every
event file it remembers how far it has read (bytes, lines) and the last line it read, so a file
that grew is read from where it stopped, and a file that changed in any other way (a checkout, a
merge, a pull done with plain git) is read again from the start. A query therefore costs a stat
per event file plus the new lines, never a scan of the whole history.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sqlite3
import time
import unicodedata
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import orjson

from ..storage import events as ev
from ..storage import lines
from ..git import lost
from ..model import memories as mem
from ..storage.store import Problem, Store, WriterState

VERSION = 10  # bump when the schema or a fold changes: caches rebuild themselves

# A task is stored as its own fields (`tasks.body`, without progress and failures), a row per
# progress item and a row per failure, and the (clock, id) of the last event folded into it: a
# new event is folded on from there and adds a row, so a write costs the same however long the
# task's history is. `fold` is new whenever the task is folded from the start: until it changes,
# rows are only appended, so a reader that holds the first rows need read only the new ones.

# What resume brings back without being asked (restore "selective"): the important memories and
# the traps. A partial index keeps exactly these in order, so finding the newest few reads a few
# rows however large the store is.
NOTABLE = "importance >= 0.7 OR kind IN ('failure', 'gotcha')"

_SCHEMA = f"""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE dirs (path TEXT PRIMARY KEY, mtime_ns INTEGER, ino INTEGER, scanned_ns INTEGER);
CREATE TABLE files (
    path TEXT PRIMARY KEY, consumed INTEGER, lines INTEGER, tail TEXT, tail_len INTEGER,
    disk_size INTEGER, mtime_ns INTEGER, ino INTEGER
);
CREATE TABLE sources (file TEXT, line INTEGER, id TEXT, PRIMARY KEY (file, line));
CREATE INDEX sources_id ON sources (id);
CREATE TABLE events (
    id TEXT PRIMARY KEY, clock INTEGER, kind TEXT, time TEXT, actor TEXT, session TEXT,
    machine TEXT, entity TEXT, task TEXT, body BLOB
);
CREATE INDEX events_order ON events (clock, id);
CREATE INDEX events_entity ON events (entity, clock, id);
CREATE INDEX events_task ON events (task, clock, id);
CREATE TABLE memories (
    id TEXT PRIMARY KEY, status TEXT, kind TEXT, scope TEXT, source TEXT, importance REAL,
    valid_from TEXT, valid_until TEXT, created_clock INTEGER, updated_clock INTEGER,
    content TEXT, task TEXT, moment TEXT, reinforced INTEGER, body BLOB
);
CREATE TABLE tasks (
    id TEXT PRIMARY KEY, name TEXT, status TEXT, parent TEXT, updated_clock INTEGER, body BLOB,
    last_clock INTEGER, last_id TEXT, fold INTEGER
);
CREATE TABLE progress (task TEXT, seq INTEGER, body BLOB, PRIMARY KEY (task, seq));
CREATE TABLE failures (
    task TEXT, seq INTEGER, component TEXT, time TEXT, body BLOB, PRIMARY KEY (task, seq)
);
CREATE INDEX failures_component ON failures (component);
CREATE TABLE sessions (
    id TEXT PRIMARY KEY, state TEXT, agent TEXT, machine TEXT, started_clock INTEGER, body BLOB
);
CREATE TABLE dirty_text (memory TEXT PRIMARY KEY, gen INTEGER);
CREATE TABLE dirty_vec (memory TEXT PRIMARY KEY, gen INTEGER);
CREATE INDEX memories_updated ON memories (updated_clock);
CREATE INDEX memories_status ON memories (status, updated_clock, id);
CREATE INDEX memories_task ON memories (task, status, updated_clock, id);
CREATE INDEX memories_written ON memories (created_clock);
CREATE INDEX memories_notable ON memories (updated_clock, id)
    WHERE status = 'active' AND ({NOTABLE});
CREATE TABLE memory_tags (memory TEXT, tag TEXT, PRIMARY KEY (memory, tag));
CREATE INDEX memory_tags_tag ON memory_tags (tag);
CREATE TABLE problems (path TEXT, line INTEGER, severity TEXT, message TEXT);
"""


_T = TypeVar("_T")


def _recovering(method: Callable[..., _T]) -> Callable[..., _T]:
    """A read that finds a cached row unreadable (damage inside a page that SQLite cannot see)
    rebuilds the cache from the event files and runs once more."""

    @functools.wraps(method)
    def read(self: Projection, *args: Any, **kwargs: Any) -> _T:
        try:
            return method(self, *args, **kwargs)
        except (sqlite3.DatabaseError, ValueError, KeyError, TypeError) as exc:
            if self._refreshing or (isinstance(exc, sqlite3.DatabaseError)
                                    and not _damaged(exc)):
                raise
        self._rebuild()
        return method(self, *args, **kwargs)

    return read


@dataclass
class RefreshReport:
    files_read: int = 0
    events_added: int = 0
    events_removed: int = 0
    entities: set[str] = field(default_factory=set)
    rebuilt: bool = False
    # Per entity, the earliest (clock, id) of the events added, or None when some were removed:
    # a task whose stored state was folded from events all earlier than that is folded on from
    # it rather than from its whole history.
    changed_from: dict[str, tuple[int, str] | None] = field(default_factory=dict)

    def added(self, entity: str, key: tuple[int, str]) -> None:
        self.entities.add(entity)
        earliest = self.changed_from.get(entity, key)
        if entity not in self.changed_from or (earliest is not None and key < earliest):
            self.changed_from[entity] = key

    def removed(self, entity: str) -> None:
        self.entities.add(entity)
        self.changed_from[entity] = None


class Projection:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.path = store.local_dir / "cache" / "projection.sqlite3"
        self._db: sqlite3.Connection | None = None
        self.in_memory = False
        self._guarded = _Guarded(self)
        self._refreshing = False
        # Progress and failures of tasks read lately: task id -> (fold, progress, failures).
        self._items: dict[str, tuple[int, tuple[Any, ...], tuple[Any, ...]]] = {}

    # -- connection ------------------------------------------------------------------------

    @property
    def db(self) -> _Guarded:
        """The connection for reads: a query that meets a damaged page rebuilds the cache."""
        return self._guarded

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = self._open()
        return self._db

    def _open(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = self._connect(str(self.path))
        except (sqlite3.DatabaseError, OSError):
            # Corrupt or unwritable cache: a corrupt one is rebuilt; an unwritable store is read
            # into memory so that reads keep working.
            self._remove_files()
            try:
                db = self._connect(str(self.path))
            except (sqlite3.DatabaseError, OSError):
                self.in_memory = True
                db = self._connect(":memory:")
        return db

    def _connect(self, target: str) -> sqlite3.Connection:
        db = sqlite3.connect(target, timeout=30, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        row = None
        try:
            row = db.execute("SELECT value FROM meta WHERE key='version'").fetchone()
        except sqlite3.OperationalError:
            pass
        if row is None or row[0] != str(VERSION):
            db.execute("BEGIN IMMEDIATE")
            try:
                current = None
                try:  # another process may have built it while we waited for the lock
                    current = db.execute("SELECT value FROM meta WHERE key='version'").fetchone()
                except sqlite3.OperationalError:
                    pass
                if current is None or current[0] != str(VERSION):
                    for (name,) in db.execute(
                        "SELECT name FROM sqlite_master WHERE type='table'"
                    ).fetchall():
                        db.execute(f"DROP TABLE IF EXISTS {name}")
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            db.execute(statement)
                    db.execute("INSERT INTO meta VALUES ('version', ?)", (str(VERSION),))
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        return db

    def _remove_files(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            try:
                Path(str(self.path) + suffix).unlink(missing_ok=True)
            except OSError:
                pass  # a read-only store: the cache is then kept in memory

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def reset(self) -> None:
        """Forget everything cached; the next refresh reads every file again."""
        self.close()
        self._remove_files()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        db = self._conn()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            try:
                db.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # SQLite rolls back by itself after some errors
            raise
        else:
            db.execute("COMMIT")

    # -- keeping up with the files ---------------------------------------------------------

    def refresh(self) -> RefreshReport:
        self._refreshing = True
        try:
            report = self._refresh()
        except sqlite3.DatabaseError:
            # A damaged cache is rebuilt, never fatal.
            self.reset()
            report = self._refresh()
            report.rebuilt = True
        finally:
            self._refreshing = False
        if not self.in_memory:
            lost.settle_if_large(self.store, self)
        return report

    def present(self, ids: Collection[str]) -> set[str]:
        """Which of these event ids the store holds."""
        wanted = list(ids)
        found: set[str] = set()
        for start in range(0, len(wanted), 500):
            part = wanted[start:start + 500]
            found.update(r[0] for r in self.db.execute(
                f"SELECT id FROM events WHERE id IN ({','.join('?' * len(part))})", part))
        return found

    def _rebuild(self) -> None:
        """Start the cache again from the event files (it was found damaged)."""
        self.reset()
        self.refresh()

    def _refresh(self) -> RefreshReport:
        report = RefreshReport()
        known = {row[0]: row for row in self.db.execute("SELECT * FROM files")}
        disk, stats, scanned = self._scan(known)
        if not self._needs_work(disk, stats, known):
            if scanned:
                with self._write() as db:
                    self._save_scan(db, scanned)
            return report
        with self._write() as db:
            self._save_scan(db, scanned)
            # Re-read inside the write transaction: another process may have just done it.
            known = {row[0]: row for row in db.execute("SELECT * FROM files")}
            # Files that appeared are read before those that went are dropped: an event that
            # only moved (a compaction folds files into one) is never removed and added again.
            for rel, name in disk.items():
                st = stats.get(rel)
                row = known.get(rel)
                if st is None and row is not None:
                    continue  # in a directory unchanged since it was read (see `_scan`)
                if st is None:
                    st = os.stat(name)
                if row is not None and _unchanged(row, st):
                    continue
                path = Path(name)
                start, first_line = 0, 1
                if row is not None and self._grew(path, row, st):
                    start, first_line = row[1], row[2] + 1
                elif row is not None:
                    self._drop_file(db, rel, report)
                if start == 0:
                    db.execute("DELETE FROM problems WHERE path=?", (rel,))
                else:
                    db.execute("DELETE FROM problems WHERE path=? AND severity='warning'", (rel,))
                chunk = self.store.read_file(path, start=start, first_line=first_line)
                report.files_read += 1
                self._add_events(db, rel, chunk.events, report)
                db.executemany(
                    "INSERT INTO problems VALUES (?, ?, ?, ?)",
                    [(p.path, p.line, p.severity, p.message) for p in chunk.problems],
                )
                tail = chunk.tail if chunk.tail else (b"" if start == 0 else None)
                db.execute(
                    "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        rel, chunk.consumed, chunk.lines,
                        hashlib.sha1(tail).hexdigest() if tail is not None else row[3],
                        len(tail) if tail is not None else row[4],
                        st.st_size, st.st_mtime_ns, st.st_ino,
                    ),
                )
            gone = set(known) - set(disk)
            read: dict[str, list[bytes]] = {}
            for rel in sorted(gone):
                self._drop_file(db, rel, report, gone, read)
            self._refold(db, report.entities, report.changed_from)
        # Clocks far ahead of this machine's are not followed (see events.CLOCK_AHEAD_US).
        top = self.db.execute(
            "SELECT MAX(clock) FROM events WHERE clock <= ?",
            (time.time_ns() // 1000 + ev.CLOCK_AHEAD_US,)).fetchone()[0]
        if top:
            try:
                self.store.observe_clock(top)
            except OSError:
                pass  # a read-only store still reads
        return report

    def _scan(self, known: Mapping[str, tuple]) -> tuple[dict[str, str], dict[str, Any],
                                                         list[tuple[str, int, int, int]]]:
        """The event files and their stats, without a `stat` per file where none is needed.

        Git never rewrites a file in place (checkout, merge and reset remove it and create a new
        one) and this clone's writer only appends to its current file, so in a directory whose
        mtime and inode are what they were when it was last read in full, every file but the
        writer's own is as it was, and is not even stat'ed. A directory changed less than
        `_RACY_NS` before it was read is read in full again (timestamps are coarse), and every
        `_SWEEP_NS` all files are checked anyway, for in-place edits by hand.

        Returns the files, the stats taken (none for files known unchanged), and the
        directories to record as read in full.
        """
        started = time.time_ns()
        trusted_dirs = {}
        if known:
            swept = self.db.execute("SELECT value FROM meta WHERE key='swept'").fetchone()
            if swept is not None and started - int(swept[0]) < _SWEEP_NS:
                trusted_dirs = {row[0]: row for row in self.db.execute("SELECT * FROM dirs")}
        live = WriterState.load(self.store).segment  # the one file appended in place
        disk: dict[str, str] = {}
        stats: dict[str, Any] = {}
        scanned: list[tuple[str, int, int, int]] = []
        full = not trusted_dirs
        root = str(self.store.root) + os.sep
        stack = [str(self.store.events_dir)]
        links: list[str] = []
        if self.store.events_dir.is_symlink():
            links, stack = [self.store.rel(self.store.events_dir)], []
        while stack:
            directory = stack.pop()
            try:
                dir_stat = os.stat(directory)
                entries = list(os.scandir(directory))
            except (FileNotFoundError, NotADirectoryError):
                continue
            rel_dir = directory[len(root):].replace(os.sep, "/")
            row = trusted_dirs.get(rel_dir)
            trusted = (row is not None and row[1] == dir_stat.st_mtime_ns
                       and row[2] == dir_stat.st_ino and row[3] - row[1] > _RACY_NS)
            for entry in entries:
                if entry.is_symlink():  # never followed out of the store; reported
                    links.append(entry.path[len(root):].replace(os.sep, "/"))
                    continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                    continue
                if not entry.name.endswith(".jsonl") or not entry.is_file(follow_symlinks=False):
                    continue
                rel = entry.path[len(root):].replace(os.sep, "/")
                disk[rel] = entry.path
                before = known.get(rel)
                if trusted and before is not None and rel != live:
                    continue  # unchanged: no stat, and nothing to compare
                try:
                    stats[rel] = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    del disk[rel]
            if not trusted:
                scanned.append((rel_dir, dir_stat.st_mtime_ns, dir_stat.st_ino, started))
        if full:
            scanned.append(("", 0, 0, started))  # the sweep's time, kept in meta
        self.store.symlinks = sorted(links)
        return disk, stats, scanned

    @staticmethod
    def _save_scan(db: sqlite3.Connection, scanned: list[tuple[str, int, int, int]]) -> None:
        for rel_dir, mtime_ns, ino, started in scanned:
            if rel_dir == "":
                db.execute("INSERT OR REPLACE INTO meta VALUES ('swept', ?)", (str(started),))
            else:
                db.execute("INSERT OR REPLACE INTO dirs VALUES (?, ?, ?, ?)",
                           (rel_dir, mtime_ns, ino, started))

    def _needs_work(self, disk: Mapping[str, Any], stats: Mapping[str, Any],
                    known: dict[str, tuple]) -> bool:
        if disk.keys() != known.keys():
            return True
        return any(not _unchanged(known[rel], st) for rel, st in stats.items())

    def _grew(self, path: Path, row: tuple, st: os.stat_result) -> bool:
        """Did the file only grow since we read it (its read part still ends as we saw it)?"""
        consumed, tail, tail_len = row[1], row[3], row[4]
        if st.st_size < consumed:
            return False
        if consumed == 0:
            return True
        with open(path, "rb") as handle:
            handle.seek(consumed - tail_len)
            return hashlib.sha1(handle.read(tail_len)).hexdigest() == tail

    def _drop_file(self, db: sqlite3.Connection, rel: str, report: RefreshReport,
                   gone: Collection[str] = (), read: dict[str, list[bytes]] | None = None
                   ) -> None:
        """Forget a file that vanished or changed; the events only it held are noted in the
        ledger of events that may be lost (`engram.lost`), so that a file git deleted is
        noticed however the cache is rebuilt afterwards."""
        ids = [r[0] for r in db.execute("SELECT id FROM sources WHERE file=?", (rel,))]
        db.execute("DELETE FROM sources WHERE file=?", (rel,))
        db.execute("DELETE FROM files WHERE path=?", (rel,))
        db.execute("DELETE FROM problems WHERE path=?", (rel,))
        vanished = []
        for event_id in ids:
            others = [o for o in db.execute("SELECT file, line FROM sources WHERE id=?",
                                            (event_id,)).fetchall() if o[0] not in gone]
            if others:  # still present in another file (a duplicate line, or moved there)
                self._settle(db, event_id, others, report, read)
                continue
            row = db.execute("SELECT entity, body FROM events WHERE id=?",
                             (event_id,)).fetchone()
            db.execute("DELETE FROM events WHERE id=?", (event_id,))
            report.events_removed += 1
            if row and row[0]:
                report.removed(row[0])
            if row:
                vanished.append(bytes(row[1]) + b"\n")
        lost.note(self.store, rel, b"".join(vanished))

    def _settle(self, db: sqlite3.Connection, event_id: str, sources: list[tuple[str, int]],
                report: RefreshReport, read: dict[str, list[bytes]] | None = None) -> None:
        """A file holding a copy of an event is gone or rewritten: the copies left decide its
        body again (the one whose bytes sort first), as a fresh read would. `read` keeps the
        files' lines for the next call (many events moved to one file at once)."""
        bodies = []
        for rel, number in sources:
            try:
                if read is not None and rel in read:
                    raw = read[rel][number - 1]
                else:
                    with open(self.store.root / rel, "rb") as handle:
                        split = handle.read().split(b"\n")
                    if read is not None:
                        read[rel] = split
                    raw = split[number - 1]
            except (OSError, IndexError):
                continue
            found = lines.classify(raw, number)
            if found.event is not None and found.event.id == event_id:
                bodies.append((ev.canonical_json(found.event.to_dict()), found.event))
        row = db.execute("SELECT body, entity FROM events WHERE id=?", (event_id,)).fetchone()
        if not bodies or row is None or min(bodies)[0] == row[0]:
            return
        db.execute("DELETE FROM events WHERE id=?", (event_id,))
        if row[1]:
            report.removed(row[1])
        event = min(bodies, key=lambda pair: pair[0])[1]
        self._insert(db, event, report)

    def _add_events(self, db: sqlite3.Connection, rel: str,
                    numbered: Sequence[tuple[int, ev.Event]], report: RefreshReport) -> None:
        for number, event in numbered:
            db.execute("INSERT OR REPLACE INTO sources VALUES (?, ?, ?)", (rel, number, event.id))
            body = ev.canonical_json(event.to_dict())
            existing = db.execute("SELECT body, entity FROM events WHERE id=?",
                                  (event.id,)).fetchone()
            if existing is not None:
                if existing[0] == body:
                    continue
                db.execute(
                    "INSERT INTO problems VALUES (?, ?, 'error', ?)",
                    (rel, number, f"event id {event.id} appears elsewhere with different "
                                  "content; of the two, every clone reads the one whose bytes "
                                  "sort first"),
                )
                if existing[0] < body:
                    continue
                # The same choice whatever order the files are read in.
                db.execute("DELETE FROM events WHERE id=?", (event.id,))
                if existing[1]:
                    report.removed(existing[1])
            self._insert(db, event, report, body)

    @staticmethod
    def _insert(db: sqlite3.Connection, event: ev.Event, report: RefreshReport,
                body: bytes | None = None) -> None:
        entity = event.entity
        task = event.data.get("task")
        db.execute(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (event.id, event.clock, event.kind, event.time, event.actor, event.session,
             event.machine, entity, task if isinstance(task, str) else None,
             body if body is not None else ev.canonical_json(event.to_dict())),
        )
        report.events_added += 1
        if entity:
            report.added(entity, event.sort_key)

    def _refold(self, db: sqlite3.Connection, entities: Iterable[str],
                changed_from: Mapping[str, tuple[int, str] | None] | None = None) -> None:
        """Fold the state of these entities again from their events. A task whose events
        changed only after those its stored state was folded from (see
        `RefreshReport.changed_from`) is folded on from that state instead."""
        self._gen = self._next_gen(db)
        for entity in entities:
            existed = db.execute("DELETE FROM memories WHERE id=?", (entity,)).rowcount
            db.execute("DELETE FROM memory_tags WHERE memory=?", (entity,))
            db.execute("DELETE FROM sessions WHERE id=?", (entity,))
            if existed:
                self._mark(db, entity)
            if changed_from and self._extend_task(db, entity, changed_from.get(entity)):
                continue
            _drop_task(db, entity)
            events = self._entity_events(db, entity)
            if events and events[0].kind.startswith(("task.", "checkpoint.")):
                self._refold_task(db, entity, events)
                continue
            if events and events[0].kind.startswith("session."):
                self._refold_session(db, entity, events)
                continue
            if not events or not events[0].kind.startswith("memory."):
                continue
            memory = mem.fold(events)
            if memory is None:
                continue
            # The search indexes catch up from the dirty lists when they are next used.
            self._mark(db, entity)
            db.execute(
                "INSERT INTO memories VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (memory.id, memory.status, memory.kind, memory.scope, memory.source,
                 memory.importance, memory.valid_from, memory.valid_until,
                 memory.created_clock, memory.updated_clock, memory.content, memory.task,
                 memory.moment, memory.reinforced, orjson.dumps(memory.to_dict())),
            )
            db.executemany("INSERT OR IGNORE INTO memory_tags VALUES (?, ?)",
                           [(memory.id, tag) for tag in memory.tags])

    @staticmethod
    def _refold_task(db: sqlite3.Connection, entity: str, events: list[ev.Event]) -> None:
        from ..model import tasks

        _drop_task(db, entity)
        state = tasks.fold_state(events)
        if state is not None:
            _save_task(db, state, events[-1].sort_key)

    @staticmethod
    def _extend_task(db: sqlite3.Connection, entity: str,
                     changed_from: tuple[int, str] | None) -> bool:
        """Fold a stored task on with its new events, when every event that changed comes
        after those it was folded from. False when it must be folded from the start."""
        from ..model import tasks

        if changed_from is None:
            return False
        row = db.execute("SELECT body, last_clock, last_id, fold FROM tasks WHERE id=?",
                         (entity,)).fetchone()
        if row is None or changed_from <= (row[1], row[2]):
            return False
        events = [ev.parse_line(r[0]) for r in db.execute(
            "SELECT body FROM events WHERE entity=? AND (clock, id) > (?, ?) ORDER BY clock, id",
            (entity, row[1], row[2]))]
        try:
            state = orjson.loads(row[0])
            state.update(progress=[], failures=[])  # the new ones; the rest are stored rows
            state = tasks.fold_state(events, state)
        except (ValueError, TypeError, KeyError, AttributeError):
            return False  # a stored state that cannot be read: fold it from the start
        if events:
            _save_task(db, state, events[-1].sort_key, appended_to=row[3])
        return True

    @staticmethod
    def _refold_session(db: sqlite3.Connection, entity: str, events: list[ev.Event]) -> None:
        from ..model import sessions

        db.execute("DELETE FROM sessions WHERE id=?", (entity,))
        session = sessions.fold(events)
        if session is not None:
            db.execute("INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?)",
                       (session.id, session.state, session.agent, session.machine,
                        session.started_clock, orjson.dumps(session.to_dict())))

    def _bodies(self, table: str, column: str, values: Sequence[str], ids: Sequence[str] | None,
                order: str) -> list[dict[str, Any]]:
        return [{**orjson.loads(r[0]), "store": self.store.kind}
                for r in self._select(table, "body", column, values, ids, order)]

    def _select(self, table: str, columns: str, column: str, values: Sequence[str],
                ids: Sequence[str] | None, order: str) -> list[Any]:
        sql, args, where = f"SELECT {columns} FROM {table}", [], []
        if values:
            where.append(f"{column} IN ({','.join('?' * len(values))})")
            args.extend(values)
        if ids is not None:
            where.append(f"id IN ({','.join('?' * len(ids))})")
            args.extend(ids)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY {order} DESC, id DESC"
        return self.db.execute(sql, args).fetchall()

    @_recovering
    def tasks(self, *, statuses: Sequence[str] = (), ids: Sequence[str] | None = None,
              items: bool = True) -> list[Any]:
        """Tasks, last changed first. With `items` False their progress and failures are left
        empty: for a lookup that needs only a task's own fields, whatever its history."""
        from ..model.tasks import Task

        with self._snapshot():
            rows = self._select("tasks", "body, fold", "status", statuses, ids, "updated_clock")
            out = []
            for body, fold in rows:
                task = Task.from_dict({**orjson.loads(body), "store": self.store.kind})
                if items:
                    progress, failures = self._task_items(task.id, fold)
                    task = replace(task, progress=progress, failures=failures)
                out.append(task)
        return out

    def _task_items(self, task: str, fold: int) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """A task's progress and failures, in order: those read before (when the task has not
        been folded from the start since) and the rows added after them."""
        from ..model.tasks import failures_from, progress_from

        held = self._items.pop(task, None)
        progress, failures = (held[1], held[2]) if held and held[0] == fold else ((), ())
        for table, build in (("progress", progress_from), ("failures", failures_from)):
            known = progress if table == "progress" else failures
            rows = self.db.execute(
                f"SELECT body FROM {table} WHERE task=? AND seq>=? ORDER BY seq",
                (task, len(known))).fetchall()
            if rows:
                # One parse of them all rather than one per row.
                added = build(orjson.loads(b"[" + b",".join(r[0] for r in rows) + b"]"))
                if table == "progress":
                    progress = known + added
                else:
                    failures = known + added
        self._items[task] = (fold, progress, failures)
        while len(self._items) > 32:  # the tasks read last
            self._items.pop(next(iter(self._items)))
        return progress, failures

    @contextmanager
    def _snapshot(self) -> Iterator[None]:
        """Reads that see one state of the cache, whatever another process writes meanwhile."""
        db = self._conn()
        if db.in_transaction:
            yield
            return
        db.execute("BEGIN")
        try:
            yield
        finally:
            if self._db is db and db.in_transaction:  # (a rebuild replaces the connection)
                db.execute("COMMIT")

    @_recovering
    def sessions(self, *, states: Sequence[str] = (), ids: Sequence[str] | None = None,
                 ) -> list[Any]:
        from ..model.sessions import Session

        return [Session.from_dict(body) for body in
                self._bodies("sessions", "state", states, ids, "started_clock")]

    @staticmethod
    def _entity_events(db: sqlite3.Connection, entity: str) -> list[ev.Event]:
        rows = db.execute(
            "SELECT body FROM events WHERE entity=? ORDER BY clock, id", (entity,)
        ).fetchall()
        return [ev.parse_line(r[0]) for r in rows]

    # -- queries ---------------------------------------------------------------------------

    @staticmethod
    def _next_gen(db: sqlite3.Connection) -> int:
        """A new generation for dirty marks (call inside a write transaction)."""
        row = db.execute("SELECT value FROM meta WHERE key='gen'").fetchone()
        gen = int(row[0]) + 1 if row else 1
        db.execute("INSERT OR REPLACE INTO meta VALUES ('gen', ?)", (str(gen),))
        return gen

    def _mark(self, db: sqlite3.Connection, memory_id: str) -> None:
        # A generation per refresh: cleaning what an indexer read never drops a newer mark.
        for table in ("dirty_text", "dirty_vec"):
            db.execute(f"INSERT OR REPLACE INTO {table} VALUES (?, ?)", (memory_id, self._gen))

    def dirty(self, which: str, limit: int | None = None) -> list[tuple[str, int]]:
        """(memory id, generation) pairs whose `which` ("text" or "vec") entries are stale."""
        sql = f"SELECT memory, gen FROM dirty_{_which(which)}"
        if limit:
            sql += f" LIMIT {int(limit)}"
        return [(r[0], r[1]) for r in self.db.execute(sql)]

    def dirty_count(self, which: str) -> int:
        return self.db.execute(f"SELECT COUNT(*) FROM dirty_{_which(which)}").fetchone()[0]

    def clean(self, which: str, marks: Sequence[tuple[str, int]]) -> None:
        """Mark index entries current (after the index saved them), unless marked again since."""
        try:
            with self._write() as db:
                db.executemany(f"DELETE FROM dirty_{_which(which)} WHERE memory=? AND gen<=?",
                               list(marks))
        except sqlite3.DatabaseError as exc:
            if not _damaged(exc):
                raise
            self._rebuild()  # a rebuilt cache marks every memory for indexing again

    def mark_all_dirty(self, which: str) -> None:
        table = f"dirty_{_which(which)}"
        try:
            with self._write() as db:
                gen = self._next_gen(db)
                db.execute(f"INSERT OR REPLACE INTO {table} SELECT id, ? FROM memories", (gen,))
        except sqlite3.DatabaseError as exc:
            if not _damaged(exc):
                raise
            self._rebuild()

    def all_memory_ids(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT id FROM memories")]

    @_recovering
    def memories_by_id(self, ids: Sequence[str]) -> dict[str, mem.Memory]:
        out: dict[str, mem.Memory] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            for (body,) in self.db.execute(
                f"SELECT body FROM memories WHERE id IN ({','.join('?' * len(chunk))})", chunk
            ):
                memory = self._memory(body)
                out[memory.id] = memory
        return out

    def dirty_contents(self) -> list[tuple[str, str | None, str | None, list[str]]]:
        """(memory id, content, kind, tags) of every memory whose vector entry is stale, in one
        query; the content is None for an id that is no longer a memory."""
        tags: dict[str, list[str]] = {}
        for memory_id, tag in self.db.execute(
            "SELECT memory, tag FROM memory_tags WHERE memory IN (SELECT memory FROM dirty_vec)"
        ):
            tags.setdefault(memory_id, []).append(tag)
        return [(memory_id, content, kind, tags.get(memory_id, []))
                for memory_id, content, kind in self.db.execute(
                    "SELECT d.memory, m.content, m.kind FROM dirty_vec d "
                    "LEFT JOIN memories m ON m.id = d.memory")]

    @_recovering
    def written_with(self, ids: Sequence[str], *, seconds: float, span: int,
                     ) -> dict[str, list[str]]:
        """For each memory, those written next to it: the `span` written just before it and just
        after it, when their moments are within `seconds` of its own (a conversation's turns, an
        agent's notes of one sitting)."""
        out: dict[str, list[str]] = {}
        marks = ",".join("?" * len(ids))
        rows = self.db.execute(
            f"SELECT id, moment, created_clock FROM memories WHERE id IN ({marks})", list(ids))
        for memory_id, moment_text, clock in rows.fetchall():
            moment = ev.parse_time(moment_text)
            near = self.db.execute(
                "SELECT id, moment FROM (SELECT id, moment FROM memories WHERE created_clock < ? "
                "ORDER BY created_clock DESC LIMIT ?) UNION ALL "
                "SELECT id, moment FROM (SELECT id, moment FROM memories WHERE created_clock > ? "
                "ORDER BY created_clock LIMIT ?)", (clock, span, clock, span)).fetchall()
            out[memory_id] = [other for other, other_moment in near
                              if abs((ev.parse_time(other_moment) - moment).total_seconds())
                              <= seconds]
        return out

    @_recovering
    def sample_ids(self, limit: int) -> list[str]:
        """The ids of `sample`, read from the primary key alone."""
        # "+status": filter on the way along the primary key rather than sort by it.
        return [row[0] for row in self.db.execute(
            "SELECT id FROM memories WHERE +status = 'active' ORDER BY id LIMIT ?", (limit,))]

    @_recovering
    def sample(self, limit: int) -> list[tuple[str, str, str, list[str]]]:
        """(id, content, kind, tags) of up to `limit` active memories: those with the smallest
        ids, which, ids being random, are a uniform sample that does not depend on the order in
        which the read model was built (read along the primary key: no scan of the table)."""
        ids = self.sample_ids(limit)
        marks = ",".join("?" * len(ids))
        found = {row[0]: row for row in self.db.execute(
            f"SELECT id, content, kind FROM memories WHERE id IN ({marks})", ids)}
        rows = [found[i] for i in ids if i in found]
        tags: dict[str, list[str]] = {}
        if rows:
            marks = ",".join("?" * len(rows))
            for memory_id, tag in self.db.execute(
                f"SELECT memory, tag FROM memory_tags WHERE memory IN ({marks})",
                [row[0] for row in rows],
            ):
                tags.setdefault(memory_id, []).append(tag)
        return [(memory_id, content, kind, tags.get(memory_id, []))
                for memory_id, content, kind in rows]

    @_recovering
    def heads(self, ids: Sequence[str], *, tags: bool = False) -> dict[str, mem.Head]:
        """Ranking fields of these memories, without parsing their bodies."""
        out: dict[str, mem.Head] = {}
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            tag_sets: dict[str, set[str]] = {}
            if tags:
                for memory_id, tag in self.db.execute(
                    f"SELECT memory, tag FROM memory_tags WHERE memory IN ({marks})", chunk
                ):
                    tag_sets.setdefault(memory_id, set()).add(tag)
            for row in self.db.execute(
                "SELECT id, status, kind, scope, task, moment, valid_from, valid_until, "
                f"importance, reinforced, updated_clock FROM memories WHERE id IN ({marks})",
                chunk,
            ):
                out[row[0]] = mem.Head(*row, tags=frozenset(tag_sets.get(row[0], ())))
        return out

    def stale(self) -> bool:
        """Would a refresh read anything? (A check that changes nothing.)"""
        disk = {self.store.rel(p): p for p in self.store.event_files()}
        stats = {rel: p.stat() for rel, p in disk.items()}
        known = {row[0]: row for row in self.db.execute("SELECT * FROM files")}
        return self._needs_work(disk, stats, known)

    def problems(self) -> list[Problem]:
        return [Problem(*row) for row in self.db.execute(
            "SELECT path, line, severity, message FROM problems ORDER BY path, line"
        )]

    @_recovering
    def entity_events(self, entity: str) -> list[ev.Event]:
        return self._entity_events(self.db, entity)

    @_recovering
    def memory(self, memory_id: str) -> mem.Memory | None:
        row = self.db.execute("SELECT body FROM memories WHERE id=?", (memory_id,)).fetchone()
        return self._memory(row[0]) if row else None

    def _memory(self, body: bytes) -> mem.Memory:
        return mem.Memory.from_dict({**orjson.loads(body), "store": self.store.kind})

    @_recovering
    def recent_memories(self, limit: int, *, now: datetime, notable: bool = False,
                        exclude: Collection[str] = ()) -> list[mem.Memory]:
        """Active memories valid at `now`, newest first (by last change), at most `limit`,
        leaving out `exclude`; with `notable`, only the NOTABLE ones. Reads about as many rows
        as it returns (an index keeps each set in order), however large the store is."""
        # Named, so that the planner never prefers a scan of every active memory.
        index, where = ("memories_notable", f"status = 'active' AND ({NOTABLE})") if notable \
            else ("memories_status", "status = 'active'")
        out: list[mem.Memory] = []
        after: list[Any] = []
        page = limit + len(exclude) + 10
        while len(out) < limit:
            rows = self.db.execute(
                "SELECT id, valid_from, valid_until, updated_clock, body FROM memories "
                f"INDEXED BY {index} WHERE {where}"
                + (" AND (updated_clock, id) < (?, ?)" if after else "")
                + f" ORDER BY updated_clock DESC, id DESC LIMIT {page}", after).fetchall()
            for memory_id, valid_from, valid_until, _, body in rows:
                if memory_id not in exclude and mem.valid_at(valid_from, valid_until, now):
                    out.append(self._memory(body))
                    if len(out) == limit:
                        break
            if len(rows) < page:
                break
            after = [rows[-1][3], rows[-1][0]]
            page *= 2  # many left out or expired: read further ahead
        return out

    @_recovering
    def failures(self, components: Collection[str]) -> list[dict[str, Any]]:
        """Failures recorded on any task in one of these components, newest first (then in the
        order of `tasks()`), each with its task's id and name."""
        if not components:
            return []
        wanted = sorted(components)
        return [{"task": task, "task_name": name, **orjson.loads(body)}
                for task, name, body in self.db.execute(
                    "SELECT f.task, t.name, f.body FROM failures f JOIN tasks t ON t.id = f.task "
                    f"WHERE f.component IN ({','.join('?' * len(wanted))}) "
                    "ORDER BY f.time DESC, t.updated_clock DESC, t.id DESC, f.seq", wanted)]

    def entity_sessions(self, entity: str) -> set[str]:
        """The sessions that wrote events about this entity."""
        return {r[0] for r in self.db.execute(
            "SELECT DISTINCT session FROM events WHERE entity=? AND session != ''", (entity,))}

    def memories(
        self, *, kinds: Sequence[str] = (), tags: Sequence[str] = (), scope: str | None = None,
        statuses: Sequence[str] = ("active",), contains: str | None = None,
        task: str | None = None, since: str | None = None, until: str | None = None,
        ids: Sequence[str] | None = None,
    ) -> Iterator[mem.Memory]:
        """Memories newest first (by last change). Validity windows are the caller's filter."""
        where, args = [], []
        if ids is not None:
            where.append(f"id IN ({','.join('?' * len(ids))})")
            args.extend(ids)
        if task is not None:
            where.append("task = ?")
            args.append(task)
        if since is not None:
            where.append("moment >= ?")
            args.append(since)
        if until is not None:
            where.append("moment < ?")
            args.append(until)
        if statuses:
            where.append(f"status IN ({','.join('?' * len(statuses))})")
            args.extend(statuses)
        if kinds:
            where.append(f"kind IN ({','.join('?' * len(kinds))})")
            args.extend(kinds)
        if scope is not None:
            where.append("scope = ?")
            args.append(scope)
        for tag in tags:
            where.append("id IN (SELECT memory FROM memory_tags WHERE tag = ?)")
            args.append(tag)
        if contains:
            where.append("instr(lower(content), ?) > 0")
            args.append(contains.lower())
        sql = "SELECT body FROM memories"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY updated_clock DESC, id DESC"
        return self._each_memory(sql, args)

    def _each_memory(self, sql: str, args: Sequence[Any]) -> Iterator[mem.Memory]:
        """Parse bodies only as they are used (a caller may stop after a few); a body found
        unreadable rebuilds the cache and the same ordered query goes on where it was."""
        done = 0
        for attempt in (1, 2):
            rows = self.db.execute(sql, args).fetchall()
            try:
                for (body,) in rows[done:]:
                    memory = self._memory(body)
                    done += 1
                    yield memory
                return
            except (ValueError, KeyError, TypeError):
                if attempt == 2 or self._refreshing:
                    raise
            self._rebuild()

    @_recovering
    def events(
        self, *, kinds: Sequence[str] = (), entity: str | None = None, task: str | None = None,
        actor: str | None = None, since_clock: int | None = None, limit: int | None = None,
        newest_first: bool = True,
    ) -> list[ev.Event]:
        where, args = [], []
        if kinds:
            # `--kind memory` matches every memory.* event; `--kind memory.created` just that.
            where.append("(" + " OR ".join(["kind = ? OR kind LIKE ?"] * len(kinds)) + ")")
            for prefix in kinds:
                args.extend([prefix, prefix + ".%"])
        if entity:
            where.append("entity = ?")
            args.append(entity)
        if task:
            where.append("(task = ? OR entity = ?)")
            args.extend([task, task])
        if actor:
            # In either form: a name another writer stored decomposed (NFD) is found too.
            forms = sorted({unicodedata.normalize(f, actor).lower() for f in ("NFC", "NFD")})
            where.append("(" + " OR ".join(["instr(lower(actor), ?) > 0"] * len(forms)) + ")")
            args.extend(forms)
        if since_clock is not None:
            where.append("clock >= ?")
            args.append(since_clock)
        order = "DESC" if newest_first else "ASC"
        sql = "SELECT {} FROM events"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY clock {order}, id {order}"
        if limit is None:
            sql = sql.format("body")
        else:
            # The rows are chosen without their bodies, which are then read for those kept
            # only (a sort would read every matching body, e.g. all of a long task's).
            sql = (f"SELECT body FROM events WHERE rowid IN ({sql.format('rowid')} "
                   f"LIMIT {int(limit)}) ORDER BY clock {order}, id {order}")
        return [ev.parse_line(r[0]) for r in self.db.execute(sql, args)]

    @_recovering
    def event(self, event_id: str) -> ev.Event | None:
        row = self.db.execute("SELECT body FROM events WHERE id=?", (event_id,)).fetchone()
        return ev.parse_line(row[0]) if row else None

    def match_ids(self, prefix: str) -> list[tuple[str, str]]:
        """(id, what) pairs whose id starts with `prefix`: memories, tasks, sessions, events."""
        out = []
        for table, what in (("memories", "memory"), ("tasks", "task"), ("sessions", "session")):
            out += [(r[0], what) for r in self.db.execute(
                f"SELECT id FROM {table} WHERE id >= ? AND id < ? LIMIT 20",
                (prefix.lower(), prefix.lower() + "\uffff"),
            )]
        upper = prefix.upper()
        events = [(r[0], "event") for r in self.db.execute(
            "SELECT id FROM events WHERE id >= ? AND id < ? LIMIT 20", (upper, upper + "\uffff")
        )]
        if not out and not events and len(upper) >= 6 and upper.isalnum():
            # `engram log` shows an event by the end of its id (the random part: events written
            # together share the start, their time).
            events = [(r[0], "event") for r in self.db.execute(
                "SELECT id FROM events WHERE id LIKE ? LIMIT 20", ("%" + upper,))]
        return out + events

    def counts(self) -> dict[str, Any]:
        db = self.db
        by_status = dict(db.execute("SELECT status, COUNT(*) FROM memories GROUP BY status"))
        return {
            "events": db.execute("SELECT COUNT(*) FROM events").fetchone()[0],
            "memories": by_status.get("active", 0),
            "forgotten": by_status.get("forgotten", 0),
            "superseded": by_status.get("superseded", 0),
            "files": db.execute("SELECT COUNT(*) FROM files").fetchone()[0],
        }


def _save_task(db: sqlite3.Connection, state: dict[str, Any], last: tuple[int, str], *,
               appended_to: int | None = None) -> None:
    """Store a folded task (`tasks.fold_state`) and the key of the last event folded into it.
    `appended_to`: the fold it extends, whose rows are stored; its progress and failures are
    then only the new ones."""
    task = state["id"]
    head = {k: v for k, v in state.items() if k not in ("progress", "failures")}
    fold = appended_to if appended_to is not None else int.from_bytes(os.urandom(7), "big")
    db.execute("INSERT OR REPLACE INTO tasks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
               (task, state["name"], state["status"], state["parent"], state["updated_clock"],
                orjson.dumps(head), last[0], last[1], fold))
    for table in ("progress", "failures"):
        first = db.execute(f"SELECT COALESCE(MAX(seq) + 1, 0) FROM {table} WHERE task=?",
                           (task,)).fetchone()[0] if appended_to is not None else 0
        items = enumerate(state[table], start=first)
        if table == "progress":
            db.executemany("INSERT OR REPLACE INTO progress VALUES (?, ?, ?)",
                           [(task, seq, orjson.dumps(item)) for seq, item in items])
            continue
        db.executemany("INSERT OR REPLACE INTO failures VALUES (?, ?, ?, ?, ?)", [
            (task, seq, item["component"] if isinstance(item["component"], str) else None,
             item["time"], orjson.dumps(item)) for seq, item in items])


def _drop_task(db: sqlite3.Connection, task: str) -> None:
    for table, column in (("tasks", "id"), ("progress", "task"), ("failures", "task")):
        db.execute(f"DELETE FROM {table} WHERE {column}=?", (task,))


def _damaged(exc: sqlite3.DatabaseError) -> bool:
    """Is this error the cache file's damage (rather than, say, a lock held too long)?"""
    if isinstance(exc, sqlite3.OperationalError):
        return str(exc).startswith(("no such table", "no such column", "Could not decode"))
    return True


class _Rows:
    """The rows of a query, read in full (so that damage shows before any is used)."""

    def __init__(self, rows: list[Any]) -> None:
        self._rows = rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)

    def fetchone(self) -> Any:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Any]:
        return self._rows


class _Guarded:
    """Reads from the projection. SQLite finds some damage only when it reads the damaged page;
    such a query rebuilds the cache from the event files and runs again, so a damaged cache
    costs time, never a wrong or failed answer."""

    def __init__(self, projection: Projection) -> None:
        self._projection = projection

    def execute(self, sql: str, args: Sequence[Any] = ()) -> _Rows:
        proj = self._projection
        try:
            return _Rows(proj._conn().execute(sql, args).fetchall())
        except sqlite3.DatabaseError as exc:
            if proj._refreshing or not _damaged(exc):
                raise  # refresh() rebuilds by itself
        proj._rebuild()
        return _Rows(proj._conn().execute(sql, args).fetchall())


def _which(which: str) -> str:
    if which not in ("text", "vec"):
        raise ValueError(which)
    return which


_RACY_NS = 2_000_000_000  # a directory changed this close to being read is read again
_SWEEP_NS = 60_000_000_000  # every file is checked at least this often


def _unchanged(row: tuple, st: os.stat_result) -> bool:
    return row[5] == st.st_size and row[6] == st.st_mtime_ns and row[7] == st.st_ino
