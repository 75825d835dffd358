"""Read Engram's own JSON Lines export back, as untrusted input.

An exported line is an event line as a store holds it, but the file may come from anyone, so
each event is checked as a write through the API is: its payload field by field (the limits,
names, paths and secret scanning of `engram.validation`; `--redact` replaces a secret in free
text), its session id, its author and machine (one short line each) and its clock (at most a
day ahead of this machine's; this clone's clock follows it at most `clock.max_skew` ahead, as it
follows any clock from elsewhere). An event that fails is skipped and reported with its line.
An event that would change a record the store holds is left to the import (`changes`).

Who wrote it: an event written by the importing actor that the checks leave as it was is
imported unchanged (same id, same bytes). Any other is written by the importing actor: the
exported event's id, author and machine (and any earlier `origin`) are kept only as provenance,
`data.origin = {"format": "engram", "id", "actor", "machine"}`, its id is derived from the
exported id and the importing actor, and its clock and time stay the source's. So an import
never writes an event in someone else's name, a second import adds nothing, and an import into
a store that holds the exported event, or the one it was rebuilt from, adds nothing either.
`store.created` events describe the exported store and are left out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...base.config import TEXT_SETTING_CHARS
from ...base.errors import UsageError, quote
from ...base.validation import COMMIT, check_relative, session_id, well_formed
from ...base.vocab import one_of_message
from ...model import freshness, sessions, tasks
from ...model import memories as mem
from ...storage import events as ev
from ..continuity import checkpoints as cp
from .plan import FORMATS, Checker, Input, Plan, Record, derived_event_id

FORMAT = "engram"
ORIGIN_FIELDS = ("format", "id", "seq", "actor", "machine", "origin")
ORIGIN_DEPTH = 4  # an origin may name the origin it was imported from, so far back

Check = Callable[[Any, str], Any]


def read(path: Path, check: Checker, source: Input, actor: str) -> Plan:
    if path.is_dir():
        raise UsageError(f"{path} is a directory; give the .jsonl file `engram export` wrote")
    plan = source.plan
    fields = _fields(check)
    seen: dict[str, bytes] = {}  # event id -> digest of its line
    now_us = ev.now_us()
    for number, line in source.lines(path):
        plan.read += 1
        if ev.is_conflict_marker(line):
            plan.skip(
                path, number, "git conflict marker: resolve the conflict (keep both sides' lines)"
            )
            continue
        try:
            event = ev.parse_line(line)
        except ev.EventFormatError as exc:
            plan.skip(path, number, f"not an Engram event: {exc}")
            continue
        digest = hashlib.sha256(event.to_line()).digest()
        if event.id in seen:
            if seen[event.id] != digest:
                plan.skip(
                    path,
                    number,
                    f"event id {event.id} appears earlier in the file with different content",
                )
            continue
        seen[event.id] = digest
        if event.kind == "store.created":
            plan.ignore("store.created (it describes the exported store)")
            continue
        try:
            record = _record(event, check, fields, actor, now_us)
        except UsageError as exc:
            plan.skip(path, number, str(exc))
            continue
        record.where = f"{path}:{number}"
        plan.records.append(record)
    return plan


def _record(
    event: ev.Event, check: Checker, fields: dict[str, dict[str, Check]], actor: str, now_us: int
) -> Record:
    data = _payload(event, check, fields)
    ahead = ev.clock_ahead(event.clock, now_us)
    if ahead:
        raise UsageError(f"its clock is {ahead:.1f} days ahead of this machine's time")
    if event.session is not None:
        check.scan(session_id(event.session, "session"), "session")
    author = check.once(("actor", event.actor), lambda: _line(event.actor, "actor", check))
    machine = (
        None
        if event.machine is None
        else check.once(("machine", event.machine), lambda: _line(event.machine, "machine", check))
    )
    sources = _sources(event.data.get("origin"))
    if author == actor and data == event.data:
        return Record(event.kind, event.data, "", event=event, sources=sources)
    origin: dict[str, Any] = {"format": FORMAT, "id": event.id, "actor": author}
    if machine:
        origin["machine"] = machine
    if "origin" in data:
        origin["origin"] = data["origin"]
    data = {**data, "origin": origin}
    rebuilt = ev.Event(
        id=derived_event_id(event.clock // 1000, FORMAT, event.id, actor),
        kind=event.kind,
        clock=event.clock,
        time=event.time,
        actor=actor,
        session=event.session,
        machine=None,
        data=data,
    )
    try:  # what readers will accept, checked now rather than found damaged later
        ev.check_payload(rebuilt.kind, rebuilt.data)
    except ev.EventFormatError as exc:
        raise UsageError(f"would become an unreadable event: {exc}") from None
    return Record(event.kind, data, "", event=rebuilt, sources=(event.id, *sources))


def _sources(origin: Any) -> tuple[str, ...]:
    """The ids of the exported events an event was rebuilt from, by earlier imports."""
    found: list[str] = []
    while isinstance(origin, dict) and len(found) < ORIGIN_DEPTH:
        if origin.get("format") == FORMAT and isinstance(origin.get("id"), str):
            found.append(origin["id"])
        origin = origin.get("origin")
    return tuple(found)


def _payload(
    event: ev.Event, check: Checker, fields: dict[str, dict[str, Check]]
) -> dict[str, Any]:
    """The payload as a write through the API would have stored it, or a `UsageError`."""
    known = fields.get(event.kind)
    if known is None:
        raise UsageError(
            f"event kind {quote(event.kind)} is not one this Engram writes; "
            "import it with a newer Engram"
        )
    unknown = sorted(set(event.data) - set(known))
    if unknown:
        raise UsageError(
            f"{event.kind} with unknown field(s) {', '.join(quote(k, 20) for k in unknown[:5])}"
        )
    for name in _REQUIRED.get(event.kind, ()):
        if name not in event.data:
            raise UsageError(f"{event.kind} without {name!r}")
    return {name: known[name](value, name) for name, value in event.data.items()}


# Besides the ids `events.PAYLOADS` requires: what a write through the API always gives.
_REQUIRED = {
    "memory.created": ("content",),
    "task.created": ("name",),
    "task.progress": ("feature",),
    "task.failure": ("error",),
}


def _fields(check: Checker) -> dict[str, dict[str, Check]]:
    """For each kind, the checks of its payload's fields (each returns the value to store)."""
    checks = check.checks

    def ident(value: Any, name: str) -> Any:  # an id the event parser has checked the shape of
        if isinstance(value, str):
            check.scan(value, name)
        return value

    def ids(value: Any, name: str) -> Any:
        most = checks.limit("limits.list_items")
        if len(value) > most:
            raise UsageError(
                f"{name} has {len(value)} ids, over the limit of {most} (setting limits.list_items)"
            )
        return value

    def text(limit: str = "limits.text_bytes", *, blank: bool = False) -> Check:
        def run(value: Any, name: str) -> Any:
            if blank and (value is None or (isinstance(value, str) and not value.strip())):
                return value
            return checks.text(value, field=name, limit=limit, redact=check.redact)

        return run

    def one_of(choices: tuple[str, ...] | dict[str, str], *, none: bool = False) -> Check:
        def run(value: Any, name: str) -> Any:
            if (value is None and none) or value in choices:
                return value
            raise UsageError(one_of_message(name, value, tuple(choices)))

        return run

    def share(value: Any, name: str) -> Any:
        if not 0 <= value <= 1:
            raise UsageError(f"{name} must be from 0 to 1, not {value}")
        return value

    def task_name(value: Any, name: str) -> str:
        value = checks.text(value, field=name, limit="limits.title_chars", one_line=True)
        return check_relative(value, "task name")

    def progress_files(value: Any, name: str) -> list[str]:
        return [f["path"] for f in check.files(list(value))]

    def working_set(value: Any, name: str) -> dict[str, Any]:
        unknown = sorted(set(value) - {"files", "commands", "artifacts"})
        if unknown:
            raise UsageError(
                f"working_set with unknown field(s) {', '.join(quote(k, 20) for k in unknown[:5])}"
            )
        out = dict(value)
        if "files" in value:
            out["files"] = _working_files(value["files"], check)
        for key in ("commands", "artifacts"):
            if key in value:
                out[key] = check.items(value[key], key)
        return out

    def seq(value: Any, name: str) -> int:
        if value < 0:
            raise UsageError(f"checkpoint seq {value} is negative")
        return int(value)

    def head(value: Any, name: str) -> Any:
        if value is not None and not (isinstance(value, str) and COMMIT.match(value)):
            raise UsageError(f"head {quote(value)} is not a git commit id")
        return value

    def origin(value: Any, name: str) -> dict[str, Any]:
        return _origin(value, check)

    def citations(value: Any, name: str) -> list[dict[str, Any]]:
        return _citations(value, check)

    def same(value: Any, name: str) -> Any:  # a time, a number: its type is checked on parse
        return value

    def name_(value: Any, name: str) -> str | None:
        return check.name(value, name)

    def items(value: Any, name: str) -> list[str]:
        return check.items(value, name)

    memory: dict[str, Check] = {
        "memory": ident,
        "content": text("limits.content_bytes"),
        "kind": lambda value, name: mem.check_kind(value),
        "tags": lambda value, name: check.tags(value),
        "scope": name_,
        "source": lambda value, name: mem.check_source(value),
        "importance": lambda value, name: mem.check_importance(value),
        "valid_from": same,
        "valid_until": same,
        "at": same,
        "task": ident,
        "citations": citations,
        "origin": origin,
    }
    task: dict[str, Check] = {
        "task": ident,
        "name": task_name,
        "goal": text(blank=True),
        "status": lambda value, name: tasks.check_status(value),
        "parent": ident,
        "tags": lambda value, name: check.tags(value),
        "origin": origin,
    }
    session: dict[str, Check] = {"session_id": ident, "origin": origin}
    kinds: dict[str, dict[str, Check]] = {
        "memory.created": {
            **memory,
            "supersedes": ids,
            "project": same,
            "project_remote": text("limits.item_bytes"),
        },
        "memory.updated": memory,
        "memory.forgotten": {
            "memory": ident,
            "reason": text("limits.item_bytes", blank=True),
            "origin": origin,
        },
        "memory.superseded": {"memory": ident, "by": ident, "origin": origin},
        "memory.reinforced": {
            "memory": ident,
            "similarity": share,
            "content": text("limits.content_bytes"),
            "origin": origin,
        },
        "task.created": task,
        "task.updated": task,
        "task.progress": {
            "task": ident,
            "feature": text("limits.item_bytes"),
            "status": lambda value, name: tasks.check_progress_status(value),
            "note": text(blank=True),
            "component": name_,
            "files": progress_files,
            "origin": origin,
        },
        "task.failure": {
            "task": ident,
            "error": text(),
            "component": name_,
            "root_cause": text(blank=True),
            "fix": text(blank=True),
            "candidate": text(blank=True),
            "origin": origin,
        },
        "checkpoint.saved": {
            "task": ident,
            "checkpoint": ident,
            "seq": seq,
            "reason": one_of(cp.REASONS),
            "goal": text(blank=True),
            "summary": text(blank=True),
            **{key: items for key in cp.LIST_FIELDS},
            "working_set": working_set,
            "confidence": share,
            "head": head,
            "origin": origin,
        },
        "session.started": {**session, "agent": one_of(sessions.AGENTS), "pid": same, "head": head},
        "session.reported": {
            **session,
            "reason": one_of(sessions.REASONS, none=True),
            "note": text("limits.item_bytes", blank=True),
        },
        "session.ended": {**session, "outcome": one_of(sessions.OUTCOMES, none=True), "how": name_},
        "session.interrupted": {
            **session,
            "reason": one_of(sessions.REASONS, none=True),
            "evidence": text(blank=True),
            "detected_by": name_,
        },
    }
    # `after` (a clock, checked when the line was parsed) keeps the event's place in its record.
    return {kind: {**known, "after": same} for kind, known in kinds.items()}


def _line(value: Any, what: str, check: Checker) -> str:
    """An author or a machine: one line of at most TEXT_SETTING_CHARS, without a secret."""
    line = well_formed(value, what).strip()
    if not line:
        raise UsageError(f"{what} is empty")
    if "\n" in line or "\t" in line:
        raise UsageError(f"{what} {quote(line)} must be one line")
    if len(line) > TEXT_SETTING_CHARS:
        raise UsageError(f"{what} {quote(line, 20)} is longer than {TEXT_SETTING_CHARS} characters")
    check.scan(line, what)
    return line


def _working_files(value: Any, check: Checker) -> list[dict[str, Any]]:
    """A checkpoint's working-set files as a handoff pins them: each path and commit checked as
    a write checks them, with the blob id it had and whether it was uncommitted or missing."""
    if not isinstance(value, list):
        raise UsageError("working-set files must be a list")
    out = check.files(value)
    pins = {item["path"]: item for item in value if isinstance(item, dict)}
    for item in out:
        pinned = pins.get(item["path"], {})
        blob = pinned.get("blob")
        if blob is not None:
            if not (isinstance(blob, str) and freshness.is_oid(blob)):
                raise UsageError(f"working-set file {quote(item['path'])}: blob is not a git id")
            item["blob"] = blob
        for flag in ("uncommitted", "missing"):
            if pinned.get(flag) is True:
                item[flag] = True
    return out


def _citations(value: Any, check: Checker) -> list[dict[str, Any]]:
    """The files a memory cites, each pinned to a commit and blob id, as `--cite` writes them."""
    if not isinstance(value, list):
        raise UsageError("citations must be a list")
    if len(value) > freshness.MAX_CITATIONS:
        raise UsageError(
            f"{len(value)} citations, over the limit of {freshness.MAX_CITATIONS} a memory has"
        )
    out = []
    for number, raw in enumerate(value, 1):
        cited = freshness.citation(raw)
        if cited is None:
            raise UsageError(
                f"citation {number} is not a tracked file pinned to a commit and blob id"
            )
        check.scan(cited.label, "citation")
        out.append(cited.to_dict())
    return out


def _origin(value: Any, check: Checker, depth: int = 1) -> dict[str, Any]:
    """Where an imported event came from: the format, the record's id there, and so on."""
    if not isinstance(value, dict):
        raise UsageError("origin must be an object")
    unknown = sorted(set(value) - set(ORIGIN_FIELDS))
    if unknown:
        raise UsageError(
            f"origin with unknown field(s) {', '.join(quote(k, 20) for k in unknown[:5])}"
        )
    if value.get("format") not in FORMATS:
        raise UsageError(one_of_message("origin format", value.get("format"), tuple(FORMATS)))
    out: dict[str, Any] = {"format": value["format"]}
    if "id" in value:
        out["id"] = check.text(value["id"], "origin id", "limits.item_bytes")
    if "seq" in value:
        seq = value["seq"]
        if seq is not None and (not isinstance(seq, int) or isinstance(seq, bool)):
            raise UsageError("origin seq must be a whole number")
        out["seq"] = seq
    for key in ("actor", "machine"):
        if key in value:
            out[key] = None if value[key] is None else _line(value[key], f"origin {key}", check)
    if "origin" in value:
        if depth >= ORIGIN_DEPTH:
            raise UsageError(f"origin nested more than {ORIGIN_DEPTH} deep")
        out["origin"] = _origin(value["origin"], check, depth + 1)
    return out
