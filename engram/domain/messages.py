"""One line about an event, and the commit message a batch of events is committed with.

Logs, the timeline, browse, resume, import reports and commits all describe events the same
way, through `describe`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from ..base.wording import count
from ..model import memories as mem
from ..storage import events as ev


def describe(event: ev.Event) -> str:
    """One line about an event, for logs and commit messages."""
    if event.kind.startswith("memory."):
        return mem.describe(event)
    if event.kind.startswith("task."):
        from ..model.tasks import describe as describe_task

        return describe_task(event)
    if event.kind.startswith("checkpoint."):
        from .continuity.checkpoints import describe as describe_checkpoint

        return describe_checkpoint(event)
    if event.kind.startswith("session."):
        from ..model.sessions import describe as describe_session

        return describe_session(event)
    if event.kind == "store.created":
        return f"initialize {event.data.get('store', '')} store".replace("  ", " ")
    return event.kind


SUBJECT_CHARS = 72  # git's conventional bound on a subject line
PREFIX = "engram: "

# What the subject calls each kind of event, in the order it names them.
_NOUNS = (
    "memory",
    "task update",
    "progress entry",
    "failure",
    "checkpoint",
    "handoff",
    "store",
    "session event",
    "other event",
)


def _noun(event: ev.Event) -> str:
    kind = event.kind
    if kind.startswith("memory."):
        return "memory"
    if kind in ("task.created", "task.updated"):
        return "task update"
    if kind == "task.progress":
        return "progress entry"
    if kind == "task.failure":
        return "failure"
    if kind.startswith("checkpoint."):
        return "handoff" if event.data.get("reason") == "handoff" else "checkpoint"
    if kind == "store.created":
        return "store"
    if kind.startswith("session."):
        return "session event"
    return "other event"


def _task_name(events: Sequence[ev.Event], names: Mapping[str, str] | None) -> str | None:
    """The name of the one task all task and checkpoint events are about, if known."""
    tasks = {
        str(e.data.get("task", "")) for e in events if e.kind.startswith(("task.", "checkpoint."))
    }
    if len(tasks) != 1:
        return None
    [task] = tasks
    name = (names or {}).get(task)
    for event in events:  # the newest name the batch itself gives
        if (
            event.kind in ("task.created", "task.updated")
            and str(event.data.get("task", "")) == task
            and isinstance(event.data.get("name"), str)
        ):
            name = event.data["name"]
    return " ".join(name.split()) if name and name.strip() else None


def counted_subject(events: Sequence[ev.Event], *, names: Mapping[str, str] | None = None) -> str:
    """What a batch of events holds, in nouns with counts and at most 72 characters:
    "engram: 2 memories, 1 handoff (OAuth login)"."""
    tally = Counter(_noun(e) for e in events)
    parts = [count(tally[noun], noun) for noun in _NOUNS if tally[noun]]
    while len(parts) > 1 and len(PREFIX + ", ".join(parts)) > SUBJECT_CHARS:
        # Too many kinds for one line: the last ones are told as other events.
        *head, before, last = parts
        others = int(before.split()[0]) + int(last.split()[0])
        parts = [*head, count(others, "other event")]
    base = PREFIX + ", ".join(parts)
    name = _task_name(events, names)
    room = SUBJECT_CHARS - len(base) - 3  # " (" and ")"
    if name and room >= 4:
        base += f" ({ev.one_line(name, room)})"
    return base


def commit_message(
    events: Sequence[ev.Event],
    *,
    subject: str | None = None,
    names: Mapping[str, str] | None = None,
) -> str:
    """A message a reviewer can read: a subject with what the commit holds, then one line per
    event it counts; a session's start and end that ride along are summed up in a last line.
    `names` gives task names by id, for a batch that does not name its task itself."""
    main = [e for e in events if ev.substantive(e.kind)] or list(events)
    riders = len(events) - len(main)
    if subject is None:
        if len(main) == 1:
            subject = ev.one_line(PREFIX + describe(main[0]), SUBJECT_CHARS)
        else:
            subject = counted_subject(main, names=names)
    lines = [subject]
    if len(main) > 1 or riders or (main and subject != f"{PREFIX}{describe(main[0])}"):
        lines.append("")
        shown = main[:50]
        lines.extend(f"- {describe(e)}" for e in shown)
        if len(main) > len(shown):
            lines.append(f"- ... and {len(main) - len(shown)} more")
        if riders:
            lines.append(f"- and {count(riders, 'session event')}")
    return "\n".join(lines) + "\n"
