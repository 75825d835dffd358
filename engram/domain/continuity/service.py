"""Continuity: tasks, their progress and failures, resume, and continuity metrics.

Everything written is an event; every method here is a thin layer of validation and folding
over the store. Checkpoints (`handoffs`) and sessions (`lifecycle`) are services of their own,
which this one uses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...base.errors import EngramError, Fix, NotFoundError, UsageError, quote
from ...base.validation import Checks, name_form, reference
from ...model import tasks
from ...model.memories import Memory
from ...storage import events as ev
from ...base.validation import check_relative
from ..messages import describe
from ..records import Records
from ..workspace import Workspace
from . import checkpoints as cp
from . import metrics, rehydrate
from .handoffs import Checkpoints, checkpoint_from
from .lifecycle import Sessions

if TYPE_CHECKING:
    from ...storage.store import Store


class AmbiguousResumeError(EngramError):
    """More than one active task matches: the caller must choose. Exit status 3."""

    exit_code = 3

    def __init__(self, candidates: Sequence[tasks.Task]) -> None:
        self.candidates = list(candidates)
        listing = "; ".join(f"{t.id[:8]} {t.name!r} ({t.status})" for t in self.candidates[:10])
        super().__init__(f"{len(self.candidates)} active tasks could be resumed: {listing}",
                         Fix("choose one with --task ID", "call session_resume again with "
                                                          "task=<id> (or the exact name)"))




class Continuity:
    """Tasks, resume and continuity metrics over a workspace's stores; checkpoints and sessions
    through their services."""

    def __init__(self, workspace: Workspace, records: Records, handoffs: Checkpoints,
                 lifecycle: Sessions) -> None:
        self.workspace = workspace
        self.records = records
        self.handoffs = handoffs
        self.lifecycle = lifecycle

    # -- tasks ---------------------------------------------------------------------------

    def task_create(self, name: str, *, goal: str = "", parent: str | None = None,
                    tags: Iterable[str] = (), status: str = "open") -> tasks.Task:
        store = self.workspace.write_store()
        checks = self.workspace.checks(store)
        name = self._task_name(checks, name)
        goal = checks.text(goal, field="goal") if goal and goal.strip() else ""
        data = {
            "task": ev.new_entity_id(), "name": name, "goal": goal,
            "status": tasks.check_status(status),
            "tags": list(checks.tags(tags)),
            "parent": self.workspace.find_task(parent, items=False)[1].id
            if parent is not None else None,
        }
        self.workspace.emit(store, "task.created", data)
        return self.workspace.find_task(data["task"])[1]

    @staticmethod
    def _task_name(checks: Checks, name: str) -> str:
        name = checks.text(name, field="name", limit="limits.title_chars", one_line=True)
        return check_relative(name_form(name, "task name"), "task name")

    def task(self, ident: str) -> tasks.Task:
        return self.workspace.find_task(ident)[1]

    def task_update(self, ident: str, *, name: str | None = None, goal: str | None = None,
                    status: str | None = None, parent: str | None = None,
                    tags: Iterable[str] | None = None) -> tasks.Task:
        store, task = self.workspace.find_task(ident, items=False)
        checks = self.workspace.checks(store)
        changes: dict[str, Any] = {}
        if name is not None:
            changes["name"] = self._task_name(checks, name)
        if goal is not None:
            changes["goal"] = checks.text(goal, field="goal")
        if status is not None:
            changes["status"] = tasks.check_status(status)
        if parent is not None:
            parent_task = self.workspace.find_task(parent, items=False)[1]
            if parent_task.id == task.id:
                raise UsageError("a task cannot be its own parent")
            changes["parent"] = parent_task.id
        if tags is not None:
            changes["tags"] = list(checks.tags(tags))
        current = task.to_dict()
        changes = {k: v for k, v in changes.items() if current.get(k) != v}
        if not changes:
            raise UsageError("nothing to change: give a new name, goal, status, parent or tags")
        self.workspace.emit(store, "task.updated", {"task": task.id, **changes})
        return self.workspace.find_task(task.id)[1]

    def tasks(self, *, statuses: Sequence[str] = (), include_closed: bool = False,
              ) -> list[tasks.Task]:
        for status in statuses:
            tasks.check_status(status)
        wanted = statuses or (() if include_closed else tasks.ACTIVE)
        out = [t for store in self.workspace.stores()
               for t in self.workspace.projection(store).tasks(statuses=wanted)]
        return sorted(out, key=lambda t: (t.updated_clock, t.id), reverse=True)

    def progress(self, ident: str, feature: str, *, status: str = "done",
                 note: str | None = None, component: str | None = None,
                 files: Iterable[str] = ()) -> dict[str, Any]:
        """Record progress on a task. Returns the task, earlier failures of the same
        component (so they are not repeated), and any checkpoint it triggered."""
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
        paths = [f["path"] for f in checks.files(list(files))]
        if paths:
            data["files"] = paths
        items: list[tuple[str, dict[str, Any]]] = [("task.progress", data)]
        if task.status == "open":  # work started
            items.append(("task.updated", {"task": task.id, "status": "in_progress"}))
        self.workspace.emit_many(store, items)
        current, saved = self.handoffs.auto_checkpoint(store, task.id, cause="progress")
        return {"task": current, "checkpoint": saved,
                "earlier_failures": self.failures_for(component=component, files=paths)}

    def failure(self, ident: str, error: str, *, component: str | None = None,
                root_cause: str | None = None, fix: str | None = None) -> dict[str, Any]:
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
        earlier = self.failures_for(component=component)
        self.workspace.emit(store, "task.failure", data)
        current, saved = self.handoffs.auto_checkpoint(store, task.id, cause="failure")
        return {"task": current, "checkpoint": saved, "earlier_failures": earlier}

    def failures_for(self, *, component: str | None = None, files: Sequence[str] = (),
                     ) -> list[dict[str, Any]]:
        """Failures recorded on any task for this component, or for a component named in
        one of these file paths: what later work should not repeat."""
        if not component and not files:
            return []
        parts = {p for f in files for p in f.replace("\\", "/").split("/") if p}
        wanted = {c for c in (component, *parts) if c}
        out = [f for store in self.workspace.stores()
               for f in self.workspace.projection(store).failures(wanted)]
        return sorted(out, key=lambda f: f["time"], reverse=True)

    def task_view(self, ident: str) -> dict[str, Any]:
        store, task = self.workspace.find_task(ident)
        proj = self.workspace.projection(store)
        memories = [m for m in proj.memories(task=task.id)]
        return {
            "task": task.to_dict(),
            "memories": [m.to_dict() for m in memories],
            "children": [t.id for t in proj.tasks() if t.parent == task.id],
        }

    # -- resume ----------------------------------------------------------------------------

    def resume(self, *, task: str | None = None, session: str | None = None,
               depth: str = "standard", since: str | datetime | None = None,
               restore: str = "selective", max_chars: int | None = None,
               record: bool = True, max_tokens: int | None = None) -> rehydrate.Resume:
        """What the next agent needs to continue, as bounded Markdown. Sessions found
        interrupted are recorded first, unless `record` is false (a reader that writes
        nothing). `max_tokens`: fill that budget by priority (must-not-redo and must-preserve
        first, then next steps, failures, memories) and name what was left out."""
        if depth not in rehydrate.DEPTHS:
            raise UsageError(f"unknown depth {quote(depth)}; use brief, standard or full")
        if restore not in rehydrate.RESTORE_MODES:
            raise UsageError(f"unknown restore mode {quote(restore)}; use full, selective or "
                             "none")
        since_clock = None
        if since is not None:
            from ...model.memories import parse_moment

            moment = since if isinstance(since, datetime) else parse_moment(since, what="--since")
            since_clock = int(moment.timestamp() * 1_000_000)
        if record:
            try:
                self.lifecycle.detect_interruptions()
            except EngramError as exc:
                self.workspace.warnings.append(str(exc))
        chosen: tasks.Task | None = None
        store: Store | None = None
        if task is not None:
            store, chosen = self.workspace.find_task(task)
        elif session is not None:
            info = self.lifecycle.session_info(session)
            for candidate in self.workspace.stores():
                worked = [e.data["task"]
                          for e in self.workspace.projection(candidate).events(limit=None)
                          if e.session == info.id and e.data.get("task")]
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
        limit = max_chars or settings["resume.max_chars"]
        events_wanted, summaries_wanted = rehydrate.DEPTHS[depth]
        checkpoint = confidence = None
        earlier: list[Mapping[str, Any]] = []
        failures: list[tasks.Failure] = []
        decisions: list[Memory] = []
        gotchas: list[Memory] = []
        others: list[Memory] = []
        events: list[tuple[ev.Event, str]] = []
        interruptions = []
        if chosen is not None and store is not None:
            proj = self.workspace.projection(store)
            checkpoint = chosen.latest_checkpoint
            if checkpoint:
                confidence = cp.confidence(
                    checkpoint, saved_at=checkpoint["time"], now=ev.utc_now(),
                    unchanged=self.handoffs.unchanged_share(
                        store, (checkpoint.get("working_set") or {}).get("files") or []))
                all_checkpoints = [{"task": chosen.id, **checkpoint_from(e, seq)}
                                   for seq, e in enumerate(
                                       self.handoffs.checkpoint_events(store, chosen.id), start=1)]
                earlier = list(reversed(all_checkpoints[:-1]))[:summaries_wanted]
            failures = list(chosen.failures)
            components = {f.component for f in chosen.failures if f.component}
            paths = [f["path"] for f in ((checkpoint or {}).get("working_set") or {})
                     .get("files", [])]
            for other in self.failures_for(files=paths):
                if other["task"] != chosen.id and other["component"] not in components:
                    failures.append(tasks.Failure(**{k: other[k] for k in (
                        "event", "clock", "time", "actor", "session", "error", "component",
                        "root_cause", "fix")}))
            task_memories = list(proj.memories(task=chosen.id,
                                               kinds=("decision", "gotcha", "failure")))
            decisions = [m for m in task_memories if m.kind == "decision"]
            gotchas = [m for m in task_memories if m.kind in ("gotcha", "failure")]
            raw = proj.events(task=chosen.id, since_clock=since_clock, limit=events_wanted)
            events = [(e, describe(e)) for e in raw if ev.substantive(e.kind)]
            worked_in = proj.entity_sessions(chosen.id)
            for info in proj.sessions(states=["interrupted"], ids=sorted(worked_in)):
                interruptions.append({"id": info.id, "agent": info.agent,
                                      "machine": info.machine, "reason": info.reason,
                                      "evidence": info.evidence})
            interruptions = interruptions[:1]
        if restore != "none":
            # The newest valid ones, project store first: all of them for "full", for
            # "selective" the important and the traps (Projection's NOTABLE), read by index.
            seen = {m.id for m in (*decisions, *gotchas)}
            wanted = 20 if restore == "selective" else 200
            now = ev.utc_now()
            for candidate in self.workspace.stores():
                reader = self.workspace.projection(candidate)
                if len(others) < wanted:
                    others += reader.recent_memories(wanted - len(others), now=now,
                                                     exclude=seen, notable=restore == "selective")
        if chosen is None:
            events = [(e, describe(e)) for e in self._recent_events(events_wanted, since)]
        return rehydrate.render(
            task=chosen, checkpoint=checkpoint, confidence=confidence, earlier=earlier,
            failures=failures, decisions=decisions, gotchas=gotchas, memories=others,
            events=events, interruptions=interruptions, limit=limit, max_tokens=max_tokens,
        )

    def _recent_events(self, wanted: int, since: str | datetime | None) -> list[ev.Event]:
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

    def continuity(self, ident: str, *, before: str | None = None,
                   after: str | None = None) -> dict[str, Any]:
        """Score the latest checkpoint (or `after`) against the one before it (or `before`)."""
        store, task = self.workspace.find_task(ident)
        saved = self.handoffs.checkpoints(task.id)
        if len(saved) < 2:
            raise UsageError("continuity compares two checkpoints; this task has "
                             f"{len(saved)} — record a handoff first")

        def pick(ref: str | None, default: dict[str, Any]) -> dict[str, Any]:
            if ref is None:
                return default
            ref = reference(ref, "checkpoint", hint="give its seq number or id")
            # A number is a seq first: a checkpoint's random id may start with the same digit.
            for match in (lambda c: str(c["seq"]) == ref,
                          lambda c: c["checkpoint"].startswith(ref)):
                for item in saved:
                    if match(item):
                        return item
            raise NotFoundError("checkpoint", ref)

        late = pick(after, saved[-1])
        early = pick(before, saved[saved.index(late) - 1] if saved.index(late) else saved[0])
        if early["clock"] >= late["clock"]:
            raise UsageError("the first checkpoint must be older than the second")
        failures_before = [f for f in task.failures if f.clock <= early["clock"]]
        failures_after = [f for f in task.failures if f.clock > early["clock"]]
        scores = metrics.score(early, late, failures_before=failures_before,
                               failures_after=failures_after)
        return {"task": task.id, "before": early["seq"], "after": late["seq"], **scores}
