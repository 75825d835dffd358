"""One line about an event, and the commit message a batch of events is committed with.

Logs, the timeline, browse, resume, import reports and commits all describe events the same
way, through `describe`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ..model import memories as mem
from ..storage import events as ev


def describe(event: ev.Event) -> str:
    """One line about an event, for logs and commit messages."""
    if event.kind.startswith("memory."):
        return mem.describe(event)
    if event.kind.startswith("task."):
        from ..model.tasks import describe as describe_task

        return describe_task(event)
    if event.kind.startswith("checkpoint."):
        from .continuity.checkpoints import describe as describe_checkpoint

        return describe_checkpoint(event)
    if event.kind.startswith("session."):
        from ..model.sessions import describe as describe_session

        return describe_session(event)
    if event.kind == "store.created":
        return f"initialize {event.data.get('store', '')} store".replace("  ", " ")
    return event.kind


def commit_message(events: Sequence[ev.Event], *, subject: str | None = None) -> str:
    """A message a reviewer can read: what happened, one line per event."""
    if subject is None:
        # Named after what happened; a session's start and end that ride along are listed only.
        main = [e for e in events if ev.substantive(e.kind)] or list(events)
        if len(main) == 1:
            subject = f"engram: {describe(main[0])}"
        else:
            verbs = Counter(describe(e).split(" ", 1)[0] for e in main)
            summary = ", ".join(f"{verb} {count}" for verb, count in verbs.most_common())
            subject = f"engram: {len(main)} events ({summary})"
    lines = [subject]
    if len(events) > 1 or (events and subject != f"engram: {describe(events[0])}"):
        lines.append("")
        shown = list(events)[:50]
        lines.extend(f"- {describe(e)}" for e in shown)
        if len(events) > len(shown):
            lines.append(f"- ... and {len(events) - len(shown)} more")
    return "\n".join(lines) + "\n"


