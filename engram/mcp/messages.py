"""Errors in an agent's words: library errors worded for tools and parameters
(`agent_message`), and arguments that fail a tool's schema as one plain line
(`invalid_arguments`)."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError

from ..base.errors import EngramError, quote

# The names an argument model takes at a place in the arguments (`tools.known_fields`).
Known = Callable[[tuple[int | str, ...]], list[str]]

_CLI_WORDS = (
    ("with --task ID", "with task=<id>"),
    ("pass --redact", "pass redact=true"),
    ("say why with --reason", "say why with reason"),
)


def agent_message(exc: EngramError) -> str:
    """The library's one-line message in an agent's words: the fix it carries, worded for MCP
    (tools and parameters); for an error that carries none, command-line options it names are
    replaced by their tool parameters."""
    if exc.fix is not None or exc.mcp_problem is not None:
        return exc.message("mcp")
    text = str(exc)
    for cli, tool in _CLI_WORDS:
        text = text.replace(cli, tool)
    return text


def _where(loc: Sequence[int | str]) -> str:
    """A parameter's place in the arguments: `citations[0].start_line`."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out or "arguments"


def _shown(value: Any) -> str:
    """An argument's value as a message shows it: short, quoted if text, never a secret."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, list):
        return "a list"
    return "an object" if isinstance(value, dict) else type(value).__name__


_TYPES = {
    "int": "a whole number",
    "float": "a number",
    "bool": "true or false",
    "string": "text",
    "list": "a list",
    "dict": "an object",
    "model": "an object",
}


def _unknown(loc: tuple[int | str, ...], tool: str, known: Known | None) -> str:
    """An argument no parameter (or a field no object) has, with the closest known name and
    all of them."""
    names = known(loc) if known is not None else []
    close = difflib.get_close_matches(str(loc[-1]), names, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    takes = f"; it takes {', '.join(names) or 'none'}" if known is not None else ""
    return f"not a {'field here' if len(loc) > 1 else f'parameter of {tool}'}{hint}{takes}"


def _wrong(error: Any, tool: str, known: Known | None) -> str:
    """What pydantic found wrong with one argument, in plain words."""
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    if kind == "missing":
        return "required"
    if kind == "extra_forbidden":
        return _unknown(tuple(error["loc"]), tool, known)
    if kind == "literal_error":
        allowed = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        return f"{_shown(value)} is not one of {', '.join(allowed)}"
    bounds = {
        "less_than_equal": ("over the maximum", "le"),
        "less_than": ("not under", "lt"),
        "greater_than_equal": ("under the minimum", "ge"),
        "greater_than": ("not over", "gt"),
    }
    if kind in bounds:
        words, key = bounds[kind]
        bound = ctx.get(key)
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)
        return f"{_shown(value)} is {words} {bound}"
    if kind == "too_short":
        return f"needs at least {ctx.get('min_length')} item(s)"
    if kind == "too_long":
        return f"holds {ctx.get('actual_length')} items; at most {ctx.get('max_length')}"
    base = kind.split("_", 1)[0]
    if base in _TYPES and kind.endswith(("_type", "_parsing", "_from_float", "_attributes_type")):
        return f"{_shown(value)} is not {_TYPES[base]}"
    return str(error.get("msg", "invalid")).removeprefix("Value error, ")


def invalid_arguments(
    error: ValidationError, *, tool: str = "the tool", known: Known | None = None
) -> str:
    """Arguments that failed the input schema, as one line that names each parameter, what
    was wrong and what is allowed: `kind: 'nonsense' is not one of fact, decision, ...`; an
    unknown name with the closest of the names `known` gives for its place, and all of them."""
    found = [
        f"{_where(e['loc'])}: {_wrong(e, tool, known)}" for e in error.errors(include_url=False)
    ]
    return "; ".join(dict.fromkeys(found))
