"""Store maintenance: init, commits and compaction, the caches, status, recovery, settings.

What `engram init`, `commit`, `compact`, `reindex`, `status`, `stats`, `recover`, `verify` and
`config` do, over a workspace's stores.
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ..base import layout
from ..base.config import (
    PROJECT_DIR,
    SETTINGS,
    Settings,
    SettingValue,
    find_work_tree,
    foreign_store,
    personal_only,
)
from ..base.errors import EngramError, GitError, UsageError
from ..readmodel.projection import Projection
from ..storage import events as ev
from ..storage.reindexing import reindexing
from ..storage.store import Store, WriterState, require
from .verify import VerifyReport
from .workspace import CommitResult, Workspace

if TYPE_CHECKING:
    from ..git.compact import CompactResult
    from ..git.lost import Recovered


# -- results -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StoreReindex:
    """What `reindex` rebuilt in one store."""

    store: str
    events: int
    memories: int
    embedded: int
    reused: int
    vectors: bool


@dataclass(frozen=True)
class ReindexReport:
    """What `reindex` rebuilt: totals over the stores, each store, and how long it took."""

    events: int
    memories: int
    embedded: int
    reused: int
    stores: tuple[StoreReindex, ...]
    seconds: float


@dataclass(frozen=True)
class IndexRefresh:
    """What `refresh_indexes` caught up: events read and dropped, texts indexed and embedded."""

    events_added: int
    events_removed: int
    indexed_text: int
    embedded: int
    reused: int
    seconds: float


@dataclass(frozen=True)
class MissingReadModel:
    """`index_state` of a store whose read model is missing: everything must be rebuilt."""

    store: str
    path: str
    projection: str
    current: bool
    healthy: bool
    behind: tuple[str, ...]
    stale: tuple[str, ...]


@dataclass(frozen=True)
class IndexState:
    """`index_state` of a store with a read model: each cache current, behind or missing."""

    store: str
    path: str
    projection: str  # current | behind
    text_index: str  # current | behind | missing
    text_pending: int
    vector_index: str  # off | current | behind | missing
    vector_pending: int
    vector_model: str | None
    model: str
    behind: tuple[str, ...]  # why a cache is behind (it catches up on its own)
    stale: tuple[str, ...]  # why a cache must be rebuilt
    current: bool
    healthy: bool


StoreIndexState = IndexState | MissingReadModel


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
    refused: tuple[str, ...]
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
                raise UsageError("this is the personal store's repository; "
                                 "run `engram init --project` inside a project")
            what = foreign_store(top / PROJECT_DIR)
            if what is not None:
                self.workspace.drop_foreign_warning()
                raise UsageError(
                    f"{top / PROJECT_DIR} is {what}, and Engram's project store would need "
                    "the same folder: nothing was changed; use Engram's personal store here "
                    "(its memories written in this repository follow the project, see "
                    "docs/project-identity.md) and `engram import .engram` to bring that "
                    "tool's memories in")
            store = Store(top / PROJECT_DIR, "project")
        else:
            store = self.workspace.personal
            what = foreign_store(store.root)
            if what is not None and not (store.root / ".git").exists():
                raise UsageError(
                    f"{store.root} is {what}, not an Engram store: nothing was changed; set "
                    "ENGRAM_HOME to another directory (e.g. `export ENGRAM_HOME=~/.engram-mem`) "
                    "and run `engram init` again")
            if store.root.exists() and any(store.root.iterdir()) and \
                    not (store.root / ".git").exists():
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
            subject = f"engram: initialize {store.kind} store" if fresh else \
                f"engram: {', '.join(created)} of the {store.kind} store brought up to date"
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
                out.append(compact.compact(store, repo, author=self.workspace.actor(store),
                                           dry_run=dry_run))
        return out

    def commit(self, *, subject: str | None = None) -> list[CommitResult]:
        """Commit every pending event of the selected stores now."""
        stores = self.workspace.stores()
        if subject is not None:
            subject = self.workspace.checks(stores[0]).text(subject, field="commit subject",
                                                  limit="limits.title_chars", one_line=True)
        return [self.workspace.commit_store(store, subject=subject, lifecycle_alone=True)
                for store in stores]


    # -- search maintenance ------------------------------------------------------------------

    def reindex(self, *, progress: Callable[[str, int, int], None] | None = None,
                ) -> ReindexReport:
        """Rebuild every cache of the selected stores from the event files.

        Embeddings come from the embedding cache where the same text was embedded before by the
        same model, so a second reindex embeds nothing. `progress(stage, done, total)` is called
        as work advances.
        """
        started = time.perf_counter()
        stores: list[StoreReindex] = []
        for store in self.workspace.stores():
            with reindexing(store):  # a second reindex of the store waits for the first
                stores.append(self._reindex_one(store, progress))
        return ReindexReport(
            events=sum(s.events for s in stores), memories=sum(s.memories for s in stores),
            embedded=sum(s.embedded for s in stores), reused=sum(s.reused for s in stores),
            stores=tuple(stores), seconds=round(time.perf_counter() - started, 3))

    def _reindex_one(self, store: Store,
                     progress: Callable[[str, int, int], None] | None) -> StoreReindex:
        self.workspace.drop_search(store)
        proj = self.workspace.cached_projection(store) or Projection(store)
        try:
            proj.refresh()  # first, so that events whose files vanished are noted as such
        except (OSError, EngramError):
            pass
        with store.lock():
            proj.reset()
            cache = layout.cache_dir(store.local_dir)
            shutil.rmtree(cache / layout.TEXT_INDEX_DIR, ignore_errors=True)
            for name in (layout.VECTOR_INDEX, layout.VECTOR_META):
                (cache / name).unlink(missing_ok=True)
        self.workspace.drop_projection(store)
        proj = self.workspace.projection(store)
        counts = proj.counts()
        total = len(proj.all_memory_ids())
        search = self.workspace.search(store)
        search.sync_text()
        report = None
        embedder = self.workspace.embedder(store)
        if embedder is not None:
            done = 0

            def step(count: int, total: int = total) -> None:
                nonlocal done
                done += count
                if progress is not None:
                    progress(store.kind, done, total)

            report = search.sync_vectors(embedder, self.workspace.settings(store), force=True,
                                         progress=step)
        return StoreReindex(store.kind, counts["events"], total,
                            report.embedded if report else 0,
                            report.reused if report else 0, embedder is not None)

    def refresh_indexes(self, *, stores: Sequence[Store] | None = None,
                        progress: Callable[[str, int, int], None] | None = None,
                        ) -> IndexRefresh:
        """Bring every cache up to date with the event files, doing only what changed.

        What `reindex` does from scratch, this does incrementally: after a pull, a merge or a
        branch switch it reads the changed files, indexes the changed memories' words, and folds
        their vectors (embedding only texts the embedding cache has not seen) into the index.
        """
        started = time.perf_counter()
        totals = dict.fromkeys(("events_added", "events_removed", "indexed_text", "embedded",
                                "reused"), 0)
        for store in stores if stores is not None else self.workspace.stores():
            proj = self.workspace.open_projection(store)
            refreshed = proj.refresh()
            totals["events_added"] += refreshed.events_added
            totals["events_removed"] += refreshed.events_removed
            search = self.workspace.search(store)
            totals["indexed_text"] += search.sync_text().indexed_text
            if (proj.dirty_count("vec") == 0
                    and (layout.cache_dir(store.local_dir) / layout.VECTOR_META).exists()):
                continue  # nothing to embed: do not load the model or the index for nothing
            embedder = self.workspace.embedder(store)
            if embedder is None:
                continue
            total = proj.dirty_count("vec")
            done = 0

            def step(count: int, total: int = total, kind: str = store.kind) -> None:
                nonlocal done
                done += count
                if progress is not None:
                    progress(kind, done, total)

            report = search.sync_vectors(embedder, self.workspace.settings(store), force=True,
                                         progress=step)
            totals["embedded"] += report.embedded
            totals["reused"] += report.reused
        return IndexRefresh(**totals, seconds=round(time.perf_counter() - started, 3))

    def index_state(self, *, reach: bool = False) -> list[StoreIndexState]:
        """Whether each store's caches are current, without changing anything.

        `current`: every cache has caught up with the files. `healthy`: nothing needs a rebuild.
        A cache that is merely behind is so by design and catches up on its own: the read model
        reads changed files on the next command, the word index takes changes on the next
        search, and the vector index saves changes in batches (`search.vector_flush`) while
        searches score the unsaved ones. Only a missing or unreadable cache, which the next
        command must rebuild from scratch, makes a store unhealthy; with `reach`, so do vectors
        the graph cannot reach (`engram.search.reachability`).
        """
        import json

        from ..search.reachability import unreachable_note

        out: list[StoreIndexState] = []
        for store in self.workspace.stores():
            cache = layout.cache_dir(store.local_dir)
            proj_path = cache / layout.PROJECTION_DB
            if not proj_path.exists():
                out.append(MissingReadModel(store.kind, str(store.root), projection="missing",
                                            current=False, healthy=False, behind=(),
                                            stale=("read model missing",)))
                continue
            proj = self.workspace.cached_projection(store) or Projection(store)
            stale = proj.stale()
            dirty_text = proj.dirty_count("text")
            dirty_vec = proj.dirty_count("vec")
            text_ok = (cache / layout.TEXT_INDEX_DIR / "meta.json").exists()
            identity = None
            try:
                identity = json.loads((cache / layout.VECTOR_META).read_text()).get("identity")
            except (OSError, ValueError, AttributeError):
                pass
            settings = self.workspace.settings(store)
            model = settings["search.model"]
            behind, broken = [], []
            if stale:
                behind.append("event files changed since the read model read them (the next "
                              "command reads them)")
            if not text_ok:
                broken.append("word index missing")
            elif dirty_text:
                behind.append(f"{dirty_text} change(s) not yet in the word index (the next "
                              "search adds them)")
            if model != "off":
                if identity is None:
                    broken.append("vector index missing")
                elif reach and (note := unreachable_note(cache, settings["search.exact_below"],
                                                         store.kind)):
                    broken.append(note)
                if identity is not None and dirty_vec:
                    behind.append(f"{dirty_vec} change(s) not yet saved in the vector index "
                                  f"(searches score them; saved every "
                                  f"{settings['search.vector_flush']})")
            entry = IndexState(
                store=store.kind,
                path=str(store.root),
                projection="behind" if stale else "current",
                text_index="missing" if not text_ok else "behind" if dirty_text or stale
                else "current",
                text_pending=dirty_text,
                vector_index=("off" if model == "off" else "missing" if identity is None else
                              "behind" if dirty_vec or stale else "current"),
                vector_pending=dirty_vec,
                vector_model=identity,
                model=model,
                behind=tuple(behind),
                stale=tuple(broken),
                current=not behind and not broken,
                healthy=not broken,
            )
            if self.workspace.cached_projection(store) is None:
                proj.close()
            out.append(entry)
        return out

    def stats(self, *, now: datetime | None = None) -> list[StoreStatistics]:
        """Counts by kind, scope and store, average strength, and index freshness."""
        from ..search.retrieval import strength

        moment = now or ev.utc_now()
        freshness = {entry.store: entry for entry in self.index_state()}
        out = []
        for store in self.workspace.stores():
            settings = self.workspace.settings(store)
            proj = self.workspace.projection(store)
            active = list(proj.memories())
            by_kind = Counter(m.kind for m in active)
            by_scope = Counter(m.scope or "-" for m in active)
            strengths = [strength(m, moment, settings) for m in active]
            out.append(StoreStatistics(
                store=store.kind,
                path=str(store.root),
                **proj.counts(),
                by_kind=dict(by_kind.most_common()),
                by_scope=dict(by_scope.most_common(20)),
                average_strength=round(sum(strengths) / len(strengths), 4)
                if strengths else None,
                decayed=sum(1 for value in strengths
                            if value < settings["recall.strength_floor"]),
                index=freshness.get(store.kind),
            ))
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
            out.append(StoreStatus(
                store=store.kind,
                path=str(store.root),
                branch=repo.branch(),
                head=repo.head_id(),
                **proj.counts(),
                uncommitted=len(pending.events),
                uncommitted_files=tuple(c.rel for c in pending.changes),
                refused=tuple(pending.refused),
                missing=tuple(pending.missing),
                restore=git.restore_command(store, pending.missing) if pending.missing
                else None,
                lost=LostSummary(gone.count, gone.files, gone.elsewhere),
                busy=repo.busy(),
                remotes=tuple(Remote(r["name"], r["url"]) for r in repo.remotes()),
                upstream=upstream,
                warnings=tuple(str(p) for p in proj.problems()),
            ))
        return out

    def recover(self, *, everything: bool = False) -> list[Recovered]:
        """Write back the events that git took away from the selected stores (see
        `engram.lost`): found in the reflogs, stashes and unreachable objects, else in the
        ledger, appended unchanged (same ids, clocks and bytes) to new event files and
        committed. With `everything`, also every event git still holds that is in neither the
        store nor any branch. Running it again writes nothing."""
        return [self._recover_store(store, everything=everything)
                for store in self.workspace.stores()]

    def _recover_store(self, store: Store, *, everything: bool) -> Recovered:
        from ..git import lost

        proj = self.workspace.projection(store)
        commit = None
        with store.lock():
            proj.refresh()
            found, from_git, missing, notes = lost.gather(store, proj, everything=everything)
            files = []
            for run in lost.runs(found):
                store.append([event for event, _ in run], fresh=True,
                             raw=[line + b"\n" for _, line in run])
                files.append(WriterState.load(store).segment or "")
            if found:
                try:
                    commit = self.workspace.commit_store(
                        store, locked=True,
                        subject=f"engram: recover {len(found)} lost event(s)").commit
                except GitError as exc:
                    notes.append(f"written back but not committed yet: {exc}")
        proj.refresh()
        lost.settle(store, proj)
        if missing:
            notes.append(f"{missing} uncommitted event(s) were lost with no copy left "
                         "anywhere (not in git's objects, not in the ledger)")
        return lost.Recovered(store.kind, len(found), tuple(files), from_git, missing, commit,
                              tuple(notes))

    def verify(self) -> VerifyReport:
        """Re-read every event file of the selected stores from disk; report all damage."""
        from .verify import verify_store

        reports = tuple(verify_store(store) for store in self.workspace.stores())
        return VerifyReport(ok=all(r.ok for r in reports), stores=reports)


    # -- settings ----------------------------------------------------------------------------

    def config_target(self) -> Store:
        if self.workspace.use == "project":
            return self.workspace.project_store()
        return require(self.workspace.personal, "personal")

    def config_set(self, key: str, text: str) -> SettingValue:
        from ..base.config import parse_value

        store = self.config_target()
        value = parse_value(key, text)
        if isinstance(value, str):
            self.workspace.checks(store).scan(value, field=key, redactable=False)
        if store.kind == "project" and personal_only(key, value):
            raise UsageError(f"{key} is read only from your own configuration, never from a "
                             f"project's (anyone who can push could change it); set it without "
                             f"--project")
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
        return self._effective_settings()[key]

    def config_list(self) -> list[EffectiveSetting]:
        settings = self._effective_settings()
        return [EffectiveSetting(key, settings[key], settings.origin(key), SETTINGS[key].help)
                for key in SETTINGS]
