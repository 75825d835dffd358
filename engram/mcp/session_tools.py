"""The session tools (handoff, resume, list, report), the discovery tools (record, check) and
the `resume` prompt."""

from __future__ import annotations

from typing import Annotated

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from ..api import Engram
from ..base.vocab import DEPTH, RESTORE
from ..domain import discovery
from .models import (
    ITEM_CHARS,
    READ,
    SESSION,
    WRITE,
    CheckResult,
    CitationCheckView,
    CitationIn,
    CitationView,
    Depth,
    DiscoveryCheck,
    DiscoveryResult,
    HandoffResult,
    Interruption,
    Outcome,
    ReportResult,
    Restore,
    ResumeResult,
    SessionList,
    SessionState,
    SessionView,
    Tags,
    TaskRef,
)
from .runtime import runtime_of, writes
from .tools import describe, tool
from .views import checkpoint_view, fit, for_agents, memory_view


def add_session_tools(server: MCPServer) -> None:
    @tool(server, "Hand off")
    def session_handoff(
        task: TaskRef,
        summary: Annotated[str, Field(description="Where things stand, in one line.")],
        ctx: Context,
        completed: Annotated[
            list[str], Field(description="What is done (added to what was done before).")
        ] = [],  # noqa: B006
        in_progress: Annotated[list[str], Field(description="What is under way.")] = [],  # noqa: B006
        blocked: Annotated[list[str], Field(description="What is blocked, and on what.")] = [],  # noqa: B006
        next: Annotated[
            list[str], Field(description="Next steps, in the order to take them.")
        ] = [],  # noqa: B006
        must_not_redo: Annotated[
            list[str],
            Field(
                description="Done or side-effecting: never "
                "repeat (a migration that ran, an "
                "app that was created)."
            ),
        ] = [],  # noqa: B006
        must_preserve: Annotated[
            list[str], Field(description='Invariants the user set ("don\'t touch main").')
        ] = [],  # noqa: B006
        files: Annotated[
            list[str],
            Field(
                description="Working-set files, relative to the repository's top (not to the "
                "server's directory): path, or path@commit to pin that commit."
            ),
        ] = [],  # noqa: B006
        commands: Annotated[
            list[str], Field(description="Commands that matter (build, test, run).")
        ] = [],  # noqa: B006
        artifacts: Annotated[
            list[str], Field(description="Artifacts: URLs, branches, outputs.")
        ] = [],  # noqa: B006
        open_questions: Annotated[
            list[str], Field(description="What the next agent should ask or decide.")
        ] = [],  # noqa: B006
        goal: Annotated[str | None, Field(description="The goal, if it changed.")] = None,
    ) -> HandoffResult:
        """Save the continuation package for a task so the next agent (after this session
        ends, the context fills, or a switch to another agent or machine) continues instead of
        starting over. Call it before you stop and when your context is nearly full.
        completed, must_not_redo and must_preserve add to what earlier handoffs said; next,
        in_progress, blocked and open_questions replace the plan (or keep the current one when
        omitted).

        Side effects: a `checkpoint.saved` event and a Markdown rendering under handoffs/,
        committed to git at once (so it shows in the pull request); on a detached HEAD it is
        saved but not committed, and warnings say how to fix that."""

        def call(engram: Engram) -> HandoffResult:
            saved = engram.handoff(
                task,
                summary=summary,
                completed=completed,
                in_progress=in_progress,
                blocked=blocked,
                next=next,
                must_not_redo=must_not_redo,
                must_preserve=must_preserve,
                files=files,
                commands=commands,
                artifacts=artifacts,
                open_questions=open_questions,
                goal=goal,
            )
            view = checkpoint_view(saved.checkpoint.record)
            assert view is not None
            done = (
                "recorded and committed"
                if saved.commit
                else "recorded, not committed (see warnings)"
            )
            return HandoffResult(
                task=saved.checkpoint.task,
                checkpoint=view,
                note=f"handoff {saved.checkpoint.seq} {done} "
                f"(continuation confidence "
                f"{saved.checkpoint.confidence:.2f})",
            )

        return runtime_of(ctx).run("session_handoff", SESSION, call)

    @tool(server, "Resume", idempotent=True)
    def session_resume(
        ctx: Context,
        task: Annotated[
            str | None,
            Field(description="The task to resume (id or name); default: the only active task."),
        ] = None,
        session: Annotated[
            str | None, Field(description="Resume what this session id was working on.")
        ] = None,
        depth: Annotated[
            Depth,
            Field(
                description="How much: brief (a small token budget), "
                "standard (default), full (the whole history)."
            ),
        ] = DEPTH.given,
        since: Annotated[
            str | None, Field(description="Only events since a date or age (2d).")
        ] = None,
        restore: Annotated[
            Restore,
            Field(
                description="Which memories come back: selective (default: "
                "important ones and failures/gotchas), full, "
                "none."
            ),
        ] = RESTORE.given,
        max_chars: Annotated[
            int, Field(ge=1000, le=100_000, description="Cut the Markdown at this length.")
        ] = 20_000,
    ) -> ResumeResult:
        """What you need to continue, as Markdown: the task and its goal, why the last session
        stopped, what happened since the last handoff (steps done, failures, memories, commits:
        do not redo them), where it stopped, next steps, what must not be redone or must be
        preserved, the working set as the code is now, failures not to repeat, the task's
        decisions, gotchas and facts, recent events. Call it at the start of
        a session. With no task and several active tasks it fails and lists them: call again
        with task. (Also available as the `resume` prompt.)

        Side effects: sessions of this machine whose process is gone are recorded as
        interrupted (with the likely reason), unless this connection may only read. The
        Markdown is cut at max_chars (`truncated`)."""
        record = writes(runtime_of(ctx).identity()[1])

        def call(engram: Engram) -> ResumeResult:
            result = engram.resume(
                task=task,
                session=session,
                depth=depth,
                since=since,
                restore=restore,
                max_chars=max_chars,
                record=record,
            )
            return ResumeResult(
                task=result.task,
                confidence=result.confidence,
                truncated=result.truncated,
                markdown=for_agents(result),
            )

        return runtime_of(ctx).run("session_resume", READ, call)

    @tool(server, "List sessions", read_only=True)
    def session_list(
        ctx: Context,
        state: Annotated[
            SessionState | None, Field(description="Only sessions in this state.")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many.")] = 20,
    ) -> SessionList:
        """Agent sessions, newest first: which agent, who, on which machine, whether each
        ended normally (and its outcome) or was interrupted (and why: crash, overflow,
        rate_limit, tool_failure, user_away). `current` marks this server's own session.

        Read-only."""

        def call(engram: Engram) -> SessionList:
            found = engram.sessions(states=[state] if state else [])
            current = runtime_of(ctx).session_id
            views = [
                SessionView(
                    **{k: v for k, v in s.to_dict().items() if k in SessionView.model_fields},
                    current=s.id == current,
                )
                for s in found[:limit]
            ]
            kept, cut = fit(views)
            return SessionList(sessions=kept, truncated=cut or len(found) > limit)

        return runtime_of(ctx).run("session_list", READ, call)

    @tool(server, "Report on the session")
    def session_report(
        ctx: Context,
        outcome: Annotated[
            Outcome | None,
            Field(
                description="How the session went: success, "
                "failure or unknown; applied "
                "when the session closes."
            ),
        ] = None,
        interruption: Annotated[
            Interruption | None,
            Field(
                description="Why you are about to stop, if you are: "
                "overflow (context full), rate_limit, "
                "tool_failure, user_away, crash, "
                "unknown."
            ),
        ] = None,
        note: Annotated[
            str | None, Field(description="A line of detail, e.g. the error message.")
        ] = None,
    ) -> ReportResult:
        """Tell Engram how this session is going. `outcome` is applied when the session
        closes: success raises, failure lowers the importance of the memories this session
        created or relied on. `interruption` records now why you are about to stop, so the next
        agent is told (it wins over Engram's own guess). Hand off first (session_handoff).

        Side effects: interruption appends a `session.reported` event; outcome is kept by the
        server and written with `session.ended` at exit."""
        runtime = runtime_of(ctx)

        def call(engram: Engram) -> ReportResult:
            if outcome is None and interruption is None:
                raise ToolError("give an outcome, an interruption reason, or both")
            if runtime.session_id is None:
                raise ToolError("no session is open (no Engram store yet?); see memory_stats")
            if interruption is not None:
                engram.report_interruption(interruption, note=note, session_id=runtime.session_id)
            if outcome is not None:
                runtime.outcome = outcome
            parts = []
            if interruption:
                parts.append(f"interruption '{interruption}' recorded")
            if outcome:
                parts.append(f"outcome '{outcome}' will be recorded when the session closes")
            return ReportResult(
                session=runtime.session_id,
                outcome=runtime.outcome,
                interruption=interruption,
                note="; ".join(parts),
            )

        return runtime.run("session_report", SESSION, call)


def add_discovery_tools(server: MCPServer) -> None:
    @tool(server, "Record a discovery")
    def discovery_record(
        content: Annotated[
            str,
            Field(
                description="The fact, in a sentence or two, e.g. "
                '"Retries are enforced in the HTTP client, '
                'not the queue".'
            ),
        ],
        citations: Annotated[
            list[CitationIn],
            Field(
                min_length=1,
                max_length=20,
                description="Where the code shows it: file and line range (1-20 citations).",
            ),
        ],
        ctx: Context,
        tags: Tags = [],  # noqa: B006
        task: Annotated[str | None, Field(description="The task id it belongs to.")] = None,
        importance: Annotated[float, Field(ge=0, le=1, description="0 to 1.")] = 0.5,
        redact: Annotated[
            bool,
            Field(description="Store detected secrets as [REDACTED:type] instead of refusing."),
        ] = False,
    ) -> DiscoveryResult:
        """Record a fact about this codebase with citations (file, line range, optional
        excerpt), pinned to the current git commit, so later agents can trust it without
        re-reading the code, and can tell when it went stale (discovery_check). Use it for
        findings you had to dig for: where something is enforced, why code is shaped a certain
        way. For knowledge without code citations use memory_remember.

        Side effects: stores a memory of kind fact tagged discovery whose content ends with one
        `cite: path:start-end@commit` line per citation (uncommitted lines of a file git tracks
        are kept as an excerpt, scanned for secrets like the content; an untracked or ignored
        file, or one inside .git/, is cited without its lines, and warnings say so). Each
        citation is checked first: the file must exist inside the repository, the range must
        be in it, and an excerpt, if given, must match."""

        def call(engram: Engram) -> DiscoveryResult:
            result, pinned = discovery.record(
                engram,
                content,
                [c.model_dump() for c in citations],
                tags=tags,
                task=task,
                importance=importance,
                redact=redact,
            )
            found = discovery.as_discovery(result.memory)
            return DiscoveryResult(
                memory=memory_view(result.memory, limit=None),
                fact=found.text if found else content.strip(),
                citations=[
                    CitationView(**c.to_dict()) for c in (found.citations if found else pinned)
                ],
                duplicate=result.duplicate,
                warnings=[c.note for c in pinned if c.note],
            )

        return runtime_of(ctx).run("discovery_record", WRITE, call)

    @tool(server, "Check discoveries", read_only=True)
    def discovery_check(
        ctx: Context,
        id: Annotated[
            str | None,
            Field(
                description="One discovery's memory id (or prefix); "
                "default: the most recent "
                "discoveries."
            ),
        ] = None,
        limit: Annotated[
            int, Field(ge=1, le=50, description="How many recent discoveries to check.")
        ] = 10,
    ) -> CheckResult:
        """Check whether discoveries still hold in the current work tree: each citation is
        valid (same lines), moved (the excerpt is at other lines, given in moved_to), broken
        (file gone or excerpt not found: re-check the fact, then forget or re-record it) or
        unknown (its commit is not in this clone: fetch; or the file was not tracked by git, so
        nothing was kept to compare with). Use it before relying on a discovery recorded at
        another commit; without id it also lists the recent discoveries.

        Read-only (reads files and git)."""

        def call(engram: Engram) -> CheckResult:
            done = discovery.survey(engram, id, limit=limit)
            views = [
                DiscoveryCheck(
                    id=item.discovery.memory.id,
                    fact=item.discovery.text[:ITEM_CHARS],
                    status=item.status,
                    citations=[CitationCheckView(**c.to_dict()) for c in item.checks],
                )
                for item in done.checked
            ]
            kept, cut = fit(views)
            return CheckResult(discoveries=kept, counts=done.counts, truncated=cut)

        return runtime_of(ctx).run("discovery_check", READ, call)


def add_prompts(server: MCPServer) -> None:
    async def resume(
        ctx: Context,
        task: Annotated[
            str | None,
            Field(
                description="The task to resume: its id (or a "
                "unique prefix) or exact name; default: "
                "the only active task."
            ),
        ] = None,
    ) -> str:
        """Load what the next agent needs (goal, where work stopped, next steps, what must not
        be redone, failures to avoid) and continue the task. Optional argument: the task id or
        name (default: the only active task)."""
        runtime = runtime_of(ctx)
        record = writes(runtime.identity()[1])

        def call(engram: Engram) -> str:
            return for_agents(
                engram.resume(task=task or None, depth="standard", max_chars=20_000, record=record)
            )

        try:
            markdown = await anyio.to_thread.run_sync(lambda: runtime.run("resume", READ, call))
        except ToolError as exc:
            return (
                f"Engram could not resume: {exc}\n\nCall the session_resume tool with the "
                "right task, then continue."
            )
        return (
            "Continue the work described below. It is Engram's continuation package from "
            "the previous session: follow the next steps in order, do not redo what is "
            "listed under must-not-redo, keep what is listed under must-preserve, and do "
            "not repeat the failures listed. Record progress with task_progress and hand "
            "off with session_handoff before you stop.\n\n" + markdown
        )

    server.prompt(
        name="resume",
        title="Resume where the last agent stopped",
        description=describe(resume.__doc__),
    )(resume)
