"""`engram diff RANGE`: what a branch or a range of commits changed in the stores, for review.

`register(main)` adds it to the `engram` group.
"""

from __future__ import annotations

import click

from ..base.display import echo
from .common import json_option, open_engram, print_json, store_options


@click.command(name="diff")
@click.argument("range_", metavar="RANGE")
@click.option("--stat", is_flag=True, help="One line per store: the counts only.")
@store_options
@json_option
@click.pass_context
def diff(
    ctx: click.Context, range_: str, stat: bool, project: bool, personal: bool, as_json: bool
) -> None:
    """What RANGE changed in the stores, from git history alone: memories added, updated,
    superseded and forgotten, tasks and their status, progress, failures and handoffs, by
    author. RANGE is read as git reads it: `main...feature` is what the branch changed since it
    left main (a pull request's view), `A..B` compares B with A, `A` alone is `A..HEAD`.

    Markdown by default, ready to post as a pull-request comment. The project store is
    compared unless --personal is given.
    """
    from ..api.review import diff as diff_range
    from ..domain.review.render import markdown, stat_line

    engram = open_engram(ctx, project=project, personal=personal)
    reviews = diff_range(engram, range_)
    if as_json:
        print_json([r.to_dict() for r in reviews])
    elif stat:
        for r in reviews:
            echo(stat_line(r))
    else:
        echo(markdown(reviews), nl=False)
    for r in reviews:
        for note in r.notes:
            if as_json or stat:
                echo(f"note: {note}", err=True)


def register(main: click.Group) -> None:
    main.add_command(diff)
