"""Store maintenance: init, commits and compaction, status, recovery, settings.

What `engram init`, `commit`, `compact`, `status`, `stats`, `recover`, `verify` and `config`
do, over a workspace's stores; the search caches (`reindex`) are `indexing`'s.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ..base.config import (
    PROJECT_DIR,
    SETTINGS,
    Settings,
    SettingValue,
    find_work_tree,
    foreign_store,
    personal_only,
)
from ..base.errors import GitError, UsageError
from ..storage import events as ev
from ..storage import shapes
from ..storage.local import WriterState
from ..storage.store import Store, require
from .indexing import Indexes
from .indexing import IndexRefresh as IndexRefresh
from .indexing import IndexState as IndexState
from .indexing import MissingReadModel as MissingReadModel
from .indexing import ReindexReport as ReindexReport
from .indexing import StoreIndexState as StoreIndexState
from .indexing import StoreReindex as StoreReindex
from .verify import VerifyReport
from .workspace import CommitResult, Workspace

if TYPE_CHECKING:
    from ..git.compact import CompactResult
    from ..git.lost import Recovered


# -- results -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StoreStatistics:
    """`stats` of one store: counts by status, kind and scope, strength, index freshness."""

    store: str
    path: str
    events: int
    memories: int
    forgotten: int
    superseded: int
    files: int
    by_kind: dict[str, int]
    by_scope: dict[str, int]
    average_strength: float | None
    decayed: int
    index: StoreIndexState | None


@dataclass(frozen=True)
class LostSummary:
    """Events git took away from a store: how many, from which files, how many elsewhere."""

    events: int
    files: dict[str, int]
    elsewhere: int


@dataclass(frozen=True)
class Remote:
    name: str
    url: str


@dataclass(frozen=True)
class Upstream:
    """The current branch against its upstream, as of the last fetch."""

    upstream: str
    ahead: int
    behind: int


@dataclass(frozen=True)
class StoreStatus:
    """`status` of one store: where it is, what it holds, what is not committed, its remotes."""

    store: str
    path: str
    branch: str | None
    head: str | None
    events: int
    memories: int
    forgotten: int
    superseded: int
    files: int
    uncommitted: int
    uncommitted_files: tuple[str, ...]
    refused: tuple[str, ...]  # event files changed in their committed part
    unreadable: tuple[str, ...]  # event files whose uncommitted lines hold one readers skip
    missing: tuple[str, ...]
    restore: str | None
    lost: LostSummary
    busy: str | None
    remotes: tuple[Remote, ...]
    upstream: Upstream | None
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class EffectiveSetting:
    """One setting as it applies here: its value, where the value comes from, what it does."""

    key: str
    value: SettingValue
    origin: str
    help: str


class Maintenance:
    """Keeping a workspace's stores, caches and settings in order."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def init(self, *, project: bool = False) -> tuple[Store, bool]:
        """Create the personal store, or the project store of the current repository.

        Returns the store and whether anything was created (init is idempotent).
        """
        from ..git import repo as git

        if project:
            top = find_work_tree(self.workspace.cwd)
            if top is None:
                raise UsageError(
                    f"{self.workspace.cwd} is not inside a git repository; run `git init` first, "
                    "or `engram init` without --project for the personal store"
                )
            if top.resolve() == self.workspace.personal.root.resolve():
                raise UsageError(
                    "this is the personal store's repository; "
                    "run `engram init --project` inside a project"
                )
            what = foreign_store(top / PROJECT_DIR)
            if what is not None:
                self.workspace.drop_foreign_warning()
                raise UsageError(
                    f"{top / PROJECT_DIR} is {what}, and Engram's project store would need "
                    "the same folder: nothing was changed; use Engram's personal store here "
                    "(its memories written in this repository follow the project, see "
                    "docs/project-identity.md) and `engram import .engram` to bring that "
                    "tool's memories in"
                )
            store = Store(top / PROJECT_DIR, "project")
        else:
            store = self.workspace.personal
            what = foreign_store(store.root)
            if what is not None and not (store.root / ".git").exists():
                raise UsageError(
                    f"{store.root} is {what}, not an Engram store: nothing was changed; set "
                    "ENGRAM_HOME to another directory (e.g. `export ENGRAM_HOME=~/.engram-mem`) "
                    "and run `engram init` again"
                )
            if (
                store.root.exists()
                and any(store.root.iterdir())
                and not (store.root / ".git").exists()
            ):
                raise UsageError(
                    f"{store.root} exists, is not empty and is not a git repository; "
                    "move it away or set ENGRAM_HOME to another directory"
                )
            if not (store.root / ".git").exists():
                store.root.mkdir(parents=True, exist_ok=True)
                git.init_repository(store.root)
        fresh = not store.exists()
        created = store.ensure_layout()
        if fresh:
            self.workspace.emit(store, "store.created", {"store": store.kind}, commit=False)
        if created or fresh:
            subject = (
                f"engram: initialize {store.kind} store"
                if fresh
                else f"engram: {', '.join(created)} of the {store.kind} store brought up to date"
            )
            self.workspace.commit_store(store, subject=subject)
        if project:
            self.workspace.project = store
        return store, bool(created or fresh)

    def compact(self, *, dry_run: bool = False) -> list[CompactResult]:
        """Commit pending events, then fold each month's closed event files into one file, in
        one commit per store (see `engram.git.compact`)."""
        from ..git import compact
        from ..git import repo as git

        out = []
        for store in self.workspace.stores():
            with store.lock():
                repo = git.StoreRepo(store)
                if not dry_run:
                    self.workspace.commit_store(store, locked=True, repo=repo)
                out.append(
                    compact.compact(
                        store, repo, author=self.workspace.actor(store), dry_run=dry_run
                    )
                )
        return out

    def commit(self, *, subject: str | None = None) -> list[CommitResult]:
        """Commit every pending event of the selected stores now."""
        stores = self.workspace.stores()
        if subject is not None:
            subject = self.workspace.checks(stores[0]).text(
                subject, field="commit subject", limit="limits.title_chars", one_line=True
            )
        return [
            self.workspace.commit_store(store, subject=subject, lifecycle_alone=True)
            for store in stores
        ]

    def stats(self, *, now: datetime | None = None) -> list[StoreStatistics]:
        """Counts by kind, scope and store, average strength, and index freshness."""
        from ..search.retrieval import strength

        moment = now or ev.utc_now()
        freshness = {e.store: e for e in Indexes(self.workspace).index_state()}
        out = []
        for store in self.workspace.stores():
            settings = self.workspace.settings(store)
            proj = self.workspace.projection(store)
            active = list(proj.memories())
            by_kind = Counter(m.kind for m in active)
            by_scope = Counter(m.scope or "-" for m in active)
            strengths = [strength(m, moment, settings) for m in active]
            out.append(
                StoreStatistics(
                    store=store.kind,
                    path=str(store.root),
                    **proj.counts(),
                    by_kind=dict(by_kind.most_common()),
                    by_scope=dict(by_scope.most_common(20)),
                    average_strength=round(sum(strengths) / len(strengths), 4)
                    if strengths
                    else None,
                    decayed=sum(
                        1 for value in strengths if value < settings["recall.strength_floor"]
                    ),
                    index=freshness.get(store.kind),
                )
            )
        return out

    def status(self) -> list[StoreStatus]:
        from ..git import lost
        from ..git import repo as git

        out = []
        for store in self.workspace.stores():
            proj = self.workspace.projection(store)
            repo = git.StoreRepo(store)
            pending = repo.pending()
            lost.settle(store, proj)
            gone = lost.find(store, proj)
            ahead = repo.upstream_state()
            upstream = Upstream(**ahead) if ahead is not None else None  # type: ignore[arg-type]
            out.append(
                StoreStatus(
                    store=store.kind,
                    path=str(store.root),
                    branch=repo.branch(),
                    head=repo.head_id(),
                    **proj.counts(),
                    uncommitted=len(pending.events),
                    uncommitted_files=tuple(c.rel for c in pending.changes),
                    refused=tuple(pending.refused),
                    unreadable=tuple(pending.unreadable),
                    missing=tuple(pending.missing),
                    restore=git.restore_command(store, pending.missing)
                    if pending.missing
                    else None,
                    lost=LostSummary(gone.count, gone.files, gone.elsewhere),
                    busy=repo.busy(),
                    remotes=tuple(Remote(r["name"], r["url"]) for r in repo.remotes()),
                    upstream=upstream,
                    warnings=tuple(str(p) for p in proj.problems()),
                )
            )
        return out

    def recover(self, *, everything: bool = False) -> list[Recovered]:
        """Write back the events that git took away from the selected stores (see
        `engram.lost`): found in the reflogs, stashes and unreachable objects, else in the
        ledger, appended unchanged (same ids, clocks and bytes) to new event files and
        committed. With `everything`, also every event git still holds that is in neither the
        store nor any branch. Running it again writes nothing."""
        return [
            self._recover_store(store, everything=everything) for store in self.workspace.stores()
        ]

    def _recover_store(self, store: Store, *, everything: bool) -> Recovered:
        from ..git import lost

        proj = self.workspace.projection(store)
        commit = None
        with store.lock():
            proj.refresh()
            found, from_git, missing, notes = lost.gather(store, proj, everything=everything)
            files = []
            for run in lost.runs(found):
                store.append(
                    [event for event, _ in run], fresh=True, raw=[line + b"\n" for _, line in run]
                )
                files.append(WriterState.load(store).segment or "")
            if found:
                try:
                    commit = self.workspace.commit_store(
                        store, locked=True, subject=f"engram: recover {len(found)} lost event(s)"
                    ).commit
                except GitError as exc:
                    notes.append(f"written back but not committed yet: {exc}")
        proj.refresh()
        lost.settle(store, proj)
        if missing:
            notes.append(
                f"{missing} uncommitted event(s) were lost with no copy left "
                "anywhere (not in git's objects, not in the ledger)"
            )
        return lost.Recovered(
            store.kind, len(found), tuple(files), from_git, missing, commit, tuple(notes)
        )

    def verify(self) -> VerifyReport:
        """Re-read every event file of the selected stores from disk; report all damage."""
        from .verify import verify_store

        reports = tuple(verify_store(store, shapes_too=True) for store in self.workspace.stores())
        return VerifyReport(ok=all(r.ok for r in reports), stores=reports)

    # -- settings ----------------------------------------------------------------------------

    def config_target(self) -> Store:
        if self.workspace.use == "project":
            return self.workspace.project_store()
        return require(self.workspace.personal, "personal")

    def config_set(self, key: str, text: str) -> SettingValue:
        from ..base.config import parse_value

        store = self.config_target()
        value: SettingValue = parse_value(key, text)
        if isinstance(value, str):
            self.workspace.checks(store).scan(value, field=key, redactable=False)
        if store.kind == "project" and personal_only(key, value):
            raise UsageError(
                f"{key} is read only from your own configuration, never from a "
                f"project's (anyone who can push could change it); set it without "
                f"--project"
            )
        shapes.refuse_write(store, store.config_file.path)
        if key == "search.model":
            # Only here, where a person sets it, is the model looked for on this machine: a
            # file read from git may name a folder only another machine has (doctor says so).
            from ..search.models.choice import model_problem

            problem = model_problem(str(value))
            if problem:
                raise UsageError(f"search.model: {problem}")
        with store.lock():
            store.config_file.set(key, value)
        self.workspace.commit_store(store, subject=f"engram: config {key} = {value}")
        return value

    def _effective_settings(self) -> Settings:
        """Settings as they apply here: the project's on top, unless only personal is used."""
        if self.workspace.use == "personal":
            return self.workspace.settings(self.workspace.personal)
        return self.workspace.settings()

    def config_get(self, key: str) -> SettingValue:
        value: SettingValue = self._effective_settings()[key]
        return value

    def config_list(self) -> list[EffectiveSetting]:
        settings = self._effective_settings()
        return [
            EffectiveSetting(key, settings[key], settings.origin(key), SETTINGS[key].help)
            for key in SETTINGS
        ]
