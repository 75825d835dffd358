"""The events a range of commits added to a store, folded into what a reviewer reads.

An event is new in the range when its id is in the head's tree and not in the base's: a
compaction, which moves lines between files without changing them, changes nothing here, and
neither does a merge that brings in lines the base already had. Each memory and task the new
events touch is folded twice, as the base had it and as the head has it, so an update shows its
old text beside the new. Lines that are not events are counted and skipped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...model import memories as mem
from ...model import tasks
from ...storage import events as ev

_NOT_A_CHANGE = ev.LIFECYCLE | {"store.created"}
# The fields of a memory an update may change, in the order they are shown.
FIELDS = (
    "content",
    "kind",
    "tags",
    "scope",
    "source",
    "importance",
    "valid_from",
    "valid_until",
    "at",
    "task",
)


@dataclass(frozen=True)
class MemoryChange:
    memory: str
    change: str  # added, updated, superseded, forgotten, reinforced
    kind: str
    content: str
    status: str  # as the head has it: active, superseded, forgotten
    authors: tuple[str, ...]
    before: str | None = None  # the base's text, when an update changed it
    fields: tuple[str, ...] = ()  # what an update changed
    reason: str | None = None  # why it was forgotten
    by: str | None = None  # the memory that supersedes it

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "authors": list(self.authors), "fields": list(self.fields)}


@dataclass(frozen=True)
class TaskChange:
    task: str
    name: str
    created: bool
    status_before: str | None
    status: str
    authors: tuple[str, ...]
    progress: tuple[Mapping[str, Any], ...] = ()
    failures: tuple[Mapping[str, Any], ...] = ()
    checkpoints: int = 0  # automatic checkpoints saved in the range

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.__dict__,
            "authors": list(self.authors),
            "progress": [dict(p) for p in self.progress],
            "failures": [dict(f) for f in self.failures],
        }


@dataclass(frozen=True)
class HandoffNote:
    task: str
    task_name: str
    checkpoint: str
    summary: str
    next: tuple[str, ...]
    author: str
    time: str

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "next": list(self.next)}


@dataclass
class Review:
    """What a range changed in one store."""

    store: str
    range: str
    base: str | None
    head: str
    notes: list[str] = field(default_factory=list)
    memories: list[MemoryChange] = field(default_factory=list)
    tasks: list[TaskChange] = field(default_factory=list)
    handoffs: list[HandoffNote] = field(default_factory=list)
    authors: dict[str, int] = field(default_factory=dict)  # new events by actor
    events: int = 0  # new events, sessions' comings and goings left out
    skipped: int = 0  # lines of the head's new files that are not events

    @property
    def counts(self) -> dict[str, int]:
        found = Counter(change.change for change in self.memories)
        return {
            "memories_added": found["added"],
            "memories_updated": found["updated"],
            "memories_superseded": found["superseded"],
            "memories_forgotten": found["forgotten"],
            "memories_reinforced": found["reinforced"],
            "tasks_created": sum(t.created for t in self.tasks),
            "tasks_changed": sum(not t.created for t in self.tasks),
            "progress": sum(len(t.progress) for t in self.tasks),
            "failures": sum(len(t.failures) for t in self.tasks),
            "handoffs": len(self.handoffs),
        }

    @property
    def empty(self) -> bool:
        return self.events == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "range": self.range,
            "base": self.base,
            "head": self.head,
            "notes": list(self.notes),
            "counts": self.counts,
            "events": self.events,
            "skipped_lines": self.skipped,
            "authors": dict(self.authors),
            "memories": [m.to_dict() for m in self.memories],
            "tasks": [t.to_dict() for t in self.tasks],
            "handoffs": [h.to_dict() for h in self.handoffs],
        }


def _by_entity(events: Iterable[ev.Event], prefix: str) -> dict[str, list[ev.Event]]:
    found: dict[str, list[ev.Event]] = {}
    for event in events:
        if event.kind.startswith(prefix) and event.entity is not None:
            found.setdefault(event.entity, []).append(event)
    for group in found.values():
        group.sort(key=lambda e: e.sort_key)
    return found


def _authors(events: Iterable[ev.Event]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(e.actor for e in events))


def _memory_change(
    before: mem.Memory | None, after: mem.Memory, new: Sequence[ev.Event]
) -> MemoryChange:
    kinds = {e.kind for e in new}
    common: dict[str, Any] = {
        "memory": after.id,
        "kind": after.kind,
        "content": after.content,
        "status": after.status,
        "authors": _authors(new),
    }
    if before is None:
        return MemoryChange(
            change="added", reason=after.forgotten_reason, by=after.superseded_by, **common
        )
    if "memory.forgotten" in kinds:
        return MemoryChange(change="forgotten", reason=after.forgotten_reason, **common)
    if "memory.superseded" in kinds:
        return MemoryChange(change="superseded", by=after.superseded_by, **common)
    if "memory.updated" in kinds:
        changed = tuple(name for name in FIELDS if getattr(before, name) != getattr(after, name))
        return MemoryChange(
            change="updated",
            fields=changed,
            before=before.content if "content" in changed else None,
            **common,
        )
    return MemoryChange(change="reinforced", **common)


def review(
    store: str,
    text: str,
    base_id: str | None,
    head_id: str,
    base: Mapping[str, ev.Event],
    head: Mapping[str, ev.Event],
    *,
    skipped: int = 0,
    notes: Sequence[str] = (),
) -> Review:
    """What `head` (events by id) holds that `base` does not, folded for a reviewer."""
    new = sorted(
        (e for i, e in head.items() if i not in base and e.kind not in _NOT_A_CHANGE),
        key=lambda e: e.sort_key,
    )
    found = Review(
        store,
        text,
        base_id,
        head_id,
        notes=list(notes),
        skipped=skipped,
        events=len(new),
        authors=dict(Counter(e.actor for e in new).most_common()),
    )
    new_ids = {e.id for e in new}
    before_memories = _by_entity(base.values(), "memory.")
    after_memories = _by_entity(head.values(), "memory.")
    for memory, events in _by_entity(new, "memory.").items():
        after = mem.fold(after_memories.get(memory, ()))
        if after is None:
            continue  # an update whose memory the head does not hold
        found.memories.append(
            _memory_change(mem.fold(before_memories.get(memory, ())), after, events)
        )
    task_kinds = ("task.", "checkpoint.")
    before_tasks = _by_entity((e for e in base.values() if e.kind.startswith(task_kinds)), "")
    after_tasks = _by_entity((e for e in head.values() if e.kind.startswith(task_kinds)), "")
    new_tasks = _by_entity((e for e in new if e.kind.startswith(task_kinds)), "")
    for task_id, events in new_tasks.items():
        now = tasks.fold(after_tasks.get(task_id, ()))
        if now is None:
            continue
        was = tasks.fold(before_tasks.get(task_id, ()))
        checkpoints = [e for e in events if e.kind == "checkpoint.saved"]
        handoffs = [e for e in checkpoints if e.data.get("reason") == "handoff"]
        found.handoffs += [
            HandoffNote(
                task=task_id,
                task_name=now.name,
                checkpoint=e.data["checkpoint"],
                summary=e.data.get("summary") or "",
                next=tuple(e.data.get("next") or ()),
                author=e.actor,
                time=e.time,
            )
            for e in handoffs
        ]
        found.tasks.append(
            TaskChange(
                task=task_id,
                name=now.name,
                created=was is None,
                status_before=was.status if was is not None else None,
                status=now.status,
                authors=_authors(events),
                progress=tuple(
                    {"feature": p.feature, "status": p.status, "note": p.note, "author": p.actor}
                    for p in now.progress
                    if p.event in new_ids
                ),
                failures=tuple(
                    {
                        "error": f.error,
                        "component": f.component,
                        "root_cause": f.root_cause,
                        "author": f.actor,
                    }
                    for f in now.failures
                    if f.event in new_ids
                ),
                checkpoints=len(checkpoints) - len(handoffs),
            )
        )
    return found
