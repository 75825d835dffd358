"""`engram handoff|checkpoints|session|sessions|resume|rehydrate|continuity`: continuity.

Handoffs, sessions and resuming (the `task` group is `engram.cli.tasks`), as click commands;
`register(main)` adds them to the `engram` group.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from ..base.display import echo, local_time
from ..base.vocab import DEPTH, INTERRUPTION, OUTCOME, RESTORE
from .common import (
    at_option,
    json_option,
    open_engram,
    print_json,
    store_options,
    task_choice,
    task_of,
)
from .receipts import echo_receipt, with_receipts

if TYPE_CHECKING:
    from ..api import Engram, HandoffPackage


# -- continuity ---------------------------------------------------------------------------------


def _load_package(engram: Engram, source: str) -> HandoffPackage:
    """The package of `--from FILE` (YAML, or JSON for *.json), or of stdin for `-`."""
    if source == "-":
        return engram.read_package(sys.stdin.buffer, name="stdin")
    try:
        with open(source, "rb") as handle:
            return engram.read_package(handle, name=source)
    except OSError as exc:
        raise click.BadParameter(
            f"cannot read {source}: {exc.strerror}", param_hint="--from"
        ) from None


@click.command()
@click.option("--task", "task_id", required=True, help="The task (id or name).")
@click.option("--summary", default=None, help="Where things stand, in a line.")
@click.option("--completed", multiple=True, help="Done; repeatable.")
@click.option("--in-progress", multiple=True, help="Under way; repeatable.")
@click.option("--blocked", multiple=True, help="Blocked, and on what; repeatable.")
@click.option("--next", "next_steps", multiple=True, help="Next step, in order; repeatable.")
@click.option(
    "--must-not-redo", multiple=True, help="Done or side-effecting: never repeat; repeatable."
)
@click.option(
    "--must-preserve",
    multiple=True,
    help='An invariant to keep, e.g. "don\'t touch main"; repeatable.',
)
@click.option(
    "--file",
    "files",
    multiple=True,
    help="A working-set file, relative to the current directory or absolute inside the "
    "repository; path@commit pins the commit given. Repeatable.",
)
@click.option("--command", "commands", multiple=True, help="A command that matters; repeatable.")
@click.option("--artifact", "artifacts", multiple=True, help="An artifact; repeatable.")
@click.option("--question", "open_questions", multiple=True, help="An open question; repeatable.")
@click.option("--goal", default=None, help="The goal, if it changed.")
@click.option(
    "--from",
    "from_file",
    type=click.Path(exists=True, dir_okay=False, allow_dash=True),
    help="The whole package as YAML or JSON, or - for stdin (options add to it).",
)
@store_options
@json_option
@click.pass_context
def handoff(
    ctx: click.Context,
    task_id: str,
    summary: str | None,
    completed: tuple[str, ...],
    in_progress: tuple[str, ...],
    blocked: tuple[str, ...],
    next_steps: tuple[str, ...],
    must_not_redo: tuple[str, ...],
    must_preserve: tuple[str, ...],
    files: tuple[str, ...],
    commands: tuple[str, ...],
    artifacts: tuple[str, ...],
    open_questions: tuple[str, ...],
    goal: str | None,
    from_file: str | None,
    project: bool,
    personal: bool,
    as_json: bool,
) -> None:
    """Record a continuation package for a task and commit it for review."""
    engram = open_engram(ctx, project, personal)
    package = _load_package(engram, from_file) if from_file else None
    saved = engram.handoff(
        task_id,
        summary=summary or "",
        package=package,
        completed=completed,
        in_progress=in_progress,
        blocked=blocked,
        next=next_steps,
        must_not_redo=must_not_redo,
        must_preserve=must_preserve,
        files=files,
        relative_to=ctx.obj["cwd"],
        commands=commands,
        artifacts=artifacts,
        open_questions=open_questions,
        goal=goal,
    )
    if as_json:
        print_json(with_receipts(engram, saved.to_dict()))
    else:
        done = "recorded and committed" if saved.commit else "recorded, not committed"
        echo(
            f"handoff {saved.checkpoint.seq} for task {saved.checkpoint.task[:8]} {done} "
            f"(confidence {saved.checkpoint.confidence:.2f})"
        )
        echo_receipt(engram)


@click.command()
@task_choice
@store_options
@json_option
@click.pass_context
def checkpoints(
    ctx: click.Context,
    task_argument: str | None,
    task_option: str | None,
    project: bool,
    personal: bool,
    as_json: bool,
) -> None:
    """Every checkpoint of a task, oldest first."""
    task_id = task_of(task_argument, task_option, "checkpoints")
    engram = open_engram(ctx, project, personal)
    found = engram.checkpoints(task_id)
    if as_json:
        print_json([c.to_dict() for c in found])
        return
    for item in found:
        echo(
            f"{item.seq:>3}  {item.checkpoint[:8]}  {local_time(item.time)}  "
            f"{item.reason:<12} {item.confidence:.2f}  {item.summary}"
        )
    if not found:
        echo("no checkpoints")


@click.group()
def session() -> None:
    """Sessions: start, heartbeat, report an interruption, end."""


@session.command(name="start")
@click.option("--agent", default="cli", help="claude-code, cursor, codex, cli or other.")
@click.option("--id", "session_id", default=None, help="Use this id instead of a new one.")
@click.option(
    "--pid",
    type=int,
    default=None,
    help="The agent's process (default: the process that ran this command).",
)
@store_options
@click.pass_context
def session_start(
    ctx: click.Context,
    agent: str,
    session_id: str | None,
    pid: int | None,
    project: bool,
    personal: bool,
) -> None:
    """Open a session; prints its id (set ENGRAM_SESSION to it for later commands)."""
    import os

    engram = open_engram(ctx, project, personal)
    opened = engram.session_start(agent=agent, session_id=session_id, pid=pid or os.getppid())
    echo(opened.id)


@session.command(name="heartbeat")
@click.option(
    "--context",
    type=click.FloatRange(0, 1),
    default=None,
    help="Share of the context window in use.",
)
@click.option("--id", "session_id", default=None, help="Default: $ENGRAM_SESSION.")
@store_options
@click.pass_context
def session_heartbeat(
    ctx: click.Context, context: float | None, session_id: str | None, project: bool, personal: bool
) -> None:
    """Say the session is alive."""
    open_engram(ctx, project, personal).heartbeat(context=context, session_id=session_id)


@session.command(name="report")
@click.argument("reason", type=click.Choice(INTERRUPTION.names))
@click.option("--note", default=None)
@click.option("--id", "session_id", default=None, help="Default: $ENGRAM_SESSION.")
@store_options
@click.pass_context
def session_report(
    ctx: click.Context,
    reason: str,
    note: str | None,
    session_id: str | None,
    project: bool,
    personal: bool,
) -> None:
    """Say why the session is about to stop (used when its interruption is classified)."""
    open_engram(ctx, project, personal).report_interruption(
        reason, note=note, session_id=session_id
    )


@session.command(name="end")
@click.option("--outcome", type=click.Choice(OUTCOME.names), default=None)
@click.option("--id", "session_id", default=None, help="Default: $ENGRAM_SESSION.")
@store_options
@click.pass_context
def session_end(
    ctx: click.Context, outcome: str | None, session_id: str | None, project: bool, personal: bool
) -> None:
    """Close the session and commit what waits (session events alone are not committed)."""
    closed = open_engram(ctx, project, personal).session_end(outcome=outcome, session_id=session_id)
    echo(f"session {closed.id[:8]} ended ({closed.outcome or 'no outcome'})")


@click.command(name="sessions")
@store_options
@json_option
@click.pass_context
def sessions_(ctx: click.Context, project: bool, personal: bool, as_json: bool) -> None:
    """Sessions, newest first, with their state and interruption reason."""
    engram = open_engram(ctx, project, personal)
    engram.detect_interruptions()
    found = engram.sessions()
    if as_json:
        print_json([s.to_dict() for s in found])
        return
    for item in found:
        why = (
            f"  {item.reason}: {item.evidence}"
            if item.state == "interrupted"
            else (f"  {item.outcome}" if item.outcome else "")
        )
        echo(
            f"{item.id[:8]}  {item.state:<11} {local_time(item.started_at)}  {item.agent:<11}"
            f" {item.machine or '-'}  {item.actor}{why}"
        )
    if not found:
        echo("no sessions")


def _resume_command(
    ctx: click.Context,
    task_id: str | None,
    session_id: str | None,
    depth: str,
    since: str | None,
    restore: str,
    max_chars: int | None,
    max_tokens: int | None,
    at: str | None,
    project: bool,
    personal: bool,
    as_json: bool,
) -> None:
    from ..domain.continuity.service import AmbiguousResumeError

    engram = open_engram(ctx, project, personal, at)
    try:
        result = engram.resume(
            task=task_id,
            session=session_id,
            depth=depth,
            since=since,
            restore=restore,
            max_chars=max_chars,
            record=at is None,
            max_tokens=max_tokens,
        )
    except AmbiguousResumeError as exc:
        if as_json:  # a script reads stdout: it gets the candidates there, and exit status 3
            print_json(exc.to_dict())
        raise
    if as_json:
        print_json(result.to_dict())
    else:
        echo(result.markdown, nl=not result.markdown.endswith("\n"))


def resume_options(func: Callable[..., Any]) -> Callable[..., Any]:
    options: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
        click.option("--task", "task_id", default=None, help="The task to resume (id or name)."),
        click.option(
            "--session", "session_id", default=None, help="Resume what this session was working on."
        ),
        click.option(
            "--depth",
            type=click.Choice(DEPTH.names),
            default=DEPTH.default,
            show_default=True,
            help="How much history.",
        ),
        click.option("--since", default=None, help="Only events since a date or age (3d)."),
        click.option(
            "--restore",
            type=click.Choice(RESTORE.names),
            default=RESTORE.default,
            show_default=True,
            help="Which memories come back (selective: important or about failures).",
        ),
        click.option(
            "--max-chars",
            type=click.IntRange(1000),
            default=None,
            help="Cut the output at this length (default: resume.max_chars).",
        ),
        click.option(
            "--max-tokens",
            type=click.IntRange(100),
            default=None,
            help="Fill this token budget by priority (must-not-redo and "
            "must-preserve first, then next steps, failures, memories) and name "
            "what was left out.",
        ),
        at_option,
    ]
    for option in reversed(options):
        func = option(func)
    return func


@click.command()
@resume_options
@store_options
@json_option
@click.pass_context
def resume(ctx: click.Context, /, **options: Any) -> None:
    """What the next agent needs to continue, as Markdown (exit 3: choose a task)."""
    _resume_command(ctx, **options)


@click.command()
@resume_options
@store_options
@json_option
@click.pass_context
def rehydrate(ctx: click.Context, /, **options: Any) -> None:
    """Same as `engram resume`."""
    _resume_command(ctx, **options)


@click.command()
@task_choice
@click.option("--before", default=None, help="The earlier checkpoint (seq or id).")
@click.option("--after", default=None, help="The later checkpoint (seq or id; default latest).")
@store_options
@json_option
@click.pass_context
def continuity(
    ctx: click.Context,
    task_argument: str | None,
    task_option: str | None,
    before: str | None,
    after: str | None,
    project: bool,
    personal: bool,
    as_json: bool,
) -> None:
    """Score how well a restore continued from the previous checkpoint."""
    task_id = task_of(task_argument, task_option, "continuity")
    engram = open_engram(ctx, project, personal)
    scores = engram.continuity(task_id, before=before, after=after)
    if as_json:
        print_json(scores.to_dict())
        return
    echo(f"task {scores.task[:8]}: checkpoint {scores.before} -> {scores.after}")
    for name, value in (
        ("goal_retention", scores.goal_retention),
        ("action_consistency", scores.action_consistency),
        ("failure_recall", scores.failure_recall),
        ("working_set_stability", scores.working_set_stability),
        ("replanning_rate", scores.replanning_rate),
        ("redundant_exploration", scores.redundant_exploration),
        ("composite", scores.composite),
    ):
        echo(f"  {name.replace('_', ' '):<22} {value:.2f}")


def register(main: click.Group) -> None:
    """Add the continuity commands to the `engram` command group."""
    for command in (handoff, checkpoints, session, sessions_, resume, rehydrate, continuity):
        main.add_command(command)
