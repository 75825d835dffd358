"""Read Engram's own JSON Lines export back: the events, exactly as they were.

An exported line is an event line as a store holds it. It is imported unchanged (same id, same
bytes), because changing it would give one event id two contents; an event already in the store
is recognised by its id. `store.created` events describe the store they were written in and are
left out. A line that is not an event, or that holds what looks like a credential, is skipped
and reported with its number.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from .. import events as ev
from ..errors import UsageError
from . import Checker, Input, Plan, Record

FORMAT = "engram"
# What each family of events must name, or folding it would fail.
_NEEDS = {"memory.": ("memory",), "task.": ("task",), "checkpoint.": ("task", "checkpoint"),
          "session.": ("session_id",)}


def read(path: Path, check: Checker, source: Input) -> Plan:
    if path.is_dir():
        raise UsageError(f"{path} is a directory; give the .jsonl file `engram export` wrote")
    plan = source.plan
    seen: dict[str, bytes] = {}  # event id -> digest of its line
    for number, line in source.lines(path):
        plan.read += 1
        if ev.is_conflict_marker(line):
            plan.skip(path, number, "git conflict marker: resolve the conflict (keep both "
                                    "sides' lines)")
            continue
        try:
            event = ev.parse_line(line)
        except ev.EventFormatError as exc:
            plan.skip(path, number, f"not an Engram event: {exc}")
            continue
        missing = [f"{event.kind} without {name!r}" for prefix, needed in _NEEDS.items()
                   if event.kind.startswith(prefix) for name in needed
                   if not isinstance(event.data.get(name), str)]
        if missing:
            plan.skip(path, number, missing[0])
            continue
        digest = hashlib.sha256(event.to_line()).digest()
        if event.id in seen:
            if seen[event.id] != digest:
                plan.skip(path, number, f"event id {event.id} appears earlier in the file "
                                        "with different content")
            continue
        seen[event.id] = digest
        if event.kind == "store.created":
            plan.ignore("store.created (it describes the exported store)")
            continue
        try:
            _scan(event.data, check, "data")
        except UsageError as exc:
            plan.skip(path, number, str(exc).split("; remove it")[0] + ": an exported event "
                      "is imported unchanged, so it cannot be redacted")
            continue
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
