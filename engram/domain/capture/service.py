"""Capture over a workspace: which store's journal an event goes to, and what a checkpoint
takes from it.

Events go to the journal of the store a write would go to (the project store when there is
one, else the personal store), in that clone's local state. Nothing here appends an event,
commits, or loads the embedding model: a hook that captures stays a file write.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import journal
from .events import Captured, Skipped

if TYPE_CHECKING:
    from ...base.config import Settings
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


def hook_target(cwd: Path | None) -> tuple[Store, Settings] | None:
    """The store a capture hook writes to from `cwd`, and its settings, as `capture_store`
    and `Workspace.settings` find them, without the workspace's imports (the read model, the
    indexes: a hook that only appends to a journal need not load them)."""
    from ...base.config import Settings, engram_home, find_project_store
    from ...storage.store import Store

    root = find_project_store(cwd or Path.cwd())
    personal = Store(engram_home(), "personal")
    project = Store(root, "project") if root is not None else None
    store = project if project is not None and project.exists() else personal
    if not store.exists():
        return None
    layers = [s.config_layer() for s in dict.fromkeys([personal, store]) if s.exists()]
    return store, Settings(*layers)


def record(
    workspace: Workspace | tuple[Store, Settings] | None,
    items: Iterable[Captured | Skipped],
    *,
    session: str | None = None,
) -> CaptureReport:
    """Fold events into their sessions' journals (`session` for those that name none), as
    the settings `capture.files` and `capture.commands` allow. Events skipped (unreadable)
    are counted in the journal of their session only when it records something of this
    batch: they never create or touch one. `workspace` is a workspace, or what `hook_target`
    found (None: no store)."""
    report = CaptureReport()
    if workspace is None or isinstance(workspace, tuple):
        store, settings = workspace or (None, None)
    else:
        store = capture_store(workspace)
        settings = workspace.settings(store) if store is not None else None
    if store is None or settings is None:
        report.skipped.append("no Engram store here: nothing captured")
        return report
    by_session: dict[str, list[Captured | Skipped]] = {}
    for item in items:
        name = (item.session if isinstance(item, Captured) else None) or session or DEFAULT_SESSION
        by_session.setdefault(name, []).append(item)
    for name, batch in by_session.items():
        kept: list[Captured] = []
        skipped = 0
        for item in batch:
            if isinstance(item, Skipped):
                skipped += 1
                report.skipped.append(item.reason)
                report.note("skipped")
            elif settings["capture.files" if item.kind == "file" else "capture.commands"]:
                kept.append(item)
            else:
                report.note("off")
        if not kept:
            # Nothing to record: the journal is neither created nor touched, for the journal
            # updated last names the session an agent works in (`recent_journal`).
            continue
        with journal.editing(store.local_dir, name) as data:
            data["skipped"] += skipped
            for item in kept:
                report.note(journal.add(data, item, work_tree=store.work_tree))
    return report


def stats(
    workspace: Workspace,
    *,
    session: str | None = None,
) -> list[journal.SessionCapture]:
    """What was captured, per session (only `session`'s when given), newest first."""
    store = capture_store(workspace)
    if store is None:
        return []
    if session is not None:
        found = journal.session(store.local_dir, session)
        return [found] if found is not None else []
    return journal.sessions(store.local_dir)


def checkpoint_fields(
    store: Store, session: str | None, latest: dict[str, Any] | None, *, most: int
) -> dict[str, list[str]]:
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
    files = [
        str(f["path"])
        for f in working.get("files") or []
        if isinstance(f, dict) and isinstance(f.get("path"), str)
    ]
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


RECENT_SECONDS = 3600.0  # a journal updated this recently is the clone's current session's
_WORD = r"[A-Za-z_][A-Za-z0-9_.]{3,}"


def recent_journal(store: Store, *, within: float = RECENT_SECONDS) -> dict[str, Any] | None:
    """The journal of this clone updated last, if within `within` seconds: the session an
    agent works in now (each work tree has its own local state, so its own journals)."""
    import os
    import time

    folder = journal.journal_dir(store.local_dir)
    try:
        paths = [p for p in folder.glob("*.json") if p.is_file()]
    except OSError:
        return None
    newest = max(paths, key=lambda p: p.stat().st_mtime, default=None)
    if newest is None or time.time() - os.stat(newest).st_mtime > within:
        return None
    return journal.read(newest)


def add_to_package(store: Store, package: dict[str, Any], *, most: int) -> None:
    """Add what the current session captured (`recent_journal`) to a derived package's
    working set: its files (checked as working-set files) and its failed commands."""
    from ...base.errors import UsageError
    from ...git.tracked import work_tree_file

    data = recent_journal(store)
    if data is None:
        return
    working = package.setdefault("working_set", {})
    files = working.setdefault("files", [])
    known = {f["path"] for f in files}
    for path in data["files"]:
        if path in known or len(files) >= most:
            continue
        try:
            work_tree_file(store.work_tree, path)
        except UsageError:
            continue
        files.append({"path": path, "commit": None})
        known.add(path)
    commands = working.setdefault("commands", [])
    for failure in data["failures"]:
        line = journal.failure_line(failure)
        if line not in commands and len(commands) < most:
            commands.append(line)


def link_failure(store: Store, error: str, task: str) -> str | None:
    """The failure candidate of the current session that a failure the agent records is
    about, as `<session>/<id>: <command> (exit N)`, marked as recorded for `task`; None when
    none shares at least two words (of four letters or more) with `error`, or the command."""
    import re

    data = recent_journal(store)
    if data is None or not data["failures"]:
        return None
    said = {w.lower() for w in re.findall(_WORD, error)}
    best, best_score = None, 1
    for failure in reversed(data["failures"]):  # the latest first: it wins a tie
        if failure.get("task"):
            continue
        words = {w.lower() for w in re.findall(_WORD, f"{failure['command']}\n{failure['output']}")}
        score = len(said & words) + (2 if failure["command"] in error else 0)
        if score > best_score:
            best, best_score = failure, score
    if best is None:
        return None
    with journal.editing(store.local_dir, data["session"]) as current:
        for failure in current["failures"]:
            if failure["id"] == best["id"]:
                failure["task"] = task
    return f"{data['session']}/{best['id']}: {best['command']} (exit {best['exit_code']})"
