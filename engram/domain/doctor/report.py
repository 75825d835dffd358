"""The doctor's findings and reports, and what it needs of the object it is given.

A `Finding` is one thing wrong (or worth knowing) about a store, where it is, and the command
that fixes it; a `StoreReport` holds a store's findings and the repairs made, and a
`DoctorReport` is the verdict on every store. `Host` and
`Fresh` say what the doctor uses of the facade it is given, so that the doctor never imports it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ...base import layout
from ...base.layout import CONFIG_FILE
from ...storage.store import Store
from ...storage.store import git_c as git_c  # the checks take it from here

if TYPE_CHECKING:
    from ...readmodel.projection import Projection

Level = Literal["error", "warning", "note"]

HOLD_SECONDS = 1.0  # a lock held this long by one process is worth reporting
MIN_FREE_BYTES = 1024 * 1024  # below this, a store's disk counts as full
SKELETON = (CONFIG_FILE, layout.README_FILE, layout.GITATTRIBUTES_FILE)


class Host(Protocol):
    """What the doctor reads of the object it is given (the `Engram` facade): the stores it
    selects, and each store's read model and settings."""

    @property
    def cwd(self) -> Path: ...
    @property
    def use(self) -> str: ...
    @property
    def personal(self) -> Store | None: ...
    @property
    def project(self) -> Store | None: ...
    @property
    def foreign(self) -> Any: ...

    def project_store(self) -> Store: ...
    def projection(self, store: Store) -> Projection: ...
    def settings(self, store: Store) -> Any: ...
    def stale(self, *, at: str | None = None, limit: int | None = None) -> Any: ...


class Fresh(Protocol):
    """A new facade over one store, for the repairs that run one of its commands."""

    def __enter__(self) -> Fresh: ...
    def __exit__(self, *exc: object) -> None: ...
    def init(self, *, project: bool = False) -> Any: ...
    def reindex(self) -> Any: ...
    def recover(self) -> list[Any]: ...


@dataclass(frozen=True)
class Finding:
    """One thing wrong (error, warning) or worth knowing (note), with its fix."""

    check: str  # a stable name: torn-line, damaged-line, uncommitted, cache, ...
    level: Level
    message: str
    fix: str  # the command (or action) that fixes it
    path: str | None = None  # an event file (store-relative) or a local file (absolute)
    line: int | None = None
    auto: bool = False  # `engram doctor --fix` applies the fix

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class StoreReport:
    store: Store
    findings: list[Finding] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(f.level != "note" for f in self.findings)

    def result(self) -> StoreDiagnosis:
        return StoreDiagnosis(
            self.store.kind, str(self.store.root), self.ok, tuple(self.findings), tuple(self.fixed)
        )


@dataclass(frozen=True)
class StoreDiagnosis:
    """The doctor's verdict on one store: its findings, and the repairs `--fix` made."""

    store: str
    path: str
    ok: bool
    findings: tuple[Finding, ...]
    fixed: tuple[str, ...]


@dataclass(frozen=True)
class DoctorReport:
    """The doctor's verdict on the selected stores: healthy if every store is."""

    ok: bool
    stores: tuple[StoreDiagnosis, ...]


# -- helpers --------------------------------------------------------------------------------------


def flag(store: Store) -> str:
    return f"--{store.kind}"


def restore_command(store: Store, rels: list[str]) -> str:
    from ...git.repo import restore_command as command

    return command(store, rels)
