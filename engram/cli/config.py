"""`engram config list|get|set`: settings, as click commands.

`register(main)` adds them to the `engram` group.
"""

from __future__ import annotations

import click

from ..base.display import echo
from ..base.results import as_json as as_json_value
from .common import json_option, open_engram, print_json

# -- settings -----------------------------------------------------------------------------------


def _shown(value: object) -> str:
    """A setting's value as config.yaml spells it (`true`, `null`), so that list, get and set
    print one value one way."""
    if value is None:
        return "null"
    return str(value).lower() if isinstance(value, bool) else str(value)


@click.group()
def config() -> None:
    """Read and change settings (config.yaml in a store; comments are kept)."""


@config.command(name="list")
@click.option("--personal", is_flag=True, help="Ignore the project store's settings.")
@json_option
@click.pass_context
def config_list(ctx: click.Context, personal: bool, as_json: bool) -> None:
    """Every setting, its effective value here, and where the value comes from."""
    engram = open_engram(ctx, personal=personal)
    rows = engram.config_list()
    if as_json:
        print_json(as_json_value(rows))
        return
    for row in rows:
        echo(f"{row.key} = {_shown(row.value)}    # {row.origin}")


@config.command(name="get")
@click.argument("key")
@click.option("--personal", is_flag=True, help="Ignore the project store's settings.")
@click.pass_context
def config_get(ctx: click.Context, key: str, personal: bool) -> None:
    """Print one setting's effective value here."""
    engram = open_engram(ctx, personal=personal)
    value = engram.config_get(key)
    echo(_shown(value))


@config.command(name="set")
@click.argument("key")
@click.argument("value")
@click.option(
    "--project",
    is_flag=True,
    help="Change the project store's config.yaml instead of the personal one.",
)
@click.pass_context
def config_set(ctx: click.Context, key: str, value: str, project: bool) -> None:
    """Change a setting in a store's config.yaml (and commit it)."""
    engram = open_engram(ctx, project=project)
    stored = engram.config_set(key, value)
    echo(f"{key} = {_shown(stored)}")


def register(main: click.Group) -> None:
    """Add `engram config` to the `engram` command group."""
    main.add_command(config)
