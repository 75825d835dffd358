"""Turns typed results (frozen dataclasses) into the plain JSON values the front ends print.

`as_json` walks a dataclass into a dict of its fields in declaration order, recursively, so a
result printed with `--json` or returned by an MCP tool keeps the keys and order it always had.
A result whose JSON is not its fields (a checkpoint keeps the fields in the order they were
saved) says so with a `to_dict()` method, which `as_json` uses.
"""

from __future__ import annotations

import dataclasses


def as_json(value: object) -> object:
    """`value` with every dataclass turned into its `to_dict()`, or else a dict of its fields
    (declaration order), tuples and lists into lists and dict values converted; anything else
    is returned as is."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        to_dict = getattr(value, "to_dict", None)
        if callable(to_dict):
            return as_json(to_dict())
        return {f.name: as_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [as_json(item) for item in value]
    if isinstance(value, dict):
        return {key: as_json(item) for key, item in value.items()}
    return value
