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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from .. import events as ev
from ..errors import UsageError
from . import Checker, DamagedInputError, Plan, Record, derived_id, slug_name

FORMAT = "mcp-memory"


def source_file(path: Path) -> Path:
    if path.is_dir():
        path = path / "memory.jsonl"
        if not path.is_file():
            raise UsageError(f"no memory.jsonl in {path.parent}; give the file the MCP memory "
                             "server uses (MEMORY_FILE_PATH)")
    return path


def read(path: Path, check: Checker) -> Plan:
    file = source_file(path)
    plan = Plan(FORMAT, path)
    seen: set[str] = set()
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {file}: {exc.strerror}") from None

    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        plan.read += 1
        where = f"{file}:{number}"

        def fail(problem: str, number: int = number) -> DamagedInputError:
            return DamagedInputError(file, number, problem)

        try:
            item = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise fail(f"invalid JSON ({exc.msg})") from None
        if not isinstance(item, dict):
            raise fail("not a JSON object")

        def text(key: str, item: dict[str, Any] = item) -> str:
            value = item.get(key)
            if not isinstance(value, str):
                raise fail(f"{item.get('type')} without {key!r} (text)")
            return value

        def add(content: str, tags: list[str], origin: str, where: str = where) -> None:
            memory_id = derived_id(FORMAT, content)
            if memory_id in seen:
                return
            seen.add(memory_id)
            try:
                content = check.text(content, "content", "limits.content_bytes")
            except UsageError as exc:
                raise fail(str(exc)) from None
            data = {
                "memory": memory_id, "content": content, "kind": "fact",
                "tags": [t for t in dict.fromkeys(tags) if t], "scope": None,
                "source": "agent-inferred", "importance": 0.5, "valid_from": None,
                "valid_until": None, "origin": {"format": FORMAT, "id": origin},
            }
            probe = ev.Event(id=ev.new_event_id(), kind="memory.created", clock=0,
                             time=ev.format_time(ev.utc_now()), actor="-", session=None,
                             machine=None, data=data)
            try:  # what readers will accept, checked now rather than found damaged later
                ev.parse_line(probe.to_line()[:-1])
            except ev.EventFormatError as exc:
                raise fail(f"would become an unreadable event: {exc}") from None
            plan.records.append(Record("memory.created", data, where, key=memory_id))

        kind = item.get("type")
        if kind == "entity":
            name, entity_type = text("name").strip(), text("entityType").strip()
            observations = item.get("observations")
            if not isinstance(observations, list) or \
                    not all(isinstance(o, str) for o in observations):
                raise fail("entity without 'observations' (a list of text)")
            if not name:
                raise fail("entity with an empty name")
            tag = slug_name(entity_type.lower())
            kept = [o.strip() for o in observations if o.strip()]
            for observation in kept:
                add(f"{name}: {observation}", [tag] if tag else [], f"entity:{name}")
            if not kept:
                add(f"{name} is an entity of type {entity_type or 'unknown'}",
                    [tag] if tag else [], f"entity:{name}")
        elif kind == "relation":
            source, relation, target = text("from").strip(), text("relationType").strip(), \
                text("to").strip()
            tag = slug_name(relation.lower())
            add(f"{source} {relation} {target}", [tag] if tag else [],
                f"relation:{source}|{relation}|{target}")
        else:
            plan.ignored[f"lines of type {kind!r}"] += 1  # the server ignores them too
    return plan
