"""`engram resume`: what the next agent needs, as Markdown, bounded in size."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import events as ev
from ..memories import Memory
from .tasks import Failure, Task

DEPTHS: dict[str, tuple[int, int]] = {  # depth -> (events, earlier checkpoint summaries)
    "brief": (12, 2),
    "standard": (30, 4),
    "full": (60, 8),
}
RESTORE_MODES = ("full", "selective", "none")


@dataclass
class Resume:
    markdown: str
    task: str | None
    truncated: bool
    confidence: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "truncated": self.truncated, "confidence": self.confidence,
                "markdown": self.markdown}


def render(
    *,
    task: Task | None,
    checkpoint: Mapping[str, Any] | None,
    confidence: float | None,
    earlier: Sequence[Mapping[str, Any]],
    failures: Sequence[Failure],
    decisions: Sequence[Memory],
    gotchas: Sequence[Memory],
    memories: Sequence[Memory],
    events: Sequence[tuple[ev.Event, str]],
    interruptions: Sequence[Mapping[str, Any]],
    limit: int,
) -> Resume:
    out: list[str] = []
    if task is not None:
        out += [f"# Resume: {task.name}", ""]
        head = f"task `{task.id}` · status {task.status}"
        if checkpoint:
            head += (f" · checkpoint {checkpoint['seq']} ({checkpoint['reason']}) by "
                     f"{checkpoint['actor']} at {checkpoint['time']}")
        if confidence is not None:
            head += f" · continuation confidence now {confidence:.2f}"
        out += [head, ""]
        goal = (checkpoint or {}).get("goal") or task.goal
        out += ["## Goal", "", goal or "(not stated)", ""]
    else:
        out += ["# Resume", "", "No task selected: memories and recent events only.", ""]
    for item in interruptions:
        out += ["## Interruption", "",
                f"- session `{item['id']}` ({item['agent']}, {item['machine']}) stopped: "
                f"**{item['reason']}** — {item['evidence']}", ""]
    if checkpoint:
        if checkpoint.get("summary"):
            out += ["## Where it stopped", "", checkpoint["summary"], ""]
        out += _list("Next steps (in order)", checkpoint.get("next"), numbered=True)
        out += _list("Must not redo (done or side-effecting: never repeat)",
                     checkpoint.get("must_not_redo"))
        out += _list("Must preserve", checkpoint.get("must_preserve"))
        out += _list("In progress", checkpoint.get("in_progress"))
        out += _list("Blocked", checkpoint.get("blocked"))
        out += _list("Open questions", checkpoint.get("open_questions"))
        out += _list("Completed", checkpoint.get("completed"))
        working = checkpoint.get("working_set") or {}
        files = [f"`{f['path']}`" + (f" @ {f['commit'][:12]}" if f.get("commit") else "")
                 for f in working.get("files") or []]
        files += [f"command: `{c}`" for c in working.get("commands") or []]
        files += [f"artifact: {a}" for a in working.get("artifacts") or []]
        out += _list("Working set", files)
    if failures:
        out += ["## Failures to avoid repeating", ""]
        for failure in failures:
            where = f"[{failure.component}] " if failure.component else ""
            line = f"- {where}{failure.error}"
            if failure.root_cause:
                line += f" — cause: {failure.root_cause}"
            if failure.fix:
                line += f" — fix: {failure.fix}"
            out.append(line)
        out.append("")
    out += _memories("Decisions", decisions)
    out += _memories("Gotchas", gotchas)
    out += _memories("Other memories", memories)
    if earlier:
        out += ["## Earlier checkpoints", ""]
        out += [f"- {c['seq']} ({c['reason']}, {c['time']}): {c.get('summary') or '(no summary)'}"
                for c in earlier]
        out.append("")
    if events:
        out += ["## Recent events (newest first)", ""]
        out += [f"- {event.time[:16].replace('T', ' ')} {text} — {event.actor}"
                for event, text in events]
        out.append("")
    text = "\n".join(out)
    truncated = False
    if len(text) > limit:
        note = (f"\n\n… cut at {limit} characters; ask for less with --depth brief or "
                "--since, or raise the limit with --max-chars\n")
        text = text[: max(0, limit - len(note))].rsplit("\n", 1)[0] + note
        truncated = True
    return Resume(text, task.id if task else None, truncated, confidence)


def _list(title: str, items: Sequence[str] | None, *, numbered: bool = False) -> list[str]:
    if not items:
        return []
    lines = [f"## {title}", ""]
    for number, item in enumerate(items, start=1):
        lines.append(f"{number}. {item}" if numbered else f"- {item}")
    return [*lines, ""]


def _memories(title: str, memories: Sequence[Memory]) -> list[str]:
    if not memories:
        return []
    lines = [f"## {title}", ""]
    for memory in memories:
        lines.append(f"- {memory.content} (`{memory.id[:8]}`, {memory.kind})")
    return [*lines, ""]
