"""Memories: what an agent learned, as events folded into current state.

`memory.created` carries every field; `memory.updated` carries only the fields that changed;
`memory.forgotten` retires a memory with a reason. Folding a memory's events in `(clock, id)`
order gives the same state on every clone. A forget is final for folding: an update that was
written concurrently (without seeing the forget) does not bring the memory back.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, NamedTuple

from ..base.errors import Fix, UsageError, parameter, quote

# Re-exported (`as`): the names belong to memories.
from ..base.kinds import DEFAULT_IMPORTANCE as DEFAULT_IMPORTANCE
from ..base.kinds import DEFAULT_KIND as DEFAULT_KIND
from ..base.kinds import DEFAULT_SOURCE as DEFAULT_SOURCE
from ..base.kinds import MEMORY_KINDS as MEMORY_KINDS
from ..base.kinds import SOURCES as SOURCES
from ..base.validation import well_formed
from ..base.vocab import MEMORY_KIND, SOURCE
from ..storage import events as ev
from .freshness import clean as clean_citations

Status = Literal["active", "forgotten", "superseded"]

_UPDATABLE = (
    "content",
    "kind",
    "tags",
    "scope",
    "source",
    "importance",
    "valid_from",
    "valid_until",
    "at",
    "task",
    "citations",
)


@dataclass(frozen=True)
class Memory:
    id: str
    content: str
    kind: str
    tags: tuple[str, ...]
    scope: str | None
    source: str
    importance: float
    valid_from: str | None
    valid_until: str | None
    status: Status
    created_at: str
    updated_at: str
    created_clock: int
    updated_clock: int
    created_by: str
    version: int
    forgotten_reason: str | None = None
    at: str | None = None  # when what it says happened or was said, if not when it was written
    task: str | None = None  # the task it belongs to, if any
    supersedes: tuple[str, ...] = ()
    superseded_by: str | None = None
    reinforced: int = 0  # times a near-duplicate confirmed it
    reinforced_at: str | None = None
    store: str | None = None  # which store it was read from, set by the reader
    # The project a personal memory was written in: its repository's root commit, and remote
    # URL as a hint (engram.git.identity). Neither: it belongs everywhere.
    project: str | None = None
    project_remote: str | None = None
    # The tracked files it names, pinned to a commit and blob id (`engram.model.freshness`).
    citations: tuple[dict[str, Any], ...] = ()
    events: tuple[str, ...] = field(default=(), repr=False)  # ids of the events folded

    def to_dict(self) -> dict[str, Any]:
        # Flat fields only, so no deep copy (dataclasses.asdict costs ~10x more here).
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["tags"] = list(self.tags)
        data["events"] = list(self.events)
        data["supersedes"] = list(self.supersedes)
        data["citations"] = list(self.citations)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Memory:
        values = dict(data)
        values["tags"] = tuple(values.get("tags") or ())
        values["events"] = tuple(values.get("events") or ())
        values["supersedes"] = tuple(values.get("supersedes") or ())
        values["citations"] = clean_citations(values.get("citations"))
        return cls(**{k: v for k, v in values.items() if k in cls.__dataclass_fields__})

    def valid_at(self, moment: datetime) -> bool:
        return valid_at(self.valid_from, self.valid_until, moment)

    @property
    def moment(self) -> str:
        """The time that ages this memory: when it was last confirmed, said, or written."""
        return self.reinforced_at or self.at or self.updated_at

    def summary(self, width: int = 72) -> str:
        return ev.one_line(self.content, width)


def valid_at(valid_from: str | None, valid_until: str | None, moment: datetime) -> bool:
    if valid_from and ev.parse_time(valid_from) > moment:
        return False
    if valid_until and ev.parse_time(valid_until) <= moment:
        return False
    return True


class Head(NamedTuple):
    """What ranking and filtering need of a memory, read without its body (a named tuple:
    recall builds one per candidate, several hundred a query)."""

    id: str
    status: str
    kind: str
    scope: str | None
    task: str | None
    moment: str
    valid_from: str | None
    valid_until: str | None
    importance: float
    reinforced: int
    updated_clock: int
    tags: frozenset[str] = frozenset()
    # Where it is seen (a memory of the personal store may belong to one project).
    project: str | None = None
    project_remote: str | None = None

    def valid_at(self, moment: datetime) -> bool:
        return valid_at(self.valid_from, self.valid_until, moment)


# -- validation at the edge --------------------------------------------------------------------


def check_kind(kind: str) -> str:
    return MEMORY_KIND.one_of(kind)


def check_source(source: str) -> str:
    SOURCE.one_of(source)
    return source


def check_importance(value: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"importance must be a number from 0 to 1, not {quote(value)}") from None
    if not 0.0 <= number <= 1.0 or math.isnan(number):
        raise UsageError(f"importance must be from 0 to 1, not {value}")
    return round(number, 4)


_RELATIVE_RE = re.compile(r"^(\d+)\s*(s|m|h|d|w)$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_moment(
    text: str, *, what: str, now: datetime | None = None, future: bool = False
) -> datetime:
    """An ISO date or date-time (UTC unless it says otherwise), an age like 3d, 12h, 2w, or
    `today`, `yesterday` or `tomorrow`: the start of that day in this machine's time zone."""
    text = well_formed(text, what).strip()
    match = _RELATIVE_RE.match(text)
    days = {"today": 0, "yesterday": -1, "tomorrow": 1}.get(text.casefold())
    if days is not None:
        local = (now or ev.utc_now()).astimezone()
        start = local.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=days)
        return start.astimezone(UTC)
    try:
        if match:
            delta = timedelta(**{_UNITS[match[2]]: int(match[1])})
            base = now or ev.utc_now()
            return base + delta if future else base - delta
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        moment.astimezone(UTC)  # every moment is stored in UTC: it must have one
    except ValueError:
        how = (
            "use an ISO date like 2026-12-01, a date-time like 2026-12-01T09:30, an age "
            "like 3d or 12h, or today or yesterday"
        )
        raise UsageError(
            f"{what} {quote(text)} is not a date",
            Fix(how, how),
            mcp_problem=f"{parameter(what)} {quote(text)} is not a date",
        ) from None
    except OverflowError:
        how = "give a date between the years 1 and 9999"
        raise UsageError(
            f"{what} {quote(text)} is out of range",
            Fix(how, how),
            mcp_problem=f"{parameter(what)} {quote(text)} is out of range",
        ) from None
    return moment


def check_window(valid_from: str | None, valid_until: str | None) -> None:
    if valid_from and valid_until and ev.parse_time(valid_until) <= ev.parse_time(valid_from):
        raise UsageError(
            "--valid-until must be later than --valid-from",
            mcp_problem="valid_until must be later than valid_from",
        )


# -- folding ------------------------------------------------------------------------------------


def fold(events: Sequence[ev.Event]) -> Memory | None:
    """The state of one memory after its events, given in (clock, id) order."""
    memory: Memory | None = None
    for event in events:
        data = event.data
        if event.kind == "memory.created":
            if memory is not None:
                continue
            memory = Memory(
                id=data["memory"],
                content=data.get("content", ""),
                kind=data.get("kind", DEFAULT_KIND),
                tags=tuple(data.get("tags") or ()),
                scope=data.get("scope"),
                source=data.get("source", DEFAULT_SOURCE),
                importance=float(data.get("importance", DEFAULT_IMPORTANCE)),
                valid_from=data.get("valid_from"),
                valid_until=data.get("valid_until"),
                status="active",
                created_at=event.time,
                updated_at=event.time,
                created_clock=event.clock,
                updated_clock=event.clock,
                created_by=event.actor,
                version=1,
                events=(event.id,),
                at=data.get("at"),
                task=data.get("task"),
                supersedes=tuple(data.get("supersedes") or ()),
                project=data.get("project"),
                project_remote=data.get("project_remote"),
                citations=clean_citations(data.get("citations")),
            )
        elif memory is None:
            continue  # an update whose creation has not arrived (yet): nothing to apply it to
        elif event.kind == "memory.updated":
            changes: dict[str, Any] = {k: data[k] for k in _UPDATABLE if k in data}
            if "tags" in changes:
                changes["tags"] = tuple(changes["tags"] or ())
            if "importance" in changes:
                changes["importance"] = float(changes["importance"])
            if "citations" in changes:
                changes["citations"] = clean_citations(changes["citations"])
            memory = replace(
                memory,
                **changes,
                updated_at=event.time,
                updated_clock=event.clock,
                version=memory.version + 1,
                events=(*memory.events, event.id),
            )
        elif event.kind == "memory.forgotten":
            memory = replace(
                memory,
                status="forgotten",
                forgotten_reason=data.get("reason"),
                updated_at=event.time,
                updated_clock=event.clock,
                events=(*memory.events, event.id),
            )
        elif event.kind == "memory.superseded":
            memory = replace(
                memory,
                status="forgotten" if memory.status == "forgotten" else "superseded",
                superseded_by=data.get("by"),
                updated_at=event.time,
                updated_clock=event.clock,
                events=(*memory.events, event.id),
            )
        elif event.kind == "memory.reinforced":
            # Confirmation ages a memory from now on; it is not a change of its content.
            memory = replace(
                memory,
                reinforced=memory.reinforced + 1,
                reinforced_at=event.time,
                events=(*memory.events, event.id),
            )
    return memory


def history(events: Sequence[ev.Event]) -> list[tuple[ev.Event, Memory]]:
    """Every version of a memory: each event with the state right after it."""
    out: list[tuple[ev.Event, Memory]] = []
    for index, event in enumerate(events):
        state = fold(events[: index + 1])
        if state is not None and (not out or out[-1][1] != state):
            out.append((event, state))
    return out


def describe(event: ev.Event) -> str:
    """One line for `engram log` and commit messages."""
    data = event.data
    short = str(data.get("memory", ""))[: ev.SHORT_ID_LEN]
    if event.kind == "memory.created":
        kind = data.get("kind", DEFAULT_KIND)
        return f"remember {short} [{kind}] {ev.one_line(data.get('content', ''))}"
    if event.kind == "memory.updated":
        fields = ", ".join(k for k in _UPDATABLE if k in data)
        text = f": {ev.one_line(data['content'])}" if "content" in data else ""
        return f"update {short} ({fields}){text}"
    if event.kind == "memory.forgotten":
        return f"forget {short}: {ev.one_line(data.get('reason') or '')}"
    if event.kind == "memory.superseded":
        return f"supersede {short} by {str(data.get('by', ''))[: ev.SHORT_ID_LEN]}"
    if event.kind == "memory.reinforced":
        text = f": {ev.one_line(data['content'])}" if "content" in data else ""
        return f"reinforce {short}{text}"
    return ""
