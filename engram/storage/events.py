"""Events: the only truth Engram keeps.

An event is an immutable JSON object on one line of a JSONL file, serialised canonically (sorted
keys, compact separators, UTF-8) so that the same event is always the same bytes. Readers dedupe
by `id` and order by `(order, id)`. `clock` is a hybrid logical clock in microseconds: close to
wall time, never going backwards on one writer, and moving past every event that writer has seen
(but never more than `clock.max_skew` ahead of this machine's time, so one line dated in the
future cannot drag it). An event about a record whose events run ahead of its clock says so in
`data.after`, and is ordered after them: its `order` is `max(clock, after + 1)`, a function of
its own bytes, the same on every clone.

Old schema versions are upgraded when read by the functions in `UPGRADES`, never rewritten.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from ..base.config import SETTINGS

SCHEMA_VERSION = 1

# Every kind this version writes. Readers keep events of kinds they do not know (a newer Engram
# may have written them) but ignore them when building state.
KINDS: dict[str, str] = {
    "store.created": "A store was initialised.",
    "memory.created": "A memory was stored (remember).",
    "memory.updated": "Fields of a memory changed; only the changed fields are in the payload.",
    "memory.forgotten": "A memory was retired, with the reason. Its history stays.",
    "memory.superseded": "A newer memory replaces this one (payload: memory, by).",
    "memory.reinforced": "A near-duplicate confirmed a memory instead of adding noise; it "
    "keeps the text that was submitted.",
}

# A session's comings and goings: kept in the events (they tell when and how work stopped) but
# never a reason to commit by themselves. They ride with the next commit of substantive events.
LIFECYCLE = frozenset(
    {"session.started", "session.reported", "session.ended", "session.interrupted"}
)


def substantive(kind: str) -> bool:
    """Whether an event of this kind is worth a commit (not only a session's start or end)."""
    return kind not in LIFECYCLE


# Ordered upgrades: UPGRADES[n] turns a schema-n event dict into a schema-(n+1) one.
UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # the base-32 digits of ULIDs and entity ids
EVENT_ID_RE = re.compile(r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$")
ENTITY_ID_RE = re.compile(r"^[0-9a-hjkmnp-tv-z]{12}$")
ENTITY_ID_LEN = 12
SHORT_ID_LEN = 8


# For tests only: seconds (negative, fractional) added to this machine's time wherever Engram
# reads it for events (their clocks, times and ids, and the time clocks are compared with), so
# that one process behaves as a machine whose clock is that far wrong. A value that is not a
# number, or more than a century, is ignored.
TEST_CLOCK_OFFSET = "ENGRAM_TEST_CLOCK_OFFSET"
_CENTURY_S = 100 * 365 * 86_400


def now_us() -> int:
    """This machine's time in microseconds (moved by `TEST_CLOCK_OFFSET` in tests)."""
    now = time.time_ns() // 1000
    text = os.environ.get(TEST_CLOCK_OFFSET)
    if not text:
        return now
    try:
        offset = float(text)
    except ValueError:
        return now
    return now + round(offset * 1e6) if abs(offset) <= _CENTURY_S else now


def new_event_id(now_ms: int | None = None) -> str:
    """A ULID: 48 bits of milliseconds then 80 random bits, in Crockford base32 (26 chars).

    Written here rather than imported: it is ten lines, and the ULID packages cost ~0.1 s of
    import time on every command.
    """
    ms = now_us() // 1000 if now_ms is None else now_ms
    value = (ms << 80) | int.from_bytes(os.urandom(10), "big")
    return "".join(CROCKFORD[(value >> (5 * i)) & 31] for i in range(25, -1, -1))


def new_entity_id() -> str:
    """A random id for a memory, task or other record: 60 bits, 12 lowercase base32 chars.

    Random rather than time-ordered so that a short prefix (like a git hash) tells records apart.
    """
    value = int.from_bytes(os.urandom(8), "big") >> 4
    return "".join(CROCKFORD[(value >> (5 * i)) & 31] for i in range(11, -1, -1)).lower()


# Clocks are microseconds (2^62 is the year 148,000): one above it would overflow SQLite's
# INTEGER after a few ticks, so a line that claims one is refused like any malformed line.
MAX_CLOCK = 2**62


# The largest count (a checkpoint's seq, a pid) a line may carry: every reader holds it exactly.
MAX_COUNT = 2**53

# Kinds are dotted lowercase words ("memory.created"); the actor, machine and session of an
# event are short labels without control characters (they reach terminals and file names).
KIND_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}(\.[a-z][a-z0-9_]{0,31}){1,3}$")
_LABEL_RE = re.compile(r"^[^\x00-\x1f\x7f-\x9f]*$")
LABEL_CHARS = 256

# How far ahead of this machine's time the clock of new events follows the clocks of events
# read from elsewhere (the `clock.max_skew` setting, in seconds; this is its default). A line
# further ahead (a wrong or hostile clock, "the year 2200") is read in its place but never drags
# the clocks written here: one line would otherwise drag every later event of every clone into
# its future, where a clone whose clock is a little slow would see them far ahead.
MAX_SKEW_US = SETTINGS["clock.max_skew"].default * 1_000_000

# What an import still takes for a time it can hold: a record dated more than a day ahead of
# this machine is damaged at its source, and is skipped (the timeline's axis ends there too).
CLOCK_AHEAD_US = 86_400 * 1_000_000


def clock_ahead(clock: int, now: int | None = None) -> float:
    """Days by which `clock` is ahead of this machine's time by more than CLOCK_AHEAD_US (0 if
    not)."""
    now = now_us() if now is None else now
    return (clock - now) / 86_400e6 if clock - now > CLOCK_AHEAD_US else 0.0


def next_clock(
    last: int, observed: int = 0, now: int | None = None, *, skew_us: int = MAX_SKEW_US
) -> int:
    """Hybrid logical clock tick: past wall time, past our last event, and past all we have seen
    that is not more than `skew_us` ahead of wall time (a clock further ahead is followed only
    that far)."""
    now = now_us() if now is None else now
    return max(now, last + 1, min(observed, now + skew_us) + 1)


def followed(clock: int, now: int | None = None, *, skew_us: int = MAX_SKEW_US) -> int:
    """How far this writer's clock follows an event from elsewhere with `clock`."""
    now = now_us() if now is None else now
    return min(clock, now + skew_us)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def utc_now() -> datetime:
    """This machine's time (moved by `TEST_CLOCK_OFFSET` in tests), as a UTC datetime."""
    return _EPOCH + timedelta(microseconds=now_us())


def format_time(moment: datetime) -> str:
    # Not strftime: its %Y drops the leading zeros of years before 1000 on some platforms.
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def machine_name() -> str:
    return os.environ.get("ENGRAM_MACHINE") or _host_name() or "unknown"


def _host_name() -> str:
    """The host's name, as `socket.gethostname()` gives it (without importing `socket`, a few
    milliseconds of every command, where `os.uname` exists)."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket

    return socket.gethostname()


def one_line(text: object, width: int = 60) -> str:
    """Text folded to one line and cut to `width` characters, for logs and messages."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


# How each import format is named when an event shows where it came from.
_SOURCES = {
    "engram": "an Engram export",
    "mcp-engram": "mcp-engram",
    "mcp-memory": "the MCP memory server",
    "engram-go": "the Go engram",
}


def written_by(actor: str, origin: Any) -> str:
    """Who wrote an event, as `resume`, `log` and a handoff's page show it: its actor, and for
    an imported event (`data.origin`) that it was imported, and from whom."""
    if not isinstance(origin, dict):
        return actor
    fmt = origin.get("format")
    source = _SOURCES.get(fmt, "another tool") if isinstance(fmt, str) else "another tool"
    author = origin.get("actor")
    if isinstance(author, str) and author:
        source = f"{one_line(author, 120)}, from {source}"
    return f"{actor} (imported from {source})"


def canonical_json(obj: Mapping[str, Any]) -> bytes:
    """The one serialisation of an object: sorted keys, no spaces, UTF-8, no trailing newline."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


def entity_of(data: Mapping[str, Any]) -> str | None:
    """The record an event with this payload is about (a memory id, a task id: a checkpoint
    belongs to its task, ...), if any."""
    for key in ("memory", "task", "checkpoint", "session_id"):
        value = data.get(key)
        if isinstance(value, str):
            return value
    return None


@dataclass(frozen=True, slots=True)
class Event:
    id: str
    kind: str
    clock: int
    time: str
    actor: str
    session: str | None
    machine: str | None
    data: dict[str, Any] = field(default_factory=dict)
    schema: int = SCHEMA_VERSION

    @property
    def order(self) -> int:
        """Where the event sorts among its record's events: its clock, or just after
        `data.after` when its writer had read events of the record ahead of its clock."""
        after = self.data.get("after")
        if isinstance(after, int) and not isinstance(after, bool) and after >= self.clock:
            return after + 1
        return self.clock

    @property
    def sort_key(self) -> tuple[int, str]:
        return (self.order, self.id)

    @property
    def entity(self) -> str | None:
        """The record this event is about (a memory id, a task id, ...), if any."""
        return entity_of(self.data)

    def to_dict(self) -> dict[str, Any]:
        return {
            "actor": self.actor,
            "clock": self.clock,
            "data": self.data,
            "id": self.id,
            "kind": self.kind,
            "machine": self.machine,
            "schema": self.schema,
            "session": self.session,
            "time": self.time,
        }

    def to_line(self) -> bytes:
        return canonical_json(self.to_dict()) + b"\n"


class EventFormatError(ValueError):
    """A line that is not a valid event. The message says what is wrong, never the whole line."""


_FIELDS: dict[str, tuple[type, ...]] = {
    "id": (str,),
    "schema": (int,),
    "kind": (str,),
    "clock": (int,),
    "time": (str,),
    "actor": (str,),
    "session": (str, type(None)),
    "machine": (str, type(None)),
    "data": (dict,),
}


# Ids of records (memories, tasks, checkpoints, sessions) end up in file names: they are short
# and hold nothing that could leave a directory.
RECORD_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _is_texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_count(value: Any) -> bool:
    """A whole number SQLite and every reader can hold (a pid, a checkpoint's seq)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_COUNT


def _is_clock(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_CLOCK


def _is_id(value: Any) -> bool:
    return isinstance(value, str) and RECORD_ID_RE.match(value) is not None


def _is_memory_id(value: Any) -> bool:
    """A memory's id is exactly what `new_entity_id` makes: the search indexes key vectors by
    its 60 bits, so another shape ("Hello-World.1", a leading "0") could not be indexed or
    would collide with another memory."""
    return isinstance(value, str) and ENTITY_ID_RE.match(value) is not None


def _is_memory_ids(value: Any) -> bool:
    return isinstance(value, list) and all(_is_memory_id(item) for item in value)


def _is_ids(value: Any) -> bool:
    return isinstance(value, list) and all(_is_id(item) for item in value)


def is_moment(value: Any) -> bool:
    """An RFC 3339 time with its offset, as events carry them."""
    if not isinstance(value, str):
        return False
    try:
        moment = parse_time(value)
        moment.astimezone(UTC)
    except (ValueError, OverflowError):
        return False
    return moment.tzinfo is not None


def _is_working_set(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    files = value.get("files", [])
    return (
        isinstance(files, list)
        and all(
            isinstance(item, dict)
            and isinstance(item.get("path"), str)
            and isinstance(item.get("commit"), (str, type(None)))
            for item in files
        )
        and all(_is_texts(value.get(key, [])) for key in ("commands", "artifacts"))
    )


def _maybe(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or check(value)


def _is_commit(value: Any) -> bool:
    return (
        isinstance(value, str) and re.fullmatch(r"[0-9a-f]{40}([0-9a-f]{24})?", value) is not None
    )


_MEMORY = {
    "content": _is_text,
    "kind": _is_text,
    "tags": _is_texts,
    "scope": _maybe(_is_text),
    "source": _is_text,
    "importance": _is_number,
    "valid_from": _maybe(is_moment),
    "valid_until": _maybe(is_moment),
    "at": _maybe(is_moment),
    "task": _maybe(_is_id),
}
_PROJECT = {
    "project": _maybe(
        lambda v: isinstance(v, str) and re.fullmatch(r"[0-9a-f]{40}([0-9a-f]{24})?", v) is not None
    ),
    "project_remote": _maybe(_is_text),
}
_TASK = {
    "name": _is_text,
    "goal": _is_text,
    "status": _is_text,
    "parent": _maybe(_is_id),
    "tags": _is_texts,
}
_LISTS = (
    "completed",
    "in_progress",
    "blocked",
    "next",
    "must_not_redo",
    "must_preserve",
    "open_questions",
)
# What the readers of each kind rely on in its payload: (required fields, optional fields),
# each with its check. Other fields are kept (a newer Engram may add some) but not read.
PAYLOADS: dict[str, tuple[dict[str, Callable[[Any], bool]], dict[str, Callable[[Any], bool]]]] = {
    "store.created": ({}, {"store": _is_text}),
    "memory.created": (
        {"memory": _is_memory_id},
        {**_MEMORY, **_PROJECT, "supersedes": _is_memory_ids},
    ),
    "memory.updated": ({"memory": _is_memory_id}, _MEMORY),
    "memory.forgotten": ({"memory": _is_memory_id}, {"reason": _maybe(_is_text)}),
    "memory.superseded": ({"memory": _is_memory_id}, {"by": _maybe(_is_memory_id)}),
    # `content`: the text that was submitted and folded into the memory (events written before
    # it was kept have none).
    "memory.reinforced": (
        {"memory": _is_memory_id},
        {"similarity": _is_number, "content": _MEMORY["content"]},
    ),
    "task.created": ({"task": _is_id}, _TASK),
    "task.updated": ({"task": _is_id}, _TASK),
    "task.progress": (
        {"task": _is_id},
        {
            "feature": _is_text,
            "status": _is_text,
            "note": _maybe(_is_text),
            "component": _maybe(_is_text),
            "files": _is_texts,
        },
    ),
    "task.failure": (
        {"task": _is_id},
        {
            "error": _is_text,
            "component": _maybe(_is_text),
            "root_cause": _maybe(_is_text),
            "fix": _maybe(_is_text),
            "candidate": _maybe(_is_text),
        },
    ),
    "checkpoint.saved": (
        {"task": _is_id, "checkpoint": _is_id, "seq": _is_count},
        {
            "reason": _is_text,
            "summary": _maybe(_is_text),
            "goal": _maybe(_is_text),
            **{name: _is_texts for name in _LISTS},
            "working_set": _is_working_set,
            "confidence": _is_number,
            "head": _maybe(_is_commit),
        },
    ),
    "session.started": (
        {"session_id": _is_id},
        {"agent": _is_text, "pid": _maybe(_is_count), "head": _maybe(_is_text)},
    ),
    "session.reported": (
        {"session_id": _is_id},
        {"reason": _maybe(_is_text), "note": _maybe(_is_text)},
    ),
    "session.ended": (
        {"session_id": _is_id},
        {"outcome": _maybe(_is_text), "how": _maybe(_is_text)},
    ),
    "session.interrupted": (
        {"session_id": _is_id},
        {"reason": _maybe(_is_text), "evidence": _maybe(_is_text), "detected_by": _maybe(_is_text)},
    ),
}


def check_payload(kind: str, data: dict[str, Any]) -> None:
    """Refuse a payload of a known kind that its readers could not fold."""
    if "after" in data and not _is_clock(data["after"]):
        raise EventFormatError(
            f"{kind} event with a malformed 'after' (a clock: a whole "
            f"number from 0 to {MAX_CLOCK - 1})"
        )
    required, optional = PAYLOADS.get(kind, ({}, {}))
    for name, check in required.items():
        if name not in data:
            raise EventFormatError(f"{kind} event without its {name!r}")
        if not check(data[name]):
            raise EventFormatError(f"{kind} event with a malformed {name!r}")
    for name, check in optional.items():
        if name in data and not check(data[name]):
            raise EventFormatError(f"{kind} event with a malformed {name!r}")


def label_problem(actor: str, session: str | None, machine: str | None) -> tuple[str, str] | None:
    """Why readers skip a line for the labels of its event (who wrote it, in which session, on
    which machine), as (field, why); None when they do not. They come from the environment, so
    the write path asks this too before it appends (`lines.check_writable`)."""
    for name, value in (("machine", machine), ("actor", actor)):
        if value is not None and (len(value) > LABEL_CHARS or not _LABEL_RE.match(value)):
            return (
                name,
                f"{name} is longer than {LABEL_CHARS} characters or holds control characters",
            )
    if session is not None and not RECORD_ID_RE.match(session):
        return "session", "session is not a session id"
    return None


def upgrade(raw: dict[str, Any]) -> dict[str, Any]:
    """Bring an event dict written by any earlier schema up to SCHEMA_VERSION."""
    version = raw.get("schema")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise EventFormatError(
            f"schema version {one_line(repr(version), 40)} is not a positive integer"
        )
    if version > SCHEMA_VERSION:
        raise EventFormatError(
            f"schema version {one_line(str(version), 24)} is newer than this Engram understands "
            f"({SCHEMA_VERSION}); upgrade engram"
        )
    while version < SCHEMA_VERSION:
        raw = UPGRADES[version](dict(raw))
        version += 1
        raw["schema"] = version
    return raw


def event_from_dict(raw: Any) -> Event:
    if not isinstance(raw, dict):
        raise EventFormatError("line is JSON but not an object")
    raw = upgrade(raw)
    for name, types in _FIELDS.items():
        if name not in raw:
            raise EventFormatError(f"field {name!r} is missing")
        value = raw[name]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise EventFormatError(f"field {name!r} has the wrong type")
    extra = set(raw) - set(_FIELDS)
    if extra:
        names = ", ".join(one_line(repr(name), 40) for name in sorted(extra)[:5])
        raise EventFormatError(f"unknown field(s) {names}" + (" ..." if len(extra) > 5 else ""))
    if not KIND_RE.match(raw["kind"]):
        raise EventFormatError(f"kind {raw['kind'][:40]!r} is not a dotted lowercase name")
    problem = label_problem(raw["actor"], raw["session"], raw["machine"])
    if problem is not None:
        raise EventFormatError(problem[1])
    if not EVENT_ID_RE.match(raw["id"]):
        raise EventFormatError(f"id {raw['id'][:40]!r} is not a ULID")
    if raw["clock"] < 0:
        raise EventFormatError("clock is negative")
    if raw["clock"] >= MAX_CLOCK:
        raise EventFormatError(f"clock {raw['clock']} is out of range (at most {MAX_CLOCK - 1})")
    if not is_moment(raw["time"]):
        raise EventFormatError("time is not an RFC 3339 time with its offset")
    check_payload(raw["kind"], raw["data"])
    return Event(
        id=raw["id"],
        kind=raw["kind"],
        clock=raw["clock"],
        time=raw["time"],
        actor=raw["actor"],
        session=raw["session"],
        machine=raw["machine"],
        data=raw["data"],
        schema=raw["schema"],
    )


def parse_line(line: bytes) -> Event:
    """Parse one line (without its newline) into an Event, upgrading old schemas."""
    try:
        raw = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise EventFormatError(f"invalid JSON ({exc.msg})") from None
    return event_from_dict(raw)


def is_canonical(line: bytes) -> bool:
    try:
        return canonical_json(orjson.loads(line)) == line
    except orjson.JSONDecodeError:
        return False


CONFLICT_MARKERS = (b"<<<<<<< ", b"=======", b">>>>>>> ", b"||||||| ")


def is_conflict_marker(line: bytes) -> bool:
    return line.startswith(CONFLICT_MARKERS) and not line.startswith(b"{")
