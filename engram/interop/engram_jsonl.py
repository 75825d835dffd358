"""Read Engram's own JSON Lines export back: the events, exactly as they were.

An exported line is an event line as a store holds it. It is imported unchanged (same id, same
bytes), because changing it would give one event id two contents; an event already in the store
is recognised by its id. `store.created` events describe the store they were written in and are
left out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import events as ev
from ..errors import UsageError
from . import Checker, DamagedInputError, Plan, Record

FORMAT = "engram"
# What each family of events must name, or folding it would fail.
_NEEDS = {"memory.": ("memory",), "task.": ("task",), "checkpoint.": ("task", "checkpoint"),
          "session.": ("session_id",)}


def read(path: Path, check: Checker) -> Plan:
    if path.is_dir():
        raise UsageError(f"{path} is a directory; give the .jsonl file `engram export` wrote")
    plan = Plan(FORMAT, path)
    seen: dict[str, bytes] = {}
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    for number, line in enumerate(data.split(b"\n"), start=1):
        line = line.rstrip(b"\r")
        if not line.strip():
            continue
        plan.read += 1
        if ev.is_conflict_marker(line):
            raise DamagedInputError(path, number, "git conflict marker",
                                    fix="resolve the conflict (keep both sides' lines)")
        try:
            event = ev.parse_line(line)
        except ev.EventFormatError as exc:
            raise DamagedInputError(path, number, f"not an Engram event: {exc}") from None
        for prefix, needed in _NEEDS.items():
            if event.kind.startswith(prefix):
                for name in needed:
                    if not isinstance(event.data.get(name), str):
                        raise DamagedInputError(path, number,
                                                f"{event.kind} without {name!r}")
        canonical = event.to_line()
        if event.id in seen:
            if seen[event.id] != canonical:
                raise DamagedInputError(path, number, f"event id {event.id} appears earlier "
                                                      "in the file with different content")
            continue
        seen[event.id] = canonical
        if event.kind == "store.created":
            plan.ignored["store.created (it describes the exported store)"] += 1
            continue
        try:
            _scan(event.data, check, "data")
        except UsageError as exc:
            raise DamagedInputError(
                path, number, str(exc).split("; remove it")[0],
                fix="remove it from the file (an exported event is imported unchanged, so it "
                    "cannot be redacted)") from None
        plan.records.append(Record(event.kind, event.data, f"{path}:{number}", event=event))
    return plan


def _scan(value: Any, check: Checker, name: str) -> None:
    if isinstance(value, str):
        if len(value) >= 8:
            check.scan(value, name)
    elif isinstance(value, dict):
        for key, item in value.items():
            _scan(item, check, str(key))
    elif isinstance(value, list):
        for item in value:
            _scan(item, check, name)
