"""Errors that carry what a caller needs to act on them.

Every error a user can cause or fix is an `EngramError`; its message is one line that names the
fix. The CLI prints it and exits with `exit_code`; the MCP server raises it as a `ToolError`.
Anything else that escapes is a bug.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def quote(value: object, width: int = 40) -> str:
    """A short, one-line quotation of what a caller gave, for messages: never all of it, and
    never any part of a credential in it (that shows as [REDACTED:type])."""
    from .secrets import redacted  # engram.secrets imports this module

    text = redacted(value if isinstance(value, str) else str(value))
    if len(text) > width:
        text = text[: width - 1] + "…"
    return repr(text)


class EngramError(Exception):
    """Base class. `str(error)` is a single line that says what to do."""

    exit_code = 1


class UsageError(EngramError):
    """Bad input: a value out of range, a malformed id, a missing option."""

    exit_code = 2


class NotFoundError(UsageError):
    def __init__(self, what: str, ident: str) -> None:
        self.what = what
        self.ident = ident
        super().__init__(
            f"no {what} with id {quote(ident, 60)}; list them with `engram list` or `engram log`"
        )


class AmbiguousIdError(UsageError):
    def __init__(self, prefix: str, candidates: Sequence[str]) -> None:
        self.prefix = prefix
        self.candidates = list(candidates)
        shown = ", ".join(self.candidates[:5]) + (", ..." if len(self.candidates) > 5 else "")
        super().__init__(
            f"id prefix {quote(prefix, 60)} matches {len(self.candidates)} records ({shown}); "
            "give more characters"
        )


class NoStoreError(EngramError):
    exit_code = 2


class SecretError(UsageError):
    """Content holds something that looks like a credential. The secret itself is never kept."""

    def __init__(self, secret_type: str, line: int, column: int, field: str = "content",
                 *, redactable: bool = True) -> None:
        self.secret_type = secret_type
        self.line = line
        self.column = column
        self.field = field
        fix = (f"remove it, or pass --redact to store it as [REDACTED:{secret_type}]"
               if redactable else "remove it")
        super().__init__(
            f"{field} contains what looks like a secret ({secret_type}) at line {line}, "
            f"column {column}; {fix}"
        )


class DamagedFileError(EngramError):
    """An event file holds something Engram did not write: conflict markers, invalid JSON."""

    def __init__(self, path: Path | str, line: int, problem: str) -> None:
        self.path = Path(path)
        self.line = line
        self.problem = problem
        super().__init__(
            f"{path}:{line}: {problem}; run `engram verify` to list every damaged line"
        )


class GitError(EngramError):
    pass
