"""`engram capture`: events of any harness (Codex, Cursor, a shell wrapper) into the capture
journal, the way Claude Code's hooks feed it; `--stats` says what was captured per session.

`register(main)` adds it to the `engram` group.
"""

from __future__ import annotations

import sys
from typing import Any

import click
import orjson

from ..base.display import echo
from .common import json_option, open_engram, print_json

MAX_LINE_BYTES = 1_048_576
MAX_LINES = 10_000


def _events(stream: Any) -> list[Any]:
    """Each line of `stream` read as an event; a line that is not one becomes its reason."""
    from ..domain.capture.events import Skipped, read

    out: list[Any] = []
    for number, line in enumerate(stream, start=1):
        if number > MAX_LINES:
            out.append(
                Skipped(
                    f"more than {MAX_LINES} lines: line {number} and after left "
                    "out; feed them in batches"
                )
            )
            break
        if not line.strip():
            continue
        if len(line) > MAX_LINE_BYTES:
            out.append(Skipped(f"line {number}: over {MAX_LINE_BYTES} bytes"))
            continue
        try:
            payload = orjson.loads(line)
        except orjson.JSONDecodeError:
            out.append(Skipped(f"line {number}: not JSON"))
            continue
        item = read(payload)
        out.append(Skipped(f"line {number}: {item.reason}") if isinstance(item, Skipped) else item)
    return out


@click.command(name="capture")
@click.option(
    "--session",
    default=None,
    metavar="ID",
    help='The session of events that name none (default: "shell").',
)
@click.option("--stats", is_flag=True, help="Say what was captured per session; read nothing.")
@json_option
@click.pass_context
def capture(ctx: click.Context, session: str | None, stats: bool, as_json: bool) -> None:
    """Record what an agent did, one JSON event a line on stdin: files it changed
    ({"event": "file", "path": ...}) and commands ({"event": "command", "command": ...,
    "exit_code": N, "output": ...}), or Claude Code's PostToolUse payloads. Nothing is
    committed: failed commands are failure candidates, files join the next checkpoint's
    working set (see docs/clients/claude-code.md)."""
    from ..domain.capture import service
    from ..domain.capture.events import SESSION

    if session is not None and not SESSION.fullmatch(session):
        raise click.UsageError("--session is 1-128 letters, digits, '.', '_', ':' or '-'")
    engram = open_engram(ctx)
    if stats:
        found = service.stats(engram.workspace, session=session)
        if as_json:
            print_json([s.to_dict() for s in found])
            return
        if not found:
            echo("nothing captured yet")
        for item in found:
            echo(
                f"{item.session}: {len(item.files)} files, {len(item.failures)} failure "
                f"candidates, {item.commands} commands ok, {item.folded} repeats folded, "
                f"{item.skipped} skipped, {item.shown} memories shown (last {item.updated})"
            )
            for failure in item.failures:
                times = f" x{failure['count']}" if failure["count"] > 1 else ""
                task = failure.get("task")
                recorded = f" (recorded as a failure of task {task})" if task else ""
                echo(
                    f"  {failure['id']} exit {failure['exit_code']}{times}: "
                    f"{failure['command']}{recorded}"
                )
        return
    stream = sys.stdin.buffer if sys.stdin is not None else []
    report = service.record(engram.workspace, _events(stream), session=session)
    if as_json:
        print_json(report.to_dict())
        return
    counts = ", ".join(f"{n} {what}" for what, n in sorted(report.counts.items()))
    echo(f"captured: {counts or 'nothing'}")
    for reason in report.skipped[:20]:
        echo(f"skipped: {reason}", err=True)


def register(main: click.Group) -> None:
    """Add `engram capture` to the `engram` command group."""
    main.add_command(capture)
