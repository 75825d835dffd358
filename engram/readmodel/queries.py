"""The read model's queries: memories, tasks, sessions and events as they are folded, and what
the search indexes need (stale entries, samples, ranking fields).

`Queries` is the part of `Projection` that only reads; every read that meets a damaged cache
rebuilds it and runs again (`guard`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from ..model import memories as mem
from ..storage import events as ev
from ..storage.store import Problem, Store
from .fold import entity_events
from .guard import Guarded, recovering
from .schema import NOTABLE, dirty_table

if TYPE_CHECKING:
    from ..model.sessions import Session


class Reach(NamedTuple):
    """Where a memory of the personal store is seen: its project (root commit) and project
    remote, None for a memory seen everywhere (`Workspace.belongs_here` reads these)."""

    project: str | None
    project_remote: str | None


class Queries:
    """Reads of the read model, newest first where an order is asked for."""

    store: Store
    db: Guarded  # reads that rebuild a damaged cache
    refreshing: bool

    if TYPE_CHECKING:

        def rebuild(self) -> None: ...
        def snapshot(self) -> AbstractContextManager[None]: ...

    def __init__(self) -> None:
        # Progress and failures of tasks read lately: task id -> (fold, progress, failures).
        self._items: dict[str, tuple[int, tuple[Any, ...], tuple[Any, ...]]] = {}

    def _bodies(
        self, table: str, column: str, values: Sequence[str], ids: Sequence[str] | None, order: str
    ) -> list[dict[str, Any]]:
        return [
            {**orjson.loads(r[0]), "store": self.store.kind}
            for r in self._select(table, "body", column, values, ids, order)
        ]

    def _select(
        self,
        table: str,
        columns: str,
        column: str,
        values: Sequence[str],
        ids: Sequence[str] | None,
        order: str,
    ) -> list[Any]:
        sql = f"SELECT {columns} FROM {table}"
        args: list[Any] = []
        where: list[str] = []
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

    @recovering
    def tasks(
        self, *, statuses: Sequence[str] = (), ids: Sequence[str] | None = None, items: bool = True
    ) -> list[Any]:
        """Tasks, last changed first. With `items` False their progress and failures are left
        empty: for a lookup that needs only a task's own fields, whatever its history."""
        from ..model.tasks import Task

        with self.snapshot():
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
                f"SELECT body FROM {table} WHERE task=? AND seq>=? ORDER BY seq", (task, len(known))
            ).fetchall()
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

    @recovering
    def sessions(
        self,
        *,
        states: Sequence[str] = (),
        ids: Sequence[str] | None = None,
    ) -> list[Session]:
        from ..model.sessions import Session

        return [
            Session.from_dict(body)
            for body in self._bodies("sessions", "state", states, ids, "started_clock")
        ]

    def dirty(
        self, which: str, limit: int | None = None, *, after: str | None = None
    ) -> list[tuple[str, int]]:
        """(memory id, generation) pairs whose `which` ("text" or "vec") entries are stale;
        with `after`, only memory ids after it, in order (to page through marks that stay
        until the index holding their entries is saved)."""
        sql = f"SELECT memory, gen FROM {dirty_table(which)}"
        args: tuple[str, ...] = ()
        if after is not None:
            sql += " WHERE memory > ? ORDER BY memory"
            args = (after,)
        if limit:
            sql += f" LIMIT {int(limit)}"
        return [(r[0], r[1]) for r in self.db.execute(sql, args)]

    def dirty_count(self, which: str) -> int:
        count: int = self.db.execute(f"SELECT COUNT(*) FROM {dirty_table(which)}").fetchone()[0]
        return count

    def all_memory_ids(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT id FROM memories")]

    @recovering
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

    @recovering
    def contents(self, ids: Sequence[str]) -> dict[str, str]:
        """The text of each of these memories, read from its column: no body is parsed."""
        out: dict[str, str] = {}
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            for memory_id, content in self.db.execute(
                f"SELECT id, content FROM memories WHERE id IN ({','.join('?' * len(chunk))})",
                chunk,
            ):
                out[memory_id] = content
        return out

    def dirty_contents(self) -> list[tuple[str, str | None, str | None, list[str]]]:
        """(memory id, content, kind, tags) of every memory whose vector entry is stale, in one
        query; the content is None for an id that is no longer a memory."""
        tags: dict[str, list[str]] = {}
        for memory_id, tag in self.db.execute(
            "SELECT memory, tag FROM memory_tags WHERE memory IN (SELECT memory FROM dirty_vec)"
        ):
            tags.setdefault(memory_id, []).append(tag)
        return [
            (memory_id, content, kind, tags.get(memory_id, []))
            for memory_id, content, kind in self.db.execute(
                "SELECT d.memory, m.content, m.kind FROM dirty_vec d "
                "LEFT JOIN memories m ON m.id = d.memory"
            )
        ]

    @recovering
    def written_with(
        self,
        ids: Sequence[str],
        *,
        seconds: float,
        span: int,
    ) -> dict[str, list[str]]:
        """For each memory, those written next to it: the `span` written just before it and just
        after it, when their moments are within `seconds` of its own (a conversation's turns, an
        agent's notes of one sitting)."""
        out: dict[str, list[str]] = {}
        marks = ",".join("?" * len(ids))
        rows = self.db.execute(
            f"SELECT id, moment, created_clock FROM memories WHERE id IN ({marks})", list(ids)
        ).fetchall()
        if not rows:
            return out
        # One statement for all of them: for each, the `span` before and the `span` after.
        parts: list[str] = []
        args: list[Any] = []
        for place, (_, _, clock) in enumerate(rows):
            parts.append(
                f"SELECT {place}, id, moment FROM (SELECT id, moment FROM memories "
                "WHERE created_clock < ? ORDER BY created_clock DESC LIMIT ?)"
            )
            parts.append(
                f"SELECT {place}, id, moment FROM (SELECT id, moment FROM memories "
                "WHERE created_clock > ? ORDER BY created_clock LIMIT ?)"
            )
            args += [clock, span, clock, span]
        near: list[list[tuple[str, str]]] = [[] for _ in rows]
        for place, other, other_moment in self.db.execute(" UNION ALL ".join(parts), args):
            near[place].append((other, other_moment))
        for (memory_id, moment_text, _), found in zip(rows, near, strict=True):
            moment = ev.parse_time(moment_text)
            out[memory_id] = [
                other
                for other, other_moment in found
                if abs((ev.parse_time(other_moment) - moment).total_seconds()) <= seconds
            ]
        return out

    @recovering
    def sample_ids(self, limit: int) -> list[str]:
        """The ids of `sample`, read from the primary key alone."""
        # "+status": filter on the way along the primary key rather than sort by it.
        return [
            row[0]
            for row in self.db.execute(
                "SELECT id FROM memories WHERE +status = 'active' ORDER BY id LIMIT ?", (limit,)
            )
        ]

    @recovering
    def sample(self, limit: int) -> list[tuple[str, str, str, list[str]]]:
        """(id, content, kind, tags) of up to `limit` active memories: those with the smallest
        ids, which, ids being random, are a uniform sample that does not depend on the order in
        which the read model was built (read along the primary key: no scan of the table)."""
        ids = self.sample_ids(limit)
        marks = ",".join("?" * len(ids))
        found = {
            row[0]: row
            for row in self.db.execute(
                f"SELECT id, content, kind FROM memories WHERE id IN ({marks})", ids
            )
        }
        rows = [found[i] for i in ids if i in found]
        tags: dict[str, list[str]] = {}
        if rows:
            marks = ",".join("?" * len(rows))
            for memory_id, tag in self.db.execute(
                f"SELECT memory, tag FROM memory_tags WHERE memory IN ({marks})",
                [row[0] for row in rows],
            ):
                tags.setdefault(memory_id, []).append(tag)
        return [
            (memory_id, content, kind, tags.get(memory_id, [])) for memory_id, content, kind in rows
        ]

    @recovering
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
            for *row, project, remote in self.db.execute(
                "SELECT id, status, kind, scope, task, moment, valid_from, valid_until, "
                "importance, reinforced, updated_clock, project, project_remote "
                f"FROM memories WHERE id IN ({marks})",
                chunk,
            ):
                tags_of = frozenset(tag_sets.get(row[0], ()))
                # The row holds the 11 fields before `tags`, so none is given twice.
                out[row[0]] = mem.Head(  # type: ignore[misc]
                    *row, tags=tags_of, project=project, project_remote=remote
                )
        return out

    def problems(self) -> list[Problem]:
        return [
            Problem(*row)
            for row in self.db.execute(
                "SELECT path, line, severity, message FROM problems ORDER BY path, line"
            )
        ]

    @recovering
    def entity_events(self, entity: str) -> list[ev.Event]:
        return entity_events(self.db, entity)

    @recovering
    def memory(self, memory_id: str) -> mem.Memory | None:
        row = self.db.execute("SELECT body FROM memories WHERE id=?", (memory_id,)).fetchone()
        return self._memory(row[0]) if row else None

    def _memory(self, body: bytes) -> mem.Memory:
        return mem.Memory.from_dict({**orjson.loads(body), "store": self.store.kind})

    @recovering
    def recent_memories(
        self, limit: int, *, now: datetime, notable: bool = False, exclude: Collection[str] = ()
    ) -> list[mem.Memory]:
        """Active memories valid at `now`, newest first (by last change), at most `limit`,
        leaving out `exclude`; with `notable`, only the NOTABLE ones. Reads about as many rows
        as it returns (an index keeps each set in order), however large the store is."""
        # Named, so that the planner never prefers a scan of every active memory.
        index, where = (
            ("memories_notable", f"status = 'active' AND ({NOTABLE})")
            if notable
            else ("memories_status", "status = 'active'")
        )
        out: list[mem.Memory] = []
        after: list[Any] = []
        page = limit + len(exclude) + 10
        while len(out) < limit:
            rows = self.db.execute(
                "SELECT id, valid_from, valid_until, updated_clock, body FROM memories "
                f"INDEXED BY {index} WHERE {where}"
                + (" AND (updated_clock, id) < (?, ?)" if after else "")
                + f" ORDER BY updated_clock DESC, id DESC LIMIT {page}",
                after,
            ).fetchall()
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

    @recovering
    def failures(self, components: Collection[str]) -> list[dict[str, Any]]:
        """Failures recorded on any task in one of these components, newest first (then in the
        order of `tasks()`), each with its task's id and name."""
        if not components:
            return []
        wanted = sorted(components)
        return [
            {"task": task, "task_name": name, **orjson.loads(body)}
            for task, name, body in self.db.execute(
                "SELECT f.task, t.name, f.body FROM failures f JOIN tasks t ON t.id = f.task "
                f"WHERE f.component IN ({','.join('?' * len(wanted))}) "
                "ORDER BY f.time DESC, t.updated_clock DESC, t.id DESC, f.seq",
                wanted,
            )
        ]

    def entity_sessions(self, entity: str) -> set[str]:
        """The sessions that wrote events about this entity."""
        return {
            r[0]
            for r in self.db.execute(
                "SELECT DISTINCT session FROM events WHERE entity=? AND session != ''", (entity,)
            )
        }

    def memories_written_in(self, sessions: Collection[str]) -> list[str]:
        """The ids of the memories created in these sessions, oldest first."""
        wanted = sorted(s for s in sessions if s)
        if not wanted:
            return []
        return [
            r[0]
            for r in self.db.execute(
                "SELECT entity FROM events WHERE kind = 'memory.created' AND "
                f"session IN ({','.join('?' * len(wanted))}) GROUP BY entity ORDER BY MIN(clock)",
                wanted,
            )
        ]

    def memories(
        self,
        *,
        kinds: Sequence[str] = (),
        tags: Sequence[str] = (),
        scope: str | None = None,
        statuses: Sequence[str] = ("active",),
        contains: str | None = None,
        task: str | None = None,
        since: str | None = None,
        until: str | None = None,
        ids: Sequence[str] | None = None,
    ) -> Iterator[mem.Memory]:
        """Memories newest first (by last change). Validity windows are the caller's filter."""
        where: list[str] = []
        args: list[Any] = []
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
                if attempt == 2 or self.refreshing:
                    raise
            self.rebuild()

    @recovering
    def events(
        self,
        *,
        kinds: Sequence[str] = (),
        entity: str | None = None,
        task: str | None = None,
        actor: str | None = None,
        since_clock: int | None = None,
        limit: int | None = None,
        newest_first: bool = True,
    ) -> list[ev.Event]:
        where: list[str] = []
        args: list[Any] = []
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
            sql = (
                f"SELECT body FROM events WHERE rowid IN ({sql.format('rowid')} "
                f"LIMIT {int(limit)}) ORDER BY clock {order}, id {order}"
            )
        return [ev.parse_line(r[0]) for r in self.db.execute(sql, args)]

    @recovering
    def event(self, event_id: str) -> ev.Event | None:
        row = self.db.execute("SELECT body FROM events WHERE id=?", (event_id,)).fetchone()
        return ev.parse_line(row[0]) if row else None

    @recovering
    def places(self, event_id: str) -> list[tuple[str, int]]:
        """Where the event's line is: (file relative to the store, line), first file first."""
        return [
            (r[0], r[1])
            for r in self.db.execute(
                "SELECT file, line FROM sources WHERE id=? ORDER BY file, line", (event_id,)
            )
        ]

    def is_dirty(self, memory_id: str, which: str) -> bool:
        """Is the memory's last change still to be taken by that index ("text", "vec")?"""
        return (
            self.db.execute(
                f"SELECT 1 FROM {dirty_table(which)} WHERE memory=?", (memory_id,)
            ).fetchone()
            is not None
        )

    def match_ids(self, prefix: str) -> list[tuple[str, str]]:
        """(id, what) pairs whose id starts with `prefix`: memories, tasks, sessions, events."""
        out = []
        for table, what in (("memories", "memory"), ("tasks", "task"), ("sessions", "session")):
            out += [
                (r[0], what)
                for r in self.db.execute(
                    f"SELECT id FROM {table} WHERE id >= ? AND id < ? LIMIT 20",
                    (prefix.lower(), prefix.lower() + "\uffff"),
                )
            ]
        upper = prefix.upper()
        events = [
            (r[0], "event")
            for r in self.db.execute(
                "SELECT id FROM events WHERE id >= ? AND id < ? LIMIT 20", (upper, upper + "\uffff")
            )
        ]
        if not out and not events and len(upper) >= 6 and upper.isalnum():
            # `engram log` shows an event by the end of its id (the random part: events written
            # together share the start, their time).
            events = [
                (r[0], "event")
                for r in self.db.execute(
                    "SELECT id FROM events WHERE id LIKE ? LIMIT 20", ("%" + upper,)
                )
            ]
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

    def present(self, ids: Collection[str]) -> set[str]:
        """Which of these event ids the store holds."""
        wanted = list(ids)
        found: set[str] = set()
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            found.update(
                r[0]
                for r in self.db.execute(
                    f"SELECT id FROM events WHERE id IN ({','.join('?' * len(part))})", part
                )
            )
        return found
