"""Sessions: one agent process's stay, its heartbeat, and how an interruption is recognised.

Events (entity: the session id):
- `session.started`  {session_id, agent, pid, head}
- `session.reported` {session_id, reason, note}      the agent says why it is about to stop
- `session.ended`    {session_id, outcome, how}       normal exit or SIGTERM
- `session.interrupted` {session_id, reason, evidence} written by whoever finds it stale

The heartbeat is local and never committed: `<git-dir>/engram/sessions/<id>.json` holds the pid
and the last beat. A session that is still open is stale when its process is gone from this
machine, or when its heartbeat is older than `session.stale_minutes` (for sessions of other
machines, or processes that hang).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import orjson

from ..base import layout
from ..base.files import atomic_write
from ..base.validation import session_id as check_session_id
from ..base.vocab import AGENT, INTERRUPTION, OUTCOME
from ..git.recovery import process_alive
from ..storage import events as ev

REASONS = INTERRUPTION.names
OUTCOMES = OUTCOME.names
AGENTS = AGENT.names

_RATE_LIMIT = re.compile(r"\b(429|rate.?limit|too many requests|quota|overloaded)\b", re.I)
_OVERFLOW = re.compile(
    r"\b(context (window )?(full|exceeded|overflow)|token limit|"
    r"maximum context|compact)",
    re.I,
)


@dataclass(frozen=True)
class Session:
    id: str
    agent: str
    actor: str
    machine: str | None
    pid: int | None
    head: str | None
    started_at: str
    started_clock: int
    state: str = "open"  # open | ended | interrupted
    ended_at: str | None = None
    outcome: str | None = None
    how: str | None = None  # exit | sigterm (ended) ; detector (interrupted)
    reason: str | None = None  # interruption reason
    reported: str | None = None  # reason the agent reported before stopping
    evidence: str | None = None
    store: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Session:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def fold(events: Sequence[ev.Event]) -> Session | None:
    session: Session | None = None
    for event in events:
        data = event.data
        if event.kind == "session.started":
            if session is None:
                session = Session(
                    id=data["session_id"],
                    agent=data.get("agent", "other"),
                    actor=event.actor,
                    machine=event.machine,
                    pid=data.get("pid"),
                    head=data.get("head"),
                    started_at=event.time,
                    started_clock=event.clock,
                )
            continue
        if session is None:
            continue
        if event.kind == "session.reported":
            session = replace(
                session, reported=data.get("reason"), evidence=data.get("note") or session.evidence
            )
        elif event.kind == "session.ended" and session.state == "open":
            session = replace(
                session,
                state="ended",
                ended_at=event.time,
                outcome=data.get("outcome"),
                how=data.get("how"),
            )
        elif event.kind == "session.interrupted" and session.state == "open":
            session = replace(
                session,
                state="interrupted",
                ended_at=event.time,
                reason=data.get("reason"),
                evidence=data.get("evidence"),
                how=data.get("detected_by"),
            )
    return session


# -- the local heartbeat --------------------------------------------------------------------


def beat_path(local_dir: Path, session_id: str) -> Path:
    return layout.session_file(local_dir, check_session_id(session_id))


def write_beat(
    local_dir: Path,
    session_id: str,
    *,
    pid: int,
    context: float | None = None,
) -> None:
    path = beat_path(local_dir, session_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    previous = read_beat(local_dir, session_id) or {}
    beat = {"pid": pid, "beat": time.time(), "started": previous.get("started", time.time())}
    if context is not None:
        beat["context"] = context
    elif "context" in previous:
        beat["context"] = previous["context"]
    atomic_write(path, orjson.dumps(beat), durable=False)


def read_beat(local_dir: Path, session_id: str) -> dict[str, Any] | None:
    try:
        beat = orjson.loads(beat_path(local_dir, session_id).read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return None
    return beat if isinstance(beat, dict) else None  # a beat file is a JSON object or nothing


def drop_beat(local_dir: Path, session_id: str) -> None:
    beat_path(local_dir, session_id).unlink(missing_ok=True)


def staleness(
    session: Session,
    beat: Mapping[str, Any] | None,
    *,
    machine: str,
    window_seconds: float,
    now: float | None = None,
) -> str | None:
    """Why an open session is stale, or None if it is alive."""
    now = time.time() if now is None else now
    if session.machine == machine and beat is not None and not process_alive(beat.get("pid")):
        return "process gone"
    last = beat.get("beat") if beat else None
    if last is None:
        started = ev.parse_time(session.started_at).timestamp()
        last = started
        if session.machine == machine and session.pid and not process_alive(session.pid):
            return "process gone"
    if now - last > window_seconds:
        return f"no heartbeat for {int(now - last)}s"
    return None


def classify(
    session: Session, beat: Mapping[str, Any] | None, stale_because: str, recent: Sequence[ev.Event]
) -> tuple[str, str]:
    """(reason, evidence) for an interruption, by heuristics unless the agent said why."""
    if session.reported in REASONS:
        return session.reported, "reported by the agent before it stopped"
    context = (beat or {}).get("context")
    if isinstance(context, (int, float)) and context >= 0.9:
        return "overflow", f"context {context:.0%} full at the last heartbeat"
    for event in reversed(list(recent)[-10:]):
        text = " ".join(str(v) for v in event.data.values())
        if _RATE_LIMIT.search(text):
            return "rate_limit", f"rate limit mentioned in {event.kind} {event.id[-8:]}"
        if _OVERFLOW.search(text):
            return "overflow", f"context overflow mentioned in {event.kind} {event.id[-8:]}"
    acts = [e for e in recent if not _automatic(e)]
    if acts and acts[-1].kind == "task.failure":
        return "tool_failure", f"the last event was a failure ({acts[-1].id[-8:]})"
    if stale_because == "process gone":
        return "crash", "the process ended without closing its session"
    if stale_because.startswith("no heartbeat"):
        return "user_away", f"{stale_because} while the process may still exist"
    return "unknown", stale_because


def _automatic(event: ev.Event) -> bool:
    """A checkpoint Engram saved by itself: it follows from what the agent did (a failure
    saves one at once) and is no act of the agent's, so it never hides the failure before it."""
    return event.kind == "checkpoint.saved" and event.data.get("reason") != "handoff"


def describe(event: ev.Event) -> str:
    data = event.data
    short = str(data.get("session_id", ""))[: ev.SHORT_ID_LEN]
    if event.kind == "session.started":
        return f"session {short} started ({data.get('agent', '')})"
    if event.kind == "session.ended":
        return f"session {short} ended ({data.get('outcome') or 'no outcome'}, {data.get('how')})"
    if event.kind == "session.interrupted":
        return f"session {short} interrupted: {data.get('reason')} ({data.get('evidence')})"
    if event.kind == "session.reported":
        return f"session {short} reports {data.get('reason')}"
    return event.kind
