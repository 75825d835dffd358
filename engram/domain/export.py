"""Writing a store out: its events as JSON Lines, or Markdown for people.

- JSON Lines: every event once, in (clock, id) order, each line exactly as a store holds it.
  `engram import` reads it back, into this store or another, without adding what is there.
- Markdown: a directory with `README.md` (what is in it), `tasks/<id>-<name>.md` (one file per
  task: its goal, progress, failures, memories and every checkpoint with what changed since the
  one before) and `memories.md` (the memories grouped by kind, then the forgotten and superseded
  ones with why). For reading and archiving, not for importing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.display import md, md_code, md_lines
from ..base.errors import UsageError
from ..base.files import atomic_write, folder_exists
from ..model.memories import MEMORY_KINDS
from ..storage import events as ev
from .continuity import checkpoints as cp

KIND_TITLES = {
    "fact": "Facts",
    "decision": "Decisions",
    "preference": "Preferences",
    "convention": "Conventions",
    "gotcha": "Gotchas",
    "failure": "Failures",
    "lesson": "Lessons",
    "procedure": "Procedures",
    "note": "Notes",
}


@dataclass
class StoreContent:
    kind: str
    path: str
    tasks: list[Any]  # continuity.tasks.Task
    checkpoints: dict[str, list[dict[str, Any]]]  # task id -> checkpoints, oldest first
    memories: list[Any]  # memories.Memory, every status
    events: int


def write_jsonl(target: Path, events: Iterable[ev.Event], *, force: bool = False) -> None:
    if target.is_dir():
        raise UsageError(f"{target} is a directory; give a file name such as engram.jsonl")
    if target.exists() and not force:
        raise UsageError(f"{target} exists; choose another name or pass --force to replace it")
    folder_exists(target)
    atomic_write(target, b"".join(event.to_line() for event in events), durable=False, hidden=True)


def write_markdown(
    target: Path, stores: Sequence[StoreContent], *, force: bool = False
) -> list[Path]:
    if target.exists() and not target.is_dir():
        raise UsageError(f"{target} is a file; Markdown is written to a directory")
    if target.is_dir() and any(target.iterdir()) and not force:
        raise UsageError(
            f"{target} is not empty; choose a new directory or pass --force to write into it"
        )
    folder_exists(target)  # the directory itself is made, never the folders above it
    files: dict[Path, str] = {}
    many = len(stores) > 1
    index = ["# Engram export", ""]
    for content in stores:
        heading = f"{content.kind.capitalize()} store" if many else "Store"
        active = sum(1 for m in content.memories if m.status == "active")
        retired = len(content.memories) - active
        index += [
            f"## {heading}",
            "",
            f"- path: {md_code(content.path)}",
            f"- {_plural(content.events, 'event')}, {_plural(len(content.tasks), 'task')}, "
            f"{_plural(active, 'memory', 'memories')}"
            + (f" ({retired} forgotten or superseded)" if retired else ""),
            "",
        ]
        prefix = f"{content.kind}/" if many else ""
        tasks = sorted(content.tasks, key=lambda t: (t.created_clock, t.id))
        names = {t.id: t.name for t in tasks}
        if tasks:
            index += ["### Tasks", ""]
        for task in tasks:
            rel = f"{prefix}tasks/{task.id[:8]}-{_slug(task.name)}.md"
            memories = [m for m in content.memories if m.task == task.id]
            files[target / rel] = task_markdown(
                task,
                content.checkpoints.get(task.id, []),
                memories,
                parent=names.get(task.parent or ""),
            )
            count = len(content.checkpoints.get(task.id, []))
            index.append(
                f"- [{_link_text(task.name)}]({rel}) — {md(task.status)}, "
                f"{_plural(count, 'checkpoint')}"
            )
        if tasks:
            index.append("")
        rel = f"{prefix}memories.md"
        files[target / rel] = memories_markdown(content.memories, tasks=names)
        index += [f"- [Memories by kind]({rel})", ""]
    files[target / "README.md"] = "\n".join(index)
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    return sorted(files)


def task_markdown(
    task: Any,
    checkpoints: Sequence[Mapping[str, Any]],
    memories: Sequence[Any],
    *,
    parent: str | None = None,
) -> str:
    lines = [
        f"# Task: {md(task.name)}",
        "",
        f"- id: {md_code(task.id)}",
        f"- status: {md(task.status)}",
        f"- created: {md(task.created_at)} by {md(task.created_by)}",
        f"- last change: {md(task.updated_at)}",
    ]
    if task.parent:
        lines.append(f"- parent: {md_code(task.parent)}" + (f" ({md(parent)})" if parent else ""))
    if task.tags:
        lines.append(f"- tags: {', '.join(md(t) for t in task.tags)}")
    lines.append("")
    if task.goal:
        lines += ["## Goal", "", md_lines(task.goal), ""]
    lines += ["## Progress", ""]
    for item in task.progress:
        where = f" ({md(item.component)})" if item.component else ""
        lines.append(f"- {md(item.time)} [{md(item.status)}] {md(item.feature)}{where}")
        if item.files:
            lines.append(f"  - files: {', '.join(md_code(f) for f in item.files)}")
        if item.note:
            lines.append(f"  - note: {md(item.note)}")
    if not task.progress:
        lines.append("(none)")
    lines += ["", "## Failures", ""]
    for failure in task.failures:
        where = f"[{md(failure.component)}] " if failure.component else ""
        lines.append(f"- {md(failure.time)} {where}{md(failure.error)}")
        if failure.root_cause:
            lines.append(f"  - root cause: {md(failure.root_cause)}")
        if failure.fix:
            lines.append(f"  - fix: {md(failure.fix)}")
    if not task.failures:
        lines.append("(none)")
    lines += ["", "## Memories of this task", ""]
    for memory in sorted(memories, key=lambda m: (m.created_clock, m.id)):
        state = "" if memory.status == "active" else f" ({memory.status})"
        lines.append(f"- [{md(memory.kind)}] {md(memory.content)}{state}")
    if not memories:
        lines.append("(none)")
    lines += ["", "## Checkpoints", ""]
    if not checkpoints:
        lines += ["(none)", ""]
    previous = None
    for checkpoint in checkpoints:
        body = cp.render(task.to_dict(), checkpoint, previous).splitlines()
        # The handoff file's own title and heading levels, nested under this section.
        lines.append(f"### Checkpoint {checkpoint.get('seq')} ({md(checkpoint.get('reason'))})")
        for line in body[1:]:
            lines.append("##" + line if line.startswith("#") else line)
        previous = checkpoint
    return "\n".join(lines)


def memories_markdown(memories: Sequence[Any], *, tasks: Mapping[str, str]) -> str:
    lines = ["# Memories", ""]
    active = [m for m in memories if m.status == "active"]
    kinds = [k for k in MEMORY_KINDS if any(m.kind == k for m in active)]
    kinds += sorted({m.kind for m in active} - set(kinds))
    for kind in kinds:
        group = sorted(
            (m for m in active if m.kind == kind),
            key=lambda m: (-m.importance, m.created_clock, m.id),
        )
        lines += [f"## {KIND_TITLES.get(kind, kind.capitalize())} ({len(group)})", ""]
        for memory in group:
            lines.append(f"- {md_lines(memory.content, indent=2)}")
            about = [
                md_code(memory.id[:8]),
                f"importance {memory.importance:g}",
                md(memory.created_at[:10]),
            ]
            if memory.tags:
                about.append(" ".join(f"#{md(t)}" for t in memory.tags))
            if memory.scope:
                about.append(f"scope {md(memory.scope)}")
            if memory.task:
                about.append(f"task {md(tasks.get(memory.task, memory.task[:8]))}")
            about += _validity(memory)
            lines.append(f"  <sub>{' · '.join(about)}</sub>")
        lines.append("")
    if not active:
        lines += ["(no memories)", ""]
    retired = [m for m in memories if m.status != "active"]
    if retired:
        lines += [f"## Forgotten and superseded ({len(retired)})", ""]
        for memory in sorted(retired, key=lambda m: (m.updated_clock, m.id)):
            why = (
                f"forgotten: {md(memory.forgotten_reason or '')}"
                if memory.status == "forgotten"
                else f"superseded by {md_code((memory.superseded_by or '')[:8])}"
            )
            lines.append(f"- [{md(memory.kind)}] {md(memory.content)} — {why}")
        lines.append("")
    return "\n".join(lines)


def _validity(memory: Any) -> list[str]:
    """When what a memory says happened, and its validity window, saying so when the window has
    passed or not begun (recall and lists leave such a memory out; the export keeps it)."""
    now = ev.utc_now()
    about = [f"happened {md(memory.at[:10])}"] if memory.at else []
    if memory.valid_from:
        later = " (not yet valid)" if ev.parse_time(memory.valid_from) > now else ""
        about.append(f"valid from {md(memory.valid_from[:10])}{later}")
    if memory.valid_until:
        passed = " (expired)" if ev.parse_time(memory.valid_until) <= now else ""
        about.append(f"valid until {md(memory.valid_until[:10])}{passed}")
    return about


def _plural(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else many or one + 's'}"


def _link_text(text: str) -> str:
    """`text` inside a link's brackets, which it cannot close."""
    return md(text).replace("[", "\\[").replace("]", "\\]")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40].strip("-") or "task"
