"""Folding events into the read model's rows: the events table, and the memories, tasks and
sessions folded from them.

A record's events are folded in `(order, id)` order (`events.Event.order`: the event's clock,
or just after `data.after` when its writer had read events of the record dated ahead of its
clock), and the events table keeps that order in its `clock` column, so that every query that
sorts events sorts them the way folding does. (The tables are described in `schema`.)
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from ..model import memories as mem
from ..storage import events as ev

if TYPE_CHECKING:
    from .guard import Guarded


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


def add_events(
    db: sqlite3.Connection,
    rel: str,
    numbered: Sequence[tuple[int, ev.Event]],
    report: RefreshReport,
) -> None:
    for number, event in numbered:
        db.execute("INSERT OR REPLACE INTO sources VALUES (?, ?, ?)", (rel, number, event.id))
        body = ev.canonical_json(event.to_dict())
        existing = db.execute("SELECT body, entity FROM events WHERE id=?", (event.id,)).fetchone()
        if existing is not None:
            if existing[0] == body:
                continue
            _conflict(db, event.id, (rel, number), loses=existing[0] < body)
            if existing[0] < body:
                continue
            # The same choice whatever order the files are read in.
            db.execute("DELETE FROM events WHERE id=?", (event.id,))
            if existing[1]:
                report.removed(existing[1])
        insert(db, event, report, body)


def _conflict(db: sqlite3.Connection, event_id: str, here: tuple[str, int], *, loses: bool) -> None:
    """Note two lines with one id and different content, under the line that loses: of the two,
    every clone reads the one whose bytes sort first, so the warning that says a line is
    skipped must name the one that is (`here`, just read, or the one read before it)."""
    other = db.execute(
        "SELECT file, line FROM sources WHERE id=? AND NOT (file=? AND line=?) "
        "ORDER BY file, line LIMIT 1",
        (event_id, *here),
    ).fetchone()
    there = (other[0], other[1]) if other is not None else here
    skipped, kept = (here, there) if loses or other is None else (there, here)
    db.execute(
        "INSERT INTO problems VALUES (?, ?, 'error', ?)",
        (
            *skipped,
            f"event id {event_id} is also at {kept[0]}:{kept[1]} with different content; "
            "every clone reads the one whose bytes sort first, that one",
        ),
    )


def insert(
    db: sqlite3.Connection, event: ev.Event, report: RefreshReport, body: bytes | None = None
) -> None:
    entity = event.entity
    task = event.data.get("task")
    db.execute(
        "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            event.id,
            event.order,
            event.kind,
            event.time,
            event.actor,
            event.session,
            event.machine,
            entity,
            task if isinstance(task, str) else None,
            body if body is not None else ev.canonical_json(event.to_dict()),
        ),
    )
    report.events_added += 1
    if entity:
        report.added(entity, event.sort_key)


def refold(
    db: sqlite3.Connection,
    entities: Iterable[str],
    changed_from: Mapping[str, tuple[int, str] | None] | None = None,
) -> None:
    """Fold the state of these entities again from their events. A task whose events
    changed only after those its stored state was folded from (see
    `RefreshReport.changed_from`) is folded on from that state instead."""
    gen = next_gen(db)
    for entity in entities:
        existed = db.execute("DELETE FROM memories WHERE id=?", (entity,)).rowcount
        db.execute("DELETE FROM memory_tags WHERE memory=?", (entity,))
        db.execute("DELETE FROM sessions WHERE id=?", (entity,))
        if existed:
            mark(db, entity, gen)
        if changed_from and extend_task(db, entity, changed_from.get(entity)):
            continue
        _drop_task(db, entity)
        events = entity_events(db, entity)
        if events and events[0].kind.startswith(("task.", "checkpoint.")):
            refold_task(db, entity, events)
            continue
        if events and events[0].kind.startswith("session."):
            refold_session(db, entity, events)
            continue
        if not events or not events[0].kind.startswith("memory."):
            continue
        memory = mem.fold(events)
        if memory is None:
            continue
        # The search indexes catch up from the dirty lists when they are next used.
        mark(db, entity, gen)
        db.execute(
            "INSERT INTO memories VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                memory.id,
                memory.status,
                memory.kind,
                memory.scope,
                memory.source,
                memory.importance,
                memory.valid_from,
                memory.valid_until,
                memory.created_clock,
                memory.updated_clock,
                memory.content,
                memory.task,
                memory.moment,
                memory.reinforced,
                memory.project,
                memory.project_remote,
                orjson.dumps(memory.to_dict()),
            ),
        )
        db.executemany(
            "INSERT OR IGNORE INTO memory_tags VALUES (?, ?)",
            [(memory.id, tag) for tag in memory.tags],
        )


def refold_task(db: sqlite3.Connection, entity: str, events: list[ev.Event]) -> None:
    from ..model import tasks

    _drop_task(db, entity)
    state = tasks.fold_state(events)
    if state is not None:
        _save_task(db, state, events[-1].sort_key)


def extend_task(db: sqlite3.Connection, entity: str, changed_from: tuple[int, str] | None) -> bool:
    """Fold a stored task on with its new events, when every event that changed comes
    after those it was folded from. False when it must be folded from the start."""
    from ..model import tasks

    if changed_from is None:
        return False
    row = db.execute(
        "SELECT body, last_clock, last_id, fold FROM tasks WHERE id=?", (entity,)
    ).fetchone()
    if row is None or changed_from <= (row[1], row[2]):
        return False
    events = [
        ev.parse_line(r[0])
        for r in db.execute(
            "SELECT body FROM events WHERE entity=? AND (clock, id) > (?, ?) ORDER BY clock, id",
            (entity, row[1], row[2]),
        )
    ]
    try:
        state = orjson.loads(row[0])
        state.update(progress=[], failures=[])  # the new ones; the rest are stored rows
        folded = tasks.fold_state(events, state)
    except (ValueError, TypeError, KeyError, AttributeError):
        return False  # a stored state that cannot be read: fold it from the start
    if folded is None:
        return False  # folded on from a stored task, it is one: never so, but fold it anew
    if events:
        _save_task(db, folded, events[-1].sort_key, appended_to=row[3])
    return True


def refold_session(db: sqlite3.Connection, entity: str, events: list[ev.Event]) -> None:
    from ..model import sessions

    db.execute("DELETE FROM sessions WHERE id=?", (entity,))
    session = sessions.fold(events)
    if session is not None:
        db.execute(
            "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?)",
            (
                session.id,
                session.state,
                session.agent,
                session.machine,
                session.started_clock,
                orjson.dumps(session.to_dict()),
            ),
        )


class Executes(Protocol):
    """What reads the read model's tables: a connection, or the projection's guarded `db`."""

    def execute(self, sql: str, args: Sequence[Any] = ..., /) -> Any: ...


def placed(db: Executes | None, batch: Sequence[ev.Event]) -> list[ev.Event]:
    """The events of a write, each about to be written after what this clone has read of its
    record: an event whose record holds events ordered at or past its clock (written by a
    clock ahead of this one, which this clone's clock does not follow that far) carries
    `data.after`, the last of their orders, and so sorts after them on every clone."""
    if db is None:
        return list(batch)
    out: list[ev.Event] = []
    last: dict[str, int | None] = {}
    for event in batch:
        entity = event.entity
        if entity is None:
            out.append(event)
            continue
        if entity not in last:
            last[entity] = latest_order(db, entity)
        top = last[entity]
        if top is not None and top >= event.clock:
            event = replace(event, data={**event.data, "after": min(top, ev.MAX_CLOCK - 1)})
        last[entity] = event.order if top is None else max(top, event.order)
        out.append(event)
    return out


def latest_order(db: Executes, entity: str) -> int | None:
    """The order of the last event of a record (None: it has none)."""
    row = db.execute("SELECT MAX(clock) FROM events WHERE entity=?", (entity,)).fetchone()
    return row[0] if row else None


def known_entities(db: Executes, ids: Iterable[str]) -> set[str]:
    """Which of these records have events in the read model."""
    wanted = sorted(set(ids))
    found: set[str] = set()
    for start in range(0, len(wanted), 500):
        part = wanted[start : start + 500]
        found.update(
            row[0]
            for row in db.execute(
                f"SELECT DISTINCT entity FROM events WHERE entity IN ({','.join('?' * len(part))})",
                part,
            )
        )
    return found


def entity_events(db: sqlite3.Connection | Guarded, entity: str) -> list[ev.Event]:
    rows = db.execute(
        "SELECT body FROM events WHERE entity=? ORDER BY clock, id", (entity,)
    ).fetchall()
    return [ev.parse_line(r[0]) for r in rows]


def next_gen(db: sqlite3.Connection) -> int:
    """A new generation for dirty marks (call inside a write transaction)."""
    row = db.execute("SELECT value FROM meta WHERE key='gen'").fetchone()
    gen = int(row[0]) + 1 if row else 1
    db.execute("INSERT OR REPLACE INTO meta VALUES ('gen', ?)", (str(gen),))
    return gen


def mark(db: sqlite3.Connection, memory_id: str, gen: int) -> None:
    # A generation per refresh: cleaning what an indexer read never drops a newer mark.
    for table in ("dirty_text", "dirty_vec"):
        db.execute(f"INSERT OR REPLACE INTO {table} VALUES (?, ?)", (memory_id, gen))


def _save_task(
    db: sqlite3.Connection,
    state: dict[str, Any],
    last: tuple[int, str],
    *,
    appended_to: int | None = None,
) -> None:
    """Store a folded task (`tasks.fold_state`) and the key of the last event folded into it.
    `appended_to`: the fold it extends, whose rows are stored; its progress and failures are
    then only the new ones."""
    task = state["id"]
    head = {k: v for k, v in state.items() if k not in ("progress", "failures")}
    fold = appended_to if appended_to is not None else int.from_bytes(os.urandom(7), "big")
    db.execute(
        "INSERT OR REPLACE INTO tasks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            task,
            state["name"],
            state["status"],
            state["parent"],
            state["updated_clock"],
            orjson.dumps(head),
            last[0],
            last[1],
            fold,
        ),
    )
    for table in ("progress", "failures"):
        first = (
            db.execute(
                f"SELECT COALESCE(MAX(seq) + 1, 0) FROM {table} WHERE task=?", (task,)
            ).fetchone()[0]
            if appended_to is not None
            else 0
        )
        items = enumerate(state[table], start=first)
        if table == "progress":
            db.executemany(
                "INSERT OR REPLACE INTO progress VALUES (?, ?, ?)",
                [(task, seq, orjson.dumps(item)) for seq, item in items],
            )
            continue
        db.executemany(
            "INSERT OR REPLACE INTO failures VALUES (?, ?, ?, ?, ?)",
            [
                (
                    task,
                    seq,
                    item["component"] if isinstance(item["component"], str) else None,
                    item["time"],
                    orjson.dumps(item),
                )
                for seq, item in items
            ],
        )


def _drop_task(db: sqlite3.Connection, task: str) -> None:
    for table, column in (("tasks", "id"), ("progress", "task"), ("failures", "task")):
        db.execute(f"DELETE FROM {table} WHERE {column}=?", (task,))
