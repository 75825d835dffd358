"""Errors that carry what a caller needs to act on them.

Every error a user can cause or fix is an `EngramError`; its message is one line that names the
fix. The CLI prints it and exits with `exit_code`; the MCP server raises it as a `ToolError`.
Anything else that escapes is a bug.

The fix is worded for whoever reads it: an error made with a `Fix` says it with commands and
options to the CLI (`str(error)`: "list them with `engram task list`", "pass --redact") and with
tools and parameters to an agent (`error.message("mcp")`: "find ids with task_list", "pass
redact=true"). An error that names an option in its problem too (`--since 'x' is not a date`)
gives the MCP wording of that part in `mcp_problem`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Front = Literal["cli", "mcp"]


def quote(value: object, width: int = 40) -> str:
    """A short, one-line quotation of what a caller gave, for messages: never all of it, and
    never any part of a credential in it (that shows as [REDACTED:type])."""
    from .secrets import redacted  # its patterns compile on import: only when quoting

    if isinstance(value, str):
        text = redacted(value)
    else:
        pieces: list[str] = []
        _brief(value, pieces, width + 1, redacted)
        text = "".join(pieces)
    if len(text) > width:
        text = text[: width - 1] + "…"
    return repr(text)


def _brief(value: object, pieces: list[str], budget: int, redact: Callable[[str], str]) -> int:
    """Append to `pieces` the start of `value`'s text, at most about `budget` characters of it,
    and return what is left of the budget. A list or a mapping read from a file can be huge
    (a YAML alias bomb expands to billions of items): it is never turned into text whole, only
    as far as the quotation shows."""
    if budget <= 0:
        return 0
    if isinstance(value, str | bytes | int | float | bool) or value is None:
        try:  # inside a list or mapping, text shows as Python shows it: quoted
            text = repr(redact(value)) if isinstance(value, str) else repr(value)
        except ValueError:  # an int too long to turn into text
            text = "a very long number"
        pieces.append(text[:budget])
        return budget - min(len(text), budget)
    if isinstance(value, Mapping):
        opening, closing, items = "{", "}", iter(value.items())
    elif isinstance(value, Iterable) and isinstance(value, Sized):
        opening, closing, items = "[", "]", iter(value)
    else:
        text = f"<{type(value).__name__}>"
        pieces.append(text[:budget])
        return budget - min(len(text), budget)
    pieces.append(opening)
    budget -= 1
    first = True
    for item in items:
        if budget <= 0:
            return 0
        if not first:
            pieces.append(", ")
            budget -= 2
        first = False
        if isinstance(value, Mapping):
            key, item = item
            budget = _brief(key, pieces, budget, redact)
            pieces.append(": ")
            budget -= 2
        budget = _brief(item, pieces, budget, redact)
    pieces.append(closing)
    return budget - 1


def parameter(option: str) -> str:
    """A command-line option as the tool parameter of the same meaning: `--valid-until` is
    `valid_until`. Anything that is not an option comes back as it is."""
    if re.fullmatch(r"--[a-z][a-z0-9-]*", option):
        return option[2:].replace("-", "_")
    return option


@dataclass(frozen=True)
class Fix:
    """What to do about an error, in each front end's words: `cli` names commands and
    options, `mcp` names tools and their parameters."""

    cli: str
    mcp: str

    def words(self, front: Front) -> str:
        return self.mcp if front == "mcp" else self.cli


FIND_IDS = {
    "memory": Fix(
        "list them with `engram list` or `engram log`", "find ids with memory_list or memory_recall"
    ),
    "task": Fix("list them with `engram task list`", "find ids with task_list"),
    "session": Fix("list them with `engram sessions`", "find ids with session_list"),
    "checkpoint": Fix(
        "see a task's checkpoints with `engram timeline TASK`",
        "see them with task_get and checkpoints=true",
    ),
    "event": Fix(
        "list them with `engram log`; a write's receipt names its event",
        "a write's receipt names its event (receipts[].event)",
    ),
    "record": Fix(
        "list them with `engram list` or `engram log`",
        "find ids with memory_list, task_list or session_list",
    ),
}


class EngramError(Exception):
    """Base class. `str(error)` is a single line that says what to do (in the CLI's words;
    `message("mcp")` says it in an agent's)."""

    exit_code = 1

    def __init__(
        self, problem: str = "", fix: Fix | None = None, *, mcp_problem: str | None = None
    ) -> None:
        self.problem = problem
        self.fix = fix
        self.mcp_problem = mcp_problem
        super().__init__(f"{problem}; {fix.cli}" if fix else problem)

    def message(self, front: Front = "cli") -> str:
        """The one-line message for a front end: `cli` (commands and options) or `mcp` (tools
        and parameters)."""
        if front == "cli" or (self.fix is None and self.mcp_problem is None):
            return str(self)
        problem = self.mcp_problem or self.problem
        return f"{problem}; {self.fix.words(front)}" if self.fix else problem


class UsageError(EngramError):
    """Bad input: a value out of range, a malformed id, a missing option."""

    exit_code = 2


class NotFoundError(UsageError):
    def __init__(self, what: str, ident: str) -> None:
        self.what = what
        self.ident = ident
        super().__init__(
            f"no {what} with id {quote(ident, 60)}", FIND_IDS.get(what, FIND_IDS["record"])
        )


class AmbiguousIdError(UsageError):
    def __init__(self, prefix: str, candidates: Sequence[str]) -> None:
        self.prefix = prefix
        self.candidates = list(candidates)
        shown = ", ".join(self.candidates[:5]) + (", ..." if len(self.candidates) > 5 else "")
        super().__init__(
            f"id prefix {quote(prefix, 60)} matches {len(self.candidates)} records ({shown})",
            Fix("give more characters of the id", "give more characters of the id"),
        )


class NoStoreError(EngramError):
    exit_code = 2


class LinkedStoreError(EngramError):
    """A project's `.engram` is a symbolic link. Through it a cloned repository could make
    Engram read, write and commit another directory (a sibling repository's memories), so
    Engram works in no store there, for reads as for writes, until it is a real folder."""

    exit_code = 2

    def __init__(self, path: Path) -> None:
        self.path = path
        self.why = (
            "a symbolic link: Engram never uses a project store through a link, which can "
            "point into another repository"
        )
        super().__init__(
            f"{path} is {self.why}",
            Fix(
                f"remove it (`git rm {path.name}`, or `rm {path.name}` if it is not committed) "
                "and run `engram init --project`",
                f"ask the user to remove {path.name} (`git rm {path.name}`) and run "
                "`engram init --project`",
            ),
        )


class SecretError(UsageError):
    """Content holds something that looks like a credential. The secret itself is never kept."""

    def __init__(
        self,
        secret_type: str,
        line: int,
        column: int,
        field: str = "content",
        *,
        redactable: bool = True,
    ) -> None:
        self.secret_type = secret_type
        self.line = line
        self.column = column
        self.field = field
        fix = (
            Fix(
                f"remove it, or pass --redact to store it as [REDACTED:{secret_type}]",
                f"remove it, or pass redact=true to store it as [REDACTED:{secret_type}]",
            )
            if redactable
            else Fix("remove it", "remove it")
        )
        super().__init__(
            f"{field} contains what looks like a secret ({secret_type}) at line {line}, "
            f"column {column}",
            fix,
        )


class DamagedFileError(EngramError):
    """An event file holds something Engram did not write: conflict markers, invalid JSON."""

    def __init__(self, path: Path | str, line: int, problem: str) -> None:
        self.path = Path(path)
        self.line = line
        super().__init__(
            f"{path}:{line}: {problem}; run `engram verify` to list every damaged line"
        )
        self.problem = problem  # what is wrong with the line; the message says where


class GitError(EngramError):
    pass
