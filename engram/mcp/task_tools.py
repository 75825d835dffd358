"""The task and continuity tools: create, get, update, list, progress, failure, continuity."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from ..api import Engram
from .models import (
    OUTPUT_CHARS,
    READ,
    WRITE,
    ContinuityResult,
    ProgressStatus,
    Tags,
    TaskChange,
    TaskList,
    TaskRef,
    TaskResult,
    TaskStatus,
)
from .runtime import runtime_of
from .tools import tool
from .views import checkpoint_view, fit, memory_view, task_change, task_detail, task_summary


def add_task_tools(server: MCPServer) -> None:
    @tool(server, "Create a task")
    def task_create(
        name: Annotated[str, Field(description='Short name, e.g. "Add OAuth login".')],
        ctx: Context,
        goal: Annotated[str, Field(description="What done looks like.")] = "",
        parent: Annotated[str | None, Field(description="A parent task (id or name).")] = None,
        tags: Tags = [],  # noqa: B006
        status: Annotated[TaskStatus, Field(description="Initial status.")] = "open",
    ) -> TaskChange:
        """Create a task for multi-step work that may outlive this session: later progress,
        failures, memories (task=<id>) and handoffs attach to it, and session_resume picks it
        up. Check task_list first: continue an existing task rather than create a twin.

        Side effects: appends a `task.created` event."""
        return runtime_of(ctx).run(
            "task_create",
            WRITE,
            lambda e: TaskChange(
                task=task_summary(
                    e.task_create(name, goal=goal, parent=parent, tags=tags, status=status)
                )
            ),
        )

    @tool(server, "Get a task", read_only=True)
    def task_get(
        task: TaskRef,
        ctx: Context,
        checkpoints: Annotated[
            bool, Field(description="Also every checkpoint, oldest first.")
        ] = False,
    ) -> TaskResult:
        """A task in full: goal, status, progress, failures, its latest checkpoint (the
        continuation package), its memories and subtasks; with checkpoints=true, every
        checkpoint. For what the next agent needs as one document, use session_resume.

        Read-only. Lists are cut to fit the answer (`truncated`)."""

        def call(engram: Engram) -> TaskResult:
            view = engram.task_view(task)
            found = engram.task(view.task.id)
            memories, cut_memories = fit([memory_view(m) for m in view.memories], OUTPUT_CHARS // 2)
            saved = None
            cut_saved = False
            if checkpoints:
                items = [
                    c
                    for c in (checkpoint_view(c.record) for c in engram.checkpoints(found.id))
                    if c
                ]
                kept, cut_saved = fit(items[::-1], OUTPUT_CHARS // 2)
                saved = kept[::-1]
            long_lists = len(found.progress) > 50 or len(found.failures) > 50
            cut = cut_memories or cut_saved or long_lists
            return TaskResult(
                task=task_detail(found),
                memories=memories,
                children=list(view.children),
                checkpoints=saved,
                truncated=cut,
                note="left out to keep the answer short: "
                + ", ".join(
                    what
                    for what, left in (
                        ("early progress and failures", long_lists),
                        ("some memories", cut_memories),
                        ("early checkpoints", cut_saved),
                    )
                    if left
                )
                if cut
                else None,
            )

        return runtime_of(ctx).run("task_get", READ, call)

    @tool(server, "Update a task", idempotent=True)
    def task_update(
        task: TaskRef,
        ctx: Context,
        name: Annotated[str | None, Field(description="New name.")] = None,
        goal: Annotated[str | None, Field(description="New goal.")] = None,
        status: Annotated[
            TaskStatus | None, Field(description="New status: done or abandoned closes the task.")
        ] = None,
        parent: Annotated[
            str | None, Field(description='New parent task; "" makes it a top-level task.')
        ] = None,
        tags: Annotated[
            list[str] | None, Field(description="New tags, replacing the old ones.")
        ] = None,
    ) -> TaskChange:
        """Change a task's name, goal, status, parent or tags; mark it done or abandoned when
        it is. To record work on it, use task_progress or task_failure.

        Side effects: appends a `task.updated` event with the changed fields. Giving only
        values it already has is an error (nothing to change)."""
        return runtime_of(ctx).run(
            "task_update",
            WRITE,
            lambda e: TaskChange(
                task=task_summary(
                    e.task_update(
                        task, name=name, goal=goal, status=status, parent=parent, tags=tags
                    )
                )
            ),
        )

    @tool(server, "List tasks", read_only=True)
    def task_list(
        ctx: Context,
        statuses: Annotated[
            list[TaskStatus],
            Field(
                description="Only these statuses "
                "(default: the active ones: "
                "open, in_progress, "
                "blocked)."
            ),
        ] = [],  # noqa: B006
        include_closed: Annotated[
            bool, Field(description="Also done and abandoned tasks.")
        ] = False,
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many.")] = 20,
    ) -> TaskList:
        """Tasks, most recently changed first, each with its status, goal and latest checkpoint
        summary: the active ones (open, in_progress, blocked) unless statuses or include_closed
        say otherwise. Use it to find the task to continue or to attach work to before
        task_create; for one task in full, task_get.

        Read-only."""

        def call(engram: Engram) -> TaskList:
            found = engram.tasks(statuses=statuses, include_closed=include_closed)
            kept, cut = fit([task_summary(t) for t in found[:limit]])
            return TaskList(tasks=kept, truncated=cut or len(found) > limit)

        return runtime_of(ctx).run("task_list", READ, call)

    @tool(server, "Record progress")
    def task_progress(
        task: TaskRef,
        feature: Annotated[
            str, Field(description='The piece of work, e.g. "Register the OAuth app".')
        ],
        ctx: Context,
        status: Annotated[
            ProgressStatus, Field(description="done (default), in_progress, blocked or todo.")
        ] = "done",
        note: Annotated[str | None, Field(description="Detail worth keeping.")] = None,
        component: Annotated[
            str | None, Field(description="The component it touches, e.g. auth.")
        ] = None,
        files: Annotated[
            list[str], Field(description="Files it touches, relative to the repository's top.")
        ] = [],  # noqa: B006
    ) -> TaskChange:
        """Record progress on a feature of a task as it happens (done, in progress, blocked,
        or still to do). It moves an open task to in_progress and keeps the continuation
        package current, so a crash loses little. For something that went wrong, use
        task_failure.

        Side effects: appends a `task.progress` event; may save an automatic checkpoint
        (returned). Returns failures already recorded for the same component or files: read
        them before repeating an approach."""
        return runtime_of(ctx).run(
            "task_progress",
            WRITE,
            lambda e: task_change(
                e.progress(
                    task, feature, status=status, note=note, component=component, files=files
                )
            ),
        )

    @tool(server, "Record a failure")
    def task_failure(
        task: TaskRef,
        error: Annotated[str, Field(description="What failed, with the error message.")],
        ctx: Context,
        component: Annotated[str | None, Field(description="The component, e.g. auth.")] = None,
        root_cause: Annotated[str | None, Field(description="Why it failed, if known.")] = None,
        fix: Annotated[str | None, Field(description="What fixed it or should, if known.")] = None,
    ) -> TaskChange:
        """Record a failure on a task: an error, a dead end, an approach that did not work,
        with its root cause and fix when known. Later agents are shown it before they repeat
        it. Use task_progress for work that succeeded.

        Side effects: appends a `task.failure` event and always saves a checkpoint (returned).
        Returns earlier failures of the same component, on any task."""
        return runtime_of(ctx).run(
            "task_failure",
            WRITE,
            lambda e: task_change(
                e.failure(task, error, component=component, root_cause=root_cause, fix=fix)
            ),
        )

    @tool(server, "Evaluate continuity", read_only=True)
    def task_continuity(
        task: TaskRef,
        ctx: Context,
        before: Annotated[
            str | None,
            Field(
                description="The earlier checkpoint (seq number or "
                "id); default: the one before "
                "`after`."
            ),
        ] = None,
        after: Annotated[
            str | None, Field(description="The later checkpoint (seq or id); default: the latest.")
        ] = None,
    ) -> ContinuityResult:
        """Score how well work continued from one checkpoint to the next: goal retention,
        action consistency, failure recall, working-set stability, replanning rate, redundant
        exploration and a composite (0..1). Use it to judge a restore; it needs two
        checkpoints.

        Read-only."""
        return runtime_of(ctx).run(
            "task_continuity",
            READ,
            lambda e: ContinuityResult(**e.continuity(task, before=before, after=after).to_dict()),
        )
