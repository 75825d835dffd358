"""Damaged lines of committed event files that `engram doctor --fix` set aside in this clone.

A committed line belongs to whoever committed it: a repair never takes it out of the file (the
commit that would do so deletes it from every teammate's clone once pushed). Readers already
skip a damaged line; setting it aside records, in local state that is never committed
(`<git-dir>/engram/set-aside.json`), that it was seen and kept, by file and a hash of the line's
bytes, so the doctor reports it as a note instead of an error. The record is local and read as
untrusted input: an entry that is not sound is ignored, and the line is then reported again.
"""

from __future__ import annotations

import hashlib
import time
from typing import TYPE_CHECKING, Any

import orjson

from ..base.files import atomic_write

if TYPE_CHECKING:
    from .store import Store

SET_ASIDE_FILE = "set-aside.json"
MAX_ENTRIES = 100_000


def line_hash(raw: bytes) -> str:
    """The key of a line (its bytes without the newline)."""
    return hashlib.sha256(raw).hexdigest()


def load(store: Store) -> dict[tuple[str, str], dict[str, Any]]:
    """(file, line hash) -> entry, for every sound entry of the record."""
    try:
        raw: Any = orjson.loads((store.local_dir / SET_ASIDE_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    out: dict[tuple[str, str], dict[str, Any]] = {}
    if not isinstance(raw, list):
        return out
    for entry in raw[:MAX_ENTRIES]:
        if (
            isinstance(entry, dict)
            and isinstance(entry.get("path"), str)
            and isinstance(entry.get("sha256"), str)
            and len(entry["sha256"]) == 64
        ):
            out[(entry["path"], entry["sha256"])] = entry
    return out


def record(store: Store, rel: str, lines: list[tuple[int, bytes, str]]) -> int:
    """Set these damaged lines (number, bytes, why) of `rel` aside; returns how many were new."""
    known = load(store)
    added = 0
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for number, raw, why in lines:
        key = (rel, line_hash(raw))
        if key in known:
            continue
        known[key] = {
            "path": rel,
            "sha256": key[1],
            "line": number,
            "problem": why,
            "bytes": len(raw),
            "at": when,
        }
        added += 1
    if added:
        data = orjson.dumps(list(known.values())[-MAX_ENTRIES:], option=orjson.OPT_INDENT_2)
        path = store.local_dir / SET_ASIDE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data)
    return added


def is_set_aside(known: dict[tuple[str, str], dict[str, Any]], rel: str, raw: bytes) -> bool:
    return (rel, line_hash(raw)) in known


def hides(
    store: Store, known: dict[tuple[str, str], dict[str, Any]], rel: str, number: int
) -> bool:
    """Is line `number` of `rel` (as the file is now) a line set aside here?"""
    if not known or not any(path == rel for path, _ in known):
        return False
    try:
        data = (store.root / rel).read_bytes()
    except OSError:
        return False
    found = data.split(b"\n")
    if not 0 < number <= len(found):
        return False
    return is_set_aside(known, rel, found[number - 1])
