"""`Families`: the `engram` group, which imports a command's module only when that command runs.

Each command family lives in a module of `engram.cli` with a `register(group)` function. Running
`engram list` imports `engram.cli.memories` (found in `WHERE`) and none of the other families, nor
what only they use (the MCP server's bounds, sync's wording, ...). Listing the commands (`--help`,
completion, the generated docs, `group.commands`) imports every family. A command missing from
`WHERE` is still found: the group then imports every family and looks again, so `WHERE` only
makes commands start sooner, never decides whether they exist (tests/test_startup.py checks that
it names each command's module).
"""

from __future__ import annotations

from typing import Any

import click

from .common import EngramGroup

# The family modules, in the order they register, and where each command is.
FAMILIES = (
    ".stores",
    ".memories",
    ".tasks",
    ".continuity",
    ".config",
    ".mcp",
    ".sync",
    ".exchange",
    ".model",
    ".capture",
    ".review",
    ".stale",
)
WHERE = {
    "browse": ".exchange",
    "capture": ".capture",
    "checkpoints": ".continuity",
    "clone": ".sync",
    "commit": ".stores",
    "compact": ".stores",
    "config": ".config",
    "consolidate": ".memories",
    "continuity": ".continuity",
    "diff": ".review",
    "doctor": ".stores",
    "export": ".exchange",
    "forget": ".memories",
    "get": ".memories",
    "handoff": ".continuity",
    "hooks": ".sync",
    "import": ".exchange",
    "init": ".stores",
    "list": ".memories",
    "log": ".stores",
    "mcp": ".mcp",
    "model": ".model",
    "pull": ".sync",
    "push": ".sync",
    "recall": ".memories",
    "recover": ".stores",
    "rehydrate": ".continuity",
    "reindex": ".stores",
    "remember": ".memories",
    "remote": ".sync",
    "resume": ".continuity",
    "serve": ".mcp",
    "session": ".continuity",
    "sessions": ".continuity",
    "show": ".stores",
    "stale": ".stale",
    "stats": ".stores",
    "status": ".stores",
    "sync": ".sync",
    "task": ".tasks",
    "timeline": ".exchange",
    "update": ".memories",
    "verify": ".stores",
}


class Families(EngramGroup):
    """A group whose commands are registered by family modules, imported when first needed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._commands: dict[str, click.Command] = {}
        self._loaded: set[str] = set()
        super().__init__(*args, **kwargs)

    @property  # type: ignore[override]
    def commands(self) -> dict[str, click.Command]:
        """Every command: reading this imports every family."""
        self.load(*FAMILIES)
        return self._commands

    @commands.setter
    def commands(self, value: dict[str, click.Command]) -> None:
        self._commands = dict(value)

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        name = name or cmd.name
        if name is None:
            raise TypeError("Command has no name.")
        self._commands[name] = cmd

    def load(self, *modules: str) -> None:
        """Import these family modules (relative to `engram.cli`) and register their commands."""
        for module in modules:
            if module not in self._loaded:
                self._loaded.add(module)
                # `__import__`, not `importlib.import_module`: `python -X importtime` lists it.
                __import__(__package__ + module, fromlist=["register"]).register(self)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = WHERE.get(cmd_name)
        if where is not None:
            self.load(where)
        found = self._commands.get(cmd_name)
        return found if found is not None else self.commands.get(cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.commands)
