"""Citations of a memory and their freshness: the records, and the strict check of what a store
holds.

A citation names a file git tracked when the memory was written, pinned to the commit and the
blob id it had there (`path`, `commit`, `blob`), optionally with the line (`path:12`) or the
symbol (`path::name`) the memory spoke of. Read back from a store, a citation that is not well
formed is dropped: one bad entry never stops a command.

Freshness is the verdict on a memory's citations at HEAD (or a given revision): `fresh` (every
cited file has the blob it had), `changed`, `moved` (followed through a git rename), `missing`,
or `unknown` (this clone cannot say: the commit is not in it, as in a shallow clone or another
repository). The memory's verdict is its worst citation's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

State = Literal["fresh", "changed", "moved", "missing", "unknown"]
STATES: tuple[State, ...] = ("fresh", "unknown", "changed", "moved", "missing")  # worst last
STALE: frozenset[str] = frozenset({"changed", "moved", "missing"})
MAX_CITATIONS = 20  # per memory
# A stale memory's recall score is multiplied by this: ranked a little lower, never hidden.
STALE_FACTOR = 0.85

_OID = re.compile(r"^[0-9a-f]{40}$")
_SYMBOL = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]{0,199}$")


@dataclass(frozen=True)
class Citation:
    path: str
    commit: str
    blob: str
    line: int | None = None
    symbol: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"path": self.path, "commit": self.commit, "blob": self.blob}
        if self.line is not None:
            data["line"] = self.line
        if self.symbol is not None:
            data["symbol"] = self.symbol
        return data

    @property
    def label(self) -> str:
        return (
            self.path
            + (f":{self.line}" if self.line is not None else "")
            + (f"::{self.symbol}" if self.symbol is not None else "")
        )


def is_oid(value: str) -> bool:
    """Whether `value` is a full git object id (commit or blob), as citations pin them."""
    return _OID.match(value) is not None


def well_formed_path(path: object) -> bool:
    """A relative, `/`-separated path inside a work tree: no `..`, no `.git`, no control text."""
    if not isinstance(path, str) or not path or len(path) > 1024 or path.startswith("/"):
        return False
    parts = path.split("/")
    return all(p not in ("", ".", "..") and p.casefold() != ".git" for p in parts) and not any(
        ord(c) < 32 or c == "\x7f" for c in path
    )


def citation(raw: object) -> Citation | None:
    """A citation read from a store, or None when it is not well formed."""
    if not isinstance(raw, Mapping):
        return None
    path, commit, blob = raw.get("path"), raw.get("commit"), raw.get("blob")
    line, symbol = raw.get("line"), raw.get("symbol")
    if (
        not well_formed_path(path)
        or not isinstance(commit, str)
        or not _OID.match(commit)
        or not isinstance(blob, str)
        or not _OID.match(blob)
    ):
        return None
    if line is not None and (
        isinstance(line, bool) or not isinstance(line, int) or not 1 <= line <= 10_000_000
    ):
        return None
    if symbol is not None and (not isinstance(symbol, str) or not _SYMBOL.match(symbol)):
        return None
    assert isinstance(path, str)
    return Citation(path, commit, blob, line, symbol)


def clean(raw: object) -> tuple[dict[str, Any], ...]:
    """The well-formed citations of an event's `citations` field, at most MAX_CITATIONS."""
    if not isinstance(raw, (list, tuple)):
        return ()
    found = (citation(item) for item in raw[:MAX_CITATIONS])
    return tuple(c.to_dict() for c in found if c is not None)


def citations_of(raw: Iterable[Mapping[str, Any]]) -> list[Citation]:
    return [c for c in map(citation, raw) if c is not None]


@dataclass(frozen=True)
class Change:
    """The history of a cited file since the memory was written (asked for with --explain)."""

    commits: int
    subject: str
    author: str
    time: str  # ISO, of the last commit that changed it

    def to_dict(self) -> dict[str, Any]:
        return {
            "commits": self.commits,
            "subject": self.subject,
            "author": self.author,
            "time": self.time,
        }


@dataclass(frozen=True)
class CitedFile:
    """One citation's verdict."""

    citation: Citation
    state: State
    now_path: str | None = None  # where a moved file is now
    why: str = ""  # for unknown: what this clone lacks
    change: Change | None = None
    symbol_exists: bool | None = None  # for a cited symbol, when asked (None: not looked at)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "path": self.citation.path,
            "cited": self.citation.label,
            "state": self.state,
        }
        if self.now_path is not None:
            data["now_path"] = self.now_path
        if self.why:
            data["why"] = self.why
        if self.change is not None:
            data["change"] = self.change.to_dict()
        if self.symbol_exists is not None:
            data["symbol_exists"] = self.symbol_exists
        return data

    def describe(self) -> str:
        text = f"{self.citation.label} {self.state}"
        if self.state == "moved" and self.now_path:
            text += f" to {self.now_path}"
        if self.why:
            text += f" ({self.why})"
        if self.change is not None:
            plural = "" if self.change.commits == 1 else "s"
            text += (
                f" in {self.change.commits} commit{plural}, last {self.change.subject!r} "
                f"by {self.change.author}"
            )
        if self.symbol_exists is False:
            text += f"; {self.citation.symbol} is no longer in it"
        return text


@dataclass(frozen=True)
class Freshness:
    """A memory's verdict: the worst of its citations'."""

    memory: str
    files: tuple[CitedFile, ...] = field(default=())

    @property
    def state(self) -> State:
        if not self.files:
            return "fresh"
        return max((f.state for f in self.files), key=STATES.index)

    @property
    def stale(self) -> bool:
        return self.state in STALE

    @property
    def last_change(self) -> str:
        """When the newest change to a cited file was committed ("" when not known)."""
        return max((f.change.time for f in self.files if f.change is not None), default="")

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "files": [f.to_dict() for f in self.files]}

    def describe(self) -> str:
        return "; ".join(f.describe() for f in self.files if f.state != "fresh")


@dataclass(frozen=True)
class Verdicts:
    """The freshness of several memories (those that cite files), looked up by memory id."""

    items: tuple[Freshness, ...] = ()
    by_id: dict[str, Freshness] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.by_id.update((f.memory, f) for f in self.items)

    def get(self, memory_id: str) -> Freshness | None:
        return self.by_id.get(memory_id)

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self.by_id

    def __getitem__(self, memory_id: str) -> Freshness:
        found = self.get(memory_id)
        if found is None:
            raise KeyError(memory_id)
        return found

    def to_dict(self) -> dict[str, Any]:
        return {f.memory: f.to_dict() for f in self.items}
