"""What folding an mcp-engram log (`mcp_engram`) into Engram events needs besides the mapping of
each kind: the loop over its lines, each line's events kept or undone whole; building events with
ids, clocks and times derived from the line alone; and the checks every mapped value passes
(limits, names, ids, secrets). `mcp_engram.Reader` maps each kind on top of `Fold`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import orjson

from ...base.errors import UsageError, quote
from ...base.validation import EVENT_KIND, check_relative, well_formed
from ...storage import events as ev
from .mcp_engram_log import (
    FORMAT,
    NOT_MAPPED,
    as_list,
    parse_entry,
    source_files,
)
from .plan import (
    Checker,
    Input,
    Plan,
    Record,
    derived_event_id,
    derived_id,
    from_micros,
    readable,
    slug_name,
)

KEY_CHARS = 128  # the longest id of an mcp-engram record (its own are numbers or short text)


@dataclass
class KnownTask:
    """A task of the log, as the lines read so far left it."""

    id: str
    name: str
    goal: str
    status: str


@dataclass
class KnownMemory:
    """A memory of the log, as the lines read so far left it."""

    id: str | None  # the Engram memory it became, if it became one
    type: str
    meta: dict[str, Any]
    content: str
    importance: float
    forgotten: bool = False


class Fold:
    """Fold the log, in order, into Engram events with deterministic ids, clocks and times: a
    subclass maps each kind (`handlers`: kind -> its handler of a line's payload)."""

    handlers: dict[str, Callable[[dict[str, Any]], None]]

    def __init__(self, path: Path, check: Checker, source: Input) -> None:
        self.path = path
        self.check = check
        self.source = source
        self.plan = source.plan
        self.tasks: dict[str, KnownTask] = {}
        self.memories: dict[str, KnownMemory] = {}
        self.sessions: dict[str, str] = {}  # Engram session id -> open | closed
        self.checkpointed: set[str] = set()  # mcp memory ids a checkpoint.write refers to
        # Set per source line:
        self.where = ""
        self.file: Path = path
        self.line = 0
        self.ts_us = 0
        self.seq: Any = 0
        self.actor = ""
        self.kind = ""
        self.emitted = 0

    # -- reading -------------------------------------------------------------------------

    def read(self) -> Plan:
        entries: list[tuple[Path, int, dict[str, Any] | UsageError]] = []
        for file in source_files(self.path):
            for number, raw in self.source.lines(file):
                try:
                    entries.append((file, number, parse_entry(raw)))
                except UsageError as exc:
                    entries.append((file, number, exc))
        for _, _, item in entries:
            if isinstance(item, dict) and item["kind"] == "checkpoint.write":
                ref = item["payload"].get("source_memory_id")
                if isinstance(ref, (int, str)) and not isinstance(ref, bool):
                    self.checkpointed.add(str(ref))
        for file, number, item in entries:
            self.file, self.line = file, number
            self.where = f"{file}:{number}"
            self.plan.read += 1
            if isinstance(item, UsageError):
                self.plan.skip(file, number, str(item))
                continue
            sizes = (
                len(self.plan.records),
                len(self.tasks),
                len(self.memories),
                len(self.sessions),
            )
            try:
                self._one(item)
            except UsageError as exc:
                self._undo(*sizes)
                self.plan.skip(file, number, str(exc))
            except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as exc:
                self._undo(*sizes)
                self.plan.skip(
                    file, number, f"{quote(self.kind, 30)} cannot be mapped ({type(exc).__name__})"
                )
        return self.plan

    def _undo(self, records: int, *sizes: int) -> None:
        """Forget what a skipped line added: its events, and the records it introduced."""
        del self.plan.records[records:]
        tables: tuple[dict[str, Any], ...] = (self.tasks, self.memories, self.sessions)
        for table, size in zip(tables, sizes, strict=True):
            for key in list(islice(reversed(table), len(table) - size)):
                del table[key]

    def _fail(self, problem: str) -> UsageError:
        return UsageError(problem)

    # -- building events -----------------------------------------------------------------

    def _emit(
        self, kind: str, data: dict[str, Any], origin: str, *, session: str | None = None
    ) -> None:
        # Everything about the event comes from its source line alone (a second event from
        # the same line sorts a microsecond later), so the same line always gives the same
        # event, whatever was imported before it.
        clock = self.ts_us + self.emitted
        self.emitted += 1
        data = {**data, "origin": {"format": FORMAT, "id": origin, "seq": self.seq}}
        event = ev.Event(
            id=derived_event_id(self.ts_us // 1000, FORMAT, self.ts_us, self.seq, self.emitted),
            kind=kind,
            clock=clock,
            time=ev.format_time(from_micros(clock)),
            actor=self.actor,
            session=session,
            machine=None,
            data=data,
        )
        self.plan.records.append(Record(kind, data, self.where, event=readable(event)))

    def _text(
        self, value: Any, name: str, limit: str = "limits.text_bytes", *, required: bool = False
    ) -> str:
        if value is None or (isinstance(value, str) and not value.strip()):
            if required:
                raise self._fail(f"{name} is missing or empty")
            return ""
        if not isinstance(value, str):
            value = orjson.dumps(value).decode()
        try:
            return self.check.text(value, name, limit)
        except UsageError as exc:
            raise self._fail(str(exc)) from None

    def _items(self, value: Any, name: str) -> list[str]:
        out: list[str] = []
        listed = as_list(value)
        most = self.check.checks.limit("limits.list_items")
        if len(listed) > most:
            raise self._fail(
                f"{name} has {len(listed)} items, over the limit of {most} "
                "(setting limits.list_items)"
            )
        for item in listed:
            text = self._text(item, name, "limits.item_bytes")
            if text and text not in out:
                out.append(text)
        return out

    def _name(self, value: Any, what: str) -> str | None:
        """Free text as a name (a scope, a component), checked like one; None if none."""
        name = slug_name(str(value or ""), self.check.checks.limit("limits.name_chars"))
        return self.check.name(name, what)

    def _need(self, payload: dict[str, Any], name: str) -> str:
        value = payload.get(name)
        if value is None or isinstance(value, (dict, list, bool)):
            raise self._fail(f"{self.kind} without {name}")
        return self._key(value, name)

    def _key(self, value: Any, name: str) -> str:
        """The id of an mcp-engram record (a number or a short line of text), as text."""
        if isinstance(value, (dict, list, bool)) or value is None:
            raise self._fail(f"{name} {quote(value)} is not an id")
        key = well_formed(str(value), name)
        if not key.strip() or len(key) > KEY_CHARS or "\n" in key or "\t" in key:
            raise self._fail(
                f"{name} {quote(key)} is not an id (one line of at most {KEY_CHARS} characters)"
            )
        self.check.scan(key, name)
        return key

    def _task(self, ref: Any) -> str:
        """The Engram id of an mcp-engram task; a task the log never created (it was pruned,
        or created before the log began) is created here, so nothing refers to nothing."""
        key = self._key(ref, "task id")
        if key not in self.tasks:
            task_id = derived_id(FORMAT, "task", key, "unknown")
            name = self._title(f"task {key}")
            self.tasks[key] = KnownTask(task_id, name, "", "open")
            self._emit(
                "task.created",
                {
                    "task": task_id,
                    "name": name,
                    "goal": "",
                    "status": "open",
                    "parent": None,
                    "tags": [],
                },
                f"task:{key}",
            )
        return self.tasks[key].id

    def _title(self, value: Any) -> str:
        """A task name, checked as `engram task create` checks one (cut to fit); "" if
        none."""
        return check_relative(self._text(value, "name", "limits.title_chars"), "task name")

    def _session(self, ref: Any) -> str:
        key = self._key(ref, "session id")
        session_id = derived_id(FORMAT, "session", key)
        if session_id not in self.sessions:
            self.sessions[session_id] = "open"
            self._emit(
                "session.started",
                {"session_id": session_id, "agent": "other", "pid": None, "head": None},
                f"session:{key}",
                session=session_id,
            )
        return session_id

    # -- one source event ----------------------------------------------------------------

    def _one(self, item: dict[str, Any]) -> None:
        self.kind = item["kind"]
        payload = item["payload"]
        self.ts_us = item["_us"]
        self.seq = item.get("seq")
        self.actor = f"mcp-engram:{slug_name(str(payload.get('user_id') or '')) or 'default'}"
        self.check.scan(self.actor, "user_id")
        self.emitted = 0
        handler = self.handlers.get(self.kind)
        if handler is None:
            if self.kind in NOT_MAPPED:
                reason = self.kind
            elif len(self.kind) <= 64 and EVENT_KIND.match(self.kind):
                reason = f"{self.kind} (unknown kind)"
            else:
                reason = f"{quote(self.kind, 30)} (not a kind)"
            self.plan.ignore(reason)
            return
        handler(payload)
