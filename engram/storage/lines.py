"""What a line of an event file is: the one classifier every reader of event files shares.

Event files arrive by git from every clone that can push, so each line is input. `classify`
decides what it is: an event to read, or a line to skip with the reason (a blank line, a git
conflict marker, a line too long to be an event, invalid UTF-8 or JSON, a field a later step
could not hold). The store's read path, `engram verify`, `engram doctor` and the git pre-commit
hook all call it, so they never disagree about a line.

A clock far ahead of this machine's time is no reason to skip a line: the line is read in its
place (see `events.Event.order`), and only the clocks written here refuse to follow it (see
`events.next_clock`). Setting it aside made whether a line was read depend on each reader's
wall clock: a teammate's clock a few minutes slow set aside lines that others read.

The write path asks the same of what it appends (`check_writable`): an event whose session,
actor or machine would make readers skip its line is refused before it is written, rather than
reported as saved and then skipped.

An event that is read may still carry a `note` for the strict readers (`verify`, `doctor`): a
line git converted to CRLF, a form that is not canonical, a kind this version does not know.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..base.errors import UsageError, quote
from . import events as ev

# No event Engram writes comes near this (the largest is a handoff with every list full, about
# 6 MB at the default limits); a longer line is refused before it is parsed.
MAX_LINE_BYTES = 16 * 1024 * 1024

CONFLICT = "git conflict marker (the file was changed on both sides of a merge)"
CRLF = (
    "line ends with CR LF: git converted its line ending (a .gitattributes sets eol=crlf "
    "for it); the store's .gitattributes must say `*.jsonl text eol=lf merge=union`"
)


@dataclass(frozen=True, slots=True)
class Line:
    """One complete line of an event file (without its newline) and what it is."""

    number: int
    raw: bytes
    event: ev.Event | None = None
    problem: str | None = None  # why readers skip it; None when it is read
    note: str | None = None  # read, but not as Engram writes it (strict readers report it)


def classify(raw: bytes, number: int = 0, *, strict: bool = False) -> Line:
    """What `raw` (one line without its newline) is. `strict` also checks canonical form, which
    costs a second serialisation and is left to `verify` and `doctor`."""
    if not raw.strip():
        return Line(number, raw, problem="blank line")
    if ev.is_conflict_marker(raw):
        return Line(number, raw, problem=CONFLICT)
    if len(raw) > MAX_LINE_BYTES:
        return Line(
            number,
            raw,
            problem=f"line of {len(raw):,} bytes is longer than any "
            f"event ({MAX_LINE_BYTES:,} bytes at most)",
        )
    body, note = raw, None
    if raw.endswith(b"\r"):
        body, note = raw[:-1], CRLF
    try:
        event = ev.parse_line(body)
    except ev.EventFormatError as exc:
        return Line(number, raw, problem=_why(body, str(exc)))
    if note is None and event.kind not in ev.PAYLOADS:
        note = f"kind {event.kind!r} is unknown to this version (kept, not read); upgrade engram"
    if note is None and strict and event.schema == ev.SCHEMA_VERSION and not ev.is_canonical(body):
        note = "not in canonical form (sorted keys, no spaces)"
    return Line(number, raw, event=event, note=note)


# How to mend each label of an event that would make readers skip its line (`check_writable`).
_MEND = {
    "session": "unset ENGRAM_SESSION or set it to an id `engram session start` printed",
    "actor": "set ENGRAM_ACTOR (or the actor setting, or git's user.name) to a short name "
    "without control characters",
    "machine": "set ENGRAM_MACHINE to a short name without control characters",
}


def check_writable(batch: Sequence[ev.Event]) -> None:
    """Refuse, before a byte is written, events whose lines every reader would skip for their
    labels, which come from the environment (`ENGRAM_SESSION`, the actor, the machine's name):
    a write reported as saved must be one its readers read. Checked as `classify` checks them,
    without serialising the line again; the rest of an event its writer makes itself."""
    for event in batch:
        problem = ev.label_problem(event.actor, event.session, event.machine)
        if problem is not None:
            name, why = problem
            raise UsageError(
                f"nothing written: the event's {why} ({quote(getattr(event, name))}); "
                + _MEND[name]
            )


def _why(body: bytes, text: str) -> str:
    if text.startswith("invalid JSON"):
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"invalid UTF-8 at byte {exc.start + 1}"
        if body.startswith(b"{") and body.count(b'{"actor":') > 1:
            return f"{text}: two lines run together (a line was cut short in the middle)"
    return text


def split(data: bytes) -> tuple[list[bytes], bytes]:
    """The complete lines of `data` (without newlines) and its unterminated tail (b"" if none)."""
    lines = data.split(b"\n")
    torn = lines.pop()
    return lines, torn


def read(data: bytes, first_line: int = 1, *, strict: bool = False) -> tuple[list[Line], bytes]:
    """Every complete line of `data`, classified, numbered from `first_line`, and the torn tail."""
    lines, torn = split(data)
    return [
        classify(raw, number, strict=strict) for number, raw in enumerate(lines, start=first_line)
    ], torn
