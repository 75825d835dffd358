"""`engram task create|show|update|list|progress|failure`: tasks, as a click group.

`engram.cli.continuity` adds the group to the `engram` group with the other continuity commands.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from ..base.display import echo, local_time
from ..base.vocab import PROGRESS_STATUS, TASK_STATUS
from .common import json_option, open_engram, print_json, store_options
from .receipts import echo_receipt, with_receipts

if TYPE_CHECKING:
    from ..api import EarlierFailure


def _task_text(task: Any) -> str:
    return f"{task.id[:8]}  {task.status:<11} {local_time(task.updated_at)[:10]}  {task.name}" + (
        f"  (parent {task.parent[:8]})" if task.parent else ""
    )


@click.group()
def task() -> None:
    """Tasks: create, show, update, list; record progress and failures."""


@task.command(name="create")
@click.argument("name")
@click.option("--goal", default="", help="What done looks like.")
@click.option("--parent", default=None, help="The parent task (id or name).")
@click.option("--tag", "tags", multiple=True, help="A tag; repeatable.")
@click.option("--status", default="open", show_default=True, type=click.Choice(TASK_STATUS.names))
@store_options
@json_option
@click.pass_context
def task_create(
    ctx: click.Context,
    name: str,
    goal: str,
    parent: str | None,
    tags: tuple[str, ...],
    status: str,
    project: bool,
    personal: bool,
    as_json: bool,
) -> None:
    """Create a task."""
    engram = open_engram(ctx, project, personal)
    created = engram.task_create(name, goal=goal, parent=parent, tags=tags, status=status)
    if as_json:
        print_json(with_receipts(engram, created.to_dict()))
    else:
        echo(f"created task {created.id[:8]}: {created.name}")
        echo_receipt(engram)


@task.command(name="show")
@click.argument("ident", metavar="ID")
@store_options
@json_option
@click.pass_context
def task_show(ctx: click.Context, ident: str, project: bool, personal: bool, as_json: bool) -> None:
    """A task with its memories, progress, failures and latest checkpoint."""
    engram = open_engram(ctx, project, personal)
    view = engram.task_view(ident)
    if as_json:
        print_json(view.to_dict())
        return
    data = view.task
    echo(f"task {data.id}  [{data.status}]  {data.name}")
    if data.goal:
        echo(f"goal: {data.goal}")
    if data.parent:
        echo(f"parent: {data.parent}")
    for item in data.progress:
        where = f" [{item.component}]" if item.component else ""
        echo(f"  progress {item.status:<11} {item.feature}{where}")
    for failure in data.failures:
        where = f"[{failure.component}] " if failure.component else ""
        echo(f"  failure  {where}{failure.error}")
    for memory in view.memories:
        echo(f"  memory   {memory.id[:8]} [{memory.kind}] {memory.content[:70]}")
    latest = data.latest_checkpoint
    if latest:
        echo(
            f"latest checkpoint {latest['seq']} ({latest['reason']}, {latest['time']}): "
            f"{latest.get('summary') or ''}"
        )
        for step in latest.get("next") or []:
            echo(f"  next: {step}")


@task.command(name="update")
@click.argument("ident", metavar="ID")
@click.option("--name", default=None)
@click.option("--goal", default=None)
@click.option("--status", default=None, type=click.Choice(TASK_STATUS.names))
@click.option(
    "--parent", default=None, help="The parent task (id or name); '' makes it a top-level task."
)
@click.option("--tag", "tags", multiple=True, help="Replace the tags; repeatable.")
@store_options
@json_option
@click.pass_context
def task_update(
    ctx: click.Context,
    ident: str,
    name: str | None,
    goal: str | None,
    status: str | None,
    parent: str | None,
    tags: tuple[str, ...],
    project: bool,
    personal: bool,
    as_json: bool,
) -> None:
    """Change a task's name, goal, status, parent or tags."""
    engram = open_engram(ctx, project, personal)
    updated = engram.task_update(
        ident, name=name, goal=goal, status=status, parent=parent, tags=tags or None
    )
    if as_json:
        print_json(with_receipts(engram, updated.to_dict()))
    else:
        echo(f"updated task {updated.id[:8]} ({updated.status})")
        echo_receipt(engram)


@task.command(name="list")
@click.option("--status", "statuses", multiple=True, type=click.Choice(TASK_STATUS.names))
@click.option("--all", "include_all", is_flag=True, help="Include done and abandoned tasks.")
@store_options
@json_option
@click.pass_context
def task_list(
    ctx: click.Context,
    statuses: tuple[str, ...],
    include_all: bool,
    project: bool,
    personal: bool,
    as_json: bool,
) -> None:
    """Tasks, most recently changed first (active ones unless told otherwise)."""
    engram = open_engram(ctx, project, personal)
    found = engram.tasks(statuses=statuses, include_closed=include_all)
    if as_json:
        print_json([t.to_dict() for t in found])
        return
    for item in found:
        echo(_task_text(item))
    if not found:
        echo("no tasks")


def _print_earlier_failures(failures: Sequence[EarlierFailure]) -> None:
    for failure in failures[:5]:
        echo(
            f"  earlier failure in {failure.component} ({failure.task_name}): "
            f"{failure.error}" + (f" — fix: {failure.fix}" if failure.fix else "")
        )


@task.command(name="progress")
@click.argument("ident", metavar="ID")
@click.argument("feature")
@click.option(
    "--status", default="done", show_default=True, type=click.Choice(PROGRESS_STATUS.names)
)
@click.option("--note", default=None)
@click.option("--component", default=None, help="The component this touches.")
@click.option(
    "--file",
    "files",
    multiple=True,
    help="A file this touches, relative to the current directory (or absolute); repeatable.",
)
@store_options
@json_option
@click.pass_context
def task_progress(
    ctx: click.Context,
    ident: str,
    feature: str,
    status: str,
    note: str | None,
    component: str | None,
    files: tuple[str, ...],
    project: bool,
    personal: bool,
    as_json: bool,
) -> None:
    """Record progress on a feature of a task."""
    engram = open_engram(ctx, project, personal)
    result = engram.progress(
        ident,
        feature,
        status=status,
        note=note,
        component=component,
        files=files,
        relative_to=ctx.obj["cwd"],
    )
    if as_json:
        print_json(with_receipts(engram, result.to_dict()))
        return
    echo(f"progress on {result.task.id[:8]}: [{status}] {feature}")
    echo_receipt(engram)
    if result.checkpoint:
        echo(f"  checkpoint {result.checkpoint.seq} saved ({result.checkpoint.reason})")
    _print_earlier_failures(result.earlier_failures)


@task.command(name="failure")
@click.argument("ident", metavar="ID")
@click.argument("error")
@click.option("--component", default=None)
@click.option("--root-cause", default=None)
@click.option("--fix", default=None, help="The fix, if known.")
@store_options
@json_option
@click.pass_context
def task_failure(
    ctx: click.Context,
    ident: str,
    error: str,
    component: str | None,
    root_cause: str | None,
    fix: str | None,
    project: bool,
    personal: bool,
    as_json: bool,
) -> None:
    """Record a failure on a task (a checkpoint is saved with it)."""
    engram = open_engram(ctx, project, personal)
    result = engram.failure(ident, error, component=component, root_cause=root_cause, fix=fix)
    if as_json:
        print_json(with_receipts(engram, result.to_dict()))
        return
    echo(
        f"failure on {result.task.id[:8]} recorded; checkpoint "
        f"{result.checkpoint.seq if result.checkpoint else '-'} saved"
    )
    echo_receipt(engram)
    _print_earlier_failures(result.earlier_failures)


def register(main: click.Group) -> None:
    """Add the `task` group to the `engram` command group."""
    main.add_command(task)
