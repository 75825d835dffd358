"""How the tool modules declare a tool: its title, description (from the docstring) and
annotations (read-only, destructive, idempotent), and arguments checked strictly (`strict`).

The SDK builds each tool's argument model from its signature in pydantic's lax mode, which
ignores an argument it does not know (a mistyped `kidn` leaves the default kind) and coerces
types (`"yes"` and `"true"` to true, true to 1, `"5"` to 5): a destructive call such as
`memory_consolidate(apply="yes")` would then run. `strict` makes the model refuse both, and its
schema say so (`additionalProperties: false`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, cast

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict

# Every argument model (and every model an argument holds): no unknown names, no coercion.
STRICT = ConfigDict(strict=True, extra="forbid")


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


def strict(tool: Tool) -> None:
    """Check `tool`'s arguments strictly: an unknown name is an error, and a value is taken only
    as its own JSON type (text is not a number or a boolean, a boolean is not a number); `5.0`
    is still taken where an integer is due, JSON having one type of number (`whole`)."""
    lax = tool.fn_metadata.arg_model
    config = {"model_config": {**lax.model_config, **STRICT}}
    model = cast(type[ArgModelBase], type(lax.__name__, (lax,), config))
    tool.fn_metadata.arg_model = model
    tool.parameters = model.model_json_schema(by_alias=True)


def whole(value: Any) -> Any:
    """Arguments with each number that is whole given as an integer (`5.0` as `5`): strict
    models take an integer where a number is due, but no `5.0` where an integer is."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: whole(item) for key, item in value.items()}
    if isinstance(value, list):
        return [whole(item) for item in value]
    return value


def known_fields(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The names the model at `loc` inside the argument model `model` takes: the tool's
    parameters for a top-level name, a citation's fields for `citations[0].line`."""
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        inner = _model_in(field.annotation) if field is not None else None
        if inner is None:
            return []
        model = inner
    return [field.alias or name for name, field in model.model_fields.items()]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation holds (`list[CitationIn]`, `CitationIn | None`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None
