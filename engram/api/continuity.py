"""What `Engram` does for continuity, kept out of the facade: tasks, their progress and failures,
handoffs and checkpoints, resume, and agent sessions. `Engram` takes these methods, and the
services behind them, from `ContinuityCalls`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from .lazy import service

if TYPE_CHECKING:
    from ..domain.continuity import rehydrate
    from ..domain.continuity.handoffs import Checkpoint, Checkpoints, Handoff, HandoffPackage
    from ..domain.continuity.lifecycle import Sessions
    from ..domain.continuity.service import (
        Continuity,
        ContinuityScore,
        EarlierFailure,
        TaskChange,
        TaskView,
    )
    from ..domain.records import Records
    from ..domain.workspace import Workspace
    from ..model import tasks
    from ..model.sessions import Session


class ContinuityCalls:
    workspace: Workspace

    # The services, each imported and built when first used (`engram.api.lazy`).
    _records: Records = service("..domain.records", "Records")
    _handoffs: Checkpoints = service("..domain.continuity.handoffs", "Checkpoints")
    _sessions: Sessions = service("..domain.continuity.lifecycle", "Sessions")
    _continuity: Continuity = service(
        "..domain.continuity.service", "Continuity", "_records", "_handoffs", "_sessions"
    )

    # -- tasks and continuity -----------------------------------------------------------------

    def task_create(
        self,
        name: str,
        *,
        goal: str = "",
        parent: str | None = None,
        tags: Iterable[str] = (),
        status: str = "open",
    ) -> tasks.Task:
        return self._continuity.task_create(
            name, goal=goal, parent=parent, tags=tags, status=status
        )

    def task(self, ident: str) -> tasks.Task:
        return self._continuity.task(ident)

    def task_update(
        self,
        ident: str,
        *,
        name: str | None = None,
        goal: str | None = None,
        status: str | None = None,
        parent: str | None = None,
        tags: Iterable[str] | None = None,
    ) -> tasks.Task:
        return self._continuity.task_update(
            ident, name=name, goal=goal, status=status, parent=parent, tags=tags
        )

    def tasks(
        self,
        *,
        statuses: Sequence[str] = (),
        include_closed: bool = False,
    ) -> list[tasks.Task]:
        return self._continuity.tasks(statuses=statuses, include_closed=include_closed)

    def progress(
        self,
        ident: str,
        feature: str,
        *,
        status: str = "done",
        note: str | None = None,
        component: str | None = None,
        files: Iterable[str] = (),
        relative_to: Path | None = None,
    ) -> TaskChange:
        """Record progress on a task. Returns the task, earlier failures of the same
        component (so they are not repeated), and any checkpoint it triggered. `files` are
        relative to the repository's top, or to the directory `relative_to` when given (as a
        command line's are to its current directory)."""
        return self._continuity.progress(
            ident,
            feature,
            status=status,
            note=note,
            component=component,
            files=files,
            relative_to=relative_to,
        )

    def failure(
        self,
        ident: str,
        error: str,
        *,
        component: str | None = None,
        root_cause: str | None = None,
        fix: str | None = None,
    ) -> TaskChange:
        """Record a failure on a task; a checkpoint is always saved with it."""
        return self._continuity.failure(
            ident, error, component=component, root_cause=root_cause, fix=fix
        )

    def failures_for(
        self,
        *,
        component: str | None = None,
        files: Sequence[str] = (),
    ) -> list[EarlierFailure]:
        """Failures recorded on any task for this component, or for a component named in
        one of these file paths: what later work should not repeat."""
        return self._continuity.failures_for(component=component, files=files)

    def task_view(self, ident: str) -> TaskView:
        return self._continuity.task_view(ident)

    def handoff(
        self,
        ident: str,
        *,
        summary: str,
        package: Mapping[str, Any] | HandoffPackage | None = None,
        reason: str = "handoff",
        relative_to: Path | None = None,
        **fields: Any,
    ) -> Handoff:
        """Record a continuation package for a task, render it for review, and commit now.

        `package` (e.g. from a YAML or JSON file) and the keyword fields (completed,
        in_progress, blocked, next, must_not_redo, must_preserve, files, commands, artifacts,
        open_questions, goal) are merged; list fields from both are concatenated. Files are
        `path` or `path@commit` (a commit given is kept), relative to the repository's top; the
        `files` field's are relative to the directory `relative_to` when given (as a command
        line's are to its current directory).

        A checkpoint saved for an automatic reason (`overflow`, before a context is compacted,
        ...) is neither rendered nor committed at once: it joins the next batched commit. The
        result's `commit` is the commit made, or None (then `warnings` says why).
        """
        return self._handoffs.handoff(
            ident,
            summary=summary,
            package=package,
            reason=reason,
            relative_to=relative_to,
            **fields,
        )

    def read_package(self, handle: BinaryIO, *, name: str = "-") -> HandoffPackage:
        """A handoff package (YAML, or JSON when `name` ends in .json) read from `handle`, at
        most `limits.package_bytes` of it. Its fields are checked when it is handed off."""
        return self._handoffs.read_package(handle, name=name)

    def checkpoints(self, ident: str) -> list[Checkpoint]:
        return self._handoffs.checkpoints(ident)

    def resume(
        self,
        *,
        task: str | None = None,
        session: str | None = None,
        depth: str = "standard",
        since: str | datetime | None = None,
        restore: str = "selective",
        max_chars: int | None = None,
        record: bool = True,
        max_tokens: int | None = None,
    ) -> rehydrate.Resume:
        """What the next agent needs to continue, as bounded Markdown. Sessions found
        interrupted are recorded first, unless `record` is false (a reader that writes
        nothing). `max_tokens`: fill that budget by priority (must-not-redo and must-preserve
        first, then next steps, failures, memories) and name what was left out."""
        return self._continuity.resume(
            task=task,
            session=session,
            depth=depth,
            since=since,
            restore=restore,
            max_chars=max_chars,
            record=record,
            max_tokens=max_tokens,
        )

    def continuity(
        self, ident: str, *, before: str | None = None, after: str | None = None
    ) -> ContinuityScore:
        """Score the latest checkpoint (or `after`) against the one before it (or `before`)."""
        return self._continuity.continuity(ident, before=before, after=after)

    # -- sessions -----------------------------------------------------------------------------

    def session_start(
        self, *, agent: str = "cli", session_id: str | None = None, pid: int | None = None
    ) -> Session:
        """Open a session for this process (or `pid`): later events carry its id."""
        return self._sessions.session_start(agent=agent, session_id=session_id, pid=pid)

    def close_session_on_exit(self) -> None:
        """Close this process's session at normal exit and on SIGTERM (a kill -9 cannot be
        caught: the next command finds the session stale and records a crash)."""
        return self._sessions.close_session_on_exit()

    def heartbeat(self, *, context: float | None = None, session_id: str | None = None) -> None:
        """Say the session is alive (and, optionally, how full its context is, 0..1)."""
        return self._sessions.heartbeat(context=context, session_id=session_id)

    def report_interruption(
        self, reason: str, *, note: str | None = None, session_id: str | None = None
    ) -> None:
        """Say why the session is about to stop; used when its interruption is classified."""
        return self._sessions.report_interruption(reason, note=note, session_id=session_id)

    def session_end(
        self, *, outcome: str | None = None, how: str = "exit", session_id: str | None = None
    ) -> Session:
        """Close the session; its outcome adjusts the importance of the memories it made or
        relied on (success +0.05, failure -0.05). Commits pending events."""
        return self._sessions.session_end(outcome=outcome, how=how, session_id=session_id)

    def note_recalled(self, memory_ids: Sequence[str]) -> None:
        """Remember, locally, which memories this session relied on."""
        return self._sessions.note_recalled(memory_ids)

    def session_info(self, session_id: str) -> Session:
        return self._sessions.session_info(session_id)

    def sessions(self, *, states: Sequence[str] = ()) -> list[Session]:
        return self._sessions.sessions(states=states)

    def detect_interruptions(self) -> list[Session]:
        """Find open sessions of this machine whose process is gone (or whose heartbeat
        stopped), classify why, and record it. Runs when a store is opened for resume or by
        the MCP server; safe to run often."""
        return self._sessions.detect_interruptions()
