"""Reads from the read model that survive a damaged cache: a query that meets a damaged page
rebuilds the cache from the event files and runs once more.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from .schema import damaged


class Rebuildable(Protocol):
    """A read model whose cache can be rebuilt from the event files."""

    refreshing: bool  # True while a refresh runs: it rebuilds by itself

    def connection(self) -> sqlite3.Connection: ...
    def rebuild(self) -> None: ...


_T = TypeVar("_T")


def recovering(method: Callable[..., _T]) -> Callable[..., _T]:
    """A read that finds a cached row unreadable (damage inside a page that SQLite cannot see)
    rebuilds the cache from the event files and runs once more."""

    @functools.wraps(method)
    def read(self: Any, *args: Any, **kwargs: Any) -> _T:
        try:
            return method(self, *args, **kwargs)
        except (sqlite3.DatabaseError, ValueError, KeyError, TypeError) as exc:
            if self.refreshing or (isinstance(exc, sqlite3.DatabaseError) and not damaged(exc)):
                raise
        self.rebuild()
        return method(self, *args, **kwargs)

    return read


class Rows:
    """The rows of a query, read in full (so that damage shows before any is used)."""

    def __init__(self, rows: list[Any]) -> None:
        self._rows = rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)

    def fetchone(self) -> Any:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Any]:
        return self._rows


class Guarded:
    """Reads from the projection. SQLite finds some damage only when it reads the damaged page;
    such a query rebuilds the cache from the event files and runs again, so a damaged cache
    costs time, never a wrong or failed answer."""

    def __init__(self, projection: Rebuildable) -> None:
        self._projection = projection

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Rows:
        proj = self._projection
        try:
            return Rows(proj.connection().execute(sql, args).fetchall())
        except sqlite3.DatabaseError as exc:
            if proj.refreshing or not damaged(exc):
                raise  # refresh() rebuilds by itself
        proj.rebuild()
        return Rows(proj.connection().execute(sql, args).fetchall())
