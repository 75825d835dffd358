"""`engram resume`: what the next agent needs, as Markdown, bounded in size."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...base.display import md, md_code, md_lines
from ...base.errors import Fix
from ...base.vocab import RESTORE
from ...model.freshness import Verdicts
from ...model.memories import Memory
from ...model.tasks import Failure, Task
from ...storage import events as ev
from . import since as since_handoff
from .workingset import FileState

RESTORE_MODES = RESTORE.names


@dataclass
class Resume:
    markdown: str
    task: str | None
    truncated: bool
    confidence: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "ambiguous": False,  # as `AmbiguousResumeError.to_dict` has it: one key to test
            "task": self.task,
            "truncated": self.truncated,
            "confidence": self.confidence,
            "markdown": self.markdown,
        }


# Sections in the order a budget fills them: what must not go wrong first, then what to do,
# then what to avoid and know, then history. Shown in the reading order of `render`.
PRIORITY = (
    "header",
    "must_not_redo",
    "must_preserve",
    "since",
    "next",
    "summary",
    "failures",
    "decisions",
    "gotchas",
    "facts",
    "in_progress",
    "blocked",
    "open_questions",
    "working_set",
    "memories",
    "completed",
    "earlier",
    "events",
)
CHARS_PER_TOKEN = 4  # a rough, tokenizer-free estimate; close for English and code


def tokens(text: str) -> int:
    """The estimated token count of `text` (characters / 4, rounded up)."""
    return -(-len(text) // CHARS_PER_TOKEN)


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
    max_tokens: int | None = None,
    facts: Sequence[Memory] = (),
    since: since_handoff.Since | None = None,
    working: Sequence[FileState] | None = None,
    freshness: Verdicts | None = None,
    more_memories: int = 0,
) -> Resume:
    """The resume Markdown. With `max_tokens`, sections are taken by PRIORITY (and a long one
    item by item) until the budget is spent, and what was left out is named at the end;
    otherwise the text is cut at `limit` characters."""
    sections: dict[str, list[str]] = {}
    header: list[str] = []
    working_now = working
    if task is not None:
        header += [f"# Resume: {md(task.name)}", ""]
        head = f"task {md_code(task.id)} · status {md(task.status)}"
        if checkpoint:
            head += (
                f" · checkpoint {checkpoint['seq']} ({md(checkpoint['reason'])}) by "
                f"{md(ev.written_by(checkpoint['actor'], checkpoint.get('origin')))} "
                f"at {md(checkpoint['time'])}"
            )
        if confidence is not None:
            head += f" · continuation confidence now {confidence:.2f}"
        header += [head, ""]
        goal = (checkpoint or {}).get("goal") or task.goal
        header += ["## Goal", "", md_lines(goal) if goal else "(not stated)", ""]
    else:
        header += ["# Resume", "", "No task selected: memories and recent events only.", ""]
    for item in interruptions:
        header += [
            "## Interruption",
            "",
            f"- session {md_code(item['id'])} ({md(item['agent'])}, "
            f"{md(item['machine'])}) stopped: **{md(item['reason'])}** — "
            f"{md(item['evidence'])}",
            "",
        ]
    sections["header"] = header
    if since is not None:
        sections["since"] = since_handoff.lines(since)
    if checkpoint:
        if checkpoint.get("summary"):
            sections["summary"] = ["## Where it stopped", "", md_lines(checkpoint["summary"]), ""]
        sections["next"] = _list("Next steps (in order)", checkpoint.get("next"), numbered=True)
        sections["must_not_redo"] = _list(
            "Must not redo (done or side-effecting: never repeat)", checkpoint.get("must_not_redo")
        )
        sections["must_preserve"] = _list("Must preserve", checkpoint.get("must_preserve"))
        sections["in_progress"] = _list("In progress", checkpoint.get("in_progress"))
        sections["blocked"] = _list("Blocked", checkpoint.get("blocked"))
        sections["open_questions"] = _list("Open questions", checkpoint.get("open_questions"))
        sections["completed"] = _list("Completed", checkpoint.get("completed"))
        pinned: Mapping[str, Any] = checkpoint.get("working_set") or {}
        if working_now is not None:
            files = [f"{md_code(f.path)} {md(f.shown())}".rstrip() for f in working_now]
        else:
            files = [
                md_code(f["path"]) + (f" @ {md(f['commit'][:12])}" if f.get("commit") else "")
                for f in pinned.get("files") or []
            ]
        files += [f"command: {md_code(c)}" for c in pinned.get("commands") or []]
        files += [f"artifact: {md_lines(a, indent=2)}" for a in pinned.get("artifacts") or []]
        sections["working_set"] = _list("Working set", files, shown=True)
    if failures:
        lines = ["## Failures to avoid repeating", ""]
        for failure in failures:
            where = f"[{md(failure.component)}] " if failure.component else ""
            line = f"- {where}{md_lines(failure.error, indent=2)}"
            if failure.root_cause:
                line += f" — cause: {md_lines(failure.root_cause, indent=2)}"
            if failure.fix:
                line += f" — fix: {md_lines(failure.fix, indent=2)}"
            lines.append(line)
        sections["failures"] = [*lines, ""]
    fresh = freshness or Verdicts()
    sections["decisions"] = _memories("Decisions", decisions, fresh)
    sections["gotchas"] = _memories("Gotchas", gotchas, fresh)
    sections["facts"] = _memories("Facts and preferences of this task", facts, fresh)
    if more_memories:
        note = (
            f"- … and {more_memories} more of this task's memories "
            "(`engram task show` lists them; --depth full brings them)"
        )
        sections["facts"] = [
            *(sections["facts"][:-1] or ["## Facts and preferences of this task", ""]),
            note,
            "",
        ]
    sections["memories"] = _memories("Other memories", memories, fresh)
    if earlier:
        sections["earlier"] = [
            "## Earlier checkpoints",
            "",
            *[
                f"- {c['seq']} ({md(c['reason'])}, {md(c['time'])}): "
                + (md_lines(c["summary"], indent=2) if c.get("summary") else "(no summary)")
                for c in earlier
            ],
            "",
        ]
    if events:
        sections["events"] = [
            "## Recent events (newest first)",
            "",
            *[
                f"- {md(event.time[:16].replace('T', ' '))} {md(text)} — "
                f"{md(ev.written_by(event.actor, event.data.get('origin')))}"
                for event, text in events
            ],
            "",
        ]
    order = (
        "header",
        "since",
        "summary",
        "next",
        "must_not_redo",
        "must_preserve",
        "in_progress",
        "blocked",
        "open_questions",
        "completed",
        "working_set",
        "failures",
        "decisions",
        "gotchas",
        "facts",
        "memories",
        "earlier",
        "events",
    )
    truncated = False
    if max_tokens is not None:
        sections, left_out = _fit(sections, max_tokens)
        truncated = bool(left_out)
    text = "\n".join(line for name in order for line in sections.get(name) or [])
    if max_tokens is not None and truncated:
        text += (
            f"\nLeft out to keep within {max_tokens} tokens: {', '.join(left_out)}; "
            "ask for more with a larger --max-tokens or --depth full\n"
        )
    if len(text) > limit:
        note = f"\n\n… cut at {limit} characters; {CUT.cli}\n"
        text = text[: max(0, limit - len(note))].rsplit("\n", 1)[0] + note
        truncated = True
    return Resume(text, task.id if task else None, truncated, confidence)


def _fit(
    sections: Mapping[str, list[str]],
    budget: int,
) -> tuple[dict[str, list[str]], list[str]]:
    """The sections that fit in `budget` tokens, taken by PRIORITY (a section's leading items
    when it does not fit whole), and what was left out, in words ("memories: 12 of 20")."""
    kept: dict[str, list[str]] = {}
    left_out: list[str] = []
    spent = 60  # kept back for the note that names what was left out
    for name in PRIORITY:
        lines = sections.get(name) or []
        if not lines:
            continue
        cost = tokens("\n".join(lines)) + 1
        if spent + cost <= budget or name == "header":
            kept[name] = list(lines)
            spent += cost
            continue
        head, items = lines[:2], [line for line in lines[2:] if line]
        taken: list[str] = []
        for item in items:
            more = tokens(item) + 1
            if spent + tokens("\n".join(head)) + more > budget:
                break
            taken.append(item)
            spent += more
        title = lines[0].removeprefix("## ").split(" (")[0].lower()
        if taken:
            kept[name] = [*head, *taken, ""]
            spent += tokens("\n".join(head))
            left_out.append(f"{title}: {len(items) - len(taken)} of {len(items)}")
        else:
            left_out.append(f"{title} ({len(items)})")
    return kept, left_out


CUT = Fix(
    "ask for less with --depth brief or --since, or raise the limit with --max-chars",
    "ask for less with depth=brief or since, or raise the limit with max_chars",
)
"""What the end of a resume cut at its limit says, in each front end's words."""


def _list(
    title: str, items: Sequence[str] | None, *, numbered: bool = False, shown: bool = False
) -> list[str]:
    """A section of items as written (`shown`: items already made Markdown)."""
    if not items:
        return []
    lines = [f"## {title}", ""]
    for number, item in enumerate(items, start=1):
        bullet = f"{number}." if numbered else "-"
        lines.append(f"{bullet} {item if shown else md_lines(item, indent=len(bullet) + 1)}")
    return [*lines, ""]


def _memories(title: str, memories: Sequence[Memory], freshness: Verdicts) -> list[str]:
    if not memories:
        return []
    lines = [f"## {title}", ""]
    for memory in memories:
        found = freshness.get(memory.id)
        mark = (
            f" — **stale: the code it cites {found.state}** ({md(found.describe())}); "
            "check it before relying on it"
            if found is not None and found.stale
            else ""
        )
        lines.append(
            f"- {md_lines(memory.content, indent=2)} ({md_code(memory.id[:8])}, "
            f"{md(memory.kind)}){mark}"
        )
    return [*lines, ""]
