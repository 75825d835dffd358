"""The mcp-engram event log as it is on disk: its daily files, its lines, and how its kinds and
states map to Engram's.

`mcp_engram.Reader` folds the entries read here into Engram events.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from ...base.errors import UsageError, quote
from ...storage import events as ev
from .plan import micros

FORMAT = "mcp-engram"

TASK_STATUS = {
    "planning": "open",
    "in_progress": "in_progress",
    "blocked": "blocked",
    "review": "in_progress",
    "done": "done",
    "cancelled": "abandoned",
}
PROGRESS_STATUS = {
    "planning": "todo",
    "in_progress": "in_progress",
    "blocked": "blocked",
    "review": "in_progress",
    "done": "done",
}
CHECKPOINT_REASON = {
    "MANUAL_HANDOFF": "handoff",
    "PLAN_UPDATE": "plan_change",
    "FAILURE": "failure",
    "WORKING_SET_SHIFT": "working_set",
    "TOOL_FINISHED": "manual",
    "AUTO_SAVE": "quiet",
}
MEMORY_KIND = {"fact": "fact", "failure": "failure", "strategy": "procedure", "assumption": "note"}
# Kinds it logs that Engram has nothing to map to.
NOT_MAPPED = {
    "session.memory_recall",
    "execution.start",
    "execution.end",
    "bootstrap.from_legacy_db",
    "snapshot.create",
    "runtime.duckdb_upgrade",
    "maintenance.backup_pruned",
    "checkpoint.restore",
    "drift.detected",
    "drift.nudge",
    "continuity.evaluated",
    "continuity.redundant_exploration",
}


def daily_files(directory: Path) -> list[Path]:
    """mcp-engram's daily files in date order; a day's .jsonl wins over its .jsonl.gz (it is
    the one still being written, or the copy a rotation left behind)."""
    if not directory.is_dir():
        return []
    by_day: dict[str, Path] = {}
    for entry in directory.iterdir():
        name = entry.name
        if not name.startswith("events-") or not entry.is_file():
            continue
        if name.endswith(".jsonl.gz"):
            by_day.setdefault(name[len("events-") : -len(".jsonl.gz")], entry)
        elif name.endswith(".jsonl"):
            by_day[name[len("events-") : -len(".jsonl")]] = entry
    return [by_day[day] for day in sorted(by_day)]


def source_files(path: Path) -> list[Path]:
    """The log's files: a file itself, or a data directory's (or its events/'s) daily files."""
    if path.is_file():
        return [path]
    files = daily_files(path / "events") or daily_files(path)
    if not files:
        raise UsageError(
            f"no events-YYYYMMDD.jsonl files in {path} or {path / 'events'}; give "
            "mcp-engram's data directory (by default ~/.engram) or its events/"
        )
    return files


def parse_entry(raw: bytes) -> dict[str, Any]:
    """One line of the log as an object whose fields are what the format says, with `_us`,
    its time in microseconds; a `UsageError` says why it is not."""
    try:
        item = orjson.loads(raw.rstrip(b"\r\n"))
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"invalid JSON ({exc.msg})") from None
    if not isinstance(item, dict):
        raise UsageError("not a JSON object")
    version = item.get("schema_version", 1)
    if version != 1:
        raise UsageError(
            f"schema_version {quote(version)}; this importer reads "
            "mcp-engram's event log version 1: import it with a newer Engram"
        )
    for name, kind in (("ts", str), ("kind", str), ("payload", dict)):
        if not isinstance(item.get(name), kind):
            raise UsageError(f"field {name!r} is missing or not a {kind.__name__}")
    seq = item.get("seq")
    if seq is not None and (not isinstance(seq, int) or isinstance(seq, bool)):
        raise UsageError(f"seq {quote(seq)} is not a whole number")
    try:
        moment = ev.parse_time(item["ts"])
    except (ValueError, OverflowError):
        raise UsageError(f"ts {quote(item['ts'])} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        from datetime import UTC

        moment = moment.replace(tzinfo=UTC)
    item["_us"] = micros(moment)
    if not 0 <= item["_us"] // 1000 < 1 << 48 or ev.clock_ahead(item["_us"]):
        raise UsageError(
            f"ts {quote(item['ts'])} is before 1970 or more than a day ahead of this machine's time"
        )
    return item


def as_list(value: Any) -> list[Any]:
    """A field that should be a list: mcp-engram keeps some as JSON text, some as one item."""
    if value is None:
        return []
    if isinstance(value, str):
        try:
            loaded = orjson.loads(value)
        except orjson.JSONDecodeError:
            return [value]
        return loaded if isinstance(loaded, list) else [value]
    return list(value) if isinstance(value, (list, tuple)) else [value]
