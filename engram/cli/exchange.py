"""`engram import|export|timeline|browse`: records into and out of the stores, and pages to read.

`register(main)` adds them to the `engram` group.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..base.display import echo
from ..base.results import as_json as as_json_value
from ..base.vocab import EXPORT_FORMAT, IMPORT_FORMAT
from .backlog import embed_imported
from .common import json_option, open_engram, print_json, store_options, task_choice, task_of

# -- import, export, timeline -------------------------------------------------------------------


@click.command(name="import")
@click.argument("path")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(IMPORT_FORMAT.names),
    default=None,
    help="What PATH holds (default: told from its layout and content).",
)
@click.option("--dry-run", is_flag=True, help="Show what would be added; write nothing.")
@click.option(
    "--redact",
    is_flag=True,
    help="Store detected secrets as [REDACTED:type] instead of skipping their records.",
)
@click.option(
    "--allow-changes",
    is_flag=True,
    help="Also write the records that change memories, tasks or sessions the store "
    "holds (by default they are refused and listed; --dry-run lists them).",
)
@store_options
@json_option
@click.pass_context
def import_(
    ctx: click.Context,
    path: str,
    fmt: str | None,
    dry_run: bool,
    redact: bool,
    allow_changes: bool,
    project: bool,
    personal: bool,
    as_json: bool,
) -> None:
    """Bring in an mcp-engram data directory, an MCP memory server's memory.jsonl, a file
    written by `engram export`, or the Go engram's export or .engram/ sync folder. Every
    record is checked like a write; one that fails is skipped and reported. An import creates:
    a record that would change what the store holds (update, forget, supersede or reinforce a
    memory, change a task, set its handoff, end a session) is refused unless --allow-changes.
    Importing the same source again adds nothing."""
    engram = open_engram(ctx, project, personal)
    report = engram.import_from(
        path, format=fmt, dry_run=dry_run, redact=redact, allow_changes=allow_changes
    )
    if as_json:
        print_json(report.to_dict())
        embed_imported(engram, report, as_json=True)
        return
    if dry_run:
        for _, text in report.added:
            echo(f"would add: {text}")
        if report.changes_allowed:
            for where, what in report.changes:
                echo(f"would change: {what} ({where})")
    counts = ", ".join(f"{n} {kind}" for kind, n in report.counts().items())
    verb = "would import" if dry_run else "imported"
    echo(
        f"{verb} {len(report.added)} events from {report.format} into the "
        f"{report.store} store" + (f" ({counts})" if counts else "")
    )
    if report.already:
        echo(f"  {report.already} already in the store, not added again")
    for reason, count in sorted(report.ignored.items()):
        echo(f"  not imported: {count} × {reason}")
    if report.changes_count:
        if report.changes_allowed:
            echo(
                f"  {'would change' if dry_run else 'changed'} {report.changes_count} "
                "records the store holds (--allow-changes)" + ("" if dry_run else ":")
            )
        else:
            echo(
                f"  refused {report.changes_count} changes to records the store holds "
                "(an import only creates; import again with --allow-changes to apply them, "
                "after a look with --dry-run --allow-changes):"
            )
        if not (dry_run and report.changes_allowed):
            for where, what in report.changes:
                echo(f"    {where}: {what}")
        if report.changes_count > len(report.changes):
            echo(f"    and {report.changes_count - len(report.changes)} more")
    if report.skipped_count:
        echo(
            f"  skipped {report.skipped_count} damaged or refused source records "
            "(the rest is imported):"
        )
        for where, why in report.skipped:
            echo(f"    {where}: {why}")
        if report.skipped_count > len(report.skipped):
            echo(f"    and {report.skipped_count - len(report.skipped)} more")
    if dry_run:
        echo("dry run: nothing written; run again without --dry-run to import")
    elif report.commit:
        echo(f"  committed as {report.commit[:8]}")
    embed_imported(engram, report, as_json=False)


@click.command()
@click.argument("out")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(EXPORT_FORMAT.names),
    default=EXPORT_FORMAT.default,
    show_default=True,
    help="jsonl: the events, re-importable; markdown: a directory to read or archive.",
)
@click.option("--force", is_flag=True, help="Replace OUT (or write into a non-empty directory).")
@store_options
@json_option
@click.pass_context
def export(
    ctx: click.Context,
    out: str,
    fmt: str,
    force: bool,
    project: bool,
    personal: bool,
    as_json: bool,
) -> None:
    """Write the stores out to OUT: a .jsonl file (- for stdout) or a Markdown directory."""
    from ..api import JsonlExport

    engram = open_engram(ctx, project, personal)
    if out == "-" and fmt == "jsonl":
        events = engram.export_events()
        for event in events:
            sys.stdout.buffer.write(event.to_line())
        sys.stdout.flush()
        return
    report = engram.export(out, format=fmt, force=force)
    if as_json:
        print_json(as_json_value(report))
    elif isinstance(report, JsonlExport):
        echo(f"exported {report.events} events to {report.path}")
    else:
        tasks = f"{report.tasks} task" + ("" if report.tasks == 1 else "s")
        memories = f"{report.memories} memor" + ("y" if report.memories == 1 else "ies")
        echo(f"exported {tasks} and {memories} as Markdown to {report.path} ({report.files} files)")


@click.command()
@task_choice
@click.option(
    "--html",
    "html_out",
    default=None,
    metavar="OUT",
    help="Write one self-contained HTML page to OUT instead of printing text.",
)
@click.option("--force", is_flag=True, help="With --html: replace OUT if it exists.")
@store_options
@json_option
@click.pass_context
def timeline(
    ctx: click.Context,
    task_argument: str | None,
    task_option: str | None,
    html_out: str | None,
    force: bool,
    project: bool,
    personal: bool,
    as_json: bool,
) -> None:
    """A task's checkpoints, progress, failures, decisions and sessions in time order."""
    from ..domain.browse import write_page
    from ..domain.timeline import render_text
    from ..domain.timeline_html import render_html

    task_id = task_of(task_argument, task_option, "timeline")
    engram = open_engram(ctx, project, personal)
    found = engram.timeline(task_id)
    if html_out:
        target = Path(html_out)
        if not target.is_absolute():
            target = ctx.obj["cwd"] / target
        write_page(target, render_html(found), force=force)
        echo(f"wrote {target} ({len(found.items)} events, {len(found.checkpoints)} checkpoints)")
        return
    if as_json:
        print_json(found.to_dict())
        return
    echo(render_text(found), nl=False)


@click.command()
@click.option(
    "--html",
    "html_out",
    required=True,
    metavar="OUT",
    help="The HTML page to write (one self-contained file).",
)
@click.option("--force", is_flag=True, help="Replace OUT if it exists.")
@store_options
@click.pass_context
def browse(ctx: click.Context, html_out: str, force: bool, project: bool, personal: bool) -> None:
    """Write one HTML page to search, filter and read the memories (with their history), tasks
    and handoffs of the stores; it loads nothing and needs no server."""
    from ..domain.browse import render_html, write_page

    engram = open_engram(ctx, project, personal)
    page = engram.browse()
    target = Path(html_out)
    if not target.is_absolute():
        target = ctx.obj["cwd"] / target
    write_page(target, render_html(page), force=force)
    counts = page.to_dict()
    echo(
        f"wrote {target} ({counts['memories']} memories, {counts['tasks']} tasks, "
        f"{counts['handoffs']} handoffs)"
    )


def register(main: click.Group) -> None:
    """Add the import, export, timeline and browse commands to the `engram` command group."""
    for command in (import_, export, timeline, browse):
        main.add_command(command)
