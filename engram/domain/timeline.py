"""A task's history on a time axis, and how the terminal shows it (the HTML page is
`timeline_html`).

The timeline shows what happened to a task in order: its progress and failures, its checkpoints
(and, field by field, how the handoff changed from one to the next), its decisions and other
memories, status changes, and the sessions that worked on it, each with who did it and on which
machine. Events are ordered by their logical clock; their wall time places them on the axis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..base.display import local_time
from ..storage import events as ev
from .continuity import checkpoints as cp

CATEGORIES = {  # category: (label, what it is)
    "checkpoint": ("checkpoint", "a continuation package (handoff or automatic)"),
    "failure": ("failure", "something that failed, with its cause and fix"),
    "progress": ("progress", "a feature done, under way, blocked or planned"),
    "decision": ("decision", "a decision recorded for the task"),
    "memory": ("memory", "another memory recorded for the task"),
    "session": ("session", "an agent session starting, reporting, ending or interrupted"),
    "task": ("task", "the task created or changed"),
}
FIELD_LABELS = {
    name: cp.TITLES[name].split(" (")[0]
    for name in (*cp.TEXT_FIELDS, *cp.LIST_FIELDS, "working_set")
}


@dataclass(frozen=True)
class Item:
    id: str
    category: str
    kind: str
    time: str
    clock: int
    actor: str
    machine: str | None
    session: str | None
    title: str
    details: tuple[str, ...] = ()
    changes: tuple[tuple[str, str, str], ...] = ()  # (field, "+" | "-" | "~", text)
    status: str | None = None  # progress status, checkpoint reason, session state...

    @property
    def who(self) -> str:
        return f"{self.actor} on {self.machine}" if self.machine else self.actor

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "category": self.category,
            "kind": self.kind,
            "time": self.time,
            "clock": self.clock,
            "actor": self.actor,
            "machine": self.machine,
            "session": self.session,
            "title": self.title,
            "details": list(self.details),
            "changes": [{"field": f, "change": c, "text": t} for f, c, t in self.changes],
            "status": self.status,
        }


@dataclass(frozen=True)
class Span:
    """A session on the axis, from its start to its end (or its last event, if open)."""

    id: str
    agent: str
    actor: str
    machine: str | None
    start: str
    end: str | None
    state: str  # open | ended | interrupted
    note: str = ""


@dataclass
class Timeline:
    task: dict[str, Any]
    items: list[Item] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    checkpoints: list[dict[str, Any]] = field(default_factory=list)  # packages, oldest first

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": {
                k: self.task[k]
                for k in (
                    "id",
                    "name",
                    "goal",
                    "status",
                    "parent",
                    "tags",
                    "created_at",
                    "updated_at",
                )
            },
            "items": [i.to_dict() for i in self.items],
            "sessions": [s.__dict__ for s in self.spans],
        }


def build(task: Any, events: Sequence[ev.Event]) -> Timeline:
    """The timeline of `task` (a continuity Task) from its events and its sessions' events,
    in (clock, id) order."""
    timeline = Timeline(task=task.to_dict())
    previous: dict[str, Any] | None = None
    starts: dict[str, ev.Event] = {}
    ends: dict[str, tuple[ev.Event, str, str]] = {}
    for event in events:
        data = event.data
        base: dict[str, Any] = {
            "id": event.id,
            "kind": event.kind,
            "time": event.time,
            "clock": event.clock,
            "actor": event.actor,
            "machine": event.machine,
            "session": event.session,
        }
        kind = event.kind
        if kind == "task.created":
            item = Item(
                **base,
                category="task",
                title=f"created: {data.get('name', '')}",
                details=_present(("goal", data.get("goal"))),
                status="created",
            )
        elif kind == "task.updated":
            fields = [k for k in ("name", "goal", "status", "parent", "tags") if k in data]
            title = (
                f"status → {data['status']}"
                if "status" in data and len(fields) == 1
                else f"updated {', '.join(fields)}"
            )
            details = tuple(
                f"{k}: {_text(data[k])}" for k in fields if k != "status" or len(fields) > 1
            )
            item = Item(
                **base, category="task", title=title, details=details, status=data.get("status")
            )
        elif kind == "task.progress":
            where = f" ({data['component']})" if data.get("component") else ""
            item = Item(
                **base,
                category="progress",
                title=f"[{data.get('status', '')}] {data.get('feature', '')}{where}",
                details=_present(
                    ("note", data.get("note")), ("files", ", ".join(data.get("files") or []))
                ),
                status=data.get("status"),
            )
        elif kind == "task.failure":
            where = f"[{data['component']}] " if data.get("component") else ""
            item = Item(
                **base,
                category="failure",
                title=f"{where}{data.get('error', '')}",
                details=_present(("root cause", data.get("root_cause")), ("fix", data.get("fix"))),
            )
        elif kind == "checkpoint.saved":
            package = {k: v for k, v in data.items() if k != "task"}
            package.update(
                time=event.time,
                actor=event.actor,
                machine=event.machine,
                session=event.session,
                clock=event.clock,
                seq=len(timeline.checkpoints) + 1,
            )
            timeline.checkpoints.append(package)
            confidence = data.get("confidence")
            title = f"checkpoint {package['seq']} ({data.get('reason')})"
            if data.get("summary"):
                title += f": {data['summary']}"
            details = _present(
                (
                    "confidence",
                    f"{confidence:.2f}" if isinstance(confidence, (int, float)) else None,
                ),
                ("next", "; ".join(data.get("next") or [])),
            )
            item = Item(
                **base,
                category="checkpoint",
                title=title,
                details=details,
                changes=_changes(previous, package),
                status=data.get("reason"),
            )
            previous = package
        elif kind == "memory.created":
            category = "decision" if data.get("kind") == "decision" else "memory"
            item = Item(
                **base,
                category=category,
                title=str(data.get("content", "")),
                details=_present(
                    ("kind", data.get("kind")),
                    ("tags", " ".join(f"#{t}" for t in data.get("tags") or [])),
                ),
                status=data.get("kind"),
            )
        elif kind.startswith("session."):
            session_id = str(data.get("session_id", ""))
            short = session_id[: ev.SHORT_ID_LEN]
            if kind == "session.started":
                starts.setdefault(session_id, event)
                title = f"session {short} started ({data.get('agent', '')})"
                state = "started"
            elif kind == "session.ended":
                ends.setdefault(session_id, (event, "ended", data.get("outcome") or ""))
                title = (
                    f"session {short} ended ({data.get('outcome') or 'no outcome'}, "
                    f"{data.get('how') or 'exit'})"
                )
                state = "ended"
            elif kind == "session.interrupted":
                ends.setdefault(session_id, (event, "interrupted", data.get("reason") or ""))
                title = f"session {short} interrupted: {data.get('reason')}"
                state = "interrupted"
            elif kind == "session.reported":
                title = f"session {short} reports {data.get('reason')}"
                state = "reported"
            else:
                title, state = kind, None
            item = Item(
                **base,
                category="session",
                title=title,
                details=_present(("evidence", data.get("evidence")), ("note", data.get("note"))),
                status=state,
            )
        else:
            from .messages import describe

            item = Item(**base, category="task", title=describe(event))
        timeline.items.append(item)
    last = timeline.items[-1].time if timeline.items else None
    for session_id, start in starts.items():
        end = ends.get(session_id)
        timeline.spans.append(
            Span(
                id=session_id,
                agent=str(start.data.get("agent", "")),
                actor=start.actor,
                machine=start.machine,
                start=start.time,
                end=end[0].time if end else last,
                state=end[1] if end else "open",
                note=end[2] if end else "",
            )
        )
    return timeline


def _present(*pairs: tuple[str, Any]) -> tuple[str, ...]:
    return tuple(f"{name}: {_text(value)}" for name, value in pairs if value)


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


def _changes(
    before: dict[str, Any] | None,
    after: dict[str, Any],
) -> tuple[tuple[str, str, str], ...]:
    out = []
    for name, change in cp.changes(before, after).items():
        label = FIELD_LABELS.get(name, name)
        if name in cp.TEXT_FIELDS:
            out.append(
                (
                    label,
                    "~",
                    f'was "{ev.one_line(change["from"], 80)}", now '
                    f'"{ev.one_line(change["to"], 80)}"',
                )
            )
            continue
        out += [(label, "+", str(x)) for x in change.get("added", [])]
        out += [(label, "-", str(x)) for x in change.get("removed", [])]
        if change.get("reordered"):
            out.append((label, "~", "reordered"))
    return tuple(out)


# -- the terminal ----------------------------------------------------------------------------

MARKS = {
    "checkpoint": "◆",
    "failure": "✗",
    "progress": "•",
    "decision": "★",
    "memory": "·",
    "session": "▸",
    "task": "▪",
}


def render_text(timeline: Timeline, *, width: int = 100) -> str:
    task = timeline.task
    lines = [f"task {task['id'][:8]}  {task['name']}  [{task['status']}]"]
    if task.get("goal"):
        lines.append(f"goal: {ev.one_line(task['goal'], width - 6)}")
    lines.append("")
    who = None
    for item in timeline.items:
        here = (item.actor, item.machine, item.session)
        if here != who:
            session = f", session {item.session[:8]}" if item.session else ""
            lines.append(f"  — {item.who}{session}")
            who = here
        label = f"{MARKS.get(item.category, ' ')} {item.category:<10}"
        lines.append(
            f"{local_time(item.time)}  {label} {ev.one_line(item.title, max(20, width - 31))}"
        )
        indent = " " * 31
        for detail in item.details:
            if item.category == "checkpoint" and detail.startswith("next:"):
                continue  # the changes below say how the plan moved
            lines.append(indent + ev.one_line(detail, max(20, width - 31)))
        for name, change, text in item.changes:
            sign = {"+": "+", "-": "−", "~": "~"}[change]
            lines.append(
                indent + ev.one_line(f"{name.lower()}: {sign} {text}", max(20, width - 31))
            )
    if not timeline.items:
        lines.append("(nothing recorded yet)")
    return "\n".join(lines) + "\n"
