"""The read model: a SQLite cache of a store's events and the state folded from them.

Derived state, never truth: it lives in `<git-dir>/engram/cache/`, can be deleted at any time,
and rebuilds itself from the event files. Freshness comes from the files themselves: for every
event file it remembers how far it has read (bytes, lines) and the last line it read, so a file
that grew is read from where it stopped, and a file that changed in any other way (a checkout, a
merge, a pull done with plain git) is read again from the start. A query therefore costs a stat
per event file plus the new lines, never a scan of the whole history.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..base import layout
from ..storage import events as ev
from ..storage import ledger, lines
from ..storage.local import WriterState
from ..storage.store import Store
from .fold import RefreshReport, add_events, insert, next_gen, refold
from .guard import Guarded
from .queries import Queries
from .schema import NOTABLE, VERSION, connect, damaged, dirty_table

RESCANS = 8  # scans of the event files one refresh makes when files keep vanishing under it


class Projection(Queries):
    """A store's read model: kept up with its event files by `refresh`, read through `Queries`."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.path = layout.cache_dir(store.local_dir) / layout.PROJECTION_DB
        self._db: sqlite3.Connection | None = None
        self.in_memory = False
        # The connection for reads: a query that meets a damaged page rebuilds the cache.
        self.db = Guarded(self)
        self.refreshing = False
        super().__init__()

    def connection(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = self._open()
        return self._db

    def generation(self) -> tuple[int, int, int]:
        """A value that changes whenever the read model may have changed: a commit by another
        connection (SQLite's `data_version`), a change through this one, a new connection. Equal
        values mean that the tables read the same, so what was read from them still holds; it
        costs no read of any table."""
        db = self.connection()
        return (id(db), db.execute("PRAGMA data_version").fetchone()[0], db.total_changes)

    def _open(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = connect(str(self.path))
        except (sqlite3.DatabaseError, OSError):
            # Corrupt or unwritable cache: a corrupt one is rebuilt; an unwritable store is read
            # into memory so that reads keep working.
            self._remove_files()
            try:
                db = connect(str(self.path))
            except (sqlite3.DatabaseError, OSError):
                self.in_memory = True
                db = connect(":memory:")
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
        db = self.connection()
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

    def refresh(self) -> RefreshReport:
        self.refreshing = True
        try:
            report = self._rescanning()
        except sqlite3.DatabaseError:
            # A damaged cache is rebuilt, never fatal.
            self.reset()
            report = self._rescanning()
            report.rebuilt = True
        finally:
            self.refreshing = False
        if not self.in_memory:
            ledger.settle_if_large(self.store, self)
        return report

    def _rescanning(self) -> RefreshReport:
        """`_refresh`, scanning again when a file vanished between the scan and its read (a
        compaction or a checkout in another process): the transaction is rolled back, so the
        next scan starts from what was committed, and sees the files as they are now."""
        for attempt in range(RESCANS):
            try:
                return self._refresh()
            except FileNotFoundError:
                if attempt == RESCANS - 1:
                    raise
                time.sleep(0.005 * (attempt + 1))
        raise AssertionError("unreachable")

    def rebuild(self) -> None:
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
                add_events(db, rel, chunk.events, report)
                db.executemany(
                    "INSERT INTO problems VALUES (?, ?, ?, ?)",
                    [(p.path, p.line, p.severity, p.message) for p in chunk.problems],
                )
                tail = chunk.tail if chunk.tail else (b"" if start == 0 else None)
                if tail is None and row is not None:  # read on from `row`: its tail stands
                    tail_hash, tail_len = row[3], row[4]
                else:
                    tail_hash, tail_len = hashlib.sha1(tail or b"").hexdigest(), len(tail or b"")
                db.execute(
                    "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        rel,
                        chunk.consumed,
                        chunk.lines,
                        tail_hash,
                        tail_len,
                        st.st_size,
                        st.st_mtime_ns,
                        st.st_ino,
                    ),
                )
            gone = set(known) - set(disk)
            read: dict[str, list[bytes]] = {}
            for rel in sorted(gone):
                self._drop_file(db, rel, report, gone, read)
            refold(db, report.entities, report.changed_from)
        # Clocks far ahead of this machine's are not followed (see events.CLOCK_AHEAD_US).
        top = self.db.execute(
            "SELECT MAX(clock) FROM events WHERE clock <= ?",
            (time.time_ns() // 1000 + ev.CLOCK_AHEAD_US,),
        ).fetchone()[0]
        if top:
            try:
                self.store.observe_clock(top)
            except OSError:
                pass  # a read-only store still reads
        return report

    def _scan(
        self, known: Mapping[str, tuple[Any, ...]]
    ) -> tuple[dict[str, str], dict[str, Any], list[tuple[str, int, int, int]]]:
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
            rel_dir = directory[len(root) :].replace(os.sep, "/")
            row = trusted_dirs.get(rel_dir)
            trusted = (
                row is not None
                and row[1] == dir_stat.st_mtime_ns
                and row[2] == dir_stat.st_ino
                and row[3] - row[1] > _RACY_NS
            )
            for entry in entries:
                if entry.is_symlink():  # never followed out of the store; reported
                    links.append(entry.path[len(root) :].replace(os.sep, "/"))
                    continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                    continue
                if not entry.name.endswith(".jsonl") or not entry.is_file(follow_symlinks=False):
                    continue
                rel = entry.path[len(root) :].replace(os.sep, "/")
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
                db.execute(
                    "INSERT OR REPLACE INTO dirs VALUES (?, ?, ?, ?)",
                    (rel_dir, mtime_ns, ino, started),
                )

    def _needs_work(
        self, disk: Mapping[str, Any], stats: Mapping[str, Any], known: dict[str, tuple[Any, ...]]
    ) -> bool:
        if disk.keys() != known.keys():
            return True
        return any(not _unchanged(known[rel], st) for rel, st in stats.items())

    def _grew(self, path: Path, row: tuple[Any, ...], st: os.stat_result) -> bool:
        """Did the file only grow since we read it (its read part still ends as we saw it)?"""
        consumed, tail, tail_len = row[1], row[3], row[4]
        if st.st_size < consumed:
            return False
        if consumed == 0:
            return True
        with open(path, "rb") as handle:
            handle.seek(consumed - tail_len)
            return bool(hashlib.sha1(handle.read(tail_len)).hexdigest() == tail)

    def _drop_file(
        self,
        db: sqlite3.Connection,
        rel: str,
        report: RefreshReport,
        gone: Collection[str] = (),
        read: dict[str, list[bytes]] | None = None,
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
            others = [
                o
                for o in db.execute(
                    "SELECT file, line FROM sources WHERE id=?", (event_id,)
                ).fetchall()
                if o[0] not in gone
            ]
            if others:  # still present in another file (a duplicate line, or moved there)
                self._settle(db, event_id, others, report, read)
                continue
            row = db.execute("SELECT entity, body FROM events WHERE id=?", (event_id,)).fetchone()
            db.execute("DELETE FROM events WHERE id=?", (event_id,))
            report.events_removed += 1
            if row and row[0]:
                report.removed(row[0])
            if row:
                vanished.append(bytes(row[1]) + b"\n")
        ledger.note(self.store, rel, b"".join(vanished))

    def _settle(
        self,
        db: sqlite3.Connection,
        event_id: str,
        sources: list[tuple[str, int]],
        report: RefreshReport,
        read: dict[str, list[bytes]] | None = None,
    ) -> None:
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
        insert(db, event, report)

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads that see one state of the cache, whatever another process writes meanwhile."""
        db = self.connection()
        if db.in_transaction:
            yield
            return
        db.execute("BEGIN")
        try:
            yield
        finally:
            if self._db is db and db.in_transaction:  # (a rebuild replaces the connection)
                db.execute("COMMIT")

    def clean(self, which: str, marks: Sequence[tuple[str, int]]) -> None:
        """Mark index entries current (after the index saved them), unless marked again since."""
        try:
            with self._write() as db:
                db.executemany(
                    f"DELETE FROM {dirty_table(which)} WHERE memory=? AND gen<=?", list(marks)
                )
        except sqlite3.DatabaseError as exc:
            if not damaged(exc):
                raise
            self.rebuild()  # a rebuilt cache marks every memory for indexing again

    def mark_all_dirty(self, which: str) -> None:
        table = dirty_table(which)
        try:
            with self._write() as db:
                gen = next_gen(db)
                db.execute(f"INSERT OR REPLACE INTO {table} SELECT id, ? FROM memories", (gen,))
        except sqlite3.DatabaseError as exc:
            if not damaged(exc):
                raise
            self.rebuild()

    def stale(self) -> bool:
        """Would a refresh read anything? (A check that changes nothing.)"""
        disk = {self.store.rel(p): p for p in self.store.event_files()}
        stats = {rel: p.stat() for rel, p in disk.items()}
        known = {row[0]: row for row in self.db.execute("SELECT * FROM files")}
        return self._needs_work(disk, stats, known)


_RACY_NS = 2_000_000_000  # a directory changed this close to being read is read again
_SWEEP_NS = 60_000_000_000  # every file is checked at least this often


def _unchanged(row: tuple[Any, ...], st: os.stat_result) -> bool:
    return bool(row[5] == st.st_size and row[6] == st.st_mtime_ns and row[7] == st.st_ino)


__all__ = ["NOTABLE", "VERSION", "Projection", "RefreshReport"]
