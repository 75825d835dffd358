"""Read the data of the Go `engram` (github.com/Gentleman-Programming/engram) as memories.

That tool keeps its memories in a SQLite database (`~/.engram/engram.db`) and writes them out in
two forms, both read here:

- `engram export [FILE]`: one JSON document (`engram-export.json` by default, indented):
  `{"version", "exported_at", "sessions": [...], "observations": [...], "prompts": [...]}`.
- `engram sync`: the project's `.engram/` folder, a `manifest.json`
  (`{"version": 1, "chunks": [{"id", "created_by", "created_at", ...}]}`) and
  `chunks/<id>.jsonl.gz`, each chunk one gzipped JSON object (despite its name, a single line)
  `{"sessions": [...], "observations": [...], "prompts": [...]}`.

Each observation (`{"id", "session_id", "type", "title", "content", "project", "scope",
"topic_key", "created_at", "updated_at", "deleted_at", ...}`) becomes one memory: its title and
content, its kind from the observation's type, tagged with the type and the project, dated
(`at`) when it was created there. Deleted observations, sessions and user prompts have no
counterpart and are counted as not imported. An observation's id there is a row number of one
machine's database (its own import renumbers them), so a memory's id is derived from what
identifies the observation on every machine: its session, creation time and title. Importing
the export or the folder again, or both, adds only what is new; a later edit there of an
observation already imported is not brought in.

A document (the export, or one chunk) is read whole, at most `limits.import_line_bytes` for a
chunk (it is one line) and `limits.import_bytes` for all of the input. A chunk that cannot be
read, or an observation that is not what the format says or fails the checks every write
passes (limits, tags, secrets), is skipped and reported with its file and place; the rest is
imported.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from ...base.config import foreign_store
from ...base.errors import UsageError, quote
from ...storage import events as ev
from .plan import Checker, Input, Plan, Record, derived_id, readable_memory, slug_name

FORMAT = "engram-go"
MANIFEST = "manifest.json"
CHUNK_ID = re.compile(r"[0-9a-f]{8,64}")
KIND = {
    "decision": "decision",
    "architecture": "decision",
    "bugfix": "lesson",
    "pattern": "convention",
    "config": "fact",
    "discovery": "fact",
    "learning": "lesson",
    "manual": "note",
    "session_summary": "note",
}
FIELD_BYTES = 1 << 20  # the longest session id, project, type or time taken from an observation


def is_sync_folder(path: Path) -> bool:
    """A `.engram/` as that tool's `engram sync` writes it (and not an Engram store)."""
    return (foreign_store(path) or "").startswith("the sync folder")


def sniff(head: bytes) -> bool:
    """Whether the first bytes of a file are that tool's export or one of its chunks."""
    return (
        re.match(
            rb'\s*\{\s*"(version"\s*:\s*"[^"]*"\s*,\s*"exported_at|sessions|'
            rb'observations)"\s*:',
            head,
        )
        is not None
    )


def source_files(path: Path, plan: Plan, source: Input) -> list[Path]:
    """The documents to read: a file itself, or a sync folder's chunks in manifest order (then
    any chunk the manifest does not list, as a merge of it may lose lines)."""
    if path.is_file():
        if path.name != MANIFEST:
            return [path]
        path = path.parent
    chunks = path / "chunks"
    if not (path / MANIFEST).is_file() and not chunks.is_dir():
        raise UsageError(
            f"no {MANIFEST} or chunks/ in {path}; give the project's .engram/ "
            "folder that `engram sync` writes, or a file of `engram export`"
        )
    ordered: list[str] = []
    manifest = path / MANIFEST
    if manifest.is_file():
        raw = source.document(manifest, source.line_bytes)
        entries: Any = None
        if raw is not None:
            try:
                entries = orjson.loads(raw).get("chunks")
            except (orjson.JSONDecodeError, AttributeError):
                entries = None
            if not isinstance(entries, list):
                plan.skip(
                    manifest,
                    1,
                    'not a manifest ({"chunks": [...]}); reading the chunks/ folder instead',
                )
                entries = []
        for number, entry in enumerate(entries or (), start=1):
            chunk_id = entry.get("id") if isinstance(entry, dict) else None
            if not isinstance(chunk_id, str) or not CHUNK_ID.fullmatch(chunk_id):
                plan.skip(
                    manifest,
                    f"chunks[{number}]",
                    f"chunk id {quote(chunk_id, 40)} is not a hexadecimal digest",
                )
                continue
            if chunk_id not in ordered:
                ordered.append(chunk_id)
    present = (
        sorted(p.name[: -len(".jsonl.gz")] for p in chunks.glob("*.jsonl.gz") if p.is_file())
        if chunks.is_dir()
        else []
    )
    files = []
    for chunk_id in ordered:
        file = chunks / f"{chunk_id}.jsonl.gz"
        if file.is_file():
            files.append(file)
        else:
            plan.skip(file, 1, "listed in the manifest but missing (not pulled yet?)")
    files.extend(
        chunks / f"{name}.jsonl.gz"
        for name in present
        if name not in ordered and CHUNK_ID.fullmatch(name)
    )
    return files


def read(path: Path, check: Checker, source: Input) -> Plan:
    plan = source.plan
    seen: set[str] = set()
    for file in source_files(path, plan, source):
        limit = source.line_bytes if file.name.endswith(".gz") else source.total_bytes
        raw = source.document(file, limit)
        if raw is None:
            continue
        try:
            document = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            plan.skip(file, 1, f"invalid JSON ({exc.msg})")
            continue
        if not isinstance(document, dict) or not isinstance(
            document.get("observations"), (list, type(None))
        ):
            plan.skip(
                file,
                1,
                "not an export or a sync chunk of the Go engram (an object "
                "with a list of observations)",
            )
            continue
        for what in ("sessions", "prompts"):
            found = document.get(what)
            if not isinstance(found, (list, type(None))):
                plan.skip(file, what, "not a list (nothing of it is imported anyway)")
                continue
            for _ in found or ():
                plan.read += 1
                plan.ignore(what if what == "sessions" else "user prompts")
        for number, item in enumerate(document.get("observations") or (), start=1):
            plan.read += 1
            where = f"observations[{number}]"
            if isinstance(item, dict) and item.get("deleted_at"):
                plan.ignore("observations deleted there")
                continue
            try:
                memory_id, data = _memory(item, check)
            except UsageError as exc:
                plan.skip(file, where, str(exc))
                continue
            if memory_id not in seen:
                seen.add(memory_id)
                plan.records.append(
                    Record("memory.created", data, f"{file}:{where}", key=memory_id)
                )
    return plan


def _moment(value: Any, what: str) -> str:
    """A time as that tool writes it (SQLite's `YYYY-MM-DD HH:MM:SS`, UTC, or RFC 3339)."""
    if not isinstance(value, str) or len(value) > 64:
        raise UsageError(f"observation without {what} (a time)")
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise UsageError(f"{what} {quote(value, 40)} is not a time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    if not 1970 <= moment.year <= 9998:
        raise UsageError(f"{what} {quote(value, 40)} is out of range")
    return ev.format_time(moment)


def _memory(item: Any, check: Checker) -> tuple[str, dict[str, Any]]:
    """The memory one observation becomes, checked; a `UsageError` if it fails."""
    if not isinstance(item, dict):
        raise UsageError("not a JSON object")

    def text(key: str, *, optional: bool = False) -> str:
        value = item.get(key)
        if value is None and optional:
            return ""
        if not isinstance(value, str):
            raise UsageError(f"observation without {key!r} (text)")
        if key != "content" and len(value.encode("utf-8", "surrogatepass")) > FIELD_BYTES:
            raise UsageError(f"observation {key!r} is over {FIELD_BYTES} bytes")
        return value.strip()

    session, kind, title = text("session_id"), text("type"), text("title")
    content, project = text("content"), text("project", optional=True)
    created = _moment(item.get("created_at"), "created_at")
    if not content and not title:
        raise UsageError("observation with neither title nor content")
    body = (
        content
        if not title or content.startswith(title)
        else f"{title}\n\n{content}"
        if content
        else title
    )
    limit = check.checks.limit("limits.name_chars")
    tags = [
        t
        for t in (
            slug_name(kind.lower(), limit),
            slug_name(f"project:{project.lower()}", limit) if project else None,
        )
        if t
    ]
    original = item.get("id")
    origin: dict[str, Any] = {
        "format": FORMAT,
        "id": str(original)
        if isinstance(original, int) and not isinstance(original, bool)
        else "-",
        "session": check.text(session, "origin session", "limits.item_bytes"),
    }
    if project:
        origin["project"] = check.text(project, "origin project", "limits.item_bytes")
    topic = item.get("topic_key")
    if isinstance(topic, str) and topic.strip():
        origin["topic_key"] = check.text(topic.strip(), "origin topic_key", "limits.item_bytes")
    memory_id = derived_id(FORMAT, session, created, title)
    data = {
        "memory": memory_id,
        "content": check.text(body, "content", "limits.content_bytes"),
        "kind": KIND.get(kind.lower(), "note"),
        "tags": check.tags(tags),
        "scope": None,
        "source": "agent-inferred",
        "importance": 0.5,
        "valid_from": None,
        "valid_until": None,
        "at": created,
        "origin": origin,
    }
    readable_memory(data)
    return memory_id, data
