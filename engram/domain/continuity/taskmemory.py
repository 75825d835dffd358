"""The memories of a task: those tied to it and those written in the sessions that worked on
it (a decision recorded mid-task without naming the task is still the task's), ranked for a
resume: decisions first, then the traps, the facts, the preferences and conventions, the rest;
within a kind, tied to the task first, then by importance, newest first."""

from __future__ import annotations

from typing import Any

from ...model.memories import Memory
from ...model.tasks import Task

RANK = {
    "decision": 0,
    "gotcha": 1,
    "failure": 1,
    "fact": 2,
    "preference": 3,
    "convention": 3,
    "lesson": 4,
    "procedure": 5,
    "note": 6,
}
TRAPS = ("gotcha", "failure")


def for_task(reader: Any, task: Task, *, limit: int = 200) -> list[Memory]:
    """The active memories of `task` as a resume ranks them, at most `limit`. `reader` is the
    store's read model (`Projection`)."""
    tied = list(reader.memories(task=task.id))
    seen = {m.id for m in tied}
    written = [
        i for i in reader.memories_written_in(reader.entity_sessions(task.id)) if i not in seen
    ]
    during = (
        [m for m in reader.memories(ids=written[:limit]) if m.task in (None, task.id)]
        if written
        else []
    )
    ranked = sorted(
        [*tied, *during],
        key=lambda m: (
            RANK.get(m.kind, len(RANK)),
            m.task != task.id,
            -m.importance,
            -m.updated_clock,
            m.id,
        ),
    )
    return ranked[:limit]
