"""Checkpoints: handoffs, the automatic checkpoints, and how they are read back.

A handoff is a continuation package an agent records for a task (what is done, what is next,
what must not be redone, the working set); an automatic checkpoint is saved when progress or a
failure changed the picture enough. Both are `checkpoint.saved` events; a handoff also gets its
Markdown rendering for review and is committed at once. A checkpoint read back is a
`Checkpoint`, a handoff's result a `Handoff`, a package read from a file a `HandoffPackage`.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, BinaryIO

from ...base.errors import EngramError, GitError, UsageError
from ...base.files import atomic_write
from ...base.vocab import CHECKPOINT_REASON
from ...model import tasks
from ...storage import events as ev
from ...storage import shapes
from ...storage.store import git_c
from ..capture.service import add_to_package
from ..workspace import Workspace
from . import checkpoints as cp
from . import workingset

if TYPE_CHECKING:
    from ...storage.store import Store


@dataclass(frozen=True)
class Checkpoint:
    """A task's saved checkpoint as shown: its main fields, and `record`, every field in the
    order it was saved (a package holds what its writer put in it), which `to_dict` gives."""

    task: str
    checkpoint: str
    seq: int
    reason: str
    summary: str
    confidence: float
    time: str
    clock: int
    record: Mapping[str, Any]

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> Checkpoint:
        return cls(
            task=record["task"],
            checkpoint=record["checkpoint"],
            seq=record["seq"],
            reason=record.get("reason") or "",
            summary=record.get("summary") or "",
            confidence=float(record.get("confidence") or 0.0),
            time=record["time"],
            clock=record["clock"],
            record=MappingProxyType(dict(record)),
        )

    def to_dict(self) -> dict[str, Any]:
        return dict(self.record)


@dataclass(frozen=True)
class Handoff:
    """A handoff's checkpoint and the commit that holds it (None: not committed yet)."""

    checkpoint: Checkpoint
    commit: str | None

    def to_dict(self) -> dict[str, Any]:
        return {**self.checkpoint.to_dict(), "commit": self.commit}


@dataclass(frozen=True)
class HandoffPackage:
    """A handoff package as read from a file: its fields, checked when it is handed off."""

    fields: Mapping[str, Any]


class Checkpoints:
    """Saving and reading checkpoints, over a workspace's stores."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

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
        open_questions, goal) are merged; list fields from both are concatenated. The `files`
        field's paths are relative to the directory `relative_to` (the command line's current
        directory; `workingset.from_directory`) when given, else, like a package's, to the
        repository's top.

        A checkpoint saved for an automatic reason (`overflow`, before a context is compacted,
        ...) is neither rendered nor committed at once: it joins the next batched commit. The
        result's `commit` is the commit made, or None (then `warnings` says why).
        """
        CHECKPOINT_REASON.one_of(reason)
        store, task = self.workspace.find_task(ident)
        if isinstance(package, HandoffPackage):
            package = package.fields
        if package is not None and not isinstance(package, Mapping):
            raise UsageError("a handoff package is a mapping of checkpoint fields")
        merged: dict[str, Any] = dict(package or {})
        if relative_to is not None and fields.get("files"):
            fields["files"] = [
                workingset.from_directory(store.work_tree, relative_to, f)
                if isinstance(f, str)
                else f
                for f in fields["files"]
            ]
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
        built = cp.normalise(
            merged, self.workspace.checks(store), names_file=workingset.names_file(store.work_tree)
        )
        cp.check_files(store.work_tree, built["working_set"]["files"])
        workingset.check_pins(store.work_tree, built["working_set"]["files"])
        given = {f["path"] for f in built["working_set"]["files"] if f.get("given")}
        for path in workingset.absent(
            store.work_tree, [f["path"] for f in built["working_set"]["files"]]
        ):
            pinned = "pinned to the commit given" if path in given else "not pinned"
            self.workspace.warn(
                f"working-set file {path!r} does not exist in the work tree: kept as missing, "
                f"{pinned}; check the path"
            )
        # What is done and what must hold carries over; the plan is what this handoff says,
        # or the current picture where it says nothing.
        current = self._derived_package(task)
        for name in ("completed", "must_not_redo", "must_preserve"):
            built[name] = [*current[name], *(x for x in built[name] if x not in current[name])]
        for name in ("in_progress", "blocked", "next", "open_questions"):
            if not built[name] and name not in merged:
                built[name] = current[name]
        if (
            not built["working_set"]["files"]
            and not merged.get("files")
            and not (merged.get("working_set") or {}).get("files")
        ):
            built["working_set"]["files"] = current["working_set"].get("files", [])
        for key in ("commands", "artifacts"):
            if not built["working_set"][key]:
                built["working_set"][key] = current["working_set"].get(key, [])
        built["goal"] = built["goal"] or current["goal"] or task.goal
        explicit = cp.rendered(reason)
        saved = self._save_checkpoint(store, task, built, reason=reason, render=explicit)
        commit = None
        if explicit:
            subject = f"handoff: {task.name} — {ev.one_line(built['summary'])}"
            try:
                commit = self.workspace.commit_store(store, subject=subject).commit
            except GitError as exc:  # saved all the same; a later commit takes it
                self.workspace.warn(f"handoff {saved.seq} is saved but not committed: {exc}")
        return Handoff(saved, commit)

    def read_package(self, handle: BinaryIO, *, name: str = "-") -> HandoffPackage:
        """A handoff package (YAML, or JSON when `name` ends in .json) read from `handle`, at
        most `limits.package_bytes` of it. Its fields are checked when it is handed off."""
        limit = self.workspace.checks().limit("limits.package_bytes")
        data = handle.read(limit + 1)
        if len(data) > limit:
            raise UsageError(
                f"{name} is over the limit of {limit} bytes "
                "(setting limits.package_bytes); shorten it"
            )
        return HandoffPackage(cp.parse_package(data, name=name))

    def unchanged_share(
        self,
        store: Store,
        files: Sequence[Mapping[str, Any]],
    ) -> float | None:
        """Share of working-set files whose content is as it was when the checkpoint saw it
        (None when there are none). A file is compared with the `blob` the checkpoint recorded,
        which needs no history, so every kind of clone (full, shallow, partial) gives the same
        answer; a file of an older checkpoint without one is compared at its commit when this
        clone has it. A file that can be told neither way counts as unknown: half."""
        from ...git.tracked import TrackedFiles, work_tree_blob

        try:
            repo: TrackedFiles | None = TrackedFiles(store.work_tree)
        except EngramError:
            repo = None
        known = same = 0.0
        for item in files:
            then = item.get("blob")
            if not isinstance(then, str) and item.get("commit") and repo is not None:
                then = repo.blob_at(str(item["commit"]), str(item["path"]))
            known += 1
            if not isinstance(then, str):
                same += 0.5
                continue
            now = work_tree_blob(store.work_tree, str(item["path"]))
            same += now == then
        return same / known if known else None

    def _save_checkpoint(
        self,
        store: Store,
        task: tasks.Task,
        package: dict[str, Any],
        *,
        reason: str,
        render: bool = False,
    ) -> Checkpoint:
        """Save a checkpoint; with `render`, also its Markdown for review (handoffs only)."""
        head = head_commit(store)
        # Each file at the newest commit that changed it, with the content seen (to tell later
        # whether it changed); the commit the repository was at, to tell what was done since.
        workingset.pin(store.work_tree, package["working_set"]["files"])
        now = ev.utc_now()
        checkpoint_id = ev.new_entity_id()
        data = {
            "task": task.id,
            "checkpoint": checkpoint_id,
            "seq": len(task.checkpoints) + 1,
            "reason": reason,
            **package,
            **({"head": head} if head else {}),
            "confidence": cp.confidence(
                package,
                saved_at=ev.format_time(now),
                now=now,
                unchanged=self.unchanged_share(store, package["working_set"]["files"]),
            ),
        }
        [event] = self.workspace.emit_many(store, [("checkpoint.saved", data)], commit=False)
        saved = {k: v for k, v in data.items() if k != "task"}
        saved.update(
            time=event.time,
            actor=event.actor,
            session=event.session,
            machine=event.machine,
            clock=event.clock,
        )
        if render:
            self._render_checkpoint(store, task, saved)
        else:
            with store.lock():
                self.workspace.maybe_commit(store)
        return Checkpoint.of({"task": task.id, **saved})

    def _render_checkpoint(
        self, store: Store, task: tasks.Task, checkpoint: Mapping[str, Any]
    ) -> Path:
        # The review names the task; its progress (maybe thousands of items) is not needed. It
        # says what changed since the previous rendered handoff, not since an automatic
        # checkpoint the reviewer never saw.
        previous = None
        saved = self.checkpoint_events(store, task.id)
        for seq in range(len(saved), 0, -1):
            event = saved[seq - 1]
            if event.data.get("checkpoint") != checkpoint["checkpoint"] and cp.rendered(
                event.data.get("reason")
            ):
                previous = checkpoint_from(event, seq)
                break
        text = cp.render({"id": task.id, "name": task.name}, checkpoint, previous)
        path = store.root / cp.render_path(task.id, checkpoint)
        link = store.symlink_in(path)
        if link is not None:  # the checkpoint is saved as an event; only its rendering waits
            self.workspace.warnings.append(
                f"{store.root / link} is a symbolic link inside the store: "
                f"the handoff's Markdown was not written through it; remove it "
                f"(`{git_c(store)} rm -- {shlex.quote(store.repo_path(link))}`)"
            )
            return path
        in_the_way = shapes.in_the_way(store, path)
        if in_the_way is not None:  # a file `handoffs` a clone brought: the same, and say so
            what = "the handoff is saved as an event, but its Markdown was not written"
            self.workspace.warnings.append(
                f"{shapes.problem(store, in_the_way, what=what)}; "
                f"fix: {shapes.fix(store, in_the_way)}"
            )
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, text, durable=False, hidden=True)
        return path

    def checkpoints(self, ident: str) -> list[Checkpoint]:
        store, task = self.workspace.find_task(ident)
        return [
            Checkpoint.of({"task": task.id, **checkpoint_from(e, seq)})
            for seq, e in enumerate(self.checkpoint_events(store, task.id), start=1)
        ]

    def checkpoint_events(self, store: Store, task_id: str) -> list[ev.Event]:
        """The task's checkpoint.saved events, oldest first (its other events left unread)."""
        return [
            e
            for e in self.workspace.projection(store).events(
                entity=task_id, kinds=["checkpoint.saved"], limit=None, newest_first=False
            )
            if e.kind == "checkpoint.saved"
        ]

    def _derived_package(self, task: tasks.Task) -> dict[str, Any]:
        """The task's picture now: its latest package, moved on by progress since."""
        latest = task.latest_checkpoint
        package = cp.empty_package()
        if latest:
            for name in (*cp.TEXT_FIELDS, *cp.LIST_FIELDS):
                package[name] = (
                    list(latest.get(name) or [])
                    if name in cp.LIST_FIELDS
                    else latest.get(name) or ""
                )
            package["working_set"] = {
                k: list(v) for k, v in (latest.get("working_set") or {}).items()
            }
        package["goal"] = package["goal"] or task.goal
        since = latest["clock"] if latest else 0
        files = {f["path"] for f in package["working_set"].get("files", [])}
        for item in task.progress:
            if item.clock <= since:
                continue
            for name in ("in_progress", "blocked", "next"):
                if item.feature in package[name] and item.status != name:
                    package[name].remove(item.feature)
            target = {
                "done": "completed",
                "in_progress": "in_progress",
                "blocked": "blocked",
                "todo": "next",
            }[item.status]
            if item.feature not in package[target]:
                package[target].append(item.feature)
            for path in item.files:
                if path not in files:
                    files.add(path)
                    package["working_set"].setdefault("files", []).append(
                        {"path": path, "commit": None}
                    )
        package["summary"] = package["summary"] if latest else ""
        return package

    def auto_checkpoint(
        self,
        store: Store,
        task_id: str,
        *,
        cause: str,
    ) -> tuple[tasks.Task, Checkpoint | None]:
        """Save a checkpoint when the picture changed enough (see docs/continuity.md).
        Returns the task as it is now (read once) and the checkpoint saved, if any."""
        task = self.workspace.projection(store).tasks(ids=[task_id])[0]
        settings = self.workspace.settings(store)
        if not settings["checkpoint.auto"]:
            return task, None
        latest = task.latest_checkpoint
        package = self._derived_package(task)
        # What client hooks captured in the current session: files edited, commands failed.
        add_to_package(store, package, most=self.workspace.checks(store).limit("limits.list_items"))
        reasons = []
        if cause == "failure":
            reasons.append("failure")
        before = latest or cp.empty_package()
        plan = cp.jaccard_distance(
            [*(before.get("next") or []), *(before.get("in_progress") or [])],
            [*package["next"], *package["in_progress"]],
        )
        if plan >= settings["checkpoint.plan_change"]:
            reasons.append("plan_change")
        if (
            cp.jaccard_distance(cp.file_paths(before), cp.file_paths(package))
            >= settings["checkpoint.working_set_change"]
        ):
            reasons.append("working_set")
        quiet = settings["checkpoint.quiet_minutes"] * 60
        last_time = (
            ev.parse_time(latest["time"]).timestamp()
            if latest
            else ev.parse_time(task.created_at).timestamp()
        )
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
            return self.workspace.projection(store).tasks(ids=[task.id])[0], saved
        return task, None

    def _last_checkpoint_times(self, store: Store, task_id: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for event in self.checkpoint_events(store, task_id):
            out[event.data.get("reason", "")] = ev.parse_time(event.time).timestamp()
        return out


def checkpoint_from(event: ev.Event, seq: int) -> dict[str, Any]:
    """A checkpoint as shown: `seq` is its place among the task's checkpoints in the
    merged order (the number its writer stored may be shared by another machine's)."""
    data = {k: v for k, v in event.data.items() if k != "task"}
    data.update(
        time=event.time,
        actor=event.actor,
        session=event.session,
        machine=event.machine,
        clock=event.clock,
        seq=seq,
    )
    return data


def head_commit(store: Store) -> str | None:
    """The commit the store's repository is at (None: none yet, or unreadable)."""
    from ...git.repo import StoreRepo

    try:
        return StoreRepo(store).head_id()
    except EngramError:
        return None
