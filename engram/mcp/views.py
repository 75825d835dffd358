"""Facade results as MCP tool results: memories, tasks, checkpoints, remember outcomes and
write receipts turned into the result models, cut to the output budget (`fit`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from ..search.neardup import describe as describe_differences
from .models import (
    ITEM_CHARS,
    LIST_ITEMS,
    OUTPUT_CHARS,
    CheckpointView,
    EarlierFailure,
    FailureView,
    MemoryView,
    ProgressView,
    ReceiptIndex,
    ReceiptView,
    Related,
    RememberResult,
    TaskChange,
    TaskSummary,
    TaskView,
    WorkingFile,
    WorkingSet,
)

if TYPE_CHECKING:
    from .. import api

# -- views -----------------------------------------------------------------------------------


def memory_view(
    memory: Any,
    *,
    limit: int | None = ITEM_CHARS,
    fresh: Any = None,
) -> MemoryView:
    content = memory.content
    cut = limit is not None and len(content) > limit
    return MemoryView(
        id=memory.id,
        kind=memory.kind,
        content=content[:limit] + "…" if cut else content,
        content_truncated=cut,
        tags=list(memory.tags),
        scope=memory.scope,
        store=memory.store,
        status=memory.status,
        importance=memory.importance,
        source=memory.source,
        task=memory.task,
        created_at=memory.created_at,
        updated_at=memory.updated_at,
        created_by=memory.created_by,
        version=memory.version,
        valid_from=memory.valid_from,
        valid_until=memory.valid_until,
        supersedes=list(memory.supersedes),
        superseded_by=memory.superseded_by,
        forgotten_reason=memory.forgotten_reason,
        reinforced=memory.reinforced,
        cites=[c["path"] for c in memory.citations],
        freshness=None if fresh is None else fresh.state,
        stale_because=fresh.describe() if fresh is not None and fresh.stale else None,
    )


def _items(value: Any) -> list[Any]:
    return list(value or [])[-LIST_ITEMS:]


def checkpoint_view(data: Mapping[str, Any] | None) -> CheckpointView | None:
    if not data:
        return None
    working = data.get("working_set") or {}
    return CheckpointView(
        checkpoint=data["checkpoint"],
        seq=data["seq"],
        reason=data.get("reason") or "",
        summary=data.get("summary") or "",
        goal=data.get("goal") or "",
        completed=_items(data.get("completed")),
        in_progress=_items(data.get("in_progress")),
        blocked=_items(data.get("blocked")),
        next=list(data.get("next") or [])[:LIST_ITEMS],
        must_not_redo=_items(data.get("must_not_redo")),
        must_preserve=_items(data.get("must_preserve")),
        open_questions=_items(data.get("open_questions")),
        working_set=WorkingSet(
            files=[
                WorkingFile(path=f["path"], commit=f.get("commit"))
                for f in _items(working.get("files"))
            ],
            commands=_items(working.get("commands")),
            artifacts=_items(working.get("artifacts")),
        ),
        confidence=float(data.get("confidence") or 0.0),
        time=data.get("time") or "",
        actor=data.get("actor") or "",
        session=data.get("session"),
    )


def task_detail(task: Any) -> TaskView:
    return TaskView(
        id=task.id,
        name=task.name,
        goal=task.goal,
        status=task.status,
        parent=task.parent,
        tags=list(task.tags),
        store=task.store,
        created_at=task.created_at,
        updated_at=task.updated_at,
        created_by=task.created_by,
        progress=[
            ProgressView(
                feature=p.feature,
                status=p.status,
                note=p.note,
                component=p.component,
                files=list(p.files),
                time=p.time,
                actor=p.actor,
            )
            for p in task.progress[-50:]
        ],
        failures=[
            FailureView(
                error=f.error,
                component=f.component,
                root_cause=f.root_cause,
                fix=f.fix,
                time=f.time,
                actor=f.actor,
                candidate=f.candidate,
            )
            for f in task.failures[-50:]
        ],
        checkpoints=len(task.checkpoints),
        latest_checkpoint=checkpoint_view(task.latest_checkpoint),
    )


def task_summary(task: Any) -> TaskSummary:
    latest = task.latest_checkpoint or {}
    return TaskSummary(
        id=task.id,
        name=task.name,
        status=task.status,
        goal=task.goal,
        parent=task.parent,
        tags=list(task.tags),
        updated_at=task.updated_at,
        latest_summary=latest.get("summary"),
    )


def _earlier(items: Sequence[api.EarlierFailure]) -> list[EarlierFailure]:
    return [
        EarlierFailure(
            task=f.task,
            task_name=f.task_name,
            error=f.error,
            component=f.component,
            root_cause=f.root_cause,
            fix=f.fix,
            time=f.time,
        )
        for f in items[:10]
    ]


M = TypeVar("M", bound=BaseModel)


def fit(items: Sequence[M], budget: int = OUTPUT_CHARS) -> tuple[list[M], bool]:
    """As many items as fit in `budget` characters of JSON (always at least one)."""
    kept: list[M] = []
    used = 0
    for item in items:
        size = len(item.model_dump_json())
        if kept and used + size > budget:
            return kept, True
        kept.append(item)
        used += size
    return kept, False


def remembered(result: Any) -> RememberResult:
    related = [
        Related(id=m.id, similarity=round(s, 4), summary=m.summary()) for m, s in result.related
    ]
    if result.duplicate:
        note = (
            f"reinforced existing memory {result.memory.id[:8]} instead of adding a "
            "duplicate (it says the same facts; your text is kept in the reinforcement "
            "event)"
        )
    elif related:
        new = result.memory.id[:8]
        differ = "".join(
            f"; the new text differs from {r.id[:8]} in {describe_differences(found)}"
            for r in related
            if (found := result.differs_from(r.id))
        )
        note = (
            f"remembered {new}; {len(related)} close memories may contradict it{differ}. "
            "If one is now wrong, replace it: memory_forget with its id and replace_with "
            f"set to this same text (it is then superseded by {new})"
        )
    else:
        note = f"remembered {result.memory.id[:8]} in the {result.memory.store} store"
    if result.uncompared:
        note += (
            f"; not compared with {result.uncompared:,} memories that have no vector yet "
            "(a bulk write being embedded)"
        )
    return RememberResult(
        memory=memory_view(result.memory, limit=None),
        duplicate=result.duplicate,
        related=related,
        note=note,
    )


def for_agents(resumed: Any) -> str:
    """A resume's Markdown, its note on being cut naming tool parameters, not options."""
    from ..domain.continuity.rehydrate import CUT

    markdown: str = resumed.markdown
    return markdown.replace(CUT.cli, CUT.mcp) if resumed.truncated else markdown


def task_change(result: api.TaskChange) -> TaskChange:
    return TaskChange(
        task=task_summary(result.task),
        checkpoint=checkpoint_view(result.checkpoint.record if result.checkpoint else None),
        earlier_failures=_earlier(result.earlier_failures),
    )


def receipt_views(receipts: Sequence[api.Receipt]) -> list[ReceiptView]:
    return [receipt_view(r) for r in receipts]


def receipt_view(receipt: api.Receipt) -> ReceiptView:
    index = receipt.indexed
    return ReceiptView(
        event=receipt.event,
        kind=receipt.kind,
        store=receipt.store,
        file=receipt.file,
        line=receipt.line,
        committed=receipt.committed,
        branch=receipt.branch,
        upstream=receipt.upstream,
        pushed=receipt.pushed,
        next=receipt.next,
        indexed=None
        if index is None
        else ReceiptIndex(memory=index.memory, words=index.words, vectors=index.vectors),
    )
