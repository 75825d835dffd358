"""Read an mcp-engram data directory: its append-only event log, as Engram events.

The log is `events/events-YYYYMMDD.jsonl` (older days gzipped to `.jsonl.gz`), one object a
line: `{"ts", "seq", "kind", "payload", "engram_version", "schema_version"}`. Its ids are
integers of one installation's database, so each record's Engram id is derived from the id
and the time the record was created there (`derived_id`); a reference to it later in the log
resolves through the same table.

How its kinds become Engram events (docs/import-export.md has the details):

- `task.create`, `task.spawn`, `task.retry` -> `task.created`; `task.update` -> `task.updated`
- `checkpoint.write` -> `checkpoint.saved`, its summary taken from the handoff, failure or
  progress that caused it
- `memory.store` of a failure or progress for a task -> `task.failure`, `task.progress`; of a
  handoff for a task that no checkpoint refers to -> `checkpoint.saved`; any other ->
  `memory.created`
- `memory.update`, `memory.delete` -> `memory.updated`, `memory.forgotten`
- `session.start`, `session.end`, `session.outcome` -> `session.started`, then
  `session.interrupted` or `session.ended`

Everything else (recall logs, execution lineage, snapshots, drift and maintenance records) has
no Engram counterpart and is counted as not imported.

A line that is not what the log says, or whose events fail the checks every write passes
(limits, names, paths, secrets), is skipped and reported with its file and line, with every
event it would have made: the rest is imported. A task or session that a skipped line would
have created is created by the next line that refers to it, as for a log that begins
mid-history.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from ...base.errors import UsageError
from ...model.sessions import REASONS as INTERRUPTION_REASONS
from ...storage import events as ev
from ..continuity import checkpoints as cp
from .mcp_engram_fold import Fold, KnownMemory, KnownTask
from .mcp_engram_log import (
    CHECKPOINT_REASON,
    FORMAT,
    MEMORY_KIND,
    PROGRESS_STATUS,
    TASK_STATUS,
    as_list,
)
from .plan import Checker, Input, Plan, derived_id, from_micros


class Reader(Fold):
    """Map each kind of the log to Engram events (the module's docstring lists them)."""

    def __init__(self, path: Path, check: Checker, source: Input) -> None:
        super().__init__(path, check, source)
        self.handlers = {
            "task.create": self._task_create,
            "task.spawn": self._task_spawn,
            "task.retry": self._task_retry,
            "task.update": self._task_update,
            "checkpoint.write": self._checkpoint_write,
            "memory.store": self._memory_store,
            "memory.update": self._memory_update,
            "memory.delete": self._memory_delete,
            "session.start": self._session_start,
            "session.end": self._session_end,
            "session.outcome": self._session_outcome,
        }

    # -- tasks and checkpoints -----------------------------------------------------------

    def _new_task(
        self, payload: dict[str, Any], *, name: Any, goal: Any, parent: str | None
    ) -> None:
        key = self._need(payload, "task_id")
        task_id = derived_id(FORMAT, "task", key, self.ts_us)
        status = TASK_STATUS.get(str(payload.get("status") or "planning"), "open")
        name = self._title(name) or self._title(f"task {key}")
        goal = self._text(goal, "goal")
        self.tasks[key] = KnownTask(task_id, name, goal, status)
        self._emit(
            "task.created",
            {
                "task": task_id,
                "name": name,
                "goal": goal,
                "status": status,
                "parent": parent,
                "tags": [],
            },
            f"task:{key}",
        )

    def _task_create(self, payload: dict[str, Any]) -> None:
        self._new_task(
            payload, name=payload.get("name") or "", goal=payload.get("goal") or "", parent=None
        )

    def _task_spawn(self, payload: dict[str, Any]) -> None:
        parent = payload.get("parent_task_id")
        self._new_task(
            payload,
            name=payload.get("name") or "",
            goal=payload.get("goal") or "",
            parent=self._task(parent) if parent is not None else None,
        )

    def _task_retry(self, payload: dict[str, Any]) -> None:
        original = payload.get("retry_of_task_id")
        known = (
            self.tasks.get(self._key(original, "retry_of_task_id"))
            if original is not None
            else None
        )
        attempt = payload.get("attempt")
        name = known.name if known else f"task {self._need(payload, 'task_id')}"
        if isinstance(attempt, int) and not isinstance(attempt, bool) and attempt:
            name = f"{name} (attempt {attempt})"
        self._new_task(payload, name=name, goal=known.goal if known else "", parent=None)

    def _task_update(self, payload: dict[str, Any]) -> None:
        key = self._need(payload, "task_id")
        task_id = self._task(key)
        task = self.tasks[key]
        changes: dict[str, Any] = {}
        if payload.get("status") is not None:
            status = TASK_STATUS.get(str(payload["status"]), "open")
            if status != task.status:
                changes["status"] = status
        if payload.get("goal") is not None:
            goal = self._text(payload["goal"], "goal")
            if goal != task.goal:
                changes["goal"] = goal
        if not changes:
            self.plan.ignore("task.update without a change Engram keeps")
            return
        self._emit("task.updated", {"task": task_id, **changes}, f"task:{key}")
        task.status = changes.get("status", task.status)
        task.goal = changes.get("goal", task.goal)

    def _checkpoint_write(self, payload: dict[str, Any]) -> None:
        key = self._need(payload, "checkpoint_id")
        task_id = self._task(self._need(payload, "task_id"))
        state = payload.get("state") or {}
        if not isinstance(state, dict):
            raise self._fail("checkpoint.write state is not an object")
        ref = payload.get("source_memory_id")
        source = self.memories.get(self._key(ref, "source_memory_id")) if ref is not None else None
        summary = _summary(source) if source else ""
        session = payload.get("source_session_id")
        package = self._package(state, summary=summary)
        version = payload.get("version")
        reason = CHECKPOINT_REASON.get(str(payload.get("checkpoint_reason")), "manual")
        seq = (
            version
            if isinstance(version, int) and not isinstance(version, bool) and version >= 0
            else 0
        )
        self._checkpoint(
            task_id,
            derived_id(FORMAT, "checkpoint", key, self.ts_us),
            seq=seq,
            reason=reason,
            package=package,
            origin=f"checkpoint:{key}",
            session=self._session(session) if session else None,
        )

    def _checkpoint(
        self,
        task_id: str,
        checkpoint_id: str,
        *,
        seq: int,
        reason: str,
        package: dict[str, Any],
        origin: str,
        session: str | None,
    ) -> None:
        moment = ev.format_time(from_micros(self.ts_us))
        confidence = cp.confidence(package, saved_at=moment, now=ev.parse_time(moment))
        self._emit(
            "checkpoint.saved",
            {
                "task": task_id,
                "checkpoint": checkpoint_id,
                "seq": seq,
                "reason": reason,
                **package,
                "confidence": confidence,
            },
            origin,
            session=session,
        )

    def _package(self, state: dict[str, Any], *, summary: str) -> dict[str, Any]:
        working = state.get("working_set") or {}
        if not isinstance(working, dict):
            working = {}
        files: dict[str, dict[str, Any]] = {}
        artifacts = []
        listed = as_list(working.get("files"))
        most = self.check.checks.limit("limits.list_items")
        if len(listed) > most:
            raise self._fail(
                f"{len(listed)} working-set files, over the limit of {most} "
                "(setting limits.list_items)"
            )
        for path in listed:
            try:
                checked = self.check.file(str(path))
                files.setdefault(checked["path"], checked)
            except UsageError:  # an absolute path, or one outside the repository
                artifacts.append(f"file: {path}")
        artifacts += [f"tool: {t}" for t in as_list(working.get("tools"))]
        artifacts += [str(a) for a in as_list(working.get("artifacts"))]
        not_redo = []
        for item in as_list(state.get("must_not_redo")):
            if isinstance(item, dict):
                action = str(item.get("action") or "").strip()
                why = str(item.get("reason") or "already_completed")
                if action:
                    not_redo.append(
                        action
                        if why == "already_completed"
                        else f"{action} ({why.replace('_', ' ')})"
                    )
            elif item:
                not_redo.append(item)
        package = cp.empty_package()
        package.update(
            goal=self._text(state.get("goal"), "goal"),
            summary=self._text(summary, "summary"),
            completed=self._items(state.get("completed"), "completed"),
            in_progress=self._items(state.get("in_progress"), "in_progress"),
            blocked=self._items(
                [*as_list(state.get("blocked")), *as_list(state.get("blocked_reasons"))], "blocked"
            ),
            next=self._items(state.get("preferred_next"), "next"),
            must_not_redo=self._items(not_redo, "must_not_redo"),
            must_preserve=self._items(
                [*as_list(state.get("must_preserve")), *as_list(state.get("active_constraints"))],
                "must_preserve",
            ),
        )
        package["working_set"] = {
            "files": list(files.values()),
            "commands": [],
            "artifacts": self._items(artifacts, "artifacts"),
        }
        return package

    def _memory_store(self, payload: dict[str, Any]) -> None:
        key = self._need(payload, "memory_id")
        meta = payload.get("metadata") or {}
        if not isinstance(meta, dict):
            raise self._fail("memory.store metadata is not an object")
        kind = str(meta.get("type") or "")
        content = payload.get("content")
        if not isinstance(content, str):
            raise self._fail("memory.store without content")
        importance = payload.get("importance", 0.5)
        importance = (
            min(1.0, max(0.0, float(importance)))
            if isinstance(importance, (int, float)) and not isinstance(importance, bool)
            else 0.5
        )
        record = KnownMemory(None, kind, meta, content, importance)
        self.memories[key] = record
        task_ref = meta.get("task_id")
        origin = f"memory:{key}"
        if task_ref is not None and kind == "failure":
            data: dict[str, Any] = {
                "task": self._task(task_ref),
                "error": self._text(meta.get("error") or content, "error", required=True),
            }
            component = self._name(meta.get("component"), "component")
            if component:
                data["component"] = component
            for name in ("root_cause", "fix"):
                if meta.get(name):
                    data[name] = self._text(meta[name], name)
            self._emit("task.failure", data, origin)
            return
        if task_ref is not None and kind == "progress":
            data = {
                "task": self._task(task_ref),
                "feature": self._text(
                    meta.get("feature") or content, "feature", "limits.item_bytes", required=True
                ),
                "status": PROGRESS_STATUS.get(str(meta.get("status")), "in_progress"),
            }
            note = "; ".join(
                x
                for x in [
                    str(meta.get("notes") or "").strip(),
                    *(f"blocker: {b}" for b in as_list(meta.get("blockers"))),
                    f"{meta['completion']:g}% complete"
                    if isinstance(meta.get("completion"), (int, float)) and meta.get("completion")
                    else "",
                ]
                if x
            )
            if note:
                data["note"] = self._text(note, "note")
            self._emit("task.progress", data, origin)
            return
        if task_ref is not None and kind == "handoff":
            if key in self.checkpointed:
                return  # its checkpoint.write follows and carries the package
            known = self.tasks.get(self._key(task_ref, "task_id"))
            package = self._package(
                {
                    "goal": known.goal if known else "",
                    "completed": meta.get("completed"),
                    "in_progress": meta.get("in_progress"),
                    "blocked": meta.get("blocked"),
                    "preferred_next": meta.get("next_steps"),
                },
                summary=_summary(record),
            )
            task_id = self._task(task_ref)
            self._checkpoint(
                task_id,
                derived_id(FORMAT, "handoff", key, self.ts_us),
                seq=0,
                reason="handoff",
                package=package,
                origin=origin,
                session=None,
            )
            return
        category = str(payload.get("category") or "fact")
        memory_kind = {
            "handoff": "note",
            "progress": "note",
            "session_failure": "lesson",
            "failure": "failure",
        }.get(kind, MEMORY_KIND.get(category, "fact"))
        record.id = derived_id(FORMAT, "memory", key, self.ts_us)
        data = {
            "memory": record.id,
            "content": self._text(content, "content", "limits.content_bytes", required=True),
            "kind": memory_kind,
            "tags": ["assumption"] if category == "assumption" else [],
            "scope": self._name(meta.get("component"), "scope") if kind == "failure" else None,
            "source": "agent-inferred",
            "importance": importance,
            "valid_from": None,
            "valid_until": None,
        }
        known = self.tasks.get(self._key(task_ref, "task_id")) if task_ref is not None else None
        if known is not None:
            data["task"] = known.id
        self._emit("memory.created", data, origin)

    def _memory_update(self, payload: dict[str, Any]) -> None:
        key = self._need(payload, "memory_id")
        record = self.memories.get(key)
        if record is None or record.id is None or record.forgotten:
            self.plan.ignore("memory.update of a memory not imported")
            return
        changes: dict[str, Any] = {}
        if payload.get("content") is not None:
            content = self._text(
                payload["content"], "content", "limits.content_bytes", required=True
            )
            if content != record.content:
                changes["content"] = content
        value = payload.get("importance")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = min(1.0, max(0.0, float(value)))
            if value != record.importance:
                changes["importance"] = value
        if not changes:
            self.plan.ignore("memory.update without a change")
            return
        self._emit("memory.updated", {"memory": record.id, **changes}, f"memory:{key}")
        record.content = changes.get("content", record.content)
        record.importance = changes.get("importance", record.importance)

    def _memory_delete(self, payload: dict[str, Any]) -> None:
        key = self._need(payload, "memory_id")
        record = self.memories.get(key)
        if record is None or record.id is None or record.forgotten:
            self.plan.ignore("memory.delete of a memory not imported")
            return
        self._emit(
            "memory.forgotten",
            {"memory": record.id, "reason": "deleted in mcp-engram"},
            f"memory:{key}",
        )
        record.forgotten = True

    def _session_start(self, payload: dict[str, Any]) -> None:
        key = self._need(payload, "session_id")
        if derived_id(FORMAT, "session", key) in self.sessions:
            self.plan.ignore("session.start of a session already started")
            return
        self._session(key)

    def _open(self, session_id: str, why: str) -> bool:
        if self.sessions.get(session_id) != "open":
            self.plan.ignore(why)
            return False
        return True

    def _session_end(self, payload: dict[str, Any]) -> None:
        key = self._need(payload, "session_id")
        session_id = self._session(key)
        if not self._open(session_id, "session.end of a session already closed"):
            return
        end_type = str(payload.get("end_type") or "handoff")
        reason = payload.get("interruption_reason")
        origin = f"session:{key}"
        if end_type == "interrupted" or reason:
            context = payload.get("interruption_context")
            evidence = "classified by mcp-engram" + (
                f": {ev.one_line(orjson.dumps(context).decode(), 400)}" if context else ""
            )
            self._emit(
                "session.interrupted",
                {
                    "session_id": session_id,
                    "reason": reason if reason in INTERRUPTION_REASONS else "unknown",
                    "evidence": self._text(evidence, "evidence"),
                    "detected_by": FORMAT,
                },
                origin,
                session=session_id,
            )
        else:
            self._emit(
                "session.ended",
                {"session_id": session_id, "outcome": None, "how": "exit"},
                origin,
                session=session_id,
            )
        self.sessions[session_id] = "closed"

    def _session_outcome(self, payload: dict[str, Any]) -> None:
        key = self._need(payload, "session_id")
        session_id = self._session(key)
        if not self._open(session_id, "session.outcome after the session closed"):
            return
        outcome = payload.get("outcome")
        self._emit(
            "session.ended",
            {
                "session_id": session_id,
                "outcome": outcome if outcome in ("success", "failure") else "unknown",
                "how": "exit",
            },
            f"session:{key}",
            session=session_id,
        )
        self.sessions[session_id] = "closed"


def _summary(memory: KnownMemory) -> str:
    meta = memory.meta
    if memory.type == "handoff":
        return ev.one_line(meta.get("summary") or memory.content, 400)
    if memory.type == "failure":
        where = f" in {meta['component']}" if meta.get("component") else ""
        return ev.one_line(f"failed{where}: {meta.get('error') or memory.content}", 400)
    if memory.type == "progress":
        return ev.one_line(f"progress: {meta.get('feature')} [{meta.get('status')}]", 400)
    return ""


def read(path: Path, check: Checker, source: Input) -> Plan:
    return Reader(path, check, source).read()
