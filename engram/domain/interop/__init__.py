"""Bringing memories and task state in from other tools, and Engram's own export back in.

The input is untrusted. Each reader turns a source into a `Plan`: the events it would write,
built and checked in full before anything touches the store. A record that is not what its
format says, or that fails the checks every write passes (limits, names, paths, secrets), is
skipped and reported with its file and line, and the rest is imported. The input is read as a
stream, a line at most `limits.import_line_bytes` long (a longer one is skipped without being
held whole) and all of it at most `limits.import_bytes` after decompression (over that, the
import stops and nothing is written).

Formats:

- `mcp-engram`: the data directory of the `mcp-engram` package (`events/events-YYYYMMDD.jsonl`,
  older days gzipped): tasks, checkpoints, handoffs, progress, failures, memories, sessions.
- `mcp-memory`: the knowledge graph file (`memory.jsonl`) of the official MCP memory server:
  entities with observations, and relations.
- `engram-go`: the data of the Go `engram` (github.com/Gentleman-Programming/engram): its JSON
  export (`engram export`), or the `.engram/` folder its `engram sync` writes in a project
  (`manifest.json`, `chunks/*.jsonl.gz`): observations become memories.
- `engram`: Engram's own JSON Lines export (`engram export`): an event written by the importing
  actor and passing the checks unchanged is kept exactly as it is; any other is written anew by
  the importing actor, its author kept in `data.origin`.

Every imported record can be traced back: events built from another tool carry
`data.origin = {"format": ..., "id": <the record's id there>, ...}`; an event of Engram's own
export is either kept as it is (its id is its provenance) or carries
`data.origin = {"format": "engram", "id": <its id>, "actor": <its author>, ...}`.

Importing twice adds nothing. Events of `mcp-engram` are derived deterministically from the
source (ids, clocks and times come from the source's own ids, sequence numbers and timestamps),
so an event already in the store is recognised by its id, and two clones that import the same
log write identical lines that git merges as one. The memory graph has no times or history:
its records become memories with ids derived from what they say, and a memory whose id is
already in the store is not written again.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

from ...base.errors import UsageError
from .plan import (
    FORMATS,
    LINE_BYTES,
    Checker,
    Input,
    Plan,
    Record,
    check_format,
    derived_event_id,
    derived_id,
    from_micros,
    micros,
    readable,
    readable_memory,
    slug_name,
    unmarked,
)


def detect(path: Path, *, line_bytes: int = LINE_BYTES) -> str:
    """Which format a path holds, from its layout and its first line."""
    from . import engram_go, mcp_engram_log

    if path.is_dir():
        if engram_go.is_sync_folder(path):
            return "engram-go"
        if mcp_engram_log.daily_files(path / "events") or mcp_engram_log.daily_files(path):
            return "mcp-engram"
        if (path / "memory.jsonl").is_file():
            return "mcp-memory"
        raise UsageError(
            f"{path} is a directory without events/events-YYYYMMDD.jsonl (mcp-engram), "
            "memory.jsonl (MCP memory server) or manifest.json and chunks/ (the Go engram's "
            "sync folder); give the data directory or the file itself, "
            "or say which with --format"
        )
    if path.name.startswith("events-") and path.name.endswith((".jsonl", ".jsonl.gz")):
        return "mcp-engram"
    if path.name == engram_go.MANIFEST and engram_go.is_sync_folder(path.parent):
        return "engram-go"
    if engram_go.sniff(_head(path)):
        return "engram-go"
    first = _first_object(path, line_bytes)
    if first is not None:
        if first.get("type") in ("entity", "relation"):
            return "mcp-memory"
        if {"id", "kind", "clock", "schema", "data"} <= set(first):
            return "engram"
        if {"ts", "seq", "kind", "payload"} <= set(first):
            return "mcp-engram"
    raise UsageError(
        f"cannot tell the format of {path}; say which with --format ({', '.join(FORMATS)})"
    )


def _head(path: Path, size: int = 4096) -> bytes:
    """The first bytes of a file (decompressed if it ends in .gz), or none."""
    import gzip

    opener: Any = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as handle:
            head = bytes(handle.read(size))
    except (OSError, EOFError, zlib.error):
        return b""
    return unmarked(path, head)


def _first_object(path: Path, line_bytes: int) -> dict[str, Any] | None:
    """The first of the first 50 lines, if it is a JSON object no longer than `line_bytes`."""
    import orjson

    try:
        with open(path, "rb") as handle:
            for number in range(50):
                line = handle.readline(line_bytes + 1)
                if not line or (len(line) > line_bytes and not line.endswith(b"\n")):
                    return None
                if number == 0:
                    line = unmarked(path, line)
                if line.strip():
                    value = orjson.loads(line)
                    return value if isinstance(value, dict) else None
    except (OSError, orjson.JSONDecodeError):
        return None
    return None


__all__ = [
    "FORMATS",
    "Checker",
    "Input",
    "Plan",
    "Record",
    "check_format",
    "detect",
    "derived_event_id",
    "derived_id",
    "from_micros",
    "micros",
    "readable",
    "readable_memory",
    "slug_name",
]
