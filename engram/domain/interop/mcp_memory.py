"""Read the official MCP memory server's knowledge graph (`memory.jsonl`) as memories.

Each line is an entity, `{"type": "entity", "name", "entityType", "observations": [...]}`, or a
relation, `{"type": "relation", "from", "to", "relationType"}`; the server writes them joined by
newlines (the last line has none) and skips blank lines when it reads.

Each observation becomes one `fact` memory, "<entity>: <observation>", tagged with the entity's
type; an entity without observations becomes "<entity> is an entity of type <type>"; a
relation becomes
"<from> <relationType> <to>", tagged with the relation type. A memory's id is derived from
what it says, so importing the graph again adds only what is new in it. The graph keeps no times,
so the memories are written now, by whoever imports them.

A line that is not JSON, or whose memories fail the checks every write passes (limits, tags,
secrets), is skipped and reported with its number; the rest is imported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from ...base.errors import UsageError, quote
from .plan import Checker, Input, Plan, Record, derived_id, readable_memory, slug_name

FORMAT = "mcp-memory"


def source_file(path: Path) -> Path:
    if path.is_dir():
        path = path / "memory.jsonl"
        if not path.is_file():
            raise UsageError(
                f"no memory.jsonl in {path.parent}; give the file the MCP memory "
                "server uses (MEMORY_FILE_PATH)"
            )
    return path


def read(path: Path, check: Checker, source: Input) -> Plan:
    file = source_file(path)
    plan = source.plan
    seen: set[str] = set()
    for number, raw in source.lines(file):
        plan.read += 1
        try:
            item = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            plan.skip(file, number, f"invalid JSON ({exc.msg})")
            continue
        if not isinstance(item, dict):
            plan.skip(file, number, "not a JSON object")
            continue
        kind = item.get("type")
        if kind not in ("entity", "relation"):
            plan.ignore(f"lines of type {quote(kind, 30)}")  # the server ignores them too
            continue
        try:
            found = _memories(item, check)
        except UsageError as exc:
            plan.skip(file, number, str(exc))
            continue
        for memory_id, data in found:
            if memory_id not in seen:
                seen.add(memory_id)
                plan.records.append(
                    Record("memory.created", data, f"{file}:{number}", key=memory_id)
                )
    return plan


def _memories(item: dict[str, Any], check: Checker) -> list[tuple[str, dict[str, Any]]]:
    """The memories one entity or relation becomes, checked; a `UsageError` if one fails."""

    def text(key: str) -> str:
        value = item.get(key)
        if not isinstance(value, str):
            raise UsageError(f"{item.get('type')} without {key!r} (text)")
        return value.strip()

    def tags(text: str) -> list[str]:
        tag = slug_name(text.lower(), check.checks.limit("limits.name_chars"))
        return check.tags([tag] if tag else [])

    found: list[tuple[str, dict[str, Any]]] = []

    def add(content: str, tags: list[str], origin: str) -> None:
        memory_id = derived_id(FORMAT, content)
        data = {
            "memory": memory_id,
            "content": check.text(content, "content", "limits.content_bytes"),
            "kind": "fact",
            "tags": tags,
            "scope": None,
            "source": "agent-inferred",
            "importance": 0.5,
            "valid_from": None,
            "valid_until": None,
            "origin": {
                "format": FORMAT,
                "id": check.text(origin, "origin id", "limits.item_bytes"),
            },
        }
        readable_memory(data)
        if all(memory_id != known for known, _ in found):
            found.append((memory_id, data))

    if item["type"] == "entity":
        name, entity_type = text("name"), text("entityType")
        observations = item.get("observations")
        if not isinstance(observations, list) or not all(isinstance(o, str) for o in observations):
            raise UsageError("entity without 'observations' (a list of text)")
        if not name:
            raise UsageError("entity with an empty name")
        tagged = tags(entity_type)
        kept = [o.strip() for o in observations if o.strip()]
        for observation in kept:
            add(f"{name}: {observation}", tagged, f"entity:{name}")
        if not kept:
            add(f"{name} is an entity of type {entity_type or 'unknown'}", tagged, f"entity:{name}")
    else:
        source, relation, target = text("from"), text("relationType"), text("to")
        add(
            f"{source} {relation} {target}",
            tags(relation),
            f"relation:{source}|{relation}|{target}",
        )
    return found
