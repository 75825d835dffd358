"""`Engram`, the one object over the personal store and the project store.

It is a facade: it opens a `Workspace` (the stores, their settings, read models and write
path) and the services that work over it, and hands each call to the service that does it. The
CLI and the MCP server are thin front ends over `Engram`; neither calls the other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..domain.workspace import Workspace
from ..model import memories as mem
from .citations import CitationReads
from .continuity import ContinuityCalls
from .lazy import service
from .receipts import ReceiptReads

if TYPE_CHECKING:
    from ..base.config import Settings, SettingValue
    from ..base.validation import Checks
    from ..domain import maintenance
    from ..domain.browse import Browse
    from ..domain.doctor.report import DoctorReport
    from ..domain.indexing import Indexes
    from ..domain.interop.service import ExportReport, ImportReport, Interop
    from ..domain.memories import Memories, MergePlan, Remembered, Superseded
    from ..domain.records import Record
    from ..domain.timeline import Timeline
    from ..domain.verify import VerifyReport
    from ..domain.workspace import CommitResult, Use
    from ..git import repo as git
    from ..git.compact import CompactResult
    from ..git.identity import Project
    from ..git.lost import Recovered
    from ..readmodel.projection import Projection
    from ..search.backlog import Recalled
    from ..storage import events as ev
    from ..storage.store import Store


class Engram(CitationReads, ContinuityCalls, ReceiptReads):
    """Open the stores that apply to a working directory.

    `use` picks which stores reads look at and where writes go: "both" (the default) reads both
    and writes to the project store when there is one, else to the personal store.
    """

    def __init__(
        self,
        *,
        cwd: Path | str | None = None,
        use: Use = "both",
        session: str | None = None,
        actor: str | None = None,
    ) -> None:
        self.workspace = Workspace(cwd=cwd, use=use, session=session, actor=actor)

    # The services, each imported and built when first used (`engram.api.lazy`); those of
    # continuity (and `_records`, `_sessions`) are `ContinuityCalls`'.
    _memories: Memories = service("..domain.memories", "Memories", "_sessions")
    _interop: Interop = service("..domain.interop.service", "Interop")
    _maintenance: maintenance.Maintenance = service("..domain.maintenance", "Maintenance")
    _indexes: Indexes = service("..domain.indexing", "Indexes")

    def at(self, rev: str) -> tuple[Engram, list[str]]:
        """The stores as they were at `rev` (a commit, tag, branch or date), read-only, from git
        history alone; and, for each store, the commit it was read at."""
        past = Engram(cwd=self.cwd, use=self.use, session=None, actor=self.workspace.given_actor)
        return past, past.workspace.go_back(rev)

    def __enter__(self) -> Engram:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the workspace's state ---------------------------------------------------------------

    @property
    def cwd(self) -> Path:
        return self.workspace.cwd

    @property
    def use(self) -> Use:
        return self.workspace.use

    @use.setter
    def use(self, value: Use) -> None:
        self.workspace.use = value

    @property
    def session(self) -> str | None:
        return self.workspace.session

    @session.setter
    def session(self, value: str | None) -> None:
        self.workspace.session = value

    @property
    def personal(self) -> Store:
        return self.workspace.personal

    @property
    def project(self) -> Store | None:
        return self.workspace.project

    @property
    def foreign(self) -> tuple[Path, str] | None:
        return self.workspace.foreign

    @property
    def warnings(self) -> list[str]:
        return self.workspace.warnings

    @warnings.setter
    def warnings(self, value: list[str]) -> None:
        self.workspace.warnings = value

    @property
    def read_only(self) -> str | None:
        return self.workspace.read_only

    @property
    def clock(self) -> Callable[[], float]:
        """What the commit policy reads as "now" (`commit.every_seconds`); a test may set it."""
        return self.workspace.clock

    @clock.setter
    def clock(self, value: Callable[[], float]) -> None:
        self.workspace.clock = value

    def doctor(self, *, fix: bool = False) -> DoctorReport:
        """Diagnose the selected stores: every problem, where it is, and the command that fixes
        it. With `fix`, apply the repairs that lose nothing (with backups), then diagnose again."""
        from ..domain.doctor import run

        return run(self, fix=fix)

    # -- stores -------------------------------------------------------------------------------

    def here(self) -> Project | None:
        """The project of the repository this works in (`engram.git.identity.Project`), or None."""
        return self.workspace.here()

    def belongs_here(self, store: Store, memory: Any) -> bool:
        """A personal memory of another project is left out inside a repository."""
        return self.workspace.belongs_here(store, memory)

    def project_store(self) -> Store:
        return self.workspace.project_store()

    def stores(self) -> list[Store]:
        """The existing stores this instance reads, project first."""
        return self.workspace.stores()

    def write_store(self) -> Store:
        return self.workspace.write_store()

    def settings(self, store: Store | None = None) -> Settings:
        return self.workspace.settings(store)

    def checks(self, store: Store | None = None) -> Checks:
        """The input checks, with the limits and secret scanning of `store`'s settings."""
        return self.workspace.checks(store)

    def actor(self, store: Store) -> str:
        return self.workspace.actor(store)

    def projection(self, store: Store) -> Projection:
        """The store's read model, brought up to date with its files once per instance call.

        A damaged line (conflict markers, invalid JSON or UTF-8, a cut-off line) is skipped and
        reported with its file and line on every read, so that one bad line never hides the rest
        of the store; `engram verify` and `engram doctor` fail on it.
        """
        return self.workspace.projection(store)

    def close(self) -> None:
        return self.workspace.close()

    def commit_due(self) -> float | None:
        """Commit each store whose batch of pending events is due, although nothing is being
        written: the timer of a long-running process calls it, and a short one at its exit.
        Returns the seconds until the next batch will be due (None: nothing waits)."""
        return self.workspace.commit_due()

    def commit_store(
        self,
        store: Store,
        *,
        subject: str | None = None,
        locked: bool = False,
        repo: git.StoreRepo | None = None,
        lifecycle_alone: bool = False,
    ) -> CommitResult:
        """Commit the store's pending changes. Pending session lifecycle events alone are left
        for the next commit unless `lifecycle_alone` (an explicit `engram commit`)."""
        return self.workspace.commit_store(
            store, subject=subject, locked=locked, repo=repo, lifecycle_alone=lifecycle_alone
        )

    def compact_if_due(self, store: Store, repo: git.StoreRepo) -> None:
        """Fold the months with `compact.files` committed event files or more (under the lock)."""
        return self.workspace.compact_if_due(store, repo)

    # -- memories -----------------------------------------------------------------------------

    def remember(
        self,
        content: str,
        *,
        kind: str = mem.DEFAULT_KIND,
        tags: Iterable[str] = (),
        scope: str | None = None,
        source: str = mem.DEFAULT_SOURCE,
        importance: float = mem.DEFAULT_IMPORTANCE,
        valid_from: str | datetime | None = None,
        valid_until: str | datetime | None = None,
        at: str | datetime | None = None,
        task: str | None = None,
        supersedes: Sequence[str] = (),
        redact: bool = False,
        check_duplicates: bool | None = None,
        everywhere: bool = False,
        cite: Sequence[str] = (),
        relative_to: Path | None = None,
    ) -> Remembered:
        """Store a memory durably (fsynced before this returns).

        A near-duplicate of an active memory of the same kind and scope reinforces that memory
        instead of adding a new one (`duplicate` is then True and `memory` is the existing one;
        the `memory.reinforced` event keeps the text given here). Close but different ones come
        back in `related`, as possible contradictions to supersede explicitly, and so does the
        same text of another kind or scope. However similar, a memory that says a different
        number, version, identifier, path, URL, date, quoted text or the opposite, or puts
        another content word in place of one (supported -> deprecated), is not a duplicate: the
        new text is added and `differs_from(id)` says what differs.

        Written to the personal store inside a git repository, the memory belongs to that
        project (its root commit, `engram.git.identity`) and is recalled only there, unless
        `everywhere`. `cite` names tracked files it is about (`engram.domain.citing`), relative
        to the repository's top, or to the directory `relative_to` when given (as a command
        line's are to its current directory).
        """
        return self._memories.remember(
            content,
            kind=kind,
            tags=tags,
            scope=scope,
            source=source,
            importance=importance,
            valid_from=valid_from,
            valid_until=valid_until,
            at=at,
            task=task,
            supersedes=supersedes,
            redact=redact,
            check_duplicates=check_duplicates,
            everywhere=everywhere,
            cite=cite,
            relative_to=relative_to,
        )

    def update(
        self,
        memory_id: str,
        content: str | None = None,
        *,
        kind: str | None = None,
        tags: Iterable[str] | None = None,
        scope: str | None = None,
        source: str | None = None,
        importance: float | None = None,
        valid_from: str | datetime | None = None,
        valid_until: str | datetime | None = None,
        redact: bool = False,
    ) -> mem.Memory:
        """Change a memory: a new event with only the changed fields. The old version stays."""
        return self._memories.update(
            memory_id,
            content,
            kind=kind,
            tags=tags,
            scope=scope,
            source=source,
            importance=importance,
            valid_from=valid_from,
            valid_until=valid_until,
            redact=redact,
        )

    def forget(self, memory_id: str, *, reason: str) -> mem.Memory:
        """Retire a memory with a reason (a tombstone event). Its history stays readable."""
        return self._memories.forget(memory_id, reason=reason)

    def supersede(self, memory_id: str, content: str, *, redact: bool = False) -> Superseded:
        """Replace a memory that is no longer true: a new memory holding `content`, with the
        old one's kind, tags, scope, importance, source and task, supersedes it in one step."""
        return self._memories.supersede(memory_id, content, redact=redact)

    def get(self, memory_id: str) -> mem.Memory:
        return self._memories.get(memory_id)

    def history(self, memory_id: str) -> list[tuple[ev.Event, mem.Memory]]:
        return self._memories.history(memory_id)

    def memories(
        self,
        *,
        kinds: Sequence[str] = (),
        tags: Sequence[str] = (),
        scope: str | None = None,
        limit: int | None = 20,
        include_forgotten: bool = False,
        include_expired: bool = False,
        contains: str | None = None,
    ) -> list[mem.Memory]:
        """Memories, most recently changed first, from the selected stores."""
        return self._memories.memories(
            kinds=kinds,
            tags=tags,
            scope=scope,
            limit=limit,
            include_forgotten=include_forgotten,
            include_expired=include_expired,
            contains=contains,
        )

    def recall(
        self,
        query: str,
        *,
        k: int = 10,
        kinds: Sequence[str] = (),
        tags: Sequence[str] = (),
        scope: str | None = None,
        task: str | None = None,
        since: str | datetime | None = None,
        until: str | datetime | None = None,
        include_forgotten: bool = False,
        include_expired: bool = False,
        include_decayed: bool = False,
        now: datetime | None = None,
        partial: bool = False,
    ) -> Recalled:
        """Memories by meaning and by words, fused, weighted by strength, best first.

        Superseded, forgotten, expired and fully decayed memories are left out unless asked for.
        `now` is the moment strength and validity are judged at (default: now). With `partial`,
        many memories without a vector yet are left out of meaning rather than embedded first
        (`Recalled.backlog` holds them); by default recall embeds them and answers in full.
        """
        return self._memories.recall(
            query,
            k=k,
            kinds=kinds,
            tags=tags,
            scope=scope,
            task=task,
            since=since,
            until=until,
            include_forgotten=include_forgotten,
            include_expired=include_expired,
            include_decayed=include_decayed,
            now=now,
            partial=partial,
        )

    def consolidate(
        self,
        *,
        apply: bool = False,
        similarity: float | None = None,
    ) -> list[MergePlan]:
        """Find clusters of near-duplicate memories; with `apply`, merge each into one.

        A merge is events only: a new memory (the longest text of the cluster, the union of its
        tags, the highest importance) that supersedes every member. Nothing is deleted. Memories
        that say a different number, version, path, ... (`neardup.differences`) are never put in
        one cluster, however similar: merging them would keep one value and drop the other.
        """
        return self._memories.consolidate(apply=apply, similarity=similarity)

    def log(
        self,
        *,
        kinds: Sequence[str] = (),
        task: str | None = None,
        actor: str | None = None,
        since: str | datetime | None = None,
        limit: int | None = 50,
    ) -> list[tuple[str, ev.Event]]:
        """Events newest first, as (store kind, event)."""
        return self._records.log(kinds=kinds, task=task, actor=actor, since=since, limit=limit)

    def show(self, ident: str) -> Record:
        """Any record by id or prefix: a memory, task or session with its events, or one
        event."""
        return self._records.show(ident)

    # -- import and export --------------------------------------------------------------------

    def import_from(
        self,
        path: str | Path,
        *,
        format: str | None = None,
        dry_run: bool = False,
        redact: bool = False,
        allow_changes: bool = False,
    ) -> ImportReport:
        """Bring in an mcp-engram data directory, an MCP memory graph or an Engram export,
        checked in full before anything is written (`Interop.import_from`): damaged or refused
        records are in `skipped`; records that would change one the store holds are in
        `changes`, and written only with `allow_changes`. A second import adds nothing."""
        return self._interop.import_from(
            path, format=format, dry_run=dry_run, redact=redact, allow_changes=allow_changes
        )

    def export_events(self) -> list[ev.Event]:
        """Every event of the selected stores, each once, in (clock, id) order."""
        return self._interop.export_events()

    def export(
        self,
        out: str | Path,
        *,
        format: str = "jsonl",
        force: bool = False,
    ) -> ExportReport:
        """Write the selected stores out: `jsonl` (the events, re-importable with `engram
        import`) or `markdown` (a directory: one file per task, the memories by kind)."""
        return self._interop.export(out, format=format, force=force)

    def browse(self) -> Browse:
        """What `engram browse` shows (`engram.browse.Browse`): every memory of the selected
        stores (forgotten and superseded ones too) with its history, and every task with its
        checkpoints. Inside a repository, personal memories of other projects are left out,
        as `memories` and `recall` leave them out."""
        return self._interop.browse()

    def timeline(self, ident: str) -> Timeline:
        """A task's history in time: its progress, failures, checkpoints (and how the handoff
        changed between them), decisions and other memories, and the sessions that worked on
        it, with who and on which machine."""
        return self._interop.timeline(ident)

    # -- maintenance --------------------------------------------------------------------------

    def init(self, *, project: bool = False) -> tuple[Store, bool]:
        """Create the personal store, or the project store of the current repository.

        Returns the store and whether anything was created (init is idempotent).
        """
        return self._maintenance.init(project=project)

    def commit(self, *, subject: str | None = None) -> list[CommitResult]:
        """Commit every pending event of the selected stores now."""
        return self._maintenance.commit(subject=subject)

    def compact(self, *, dry_run: bool = False) -> list[CompactResult]:
        """Commit pending events, then fold each month's closed event files into one file, in
        one commit per store (see `engram.git.compact`)."""
        return self._maintenance.compact(dry_run=dry_run)

    def reindex(
        self,
        *,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> maintenance.ReindexReport:
        """Rebuild every cache of the selected stores from the event files.

        Embeddings come from the embedding cache where the same text was embedded before by the
        same model, so a second reindex embeds nothing. `progress(stage, done, total)` is called
        as work advances: "embedding (personal)", then "linking (personal)" as vectors are
        linked into the vector index. The next reindex goes on from one killed half-way.
        """
        return self._indexes.reindex(progress=progress)

    def refresh_indexes(
        self,
        *,
        stores: Sequence[Store] | None = None,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> maintenance.IndexRefresh:
        """Bring every cache up to date with the event files, doing only what changed.

        What `reindex` does from scratch, this does incrementally: after a pull, a merge or a
        branch switch it reads the changed files, indexes the changed memories' words, and folds
        their vectors (embedding only texts the embedding cache has not seen) into the index.
        """
        return self._indexes.refresh_indexes(stores=stores, progress=progress)

    def index_state(self, *, thorough: bool = False) -> list[maintenance.StoreIndexState]:
        """Whether each store's caches are current, without changing anything.

        `current`: every cache has caught up with the files. `healthy`: nothing needs a rebuild.
        A cache that is merely behind is so by design and catches up on its own: the read model
        reads changed files on the next command, the word index takes changes on the next
        search, and the vector index saves changes in batches (`search.vector_flush`) while
        searches score the unsaved ones. Only a missing or damaged cache (damaged as `engram
        doctor` finds it) makes a store unhealthy; `thorough` (`reindex --check`) also reads the
        SQLite caches through and looks for vectors the graph cannot reach (`engram doctor
        --fix`).
        """
        return self._indexes.index_state(thorough=thorough)

    def stats(self, *, now: datetime | None = None) -> list[maintenance.StoreStatistics]:
        """Counts by kind, scope and store, average strength, and index freshness."""
        return self._maintenance.stats(now=now)

    def status(self) -> list[maintenance.StoreStatus]:
        return self._maintenance.status()

    def recover(self, *, everything: bool = False) -> list[Recovered]:
        """Write back the events that git took away from the selected stores (see
        `engram.lost`): found in the reflogs, stashes and unreachable objects, else in the
        ledger, appended unchanged (same ids, clocks and bytes) to new event files and
        committed. With `everything`, also every event git still holds that is in neither the
        store nor any branch. Running it again writes nothing."""
        return self._maintenance.recover(everything=everything)

    def verify(self) -> VerifyReport:
        """Re-read every event file of the selected stores from disk; report all damage."""
        return self._maintenance.verify()

    def config_target(self) -> Store:
        return self._maintenance.config_target()

    def config_set(self, key: str, text: str) -> SettingValue:
        return self._maintenance.config_set(key, text)

    def config_get(self, key: str) -> SettingValue:
        return self._maintenance.config_get(key)

    def config_list(self) -> list[maintenance.EffectiveSetting]:
        return self._maintenance.config_list()
