"""Writing one table of a TOML document without a TOML writer (none is a dependency), for
Codex's `config.toml`: the table is removed from the text and appended again, and the result must
parse to exactly the old document with only that table changed, or nothing is written.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..base.errors import UsageError

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else json.dumps(key, ensure_ascii=False)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string
    if isinstance(value, Sequence):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        inner = ", ".join(f"{toml_key(str(k))} = {toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    raise UsageError(f"cannot write {type(value).__name__} values to TOML")


def _header_keys(line: str) -> tuple[str, ...] | None:
    """The key path of a `[table]` or `[[array]]` header line, or None if it is not one."""
    text = line.strip()
    if not text.startswith("["):
        return None
    inner = text[2:] if text.startswith("[[") else text[1:]
    keys: list[str] = []
    i = 0
    while i < len(inner):
        char = inner[i]
        if char in " \t.":
            i += 1
        elif char in "\"'":
            end = i + 1
            while end < len(inner) and inner[end] != char:
                end += 2 if char == '"' and inner[end] == "\\" else 1
            raw = inner[i : end + 1]
            keys.append(json.loads(raw) if char == '"' else raw[1:-1])
            i = end + 1
        elif char == "]":
            return tuple(keys)
        else:
            found = _BARE_KEY.match(inner, i)
            if not found:
                return None
            keys.append(found.group())
            i = found.end()
    return None


def set_toml_table(
    text: str, table: tuple[str, ...], values: Mapping[str, Any], *, where: Path | str = "the file"
) -> str:
    """`text` with the table `table` (and its subtables) replaced by `values`, appended at the
    end. Refuses (UsageError) unless the result parses to the old document with only that
    table changed."""
    before = tomllib.loads(text) if text.strip() else {}
    kept: list[str] = []
    skipping = False
    open_quote: str | None = None
    for line in text.splitlines(keepends=True):
        if open_quote is None:
            keys = _header_keys(line)
            if keys is not None:
                skipping = keys[: len(table)] == table
        if not skipping:
            kept.append(line)
        for quote in ('"""', "'''"):
            if line.count(quote) % 2 == 1 and open_quote in (None, quote):
                open_quote = None if open_quote == quote else quote
    body = "".join(kept).rstrip()
    block = (
        "["
        + ".".join(toml_key(k) for k in table)
        + "]\n"
        + "".join(f"{toml_key(k)} = {toml_value(v)}\n" for k, v in values.items())
    )
    new_text = (body + "\n\n" if body else "") + block
    expected = json.loads(json.dumps(before, default=str))
    cursor = expected
    for key in table[:-1]:
        cursor = cursor.setdefault(key, {})
    cursor[table[-1]] = dict(values)
    try:
        after = tomllib.loads(new_text)
    except tomllib.TOMLDecodeError:
        after = None
    if after is None or json.loads(json.dumps(after, default=str)) != expected:
        dotted = ".".join(table)
        raise UsageError(
            f"{where}: could not update [{dotted}] without touching anything "
            f"else (is it defined inline?); add this table by hand:\n{block}"
        )
    return new_text
