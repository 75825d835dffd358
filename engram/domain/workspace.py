"""The stores one `Engram` works over, and what every service needs of them.

A `Workspace` holds the personal and project stores of a working directory, their settings and
input checks, the actor who writes, each store's read model and search indexes, id resolution
across stores, and the write path: events appended, then committed in batches. The services
(`memories`, `continuity`, `interop`, `maintenance`) receive it and use only its public members.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..base import layout
from ..base.config import (
    Layer,
    Settings,
    check_value,
    engram_home,
    find_foreign_store,
    find_work_tree,
    project_store_at,
)
from ..base.errors import (
    AmbiguousIdError,
    EngramError,
    Fix,
    GitError,
    NoStoreError,
    NotFoundError,
    UsageError,
    quote,
)
from ..base.validation import Checks, chosen_session, name_key, reference, well_formed
from ..model import memories as mem
from ..model import tasks
from ..readmodel import fold
from ..readmodel.projection import Projection
from ..storage import events as ev
from ..storage import set_aside, shapes
from ..storage.local import WriterState
from ..storage.store import NO_STORE, Store, StoreKind, require
from .messages import commit_message

if TYPE_CHECKING:
    from ..git import repo as git
    from ..git.identity import Project
    from ..search.embed import Embedder
    from ..search.retrieval import StoreSearch

Use = Literal["both", "personal", "project"]
MIN_PREFIX = 4
_WARNED: set[str] = set()  # models whose failure to load was already reported in this process


@dataclass
class CommitResult:
    store: str
    commit: str | None
    events: int
    refused: list[str] = field(default_factory=list)  # changed in their committed part
    unreadable: list[str] = field(default_factory=list)  # new lines hold one readers skip


class Workspace:
    """The stores that apply to a working directory, with their read models and write path.

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
        self.cwd = Path(cwd) if cwd is not None else Path.cwd()
        self.use: Use = use
        self.session = chosen_session(session)  # ENGRAM_SESSION's: empty is none, bad refused
        # The actor given to the constructor: it wins over the settings (see `actor`).
        self.given_actor: str | None = check_value("actor", actor) if actor is not None else None
        self.personal = Store(engram_home(), "personal")
        self._top = find_work_tree(self.cwd)  # where the project store is looked for
        self._project: Store | None = None
        self._projections: dict[Path, Projection] = {}
        self._searches: dict[Path, StoreSearch] = {}
        self._settings: tuple[tuple[Any, ...], Settings] | None = None
        self._here: tuple[Project | None] | None = None
        self.warnings: list[str] = []
        # The events this instance appended lately, with where: (store, event, file, line).
        self.written: deque[tuple[Store, ev.Event, str, int]] = deque(maxlen=256)
        self.read_only: str | None = None  # the revision, for the stores as they were (at())
        # What the commit policy reads as "now" (`commit.every_seconds`); a test may set it.
        self.clock: Callable[[], float] = time.time
        # Another tool's `.engram/` where a project store would be: named, never read as ours.
        self.foreign = find_foreign_store(self.cwd) if self.project is None else None
        if self.foreign is not None and use == "both":
            self.warnings.append(f"{self.foreign_note()}; Engram uses the personal store here")

    def go_back(self, rev: str) -> list[str]:
        """Read the stores as they were at `rev` (a commit, tag, branch or date), read-only,
        from git history alone; returns, for each store, the commit it is read at."""
        from ..git import asof

        rev = well_formed(rev, "--at")
        self.read_only = rev
        try:  # a commit, tag or branch first; else a date, or an age like 3d
            moment = mem.parse_moment(rev, what="--at")
        except UsageError:
            moment = None  # names no date either: only a commit, tag or branch can match
        found: dict[StoreKind, Any] = {}
        for store in self.stores():
            commit = asof.named(store, rev)
            if commit is None and moment is not None:
                commit = asof.last_before(store, moment)
            if commit is not None:
                found[store.kind] = (asof.snapshot(store, commit), commit)
        if not found:
            raise asof.unknown(rev)
        self.personal = (
            found["personal"][0]
            if "personal" in found
            else Store(self.personal.root / ".absent", "personal")
        )
        self.project = found["project"][0] if "project" in found else None
        self.use = "both" if len(found) == 2 else next(iter(found))
        return [f"{kind} store at {asof.describe(commit)}" for kind, (_, commit) in found.items()]

    def drop_foreign_warning(self) -> None:
        """An error that names the foreign folder says it all."""
        note = self.foreign_note()
        self.warnings = [w for w in self.warnings if not w.startswith(note)]

    def foreign_note(self) -> str:
        path, what = self.foreign or (Path(), "")
        return (
            f"{path} is {what}, not an Engram store (`engram import {path}` brings its memories in)"
        )

    def here(self) -> Project | None:
        """The project of the repository this works in (`engram.git.identity.Project`), or None."""
        if self._here is None:
            top = find_work_tree(self.cwd)
            if top is None or top.resolve() == self.personal.root.resolve():
                self._here = (None,)  # outside any repository (git is not loaded), or ours
            else:
                from ..git.identity import project_of

                cache = (
                    layout.cache_dir(self.personal.local_dir) if self.personal.exists() else None
                )
                self._here = (project_of(self.cwd, cache),)
        return self._here[0]

    def belongs_here(self, store: Store, memory: Any) -> bool:
        """A personal memory of another project is left out inside a repository."""
        if store.kind != "personal" or (memory.project is None and memory.project_remote is None):
            return True
        here = self.here()
        return here is None or here.owns(memory.project, memory.project_remote)

    # -- stores ------------------------------------------------------------------------------

    @property
    def project(self) -> Store | None:
        """The project store, looked for again (a stat) while there is none: a long-running
        server finds the store `engram init --project` made after it started."""
        if self._project is None and self._top is not None:
            root = project_store_at(self._top)
            self._project = Store(root, "project") if root is not None else None
        return self._project

    @project.setter
    def project(self, store: Store | None) -> None:
        self._project, self._top = store, None  # made, or as at a commit: not looked for again

    def project_store(self) -> Store:
        if self.foreign is not None and self.project is None:
            self.drop_foreign_warning()
            raise NoStoreError(
                f"{self.foreign_note()}; there is no Engram project store here: "
                "use the personal store (without --project)"
            )
        return require(self.project, "project")

    def stores(self) -> list[Store]:
        """The existing stores this instance reads, project first."""
        if self.use == "personal":
            return [require(self.personal, "personal")]
        if self.use == "project":
            return [self.project_store()]
        found = [s for s in (self.project, self.personal) if s is not None and s.exists()]
        if not found:
            raise NoStoreError(NO_STORE)
        return found

    def write_store(self) -> Store:
        if self.read_only is not None:
            raise UsageError(
                f"the stores as they were at {quote(self.read_only, 60)} are "
                "read-only; write without --at"
            )
        if self.use == "personal":
            return require(self.personal, "personal")
        if self.project is not None and self.project.exists():
            return self.project
        if self.use == "project":
            return self.project_store()
        if self.foreign is None and not self.personal.exists():
            raise NoStoreError(NO_STORE)  # either store would take the write
        return require(self.personal, "personal")

    def settings(self, store: Store | None = None) -> Settings:
        layers = []
        if self.personal.exists():
            layers.append(self.personal.config_layer())
        target = store or (self.project if self.project and self.project.exists() else None)
        if target is not None and target.kind == "project" and target.exists():
            layers.append(target.config_layer())
        for layer in layers:  # what a file sets that is left out, said once (read_config)
            for text in layer.warnings:
                self.warn(text)
        actor = os.environ.get("ENGRAM_ACTOR")
        # Each layer is kept until its file changes: the same layers give the same settings.
        key = (*layers, actor)
        kept = self._settings
        if (
            kept is not None
            and len(kept[0]) == len(key)
            and kept[0][-1] == actor
            and all(a is b for a, b in zip(kept[0][:-1], layers, strict=True))
        ):
            return kept[1]
        if actor:
            try:
                actor = check_value("actor", actor)
            except UsageError as exc:
                raise UsageError(f"ENGRAM_ACTOR: {exc}") from None
            layers.append(Layer({"actor": actor}, origin="ENGRAM_ACTOR"))
        settings = Settings(*layers)
        self._settings = (key, settings)
        return settings

    def checks(self, store: Store | None = None) -> Checks:
        """The input checks, with the limits and secret scanning of `store`'s settings."""
        return Checks(self.settings(store))

    def actor(self, store: Store) -> str:
        if self.given_actor:
            return self.given_actor
        configured: str | None = self.settings(store)["actor"]
        if configured:
            return configured
        from ..git import repo as git

        return git.git_identity(store.work_tree) or git.fallback_actor()

    # -- read models and indexes -------------------------------------------------------------

    def projection(self, store: Store) -> Projection:
        """The store's read model, brought up to date with its files once per instance call.

        A damaged line (conflict markers, invalid JSON or UTF-8, a cut-off line) is skipped and
        reported with its file and line on every read, so that one bad line never hides the rest
        of the store; `engram verify` and `engram doctor` fail on it.
        """
        proj = self.open_projection(store)
        proj.refresh()
        for text in shapes.layout_warnings(store):
            self.warn(text)
        aside = set_aside.load(store)
        for problem in proj.problems():
            if problem.severity == "error" and set_aside.hides(
                store, aside, problem.path, problem.line
            ):
                continue  # a damaged committed line `doctor --fix` set aside here
            text = f"{store.root / problem.path}:{problem.line}: {problem.message}"
            if problem.severity == "error":
                text += "; this line is skipped; `engram doctor` says how to repair it"
            self.warn(text)
        return proj

    def open_projection(self, store: Store) -> Projection:
        """The store's read model as this instance keeps it, opened if need be, not refreshed."""
        proj = self._projections.get(store.root)
        if proj is None:
            proj = self._projections[store.root] = Projection(store)
        return proj

    def cached_projection(self, store: Store) -> Projection | None:
        """The read model this instance has open for the store, if any (as it is)."""
        return self._projections.get(store.root)

    def drop_projection(self, store: Store) -> None:
        """Stop keeping the store's read model: the next `projection` opens it again."""
        self._projections.pop(store.root, None)

    def search(self, store: Store) -> StoreSearch:
        """The store's word and vector indexes, opened once per instance."""
        from ..search.retrieval import StoreSearch

        search = self._searches.get(store.root)
        if search is None:
            search = self._searches[store.root] = StoreSearch(store, self.projection(store))
        return search

    def drop_search(self, store: Store) -> None:
        """Close the store's indexes: the next `search` opens them again."""
        search = self._searches.pop(store.root, None)
        if search is not None:
            search.close()

    def embedder(self, store: Store | None = None) -> Embedder | None:
        """The configured embedding model, or None (said once) when it cannot load."""
        from ..search.embed import EmbeddingUnavailable, load_embedder

        model = self.settings(store)["search.model"]
        if model == "off":
            return None
        try:
            return load_embedder(model)
        except EmbeddingUnavailable as exc:
            if model not in _WARNED:
                _WARNED.add(model)
                self.warnings.append(f"{exc}; recall uses words only (BM25) until it loads")
            return None

    def warn(self, text: str) -> None:
        """Say something once per instance, however often the condition is met."""
        if text not in self.warnings:
            self.warnings.append(text)

    def close(self) -> None:
        for search in self._searches.values():
            search.close()
        self._searches.clear()
        for proj in self._projections.values():
            proj.close()
        self._projections.clear()

    # -- ids ---------------------------------------------------------------------------------

    def resolve(
        self, ident: str, *, what: str = "memory", short_ok: bool = False
    ) -> list[tuple[Store, str, str]]:
        """The records whose id is `ident` or starts with it, as (store, full id, kind): the
        exact match alone when there is one. `what` is a kind of record, or "any". An id
        shorter than a prefix may be (a record another writer made, `t1`) is found only
        exactly; otherwise it is refused as too short (or, with `short_ok`, matches nothing)."""
        ident = reference(ident, "id" if what == "any" else f"{what} id")
        found: list[tuple[Store, str, str]] = []
        for store in self.stores():
            for full, kind in self.projection(store).match_ids(ident):
                if what == "any" or kind == what:
                    found.append((store, full, kind))
        exact = [f for f in found if f[1].lower() == ident.lower()]
        if len(ident) < MIN_PREFIX and not exact:
            if short_ok:
                return []
            raise UsageError(f"id {ident!r} is too short; give at least {MIN_PREFIX} characters")
        return exact or found

    def find_memory(self, ident: str) -> tuple[Store, mem.Memory]:
        """A memory by id or prefix, and its store."""
        found = self.resolve(ident)
        if not found:
            raise NotFoundError("memory", ident)
        if len({f[1] for f in found}) > 1:
            raise AmbiguousIdError(ident, sorted({f[1] for f in found}))
        store, full, _ = found[0]
        memory = self.projection(store).memory(full)
        assert memory is not None
        return store, memory

    def find_task(self, ident: str | None, *, items: bool = True) -> tuple[Store, tasks.Task]:
        """A task by id prefix, or by its exact name (case-insensitive, in NFC: a name stored
        in another form by another writer is found too). Without `items` its progress and
        failures are left empty: a lookup that costs the same however long the task's history
        is."""
        ident = reference(
            ident,
            "task",
            hint=Fix(
                "give a task id (or its exact name); list them with `engram task list`",
                "give a task id (or its exact name); find ids with task_list",
            ),
        )
        found: list[tuple[Store, Projection, tasks.Task]] = []
        for store, full, _ in self.resolve(ident, what="task", short_ok=True):
            proj = self.projection(store)
            found += [(store, proj, t) for t in proj.tasks(ids=[full], items=False)]
        if not found:
            key = name_key(ident)
            for store in self.stores():
                proj = self.projection(store)
                found += [
                    (store, proj, t) for t in proj.tasks(items=False) if name_key(t.name) == key
                ]
        if not found:
            raise NotFoundError("task", ident)
        if len({t.id for _, _, t in found}) > 1:
            raise AmbiguousIdError(ident, sorted({t.id for _, _, t in found}))
        store, proj, task = found[0]
        return store, proj.tasks(ids=[task.id])[0] if items else task

    # -- writing -----------------------------------------------------------------------------

    def emit(
        self, store: Store, kind: str, data: dict[str, Any], *, commit: bool = True
    ) -> ev.Event:
        return self.emit_many(store, [(kind, data)], commit=commit)[0]

    def emit_many(
        self, store: Store, items: Sequence[tuple[str, dict[str, Any]]], *, commit: bool = True
    ) -> list[ev.Event]:
        """Append events in one write (one fsync), in order, with increasing clocks."""
        actor = self.actor(store)
        proj = self.cached_projection(store)
        with store.lock():
            clock = store.next_clock(self.settings(store)["clock.max_skew"] * 1_000_000)
            now = ev.format_time(ev.utc_now())
            batch = fold.placed(
                proj.db if proj is not None else None,
                [
                    ev.Event(
                        id=ev.new_event_id(),
                        kind=kind,
                        clock=clock + offset,
                        time=now,
                        actor=actor,
                        session=self.session,
                        machine=ev.machine_name(),
                        data=data,
                    )
                    for offset, (kind, data) in enumerate(items)
                ],
            )
            rel, line = store.append(batch, now=self.clock())
            self.written.extend((store, event, rel, line + n) for n, event in enumerate(batch))
            self.warnings.extend(store.repairs)
            store.repairs.clear()
            if commit:
                self.maybe_commit(store)
        return batch

    def due_in(self, store: Store) -> float | None:
        """Seconds until the store's batch of pending events is due for its commit (0: due
        now), or None when none waits or automatic commits are off.

        Only substantive events count (`events.substantive`): a session's start and end alone
        never make a commit; they ride with the next one.
        """
        state = WriterState.load(store)
        if state.pending <= 0:
            return None  # decided before the settings are read: nothing waits, whatever they say
        settings = self.settings(store)
        if not settings["commit.auto"]:
            return None
        if state.pending >= settings["commit.every_events"]:
            return 0.0
        age = self.clock() - state.pending_since
        every: float = settings["commit.every_seconds"]
        return max(0.0, every - age)

    def maybe_commit(self, store: Store) -> None:
        """Commit the pending events if their batch is due (the caller holds the lock)."""
        if self.due_in(store) == 0:
            try:
                self.commit_store(store, locked=True)
            except GitError as exc:
                self.warn(f"{_waiting(store)} saved but not committed yet: {exc}")

    def commit_due(self) -> float | None:
        """Commit each store whose batch of pending events is due, although nothing is being
        written: the timer of a long-running process calls it, and a short one at its exit.
        Returns the seconds until the next batch will be due (None: nothing waits)."""
        try:
            stores = self.stores()
        except EngramError:
            return None  # no store: nothing can wait
        soonest: float | None = None
        for store in stores:
            try:
                if self.due_in(store) is None:
                    continue  # the usual case, decided without the lock
                with store.lock():
                    self.maybe_commit(store)
                    left = self.due_in(store)
            except EngramError as exc:
                if WriterState.load(store).pending > 0:  # else nothing waits: nothing to say
                    self.warn(f"{_waiting(store)} saved but not committed yet: {exc}")
                continue
            if left is not None:
                soonest = left if soonest is None else min(soonest, left)
        return soonest

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
        import pygit2

        from ..git import repo as git

        if not locked:
            with store.lock():
                return self.commit_store(
                    store, subject=subject, locked=True, repo=repo, lifecycle_alone=lifecycle_alone
                )
        repo = repo or git.StoreRepo(store)
        pending = repo.pending()
        if (
            not lifecycle_alone
            and pending.changes
            and all(
                change.new_events and not any(ev.substantive(e.kind) for e in change.new_events)
                for change in pending.changes
            )
        ):
            self.reset_batch(store)  # nothing substantive waits (git may have taken it)
            return CommitResult(store.kind, None, 0, *pending.problems)
        for attempt in (1, 2):
            try:
                oid = repo.commit(
                    pending,
                    message=lambda events: commit_message(events, subject=subject),
                    author=self.actor(store) if pending.changes else "",
                )
                break
            except (GitError, pygit2.GitError, OSError) as exc:
                # A commit killed half-way leaves git's lock files (index.lock, a branch's
                # ref lock) and the index behind HEAD: once no process holds them, the next
                # commit clears them up.
                from ..git.recovery import recover_interrupted_commit

                note = (
                    recover_interrupted_commit(store)
                    if attempt == 1 and ".lock" in str(exc)
                    else None
                )
                if note is not None:
                    self.warnings.append(note)
                    continue
                if isinstance(exc, GitError):
                    raise
                # Disk full or read-only part-way through: git's own files are written by
                # rename, so nothing is half-done; the events wait on disk for the next commit.
                raise GitError(
                    f"could not commit ({ev.one_line(exc, 200)}); the events are "
                    "safe on disk: fix that, then run `engram commit`"
                ) from None
        self.reset_batch(store)
        if oid is not None:
            self.compact_if_due(store, repo)
        return CommitResult(store.kind, oid, len(pending.events), *pending.problems)

    @staticmethod
    def reset_batch(store: Store) -> None:
        """Nothing waits for a commit any more: start the next batch from zero."""
        state = WriterState.load(store)
        if state.pending == 0 and state.pending_since == 0.0:
            return
        state.pending = 0
        state.pending_since = 0.0
        with suppress(OSError):  # only the batching count; the commit is made
            state.save(store)

    def compact_if_due(self, store: Store, repo: git.StoreRepo) -> None:
        """Fold the months with `compact.files` committed event files or more (under the lock)."""
        from ..git import compact

        months = compact.due_months(store, repo, self.settings(store)["compact.files"])
        if not months:
            return
        try:
            compact.compact(store, repo, author=self.actor(store), months=months)
        except (GitError, OSError) as exc:
            self.warnings.append(f"event files not compacted: {ev.one_line(exc, 200)}")


def _waiting(store: Store) -> str:
    """The events waiting for a commit, counted: "3 events are"."""
    count = WriterState.load(store).pending
    return f"{count} event{' is' if count == 1 else 's are'}"
