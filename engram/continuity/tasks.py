"""Tasks: first-class records with progress and failures as structured events.

Events (entity: the task id):
- `task.created`  {task, name, goal, status, parent, tags}
- `task.updated`  {task, + changed fields of name, goal, status, parent, tags}
- `task.progress` {task, feature, status, note, component, files}
- `task.failure`  {task, error, component, root_cause, fix}
- `checkpoint.saved` {task, checkpoint, ...}: see checkpoints.py
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from .. import events as ev
from ..errors import UsageError

STATUSES = ("open", "in_progress", "blocked", "done", "abandoned")
ACTIVE = ("open", "in_progress", "blocked")
PROGRESS_STATUSES = ("done", "in_progress", "blocked", "todo")


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
        data = asdict(self)
        data["tags"] = list(self.tags)
        data["checkpoints"] = list(self.checkpoints)
        data["progress"] = [dict(asdict(p), files=list(p.files)) for p in self.progress]
        data["failures"] = [asdict(f) for f in self.failures]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Task:
        values = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        values["tags"] = tuple(values.get("tags") or ())
        values["checkpoints"] = tuple(values.get("checkpoints") or ())
        values["progress"] = tuple(
            Progress(**{**p, "files": tuple(p.get("files") or ())})
            for p in values.get("progress") or ()
        )
        values["failures"] = tuple(Failure(**f) for f in values.get("failures") or ())
        return cls(**values)

    @property
    def active(self) -> bool:
        return self.status in ACTIVE


def fold(events: Sequence[ev.Event]) -> Task | None:
    task: Task | None = None
    for event in events:
        data = event.data
        if event.kind == "task.created":
            if task is not None:
                continue
            task = Task(
                id=data["task"], name=data.get("name", ""), goal=data.get("goal", ""),
                status=data.get("status", "open"), parent=data.get("parent"),
                tags=tuple(data.get("tags") or ()), created_at=event.time,
                updated_at=event.time, created_clock=event.clock, updated_clock=event.clock,
                created_by=event.actor,
            )
            continue
        if task is None:
            continue
        stamp = {"updated_at": event.time, "updated_clock": event.clock}
        if event.kind == "task.updated":
            changes = {k: data[k] for k in ("name", "goal", "status", "parent") if k in data}
            if "tags" in data:
                changes["tags"] = tuple(data["tags"] or ())
            task = replace(task, **changes, **stamp)
        elif event.kind == "task.progress":
            item = Progress(event.id, event.clock, event.time, event.actor, event.session,
                            data.get("feature", ""), data.get("status", "done"),
                            data.get("note"), data.get("component"),
                            tuple(data.get("files") or ()))
            task = replace(task, progress=(*task.progress, item), **stamp)
        elif event.kind == "task.failure":
            item = Failure(event.id, event.clock, event.time, event.actor, event.session,
                           data.get("error", ""), data.get("component"),
                           data.get("root_cause"), data.get("fix"))
            task = replace(task, failures=(*task.failures, item), **stamp)
        elif event.kind == "checkpoint.saved":
            package = {k: v for k, v in data.items() if k != "task"}
            package.update(time=event.time, actor=event.actor, session=event.session,
                           machine=event.machine, clock=event.clock)
            task = replace(task, checkpoints=(*task.checkpoints, data["checkpoint"]),
                           previous_checkpoint=task.latest_checkpoint,
                           latest_checkpoint=package, **stamp)
    return task


def check_status(status: str) -> str:
    if status not in STATUSES:
        raise UsageError(f"unknown task status {status!r}; use one of: {', '.join(STATUSES)}")
    return status


def check_progress_status(status: str) -> str:
    if status not in PROGRESS_STATUSES:
        raise UsageError(f"unknown progress status {status!r}; use one of: "
                         f"{', '.join(PROGRESS_STATUSES)}")
    return status


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


__all__ = ["Task", "Progress", "Failure", "fold", "STATUSES", "ACTIVE", "describe"]
