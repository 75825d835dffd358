"""The continuity half of the public API, mixed into `engram.api.Engram`.

Tasks, progress and failures; checkpoints (handoffs and the automatic ones); sessions and their
interruptions; resume; continuity metrics. Everything written is an event; every method here is
a thin layer of validation and folding over the store.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from ...storage import events as ev
from ...base.errors import (
    AmbiguousIdError,
    EngramError,
    Fix,
    GitError,
    NotFoundError,
    UsageError,
    quote,
)
from ...model.memories import Memory
from ...storage.store import check_relative, git_c
from ...base.validation import Checks, name_form, name_key, reference
from ...base.validation import session_id as check_session_id
from . import checkpoints as cp
from . import metrics, rehydrate
from ...model import sessions, tasks

if TYPE_CHECKING:
    from ...readmodel.projection import Projection
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
    """Mixin: needs the store plumbing of `Engram` (stores, projection, _emit_many, ...)."""

    # -- tasks ---------------------------------------------------------------------------

    def task_create(self, name: str, *, goal: str = "", parent: str | None = None,
                    tags: Iterable[str] = (), status: str = "open") -> tasks.Task:
        store = self.write_store()
        checks = self.checks(store)
        name = self._task_name(checks, name)
        goal = checks.text(goal, field="goal") if goal and goal.strip() else ""
        data = {
            "task": ev.new_entity_id(), "name": name, "goal": goal,
            "status": tasks.check_status(status),
            "tags": list(checks.tags(tags)),
            "parent": self._task(parent, items=False)[1].id if parent is not None else None,
        }
        self._emit(store, "task.created", data)
        return self._task(data["task"])[1]

    @staticmethod
    def _task_name(checks: Checks, name: str) -> str:
        name = checks.text(name, field="name", limit="limits.title_chars", one_line=True)
        return check_relative(name_form(name, "task name"), "task name")

    def _task(self, ident: str | None, *, items: bool = True) -> tuple[Store, tasks.Task]:
        """A task by id prefix, or by its exact name (case-insensitive, in NFC: a name stored
        in another form by another writer is found too). Without `items` its progress and
        failures are left empty: a lookup that costs the same however long the task's history
        is."""
        ident = reference(ident, "task", hint=Fix(
            "give a task id (or its exact name); list them with `engram task list`",
            "give a task id (or its exact name); find ids with task_list"))
        found: list[tuple[Store, Projection, tasks.Task]] = []
        if len(ident) >= 4:
            for store, full, _ in self._resolve(ident, what="task"):
                proj = self.projection(store)
                found += [(store, proj, t) for t in proj.tasks(ids=[full], items=False)]
        if not found:
            key = name_key(ident)
            for store in self.stores():
                proj = self.projection(store)
                found += [(store, proj, t) for t in proj.tasks(items=False)
                          if name_key(t.name) == key]
        if not found:
            raise NotFoundError("task", ident)
        if len({t.id for _, _, t in found}) > 1:
            raise AmbiguousIdError(ident, sorted({t.id for _, _, t in found}))
        store, proj, task = found[0]
        return store, proj.tasks(ids=[task.id])[0] if items else task

    def task(self, ident: str) -> tasks.Task:
        return self._task(ident)[1]

    def task_update(self, ident: str, *, name: str | None = None, goal: str | None = None,
                    status: str | None = None, parent: str | None = None,
                    tags: Iterable[str] | None = None) -> tasks.Task:
        store, task = self._task(ident, items=False)
        checks = self.checks(store)
        changes: dict[str, Any] = {}
        if name is not None:
            changes["name"] = self._task_name(checks, name)
        if goal is not None:
            changes["goal"] = checks.text(goal, field="goal")
        if status is not None:
            changes["status"] = tasks.check_status(status)
        if parent is not None:
            parent_task = self._task(parent, items=False)[1]
            if parent_task.id == task.id:
                raise UsageError("a task cannot be its own parent")
            changes["parent"] = parent_task.id
        if tags is not None:
            changes["tags"] = list(checks.tags(tags))
        current = task.to_dict()
        changes = {k: v for k, v in changes.items() if current.get(k) != v}
        if not changes:
            raise UsageError("nothing to change: give a new name, goal, status, parent or tags")
        self._emit(store, "task.updated", {"task": task.id, **changes})
        return self._task(task.id)[1]

    def tasks(self, *, statuses: Sequence[str] = (), include_closed: bool = False,
              ) -> list[tasks.Task]:
        for status in statuses:
            tasks.check_status(status)
        wanted = statuses or (() if include_closed else tasks.ACTIVE)
        out = [t for store in self.stores() for t in self.projection(store).tasks(
            statuses=wanted)]
        return sorted(out, key=lambda t: (t.updated_clock, t.id), reverse=True)

    def progress(self, ident: str, feature: str, *, status: str = "done",
                 note: str | None = None, component: str | None = None,
                 files: Iterable[str] = ()) -> dict[str, Any]:
        """Record progress on a task. Returns the task, earlier failures of the same
        component (so they are not repeated), and any checkpoint it triggered."""
        store, task = self._task(ident, items=False)
        checks = self.checks(store)
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
        self._emit_many(store, items)
        current, saved = self._auto_checkpoint(store, task.id, cause="progress")
        return {"task": current, "checkpoint": saved,
                "earlier_failures": self.failures_for(component=component, files=paths)}

    def failure(self, ident: str, error: str, *, component: str | None = None,
                root_cause: str | None = None, fix: str | None = None) -> dict[str, Any]:
        """Record a failure on a task; a checkpoint is always saved with it."""
        store, task = self._task(ident, items=False)
        checks = self.checks(store)
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
        self._emit(store, "task.failure", data)
        current, saved = self._auto_checkpoint(store, task.id, cause="failure")
        return {"task": current, "checkpoint": saved, "earlier_failures": earlier}

    def failures_for(self, *, component: str | None = None, files: Sequence[str] = (),
                     ) -> list[dict[str, Any]]:
        """Failures recorded on any task for this component, or for a component named in
        one of these file paths: what later work should not repeat."""
        if not component and not files:
            return []
        parts = {p for f in files for p in f.replace("\\", "/").split("/") if p}
        wanted = {c for c in (component, *parts) if c}
        out = [f for store in self.stores() for f in self.projection(store).failures(wanted)]
        return sorted(out, key=lambda f: f["time"], reverse=True)

    def task_view(self, ident: str) -> dict[str, Any]:
        store, task = self._task(ident)
        proj = self.projection(store)
        memories = [m for m in proj.memories(task=task.id)]
        return {
            "task": task.to_dict(),
            "memories": [m.to_dict() for m in memories],
            "children": [t.id for t in proj.tasks() if t.parent == task.id],
        }

    # -- checkpoints -----------------------------------------------------------------------

    def handoff(self, ident: str, *, summary: str, package: Mapping[str, Any] | None = None,
                reason: str = "handoff", **fields: Any) -> dict[str, Any]:
        """Record a continuation package for a task, render it for review, and commit now.

        `package` (e.g. from a YAML or JSON file) and the keyword fields (completed,
        in_progress, blocked, next, must_not_redo, must_preserve, files, commands, artifacts,
        open_questions, goal) are merged; list fields from both are concatenated.

        A checkpoint saved for an automatic reason (`overflow`, before a context is compacted,
        ...) is neither rendered nor committed at once: it joins the next batched commit. The
        result's `commit` is the commit made, or None (then `warnings` says why).
        """
        if reason not in cp.REASONS:
            raise UsageError(f"unknown checkpoint reason {quote(reason)}; use one of "
                             f"{', '.join(cp.REASONS)}")
        store, task = self._task(ident)
        if package is not None and not isinstance(package, Mapping):
            raise UsageError("a handoff package is a mapping of checkpoint fields")
        merged: dict[str, Any] = dict(package or {})
        for key, value in fields.items():
            if value is None or value == () or value == []:
                continue
            if isinstance(value, (list, tuple)) and isinstance(merged.get(key), list):
                merged[key] = [*merged[key], *value]
            else:
                merged[key] = list(value) if isinstance(value, tuple) else value
        merged["summary"] = summary or merged.get("summary") or ""
        if not isinstance(merged["summary"], str) or not merged["summary"].strip():
            raise UsageError("a handoff needs a summary: say in a line where things stand")
        built = cp.normalise(merged, self.checks(store))
        # What is done and what must hold carries over; the plan is what this handoff says,
        # or the current picture where it says nothing.
        current = self._derived_package(task)
        for name in ("completed", "must_not_redo", "must_preserve"):
            built[name] = [*current[name], *(x for x in built[name] if x not in current[name])]
        for name in ("in_progress", "blocked", "next", "open_questions"):
            if not built[name] and name not in merged:
                built[name] = current[name]
        if not built["working_set"]["files"] and not merged.get("files") and \
                not (merged.get("working_set") or {}).get("files"):
            built["working_set"]["files"] = current["working_set"].get("files", [])
        for key in ("commands", "artifacts"):
            if not built["working_set"][key]:
                built["working_set"][key] = current["working_set"].get(key, [])
        built["goal"] = built["goal"] or current["goal"] or task.goal
        explicit = cp.rendered(reason)
        saved = self._save_checkpoint(store, task, built, reason=reason, render=explicit)
        saved["commit"] = None
        if explicit:
            subject = f"handoff: {task.name} — {ev.one_line(built['summary'])}"
            try:
                saved["commit"] = self.commit_store(store, subject=subject).commit
            except GitError as exc:  # saved all the same; a later commit takes it
                self._warn(f"handoff {saved['seq']} is saved but not committed: {exc}")
        return saved

    def read_package(self, handle: BinaryIO, *, name: str = "-") -> dict[str, Any]:
        """A handoff package (YAML, or JSON when `name` ends in .json) read from `handle`, at
        most `limits.package_bytes` of it. Its fields are checked when it is handed off."""
        limit = self.checks().limit("limits.package_bytes")
        data = handle.read(limit + 1)
        if len(data) > limit:
            raise UsageError(f"{name} is over the limit of {limit} bytes "
                             "(setting limits.package_bytes); shorten it")
        return cp.parse_package(data, name=name)

    def _unchanged_share(self, store: Store, files: Sequence[Mapping[str, Any]],
                         ) -> float | None:
        """Share of working-set files whose content is as it was when the checkpoint saw it
        (None when there are none). A file is compared with the `blob` the checkpoint recorded,
        which needs no history, so every kind of clone (full, shallow, partial) gives the same
        answer; a file of an older checkpoint without one is compared at its commit when this
        clone has it. A file that can be told neither way counts as unknown: half."""
        import pygit2

        from ...git.repo import open_repository

        try:
            repo: pygit2.Repository | None = open_repository(store.work_tree)
        except EngramError:
            repo = None
        known = same = 0.0
        for item in files:
            then = item.get("blob")
            if not isinstance(then, str) and item.get("commit") and repo is not None:
                try:
                    then = str(repo.revparse_single(f"{item['commit']}:{item['path']}").id)
                except (KeyError, ValueError, pygit2.GitError):
                    then = None
            known += 1
            if not isinstance(then, str):
                same += 0.5
                continue
            now = _blob_id(store.work_tree / item["path"])
            same += now == then
        return same / known if known else None

    def _head(self, store: Store) -> str | None:
        from ...git.repo import StoreRepo

        try:
            return StoreRepo(store).head_id()
        except EngramError:
            return None

    def _save_checkpoint(self, store: Store, task: tasks.Task, package: dict[str, Any], *,
                         reason: str, render: bool = False) -> dict[str, Any]:
        """Save a checkpoint; with `render`, also its Markdown for review (handoffs only)."""
        head = self._head(store)
        for item in package["working_set"]["files"]:
            if not item.get("commit"):
                item["commit"] = head
            blob = _blob_id(store.work_tree / item["path"])
            if blob is not None:
                item["blob"] = blob  # the content seen, to tell later whether it changed
        now = ev.utc_now()
        checkpoint_id = ev.new_entity_id()
        data = {
            "task": task.id, "checkpoint": checkpoint_id, "seq": len(task.checkpoints) + 1,
            "reason": reason, **package,
            "confidence": cp.confidence(
                package, saved_at=ev.format_time(now), now=now,
                unchanged=self._unchanged_share(store, package["working_set"]["files"])),
        }
        [event] = self._emit_many(store, [("checkpoint.saved", data)], commit=False)
        saved = {k: v for k, v in data.items() if k != "task"}
        saved.update(time=event.time, actor=event.actor, session=event.session,
                     machine=event.machine, clock=event.clock)
        if render:
            self._render_checkpoint(store, task, saved)
        else:
            with store.lock():
                self._maybe_commit(store)
        return {"task": task.id, **saved}

    def _render_checkpoint(self, store: Store, task: tasks.Task,
                           checkpoint: Mapping[str, Any]) -> Path:
        # The review names the task; its progress (maybe thousands of items) is not needed. It
        # says what changed since the previous rendered handoff, not since an automatic
        # checkpoint the reviewer never saw.
        previous = None
        saved = self._checkpoint_events(store, task.id)
        for seq in range(len(saved), 0, -1):
            event = saved[seq - 1]
            if event.data.get("checkpoint") != checkpoint["checkpoint"] and \
                    cp.rendered(event.data.get("reason")):
                previous = self._checkpoint_from(event, seq)
                break
        text = cp.render({"id": task.id, "name": task.name}, checkpoint, previous)
        path = store.root / cp.render_path(task.id, checkpoint)
        link = store.symlink_in(path)
        if link is not None:  # the checkpoint is saved as an event; only its rendering waits
            self.warnings.append(f"{store.root / link} is a symbolic link inside the store: "
                                 f"the handoff's Markdown was not written through it; remove it "
                                 f"(`{git_c(store)} rm -- {shlex.quote(store.repo_path(link))}`)")
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
        return path

    def checkpoints(self, ident: str) -> list[dict[str, Any]]:
        store, task = self._task(ident)
        return [{"task": task.id, **self._checkpoint_from(e, seq)}
                for seq, e in enumerate(self._checkpoint_events(store, task.id), start=1)]

    def _checkpoint_events(self, store: Store, task_id: str) -> list[ev.Event]:
        """The task's checkpoint.saved events, oldest first (its other events left unread)."""
        return [e for e in self.projection(store).events(
                    entity=task_id, kinds=["checkpoint.saved"], limit=None, newest_first=False)
                if e.kind == "checkpoint.saved"]

    @staticmethod
    def _checkpoint_from(event: ev.Event, seq: int) -> dict[str, Any]:
        """A checkpoint as shown: `seq` is its place among the task's checkpoints in the
        merged order (the number its writer stored may be shared by another machine's)."""
        data = {k: v for k, v in event.data.items() if k != "task"}
        data.update(time=event.time, actor=event.actor, session=event.session,
                    machine=event.machine, clock=event.clock, seq=seq)
        return data

    def _derived_package(self, task: tasks.Task) -> dict[str, Any]:
        """The task's picture now: its latest package, moved on by progress since."""
        latest = task.latest_checkpoint
        package = cp.empty_package()
        if latest:
            for name in (*cp.TEXT_FIELDS, *cp.LIST_FIELDS):
                package[name] = list(latest.get(name) or []) if name in cp.LIST_FIELDS \
                    else latest.get(name) or ""
            package["working_set"] = {k: list(v) for k, v in
                                      (latest.get("working_set") or {}).items()}
        package["goal"] = package["goal"] or task.goal
        since = latest["clock"] if latest else 0
        files = {f["path"] for f in package["working_set"].get("files", [])}
        for item in task.progress:
            if item.clock <= since:
                continue
            for name in ("in_progress", "blocked", "next"):
                if item.feature in package[name] and item.status != name:
                    package[name].remove(item.feature)
            target = {"done": "completed", "in_progress": "in_progress",
                      "blocked": "blocked", "todo": "next"}[item.status]
            if item.feature not in package[target]:
                package[target].append(item.feature)
            for path in item.files:
                if path not in files:
                    files.add(path)
                    package["working_set"].setdefault("files", []).append(
                        {"path": path, "commit": None})
        package["summary"] = package["summary"] if latest else ""
        return package

    def _auto_checkpoint(self, store: Store, task_id: str, *, cause: str,
                         ) -> tuple[tasks.Task, dict[str, Any] | None]:
        """Save a checkpoint when the picture changed enough (see docs/continuity.md).
        Returns the task as it is now (read once) and the checkpoint saved, if any."""
        task = self.projection(store).tasks(ids=[task_id])[0]
        settings = self.settings(store)
        if not settings["checkpoint.auto"]:
            return task, None
        latest = task.latest_checkpoint
        package = self._derived_package(task)
        reasons = []
        if cause == "failure":
            reasons.append("failure")
        before = latest or cp.empty_package()
        plan = cp.jaccard_distance([*(before.get("next") or []),
                                    *(before.get("in_progress") or [])],
                                   [*package["next"], *package["in_progress"]])
        if plan >= settings["checkpoint.plan_change"]:
            reasons.append("plan_change")
        if cp.jaccard_distance(cp.file_paths(before), cp.file_paths(package)) >= \
                settings["checkpoint.working_set_change"]:
            reasons.append("working_set")
        quiet = settings["checkpoint.quiet_minutes"] * 60
        last_time = ev.parse_time(latest["time"]).timestamp() if latest else \
            ev.parse_time(task.created_at).timestamp()
        if time.time() - last_time >= quiet:
            reasons.append("quiet")
        debounce = settings["checkpoint.debounce_seconds"]
        last_by_reason: dict[str, float] | None = None  # read only when a reason needs it
        for reason in reasons:
            if reason != "failure":
                if last_by_reason is None:
                    last_by_reason = self._last_checkpoint_times(store, task.id)
                if time.time() - last_by_reason.get(reason, 0) < debounce:
                    continue
            failure = task.failures[-1] if reason == "failure" and task.failures else None
            if failure is not None:
                where = f" in {failure.component}" if failure.component else ""
                package["summary"] = f"failed{where}: {failure.error}"
            elif not package["summary"]:
                package["summary"] = f"automatic checkpoint ({reason.replace('_', ' ')})"
            saved = self._save_checkpoint(store, task, package, reason=reason)
            return self.projection(store).tasks(ids=[task.id])[0], saved
        return task, None

    def _last_checkpoint_times(self, store: Store, task_id: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for event in self._checkpoint_events(store, task_id):
            out[event.data.get("reason", "")] = ev.parse_time(event.time).timestamp()
        return out

    # -- sessions --------------------------------------------------------------------------

    def session_start(self, *, agent: str = "cli", session_id: str | None = None,
                      pid: int | None = None) -> sessions.Session:
        """Open a session for this process (or `pid`): later events carry its id."""
        store = self.write_store()
        if agent not in sessions.AGENTS:
            raise UsageError(f"unknown agent {quote(agent)}; use one of "
                             f"{', '.join(sessions.AGENTS)}")
        if session_id is None:
            session_id = ev.new_entity_id()
        else:
            session_id = self.checks(store).scan(check_session_id(session_id),
                                                 field="session id", redactable=False)
            if any(self.projection(s).sessions(ids=[session_id]) for s in self.stores()):
                raise UsageError(f"session {session_id} exists already; give a new id, or "
                                 "none for a fresh one")
        pid = pid or os.getpid()
        self.session = session_id
        self._emit(store, "session.started", {"session_id": session_id, "agent": agent,
                                              "pid": pid, "head": self._head(store)})
        sessions.write_beat(store.local_dir, session_id, pid=pid)
        return self.session_info(session_id)

    def close_session_on_exit(self) -> None:
        """Close this process's session at normal exit and on SIGTERM (a kill -9 cannot be
        caught: the next command finds the session stale and records a crash)."""
        import atexit
        import signal

        session_id = self.session
        if not session_id:
            raise UsageError("no session to close: start one first")

        def close(how: str) -> None:
            try:
                if self.session_info(session_id).state == "open":
                    self.session_end(how=how, session_id=session_id)
            except EngramError:
                pass

        def on_sigterm(signum: int, frame: object) -> None:
            close("sigterm")
            raise SystemExit(128 + signum)

        atexit.register(close, "exit")
        signal.signal(signal.SIGTERM, on_sigterm)

    def heartbeat(self, *, context: float | None = None, session_id: str | None = None) -> None:
        """Say the session is alive (and, optionally, how full its context is, 0..1)."""
        store = self.write_store()
        session_id = self._session_id(session_id)
        if context is not None and not 0 <= context <= 1:
            raise UsageError("context is the share of the context window in use, 0 to 1")
        beat = sessions.read_beat(store.local_dir, session_id)
        if beat is None:  # not opened on this clone: it must at least exist, and be open
            self._open_session(session_id)
            beat = {}
        sessions.write_beat(store.local_dir, session_id, pid=beat.get("pid") or os.getpid(),
                            context=context)

    def report_interruption(self, reason: str, *, note: str | None = None,
                            session_id: str | None = None) -> None:
        """Say why the session is about to stop; used when its interruption is classified."""
        if reason not in sessions.REASONS:
            raise UsageError(f"unknown interruption reason {reason!r}; use one of "
                             f"{', '.join(sessions.REASONS)}")
        store = self.write_store()
        session_id = self._open_session(self._session_id(session_id)).id
        data = {"session_id": session_id, "reason": reason}
        if note:
            data["note"] = self.checks(store).text(note, field="note", limit="limits.item_bytes")
        self._emit(store, "session.reported", data)

    def session_end(self, *, outcome: str | None = None, how: str = "exit",
                    session_id: str | None = None) -> sessions.Session:
        """Close the session; its outcome adjusts the importance of the memories it made or
        relied on (success +0.05, failure -0.05). Commits pending events."""
        store = self.write_store()
        session_id = self._session_id(session_id)
        if outcome is not None and outcome not in sessions.OUTCOMES:
            raise UsageError(f"unknown outcome {quote(outcome)}; use one of "
                             f"{', '.join(sessions.OUTCOMES)}")
        session_id = self._open_session(session_id).id
        items: list[tuple[str, dict[str, Any]]] = [
            ("session.ended", {"session_id": session_id, "outcome": outcome, "how": how})]
        delta = {"success": 0.05, "failure": -0.05}.get(outcome or "", 0.0)
        if delta:
            for memory in self._session_memories(store, session_id):
                value = round(min(1.0, max(0.0, memory.importance + delta)), 4)
                if value != memory.importance:
                    items.append(("memory.updated", {"memory": memory.id, "importance": value}))
        self._emit_many(store, items, commit=False)
        sessions.drop_beat(store.local_dir, session_id)
        try:
            self.commit_store(store)
        except EngramError as exc:
            self.warnings.append(f"session closed; events not committed yet: {exc}")
        if self.session == session_id:
            self.session = None
        return self.session_info(session_id)

    def _session_memories(self, store: Store, session_id: str) -> list[Memory]:
        proj = self.projection(store)
        ids = {e.data["memory"] for e in proj.events(kinds=["memory.created"], limit=None)
               if e.session == session_id}
        ids |= set(_read_lines(store.local_dir / "sessions" / f"{session_id}.recalled"))
        return list(proj.memories_by_id(sorted(ids)).values())

    def note_recalled(self, memory_ids: Sequence[str]) -> None:
        """Remember, locally, which memories this session relied on."""
        if not self.session or not memory_ids:
            return
        for store in self.stores():
            path = store.local_dir / "sessions" / f"{self.session}.recalled"
            if path.parent.exists():
                with open(path, "a", encoding="utf-8") as handle:
                    handle.write("".join(f"{m}\n" for m in memory_ids))

    def _session_id(self, session_id: str | None) -> str:
        """The session meant: the one given, else this instance's own."""
        if session_id is None:
            session_id = self.session
            if not session_id:
                raise UsageError("no session: start one with `engram session start`")
        return check_session_id(session_id)

    def _open_session(self, session_id: str) -> sessions.Session:
        current = self.session_info(session_id)
        if current.state != "open":
            raise UsageError(f"session {current.id[:8]} is {current.state}: it is history")
        return current

    def session_info(self, session_id: str) -> sessions.Session:
        session_id = check_session_id(session_id)
        for store in self.stores():
            found = self.projection(store).sessions(ids=[session_id])
            if found:
                return found[0]
        matches = [f for f in self._resolve(session_id, what="session")] \
            if len(session_id) >= 4 else []
        if len({m[1] for m in matches}) == 1:
            return self.projection(matches[0][0]).sessions(ids=[matches[0][1]])[0]
        raise NotFoundError("session", session_id)

    def sessions(self, *, states: Sequence[str] = ()) -> list[sessions.Session]:
        out = [s for store in self.stores() for s in self.projection(store).sessions(
            states=states)]
        return sorted(out, key=lambda s: (s.started_clock, s.id), reverse=True)

    def detect_interruptions(self) -> list[sessions.Session]:
        """Find open sessions of this machine whose process is gone (or whose heartbeat
        stopped), classify why, and record it. Runs when a store is opened for resume or by
        the MCP server; safe to run often."""
        found = []
        machine = ev.machine_name()
        for store in self.stores():
            settings = self.settings(store)
            window = settings["session.stale_minutes"] * 60
            proj = self.projection(store)
            for session in proj.sessions(states=["open"]):
                if session.machine != machine or session.id == self.session:
                    continue
                beat = sessions.read_beat(store.local_dir, session.id)
                why = sessions.staleness(session, beat, machine=machine, window_seconds=window)
                if why is None:
                    continue
                recent = [e for e in proj.events(limit=200) if e.session == session.id]
                recent.reverse()
                reason, evidence = sessions.classify(session, beat, why, recent)
                try:
                    self._emit(store, "session.interrupted", {
                        "session_id": session.id, "reason": reason, "evidence": evidence,
                        "detected_by": self.session or "cli"})
                except EngramError as exc:  # a read-only store still resumes
                    self.warnings.append(f"could not record the interruption: {exc}")
                    continue
                sessions.drop_beat(store.local_dir, session.id)
                found.append(self.projection(store).sessions(ids=[session.id])[0])
        return found

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
                self.detect_interruptions()
            except EngramError as exc:
                self.warnings.append(str(exc))
        chosen: tasks.Task | None = None
        store: Store | None = None
        if task is not None:
            store, chosen = self._task(task)
        elif session is not None:
            info = self.session_info(session)
            for candidate in self.stores():
                worked = [e.data["task"] for e in self.projection(candidate).events(limit=None)
                          if e.session == info.id and e.data.get("task")]
                if worked:
                    store, chosen = self._task(worked[0])
                    break
        else:
            active = self.tasks()
            if len(active) > 1:
                raise AmbiguousResumeError(active)
            if active:
                store, chosen = self._task(active[0].id)
        settings = self.settings(store)
        limit = max_chars or settings["resume.max_chars"]
        events_wanted, summaries_wanted = rehydrate.DEPTHS[depth]
        from ...api import describe

        checkpoint = confidence = None
        earlier: list[Mapping[str, Any]] = []
        failures: list[tasks.Failure] = []
        decisions: list[Memory] = []
        gotchas: list[Memory] = []
        others: list[Memory] = []
        events: list[tuple[ev.Event, str]] = []
        interruptions = []
        if chosen is not None and store is not None:
            proj = self.projection(store)
            checkpoint = chosen.latest_checkpoint
            if checkpoint:
                confidence = cp.confidence(
                    checkpoint, saved_at=checkpoint["time"], now=ev.utc_now(),
                    unchanged=self._unchanged_share(
                        store, (checkpoint.get("working_set") or {}).get("files") or []))
                all_checkpoints = [{"task": chosen.id, **self._checkpoint_from(e, seq)}
                                   for seq, e in enumerate(
                                       self._checkpoint_events(store, chosen.id), start=1)]
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
            for candidate in self.stores():
                reader = self.projection(candidate)
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
            raw = [e for _, e in self.log(limit=fetch, since=since)]
            kept = [e for e in raw if ev.substantive(e.kind)]
            if len(kept) >= wanted or len(raw) < fetch or fetch >= wanted * 64:
                return kept[:wanted]
            fetch *= 4

    # -- metrics ---------------------------------------------------------------------------

    def continuity(self, ident: str, *, before: str | None = None,
                   after: str | None = None) -> dict[str, Any]:
        """Score the latest checkpoint (or `after`) against the one before it (or `before`)."""
        store, task = self._task(ident)
        saved = self.checkpoints(task.id)
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


def _read_lines(path: Path) -> list[str]:
    try:
        return [line.strip() for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def _blob_id(path: Path) -> str | None:
    """The git blob id of a file's content now (None when it is not a readable file)."""
    import pygit2

    try:
        return str(pygit2.hash(path.read_bytes())) if path.is_file() else None
    except OSError:
        return None
