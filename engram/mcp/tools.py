"""How the tool modules declare a tool: its title, description (from the docstring) and
annotations (read-only, destructive, idempotent)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations


def _annotations(
    title: str, *, read_only: bool = False, destructive: bool = False, idempotent: bool = False
) -> ToolAnnotations:
    if read_only:
        return ToolAnnotations(title=title, read_only_hint=True, open_world_hint=False)
    return ToolAnnotations(
        title=title,
        read_only_hint=False,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


def describe(doc: str | None) -> str:
    """A docstring as a tool description: dedented, each paragraph on one line."""
    return "\n\n".join(" ".join(p.split()) for p in inspect.cleandoc(doc or "").split("\n\n"))


def tool(
    server: MCPServer,
    title: str,
    *,
    read_only: bool = False,
    destructive: bool = False,
    idempotent: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        server.add_tool(
            fn,
            title=title,
            description=describe(fn.__doc__),
            annotations=_annotations(
                title, read_only=read_only, destructive=destructive, idempotent=idempotent
            ),
        )
        return fn

    return register
