"""The read model's SQLite schema, and opening a cache file at it (rebuilt when it is older).

`VERSION` changes whenever the schema or a fold changes: a cache of another version is dropped
and built again from the event files.
"""

from __future__ import annotations

import sqlite3

VERSION = 15  # bump when the schema or a fold changes: caches rebuild themselves

# A task is stored as its own fields (`tasks.body`, without progress and failures), a row per
# progress item and a row per failure, and the (clock, id) of the last event folded into it: a
# new event is folded on from there and adds a row, so a write costs the same however long the
# task's history is. `fold` is new whenever the task is folded from the start: until it changes,
# rows are only appended, so a reader that holds the first rows need read only the new ones.

# What resume brings back without being asked (restore "selective"): the important memories and
# the traps. A partial index keeps exactly these in order, so finding the newest few reads a few
# rows however large the store is.
NOTABLE = "importance >= 0.7 OR kind IN ('failure', 'gotcha')"

SCHEMA = f"""
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
CREATE INDEX events_entity ON events (entity, clock, id, session);
CREATE INDEX events_memory_session ON events (session, entity, clock)
    WHERE kind = 'memory.created';
CREATE INDEX events_task ON events (task, clock, id);
CREATE TABLE memories (
    id TEXT PRIMARY KEY, status TEXT, kind TEXT, scope TEXT, source TEXT, importance REAL,
    valid_from TEXT, valid_until TEXT, created_clock INTEGER, updated_clock INTEGER,
    content TEXT, task TEXT, moment TEXT, reinforced INTEGER, project TEXT, project_remote TEXT,
    body BLOB
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


def connect(target: str) -> sqlite3.Connection:
    """A connection to the cache at `target` (a path, or ":memory:"), its tables created (and
    any of another version dropped first)."""
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
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute("INSERT INTO meta VALUES ('version', ?)", (str(VERSION),))
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
    return db


def damaged(exc: sqlite3.DatabaseError) -> bool:
    """Is this error the cache file's damage (rather than, say, a lock held too long)?"""
    if isinstance(exc, sqlite3.OperationalError):
        return str(exc).startswith(("no such table", "no such column", "Could not decode"))
    return True


def dirty_table(which: str) -> str:
    """The table of stale index entries of `which` index: "text" or "vec"."""
    if which not in ("text", "vec"):
        raise ValueError(which)
    return f"dirty_{which}"
