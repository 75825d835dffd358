"""Capture over a workspace: which store's journal an event goes to, and what a checkpoint
takes from it.

Events go to the journal of the store a write would go to (the project store when there is
one, else the personal store), in that clone's local state. Nothing here appends an event,
commits, or loads the embedding model: a hook that captures stays a file write.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import journal
from .events import Captured, Skipped

if TYPE_CHECKING:
    from ...storage.store import Store
    from ..workspace import Workspace

DEFAULT_SESSION = "shell"  # events that name no session


@dataclass
class CaptureReport:
    """What one batch of events did, by outcome ("file", "failure", "folded", ...)."""

    counts: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)

    def note(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def to_dict(self) -> dict[str, Any]:
        return {"counts": dict(self.counts), "skipped": list(self.skipped)}


def capture_store(workspace: Workspace) -> Store | None:
    """The store whose journal takes captured events, or None when there is no store."""
    from ...base.errors import EngramError

    try:
        store = workspace.write_store()
    except EngramError:
        return None
    return store if store.exists() else None


def record(workspace: Workspace, items: Iterable[Captured | Skipped], *,
           session: str | None = None) -> CaptureReport:
    """Fold events into their sessions' journals (`session` for those that name none), as
    the settings `capture.files` and `capture.commands` allow."""
    report = CaptureReport()
    store = capture_store(workspace)
    if store is None:
        report.skipped.append("no Engram store here: nothing captured")
        return report
    settings = workspace.settings(store)
    by_session: dict[str, list[Captured | Skipped]] = {}
    for item in items:
        name = (item.session if isinstance(item, Captured) else None) or session or \
            DEFAULT_SESSION
        by_session.setdefault(name, []).append(item)
    for name, batch in by_session.items():
        with journal.editing(store.local_dir, name) as data:
            for item in batch:
                if isinstance(item, Skipped):
                    data["skipped"] += 1
                    report.skipped.append(item.reason)
                    report.note("skipped")
                    continue
                wanted = settings["capture.files"] if item.kind == "file" else \
                    settings["capture.commands"]
                if not wanted:
                    report.note("off")
                    continue
                report.note(journal.add(data, item, work_tree=store.work_tree))
    return report


def stats(workspace: Workspace, *, session: str | None = None,
          ) -> list[journal.SessionCapture]:
    """What was captured, per session (only `session`'s when given), newest first."""
    store = capture_store(workspace)
    if store is None:
        return []
    if session is not None:
        found = journal.session(store.local_dir, session)
        return [found] if found is not None else []
    return journal.sessions(store.local_dir)


def checkpoint_fields(store: Store, session: str | None, latest: dict[str, Any] | None,
                      *, most: int) -> dict[str, list[str]]:
    """The working set a checkpoint saved now should carry: the files and commands of the
    task's latest checkpoint, then those this session's journal captured (files that are no
    longer safe working-set files dropped: outside the work tree, through a link, in .git).
    Empty when nothing was captured, so the checkpoint keeps its usual working set."""
    from ...base.errors import UsageError
    from ...git.tracked import work_tree_file

    data = journal.read(journal.journal_path(store.local_dir, session)) if session else None
    if data is None or not (data["files"] or data["failures"]):
        return {}
    working = (latest or {}).get("working_set") or {}
    files = [str(f["path"]) for f in working.get("files") or []
             if isinstance(f, dict) and isinstance(f.get("path"), str)]
    for path in data["files"]:
        if path in files:
            continue
        try:
            work_tree_file(store.work_tree, path)
        except UsageError:
            continue
        files.append(path)
    commands = [c for c in working.get("commands") or [] if isinstance(c, str)]
    for failure in data["failures"]:
        line = journal.failure_line(failure)
        if line not in commands:
            commands.append(line)
    return {"files": files[-most:], "commands": commands[-most:]}
