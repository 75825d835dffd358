"""`engram stale`: the memories whose cited files changed since they were written.

`register(main)` adds it to the `engram` group.
"""

from __future__ import annotations

import shlex

import click

from ..base.display import echo
from .common import json_option, open_engram, print_json, store_options


@click.command()
@click.option(
    "--at",
    "at",
    default=None,
    metavar="REV",
    help="Judge the cited files as they were at this commit, tag or branch of the "
    "work tree's repository (default: HEAD).",
)
@click.option("-n", "--limit", default=None, type=click.IntRange(1), help="At most this many.")
@store_options
@json_option
@click.pass_context
def stale(
    ctx: click.Context,
    at: str | None,
    limit: int | None,
    project: bool,
    personal: bool,
    as_json: bool,
) -> None:
    """Memories whose cited files changed, moved or are gone, newest change first, with the
    command to confirm or retire each."""
    engram = open_engram(ctx, project, personal)
    found = engram.stale(at=at, limit=limit)
    if as_json:
        print_json(
            [
                {
                    "id": m.id,
                    "summary": m.summary(),
                    "store": m.store,
                    "freshness": f.to_dict(),
                    "confirm": _confirm(m.id),
                    "retire": _retire(m.id),
                }
                for m, f in found
            ]
        )
        return
    if not found:
        echo("no stale memories: every cited file is as it was when its memory was written")
        return
    for memory, fresh in found:
        echo(f"{memory.id[:8]}  [{fresh.state}]  {memory.summary()}")
        for file in fresh.files:
            if file.state != "fresh":
                echo(f"          {file.describe()}")
        echo(f"          still true: {_confirm(memory.id)}")
        echo(f"          no longer:  {_retire(memory.id)}")


def _confirm(memory_id: str) -> str:
    return f"engram update {memory_id[:8]} {shlex.quote('TEXT (the same, or corrected)')}"


def _retire(memory_id: str) -> str:
    return f"engram forget {memory_id[:8]} --reason {shlex.quote('the code it cites changed')}"


def register(main: click.Group) -> None:
    main.add_command(stale)
