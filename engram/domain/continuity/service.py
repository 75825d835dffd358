"""Continuity: tasks, their progress and failures, resume, and continuity metrics.

Everything written is an event; every method here is a thin layer of validation and folding
over the store. Checkpoints (`handoffs`) and sessions (`lifecycle`) are services of their own,
which this one uses. Results: `TaskChange` (progress or a failure recorded), `EarlierFailure`,
`TaskView` and `ContinuityScore`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...base.errors import EngramError, Fix, NoStoreError, NotFoundError, UsageError
from ...base.validation import Checks, check_relative, name_form, reference
from ...base.vocab import DEPTH, RESTORE
from ...model import tasks
from ...model.memories import Memory
from ...storage import events as ev
from ..capture.service import link_failure
from ..records import Records
from ..workspace import Workspace
from . import assemble, metrics, rehydrate, workingset
from .handoffs import Checkpoint, Checkpoints
from .lifecycle import Sessions

if TYPE_CHECKING:
    from ...storage.store import Store


class AmbiguousResumeError(EngramError):
    """More than one active task matches: the caller must choose. Exit status 3."""

    exit_code = 3

    def __init__(self, candidates: Sequence[tasks.Task]) -> None:
        self.candidates = list(candidates)
        listing = "; ".join(f"{t.id[:8]} {t.name!r} ({t.status})" for t in self.candidates[:10])
        super().__init__(
            f"{len(self.candidates)} active tasks could be resumed: {listing}",
            Fix(
                "choose one with --task ID",
                "call session_resume again with task=<id> (or the exact name)",
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        """For `resume --json`: a script that gets no resume still gets JSON, with every
        candidate to choose from (most recently changed first) and how to choose."""
        return {
            "ambiguous": True,
            "task": None,
            "error": self.problem,
            "hint": self.fix.cli if self.fix else None,
            "candidates": [
                {"id": t.id, "name": t.name, "status": t.status, "updated": t.updated_at}
                for t in self.candidates
            ],
        }


@dataclass(frozen=True)
class EarlierFailure:
    """A failure recorded on a task, with the task's id and name: what later work in the same
    component should not repeat."""

    task: str
    task_name: str
    event: str
    clock: int
    time: str
    actor: str
    session: str | None
    error: str
    component: str | None
    root_cause: str | None
    fix: str | None
    candidate: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TaskChange:
    """Progress or a failure recorded: the task as it is now, the checkpoint it triggered (if
    any) and the failures already recorded for the same component or files."""

    task: tasks.Task
    checkpoint: Checkpoint | None
    earlier_failures: tuple[EarlierFailure, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task.to_dict(),
            "checkpoint": self.checkpoint.to_dict() if self.checkpoint else None,
            "earlier_failures": [f.to_dict() for f in self.earlier_failures],
        }


@dataclass(frozen=True)
class TaskView:
    """A task with its memories and the ids of its subtasks."""

    task: tasks.Task
    memories: tuple[Memory, ...]
    children: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task.to_dict(),
            "memories": [m.to_dict() for m in self.memories],
            "children": list(self.children),
        }


@dataclass(frozen=True)
class ContinuityScore:
    """How well work continued from checkpoint `before` to checkpoint `after` of a task, each
    score 0..1 (see `metrics`)."""

    task: str
    before: int
    after: int
    goal_retention: float
    action_consistency: float
    failure_recall: float
    working_set_stability: float
    replanning_rate: float
    redundant_exploration: float
    composite: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Continuity:
    """Tasks, resume and continuity metrics over a workspace's stores; checkpoints and sessions
    through their services."""

    def __init__(
        self, workspace: Workspace, records: Records, handoffs: Checkpoints, lifecycle: Sessions
    ) -> None:
        self.workspace = workspace
        self.records = records
        self.handoffs = handoffs
        self.lifecycle = lifecycle

    # -- tasks ---------------------------------------------------------------------------

    def task_create(
        self,
        name: str,
        *,
        goal: str = "",
        parent: str | None = None,
        tags: Iterable[str] = (),
        status: str = "open",
    ) -> tasks.Task:
        store = self.workspace.write_store()
        checks = self.workspace.checks(store)
        name = self._task_name(checks, name)
        goal = checks.text(goal, field="goal") if goal and goal.strip() else ""
        data: dict[str, Any] = {
            "task": ev.new_entity_id(),
            "name": name,
            "goal": goal,
            "status": tasks.check_status(status),
            "tags": list(checks.tags(tags)),
            "parent": self.workspace.find_task(parent, items=False)[1].id
            if parent is not None
            else None,
        }
        self.workspace.emit(store, "task.created", data)
        return self.workspace.find_task(data["task"])[1]

    @staticmethod
    def _task_name(checks: Checks, name: str) -> str:
        name = checks.text(name, field="name", limit="limits.title_chars", one_line=True)
        return check_relative(name_form(name, "task name"), "task name")

    def task(self, ident: str) -> tasks.Task:
        return self.workspace.find_task(ident)[1]

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
        store, task = self.workspace.find_task(ident, items=False)
        checks = self.workspace.checks(store)
        changes: dict[str, Any] = {}
        if name is not None:
            changes["name"] = self._task_name(checks, name)
        if goal is not None:
            changes["goal"] = checks.text(goal, field="goal")
        if status is not None:
            changes["status"] = tasks.check_status(status)
        if parent is not None and not parent.strip():
            changes["parent"] = None  # out from under its parent: a top-level task again
        elif parent is not None:
            parent_task = self.workspace.find_task(parent, items=False)[1]
            changes["parent"] = tasks.check_parent(task, parent_task, self._task_by_id)
        if tags is not None:
            changes["tags"] = list(checks.tags(tags))
        current = task.to_dict()
        changes = {k: v for k, v in changes.items() if current.get(k) != v}
        if not changes:
            raise UsageError("nothing to change: give a new name, goal, status, parent or tags")
        self.workspace.emit(store, "task.updated", {"task": task.id, **changes})
        return self.workspace.find_task(task.id)[1]

    def _task_by_id(self, ident: str) -> tasks.Task | None:
        """A task by its full id, in whichever store holds it, without its progress."""
        for store in self.workspace.stores():
            found: list[tasks.Task] = self.workspace.projection(store).tasks(
                ids=[ident], items=False
            )
            if found:
                return found[0]
        return None

    def tasks(
        self,
        *,
        statuses: Sequence[str] = (),
        include_closed: bool = False,
    ) -> list[tasks.Task]:
        for status in statuses:
            tasks.check_status(status)
        out: list[tasks.Task] = []
        for store in self.workspace.stores():
            proj = self.workspace.projection(store)
            if statuses or include_closed:
                out += proj.tasks(statuses=statuses)
                continue
            # Every task not closed, one of a status no known one too (`Task.active`).
            shown = [t.id for t in proj.tasks(items=False) if t.active]
            out += proj.tasks(ids=shown) if shown else []
        return sorted(out, key=lambda t: (t.updated_clock, t.id), reverse=True)

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
        relative to the directory `relative_to` when given (the command line's current
        directory), else to the repository's top."""
        store, task = self.workspace.find_task(ident, items=False)
        checks = self.workspace.checks(store)
        data: dict[str, Any] = {
            "task": task.id,
            "feature": checks.text(feature, field="feature", limit="limits.item_bytes"),
            "status": tasks.check_progress_status(status),
        }
        if note:
            data["note"] = checks.text(note, field="note")
        component = checks.optional_name(component, what="component")
        if component:
            data["component"] = component
        paths = workingset.touched(store.work_tree, checks, files, here=relative_to)
        if paths:
            data["files"] = paths
        items: list[tuple[str, dict[str, Any]]] = [("task.progress", data)]
        if task.status == "open":  # work started
            items.append(("task.updated", {"task": task.id, "status": "in_progress"}))
        self.workspace.emit_many(store, items)
        current, saved = self.handoffs.auto_checkpoint(store, task.id, cause="progress")
        return TaskChange(
            current, saved, tuple(self.failures_for(component=component, files=paths))
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
        store, task = self.workspace.find_task(ident, items=False)
        checks = self.workspace.checks(store)
        data: dict[str, Any] = {
            "task": task.id,
            "error": checks.text(error, field="error"),
        }
        component = checks.optional_name(component, what="component")
        if component:
            data["component"] = component
        for key, value in (("root_cause", root_cause), ("fix", fix)):
            if value:
                data[key] = checks.text(value, field=key.replace("_", " "))
        linked = link_failure(store, data["error"], task.id)  # a command capture saw fail
        if linked:
            data["candidate"] = checks.text(linked[:2000], field="candidate")
        earlier = self.failures_for(component=component)
        self.workspace.emit(store, "task.failure", data)
        current, saved = self.handoffs.auto_checkpoint(store, task.id, cause="failure")
        return TaskChange(current, saved, tuple(earlier))

    def failures_for(
        self,
        *,
        component: str | None = None,
        files: Sequence[str] = (),
    ) -> list[EarlierFailure]:
        """Failures recorded on any task for this component, or for a component named in
        one of these file paths: what later work should not repeat."""
        if not component and not files:
            return []
        parts = {p for f in files for p in f.replace("\\", "/").split("/") if p}
        wanted = {c for c in (component, *parts) if c}
        out = [
            EarlierFailure(**f)
            for store in self.workspace.stores()
            for f in self.workspace.projection(store).failures(wanted)
        ]
        return sorted(out, key=lambda f: f.time, reverse=True)

    def task_view(self, ident: str) -> TaskView:
        store, task = self.workspace.find_task(ident)
        proj = self.workspace.projection(store)
        return TaskView(
            task=task,
            memories=tuple(proj.memories(task=task.id)),
            children=tuple(t.id for t in proj.tasks() if t.parent == task.id),
        )

    # -- resume ----------------------------------------------------------------------------

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
        DEPTH.one_of(depth)
        RESTORE.one_of(restore)
        since_clock = None
        if since is not None:
            from ...model.memories import parse_moment

            moment = since if isinstance(since, datetime) else parse_moment(since, what="--since")
            since_clock = int(moment.timestamp() * 1_000_000)
        if record:
            try:
                self.lifecycle.detect_interruptions()
            except NoStoreError:
                raise  # said once, as the error it is
            except EngramError as exc:
                self.workspace.warnings.append(str(exc))
        chosen: tasks.Task | None = None
        store: Store | None = None
        if task is not None:
            store, chosen = self.workspace.find_task(task)
        elif session is not None:
            info = self.lifecycle.session_info(session)
            for candidate in self.workspace.stores():
                worked = [
                    e.data["task"]
                    for e in self.workspace.projection(candidate).events(limit=None)
                    if e.session == info.id and e.data.get("task")
                ]
                if worked:
                    store, chosen = self.workspace.find_task(worked[0])
                    break
        else:
            active = self.tasks()
            if len(active) > 1:
                raise AmbiguousResumeError(active)
            if active:
                store, chosen = self.workspace.find_task(active[0].id)
        settings = self.workspace.settings(store)
        return assemble.build(
            self,
            store=store,
            chosen=chosen,
            depth=depth,
            since_clock=since_clock,
            since_text=since,
            restore=restore,
            limit=max_chars or settings["resume.max_chars"],
            max_tokens=max_tokens,
        )

    def recent_events(self, wanted: int, since: str | datetime | None) -> list[ev.Event]:
        """The newest substantive events, newest first: sessions starting and ending (every
        server start is one) do not crowd out what was done. Reads a bounded number of
        events."""
        fetch = wanted
        while True:
            raw = [e for _, e in self.records.log(limit=fetch, since=since)]
            kept = [e for e in raw if ev.substantive(e.kind)]
            if len(kept) >= wanted or len(raw) < fetch or fetch >= wanted * 64:
                return kept[:wanted]
            fetch *= 4

    # -- metrics ---------------------------------------------------------------------------

    def continuity(
        self, ident: str, *, before: str | None = None, after: str | None = None
    ) -> ContinuityScore:
        """Score the latest checkpoint (or `after`) against the one before it (or `before`)."""
        store, task = self.workspace.find_task(ident)
        saved = self.handoffs.checkpoints(task.id)
        if len(saved) < 2:
            raise UsageError(
                "continuity compares two checkpoints; this task has "
                f"{len(saved)} — record a handoff first"
            )

        def pick(ref: str | None, default: Checkpoint) -> Checkpoint:
            if ref is None:
                return default
            ref = reference(ref, "checkpoint", hint="give its seq number or id")
            # A number is a seq first: a checkpoint's random id may start with the same digit.
            for match in (lambda c: str(c.seq) == ref, lambda c: c.checkpoint.startswith(ref)):
                for item in saved:
                    if match(item):
                        return item
            raise NotFoundError("checkpoint", ref)

        late = pick(after, saved[-1])
        early = pick(before, saved[saved.index(late) - 1] if saved.index(late) else saved[0])
        if late is saved[0]:
            raise UsageError(
                f"checkpoint {late.seq} is the task's first: none before it to compare with; "
                f"give --after a later one (2 to {len(saved)})"
            )
        if early.clock >= late.clock:
            older = saved.index(late)  # the seqs 1 to this one are older
            raise UsageError(
                f"checkpoint {early.seq} is not older than checkpoint {late.seq}; give --before "
                f"an earlier one ({'1' if older == 1 else f'1 to {older}'}), or --after a later one"
            )
        failures_before = [f for f in task.failures if f.clock <= early.clock]
        failures_after = [f for f in task.failures if f.clock > early.clock]
        scores = metrics.score(
            early.record,
            late.record,
            failures_before=failures_before,
            failures_after=failures_after,
        )
        return ContinuityScore(task=task.id, before=early.seq, after=late.seq, **scores)
