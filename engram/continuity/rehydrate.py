"""`engram resume`: what the next agent needs, as Markdown, bounded in size."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import events as ev
from ..display import md, md_code, md_lines
from ..errors import Fix
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
        out += [f"# Resume: {md(task.name)}", ""]
        head = f"task {md_code(task.id)} · status {md(task.status)}"
        if checkpoint:
            head += (f" · checkpoint {checkpoint['seq']} ({md(checkpoint['reason'])}) by "
                     f"{md(checkpoint['actor'])} at {md(checkpoint['time'])}")
        if confidence is not None:
            head += f" · continuation confidence now {confidence:.2f}"
        out += [head, ""]
        goal = (checkpoint or {}).get("goal") or task.goal
        out += ["## Goal", "", md_lines(goal) if goal else "(not stated)", ""]
    else:
        out += ["# Resume", "", "No task selected: memories and recent events only.", ""]
    for item in interruptions:
        out += ["## Interruption", "",
                f"- session {md_code(item['id'])} ({md(item['agent'])}, {md(item['machine'])}) "
                f"stopped: **{md(item['reason'])}** — {md(item['evidence'])}", ""]
    if checkpoint:
        if checkpoint.get("summary"):
            out += ["## Where it stopped", "", md_lines(checkpoint["summary"]), ""]
        out += _list("Next steps (in order)", checkpoint.get("next"), numbered=True)
        out += _list("Must not redo (done or side-effecting: never repeat)",
                     checkpoint.get("must_not_redo"))
        out += _list("Must preserve", checkpoint.get("must_preserve"))
        out += _list("In progress", checkpoint.get("in_progress"))
        out += _list("Blocked", checkpoint.get("blocked"))
        out += _list("Open questions", checkpoint.get("open_questions"))
        out += _list("Completed", checkpoint.get("completed"))
        working = checkpoint.get("working_set") or {}
        files = [md_code(f["path"]) + (f" @ {md(f['commit'][:12])}" if f.get("commit") else "")
                 for f in working.get("files") or []]
        files += [f"command: {md_code(c)}" for c in working.get("commands") or []]
        files += [f"artifact: {md_lines(a, indent=2)}" for a in working.get("artifacts") or []]
        out += _list("Working set", files, shown=True)
    if failures:
        out += ["## Failures to avoid repeating", ""]
        for failure in failures:
            where = f"[{md(failure.component)}] " if failure.component else ""
            line = f"- {where}{md_lines(failure.error, indent=2)}"
            if failure.root_cause:
                line += f" — cause: {md_lines(failure.root_cause, indent=2)}"
            if failure.fix:
                line += f" — fix: {md_lines(failure.fix, indent=2)}"
            out.append(line)
        out.append("")
    out += _memories("Decisions", decisions)
    out += _memories("Gotchas", gotchas)
    out += _memories("Other memories", memories)
    if earlier:
        out += ["## Earlier checkpoints", ""]
        out += [f"- {c['seq']} ({md(c['reason'])}, {md(c['time'])}): "
                + (md_lines(c["summary"], indent=2) if c.get("summary") else "(no summary)")
                for c in earlier]
        out.append("")
    if events:
        out += ["## Recent events (newest first)", ""]
        out += [f"- {md(event.time[:16].replace('T', ' '))} {md(text)} — {md(event.actor)}"
                for event, text in events]
        out.append("")
    text = "\n".join(out)
    truncated = False
    if len(text) > limit:
        note = f"\n\n… cut at {limit} characters; {CUT.cli}\n"
        text = text[: max(0, limit - len(note))].rsplit("\n", 1)[0] + note
        truncated = True
    return Resume(text, task.id if task else None, truncated, confidence)


CUT = Fix("ask for less with --depth brief or --since, or raise the limit with --max-chars",
          "ask for less with depth=brief or since, or raise the limit with max_chars")
"""What the end of a resume cut at its limit says, in each front end's words."""


def _list(title: str, items: Sequence[str] | None, *, numbered: bool = False,
          shown: bool = False) -> list[str]:
    """A section of items as written (`shown`: items already made Markdown)."""
    if not items:
        return []
    lines = [f"## {title}", ""]
    for number, item in enumerate(items, start=1):
        bullet = f"{number}." if numbered else "-"
        lines.append(f"{bullet} {item if shown else md_lines(item, indent=len(bullet) + 1)}")
    return [*lines, ""]


def _memories(title: str, memories: Sequence[Memory]) -> list[str]:
    if not memories:
        return []
    lines = [f"## {title}", ""]
    for memory in memories:
        lines.append(f"- {md_lines(memory.content, indent=2)} ({md_code(memory.id[:8])}, "
                     f"{md(memory.kind)})")
    return [*lines, ""]
