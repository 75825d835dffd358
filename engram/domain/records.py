"""Reading any record of the selected stores: the event log, and one record by id.

`log` lists events newest first (what happened, by whom, for which task); `show` finds a
memory, task, session or event by id or prefix across the stores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from ..base.config import LIST_LIMIT, check_count
from ..base.errors import AmbiguousIdError, NotFoundError
from ..base.validation import event_kind, reference
from ..model import memories as mem
from ..storage import events as ev
from .workspace import Workspace


@dataclass(frozen=True)
class MemoryRecord:
    """`show` of a memory: its state now and every event about it."""

    store: str
    memory: mem.Memory
    events: tuple[ev.Event, ...]
    type: Literal["memory"] = "memory"

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "store": self.store,
            "memory": self.memory.to_dict(),
            "events": [e.to_dict() for e in self.events],
        }


@dataclass(frozen=True)
class EntityRecord:
    """`show` of a task or session: its id and every event about it."""

    type: Literal["task", "session"]
    store: str
    id: str
    events: tuple[ev.Event, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "store": self.store,
            "id": self.id,
            "events": [e.to_dict() for e in self.events],
        }


@dataclass(frozen=True)
class EventRecord:
    """`show` of one event."""

    store: str
    event: ev.Event
    type: Literal["event"] = "event"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "store": self.store, "event": self.event.to_dict()}


Record = MemoryRecord | EntityRecord | EventRecord


class Records:
    """The event log and record lookup over a workspace's stores."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def log(
        self,
        *,
        kinds: Sequence[str] = (),
        task: str | None = None,
        actor: str | None = None,
        since: str | datetime | None = None,
        limit: int | None = 50,
    ) -> list[tuple[str, ev.Event]]:
        """Events newest first, as (store kind, event)."""
        kinds, limit = [event_kind(kind) for kind in kinds], check_count(limit, "limit", LIST_LIMIT)
        if task is not None:
            task = self.workspace.find_task(task, items=False)[1].id
        if actor is not None:
            actor = reference(actor, "actor", hint="give part of a name or an email")
        since_clock = None
        if since is not None:
            moment = (
                since if isinstance(since, datetime) else mem.parse_moment(since, what="--since")
            )
            since_clock = int(moment.timestamp() * 1_000_000)
        out: list[tuple[str, ev.Event]] = []
        for store in self.workspace.stores():
            for event in self.workspace.projection(store).events(
                kinds=kinds,
                task=task,
                actor=actor,
                since_clock=since_clock,
                limit=limit,
            ):
                out.append((store.kind, event))
        out.sort(key=lambda pair: pair[1].sort_key, reverse=True)
        return out[:limit] if limit is not None else out

    def show(self, ident: str) -> Record:
        """Any record by id or prefix: a memory, task or session with its events, or one
        event."""
        found = self.workspace.resolve(ident, what="any")
        if not found:
            raise NotFoundError("record", ident)
        if len({f[1] for f in found}) > 1:
            raise AmbiguousIdError(ident, sorted({f[1] for f in found}))
        store, full, kind = found[0]
        proj = self.workspace.projection(store)
        if kind == "memory":
            memory = proj.memory(full)
            assert memory is not None
            return MemoryRecord(store.kind, memory, tuple(proj.entity_events(full)))
        if kind in ("task", "session"):
            entity: Literal["task", "session"] = "task" if kind == "task" else "session"
            return EntityRecord(entity, store.kind, full, tuple(proj.entity_events(full)))
        event = proj.event(full)
        if event is None:
            raise NotFoundError("record", ident)
        return EventRecord(store.kind, event)
