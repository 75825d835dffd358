"""The `engram` command: thin click commands over `engram.api.Engram`.

Library errors become one line on stderr and their exit status (2 for bad input). `--json` on
every read command prints a JSON document for scripts; otherwise output is for people.

The `main` group is defined here; each command family lives in its own module and adds its
commands with `register(main)`, imported when one of its commands runs (`engram.cli.families`,
which lists where each command is). Those modules import only `engram.cli.common`, never this
one.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from .. import __version__
from .common import CONTEXT, end_process
from .families import Families

# -- the group ----------------------------------------------------------------------------------


@click.group(cls=Families, context_settings=CONTEXT)
@click.version_option(__version__, "-V", "--version", prog_name="engram")
@click.option(
    "-C",
    "cwd",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="Run as if started in this directory (like git -C).",
)
@click.pass_context
def main(ctx: click.Context, cwd: Path | None) -> None:
    """Durable memory and task continuity for coding agents, kept as JSONL events in git.

    A personal store lives in ~/.engram (ENGRAM_HOME moves it); a project store lives in .engram/
    inside a project's git repository. Commands read both unless told --project or --personal;
    writes go to the project store when there is one.
    """
    ctx.ensure_object(dict)
    ctx.obj["cwd"] = cwd or Path.cwd()


def run() -> None:
    """The `engram` console script (and `python -m engram`): `main`, then the process ends as
    soon as the command's work is done (`end_process`)."""
    # Recall's matrix products are small (a hundred vectors): OpenBLAS's own threads cost more
    # than they save, tens of milliseconds on a busy machine. Set before numpy loads.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        main(prog_name="engram")
    except SystemExit as exc:
        end_process(exc.code)
    end_process(0)


if __name__ == "__main__":  # pragma: no cover
    run()
