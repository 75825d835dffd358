"""Tasks: first-class records with progress and failures as structured events.

Events (entity: the task id):
- `task.created`  {task, name, goal, status, parent, tags}
- `task.updated`  {task, + changed fields of name, goal, status, parent, tags}
- `task.progress` {task, feature, status, note, component, files}
- `task.failure`  {task, error, component, root_cause, fix, candidate}
- `checkpoint.saved` {task, checkpoint, ...}: see checkpoints.py
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..base.errors import UsageError, quote
from ..base.vocab import PROGRESS_STATUS, TASK_STATUS
from ..storage import events as ev
from . import plans

STATUSES = TASK_STATUS.names
ACTIVE = tuple(term.name for term in TASK_STATUS.terms if term.data["active"])
# A status none of these (from another writer, or a later version of Engram) is taken as work
# not finished: a task nobody closed stays in sight rather than vanish from `engram task list`.
CLOSED = tuple(name for name in STATUSES if name not in ACTIVE)
PROGRESS_STATUSES = PROGRESS_STATUS.names


@dataclass(frozen=True)
class Progress:
    event: str
    clock: int
    time: str
    actor: str
    session: str | None
    feature: str
    status: str
    note: str | None = None
    component: str | None = None
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class Failure:
    event: str
    clock: int
    time: str
    actor: str
    session: str | None
    error: str
    component: str | None = None
    root_cause: str | None = None
    fix: str | None = None
    candidate: str | None = None  # the failed command capture saw, `<session>/<id>: ...`


@dataclass(frozen=True)
class Task:
    id: str
    name: str
    goal: str
    status: str
    parent: str | None
    tags: tuple[str, ...]
    created_at: str
    updated_at: str
    created_clock: int
    updated_clock: int
    created_by: str
    progress: tuple[Progress, ...] = ()
    failures: tuple[Failure, ...] = ()
    checkpoints: tuple[str, ...] = ()  # checkpoint ids, oldest first
    latest_checkpoint: dict[str, Any] | None = None
    previous_checkpoint: dict[str, Any] | None = None
    store: str | None = None

    def to_dict(self) -> dict[str, Any]:
        # Field by field: dataclasses.asdict deep-copies every progress item one field at a
        # time, which made a long task slow to write and to return.
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["tags"] = list(self.tags)
        data["checkpoints"] = list(self.checkpoints)
        data["progress"] = [_progress_dict(p) for p in self.progress]
        data["failures"] = [dict(f.__dict__) for f in self.failures]
        data["latest_checkpoint"] = _copied(self.latest_checkpoint)
        data["previous_checkpoint"] = _copied(self.previous_checkpoint)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Task:
        values = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        values["tags"] = tuple(values.get("tags") or ())
        values["checkpoints"] = tuple(values.get("checkpoints") or ())
        values["progress"] = progress_from(values.get("progress") or ())
        values["failures"] = failures_from(values.get("failures") or ())
        return cls(**values)

    @property
    def active(self) -> bool:
        return self.status not in CLOSED


def fold(events: Sequence[ev.Event]) -> Task | None:
    state = fold_state(events)
    return Task.from_dict(state) if state is not None else None


def fold_state(
    events: Iterable[ev.Event],
    state: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The task after `events` (in (clock, id) order), as `Task.to_dict()` gives it, folded on
    from `state` (such a dict) if given: the read model extends a stored task with the events
    that follow it instead of folding its whole history again. `state` is changed in place."""
    for event in events:
        data = event.data
        if event.kind == "task.created":
            if state is not None:
                continue
            state = {
                "id": data["task"],
                "name": data.get("name", ""),
                "goal": data.get("goal", ""),
                "status": data.get("status", "open"),
                "parent": data.get("parent"),
                "tags": list(data.get("tags") or ()),
                "created_at": event.time,
                "updated_at": event.time,
                "created_clock": event.clock,
                "updated_clock": event.clock,
                "created_by": event.actor,
                "progress": [],
                "failures": [],
                "checkpoints": [],
                "latest_checkpoint": None,
                "previous_checkpoint": None,
                "store": None,
            }
            continue
        if state is None:
            continue
        if event.kind == "task.updated":
            for key in ("name", "goal", "status", "parent"):
                if key in data:
                    state[key] = data[key]
            if "tags" in data:
                state["tags"] = list(data["tags"] or ())
        elif event.kind == "task.progress":
            state["progress"].append(
                {
                    "event": event.id,
                    "clock": event.clock,
                    "time": event.time,
                    "actor": event.actor,
                    "session": event.session,
                    "feature": data.get("feature", ""),
                    "status": data.get("status", "done"),
                    "note": data.get("note"),
                    "component": data.get("component"),
                    "files": list(data.get("files") or ()),
                }
            )
        elif event.kind == "task.failure":
            state["failures"].append(
                {
                    "event": event.id,
                    "clock": event.clock,
                    "time": event.time,
                    "actor": event.actor,
                    "session": event.session,
                    "error": data.get("error", ""),
                    "component": data.get("component"),
                    "root_cause": data.get("root_cause"),
                    "fix": data.get("fix"),
                    "candidate": data.get("candidate"),
                }
            )
        elif event.kind == "checkpoint.saved":
            package = {k: v for k, v in data.items() if k != "task"}
            state["checkpoints"].append(data["checkpoint"])
            # Numbered by the merged order, never by what the writer counted: two machines
            # that each saved their "checkpoint 5" have a 5 and a 6 once merged.
            package.update(
                time=event.time,
                actor=event.actor,
                session=event.session,
                machine=event.machine,
                clock=event.clock,
                seq=len(state["checkpoints"]),
            )
            # Mended with what its writer may not have known (another machine's work).
            done = (p["feature"] for p in state["progress"] if p["status"] == "done")
            plans.merge(package, state["latest_checkpoint"], done)
            state["previous_checkpoint"] = state["latest_checkpoint"]
            state["latest_checkpoint"] = package
        else:
            continue
        state["updated_at"] = event.time
        state["updated_clock"] = event.clock
    return state


_PROGRESS_FIELDS = Progress.__dataclass_fields__.keys()
_FAILURE_FIELDS = Failure.__dataclass_fields__.keys()


def progress_from(items: Iterable[Mapping[str, Any]]) -> tuple[Progress, ...]:
    """Progress items from their dicts (as `Task.to_dict()` gives them)."""
    return tuple(_progress(item) for item in items)


def failures_from(items: Iterable[Mapping[str, Any]]) -> tuple[Failure, ...]:
    """Failures from their dicts (as `Task.to_dict()` gives them)."""
    return tuple(_failure(item) for item in items)


def _progress(data: Mapping[str, Any]) -> Progress:
    # A long task has thousands of these: a dict that has exactly the fields is taken as it is,
    # without the frozen dataclass's __init__ (several times slower); anything else goes
    # through __init__, which checks it.
    if data.keys() != _PROGRESS_FIELDS:
        return Progress(**{**data, "files": tuple(data.get("files") or ())})
    item = object.__new__(Progress)
    item.__dict__.update(data)
    item.__dict__["files"] = tuple(data["files"] or ())
    return item


def _failure(data: Mapping[str, Any]) -> Failure:
    if data.keys() != _FAILURE_FIELDS:
        return Failure(**data)
    item = object.__new__(Failure)
    item.__dict__.update(data)
    return item


def _progress_dict(item: Progress) -> dict[str, Any]:
    data = dict(item.__dict__)
    data["files"] = list(item.files)
    return data


def _copied(value: Any) -> Any:
    """A deep copy of JSON-like data (what asdict made of a checkpoint package)."""
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_copied(v) for v in value)
    return value


def check_status(status: str) -> str:
    return TASK_STATUS.one_of(status)


def ancestors(task: Task, parent_of: Callable[[str], Task | None]) -> list[Task]:
    """`task` and the tasks above it, nearest first (`parent_of` finds a parent by id, None
    when it is unknown). Stops at a task met already: an update refuses to make a cycle, but
    two clones that each put one task under the other make one when merged, and no reader may
    walk it for ever."""
    chain: list[Task] = []
    seen: set[str] = set()
    current: Task | None = task
    while current is not None and current.id not in seen:
        seen.add(current.id)
        chain.append(current)
        current = parent_of(current.parent) if current.parent else None
    return chain


def check_parent(task: Task, parent: Task, parent_of: Callable[[str], Task | None]) -> str:
    """The id of `parent` if `task` may be put under it: not itself, nor any task already
    under it (at any depth), which would make a cycle."""
    if parent.id == task.id:
        raise UsageError("a task cannot be its own parent")
    chain = ancestors(parent, parent_of)
    if task.id in [t.id for t in chain]:
        between = chain[1 : [t.id for t in chain].index(task.id)]
        via = f" (through {', '.join(quote(t.name) for t in between)})" if between else ""
        raise UsageError(
            f"{quote(parent.name)} is under {quote(task.name)} already{via}: a task cannot "
            "be under its own subtask (an empty parent takes a task out from under its own)"
        )
    return parent.id


def check_progress_status(status: str) -> str:
    return PROGRESS_STATUS.one_of(status)


def describe(event: ev.Event) -> str:
    data = event.data
    short = str(data.get("task", ""))[: ev.SHORT_ID_LEN]
    if event.kind == "task.created":
        return f"task {short} created: {ev.one_line(data.get('name', ''))}"
    if event.kind == "task.updated":
        fields = ", ".join(k for k in ("name", "goal", "status", "parent", "tags") if k in data)
        status = f" -> {data['status']}" if "status" in data else ""
        return f"task {short} updated ({fields}){status}"
    if event.kind == "task.progress":
        return f"progress {short} [{data.get('status', '')}] {ev.one_line(data.get('feature', ''))}"
    if event.kind == "task.failure":
        where = f" in {data['component']}" if data.get("component") else ""
        return f"failure {short}{where}: {ev.one_line(data.get('error', ''))}"
    return event.kind


__all__ = [
    "Task",
    "Progress",
    "Failure",
    "fold",
    "fold_state",
    "ancestors",
    "check_parent",
    "STATUSES",
    "ACTIVE",
    "CLOSED",
    "describe",
]
