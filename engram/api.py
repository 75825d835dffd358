"""The public API: one object over the personal store and the project store.

The CLI and the MCP server are thin front ends over `Engram`; neither calls the other.
"""

from __future__ import annotations

import os
import shlex
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .storage import events as ev
from .model import memories as mem
from .base.config import (
    CONFIG_FILE,
    PROJECT_DIR,
    SETTINGS,
    Layer,
    Settings,
    check_value,
    engram_home,
    find_foreign_store,
    find_project_store,
    find_work_tree,
    foreign_store,
    personal_only,
)
from .base.errors import (
    AmbiguousIdError,
    EngramError,
    GitError,
    NoStoreError,
    NotFoundError,
    UsageError,
    quote,
)
from .domain.continuity.service import Continuity
from .domain.interop.service import Interop
from .search.neardup import Difference, differences
from .readmodel.projection import Projection
from .storage.store import Store, WriterState, git_c, require
from .base.validation import Checks, event_kind, reference, well_formed

if TYPE_CHECKING:
    from .git import repo as git
    from .git.compact import CompactResult
    from .git.lost import Recovered
    from .domain.identity import Project
    from .search.embed import Embedder
    from .search.retrieval import Hit, StoreSearch

Use = Literal["both", "personal", "project"]
MIN_PREFIX = 4
_WARNED: set[str] = set()  # models whose failure to load was already reported in this process


@dataclass(frozen=True)
class Remembered:
    """What `remember` did. Reads like the memory itself (`.id`, `.content`, ...)."""

    memory: mem.Memory
    duplicate: bool = False  # an existing memory was reinforced instead of adding one
    related: tuple[tuple[mem.Memory, float], ...] = ()  # (memory, similarity): may contradict
    # For related memories that say a different number, version, path, ... than the new text
    # (however similar): (memory id, what differs). Such a memory is never reinforced.
    differences: tuple[tuple[str, tuple[Difference, ...]], ...] = ()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "memory":
            raise AttributeError(name)
        return getattr(self.memory, name)

    def differs_from(self, memory_id: str) -> tuple[Difference, ...]:
        """What the new text says otherwise than a related memory (empty: only its wording)."""
        return next((found for other, found in self.differences if other == memory_id), ())

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.memory.to_dict(),
            "duplicate": self.duplicate,
            "related": [{"id": m.id, "similarity": round(sim, 4), "summary": m.summary(),
                         "differences": [d.to_dict() for d in self.differs_from(m.id)]}
                        for m, sim in self.related],
        }


@dataclass
class CommitResult:
    store: str
    commit: str | None
    events: int
    refused: list[str] = field(default_factory=list)


class Engram(Continuity, Interop):
    """Open the stores that apply to a working directory.

    `use` picks which stores reads look at and where writes go: "both" (the default) reads both
    and writes to the project store when there is one, else to the personal store.
    """

    def __init__(
        self, *, cwd: Path | str | None = None, use: Use = "both", session: str | None = None,
        actor: str | None = None,
    ) -> None:
        self.cwd = Path(cwd) if cwd is not None else Path.cwd()
        self.use: Use = use
        self.session = session if session is not None else os.environ.get("ENGRAM_SESSION")
        self._actor = check_value("actor", actor) if actor is not None else None
        self.personal = Store(engram_home(), "personal")
        project_root = find_project_store(self.cwd)
        self.project = Store(project_root, "project") if project_root else None
        self._projections: dict[Path, Projection] = {}
        self._searches: dict[Path, StoreSearch] = {}
        self._refreshed: set[Path] = set()
        self._settings: tuple[tuple[Any, ...], Settings] | None = None
        self.warnings: list[str] = []
        self.read_only: str | None = None  # the revision, for the stores as they were (at())
        # What the commit policy reads as "now" (`commit.every_seconds`); a test may set it.
        self.clock: Callable[[], float] = time.time
        # Another tool's `.engram/` where a project store would be: named, never read as ours.
        self.foreign = find_foreign_store(self.cwd) if project_root is None else None
        if self.foreign is not None and use == "both":
            self.warnings.append(f"{self._foreign_note()}; Engram uses the personal store here")

    def at(self, rev: str) -> tuple[Engram, list[str]]:
        """The stores as they were at `rev` (a commit, tag, branch or date), read-only, from git
        history alone; and, for each store, the commit it was read at."""
        from .domain import asof

        rev = well_formed(rev, "--at")
        past = Engram(cwd=self.cwd, use=self.use, session=None, actor=self._actor)
        past.read_only = rev
        found: dict[str, Any] = {}
        for store in self.stores():
            commit = asof.resolve(store, rev)
            if commit is not None:
                found[store.kind] = (asof.snapshot(store, commit), commit)
        if not found:
            raise asof.unknown(rev)
        past.personal = found["personal"][0] if "personal" in found else \
            Store(past.personal.root / ".absent", "personal")
        past.project = found["project"][0] if "project" in found else None
        past.use = "both" if len(found) == 2 else next(iter(found))  # type: ignore[assignment]
        return past, [f"{kind} store at {asof.describe(commit)}"
                      for kind, (_, commit) in found.items()]

    def _drop_foreign_warning(self) -> None:
        """An error that names the foreign folder says it all."""
        note = self._foreign_note()
        self.warnings = [w for w in self.warnings if not w.startswith(note)]

    def here(self) -> Project | None:
        """The project of the repository this works in (`engram.identity.Project`), or None."""
        if not hasattr(self, "_here"):
            from .domain.identity import project_of

            cache = self.personal.local_dir / "cache" if self.personal.exists() else None
            top = find_work_tree(self.cwd)
            mine = top is not None and top.resolve() == self.personal.root.resolve()
            self._here = None if mine else project_of(self.cwd, cache)  # not a project
        return self._here

    def belongs_here(self, store: Store, memory: Any) -> bool:
        """A personal memory of another project is left out inside a repository."""
        if store.kind != "personal" or (memory.project is None and
                                         memory.project_remote is None):
            return True
        here = self.here()
        return here is None or here.owns(memory.project, memory.project_remote)

    def _foreign_note(self) -> str:
        path, what = self.foreign or (Path(), "")
        return (f"{path} is {what}, not an Engram store (`engram import {path}` brings its "
                "memories in)")

    def project_store(self) -> Store:
        if self.foreign is not None and self.project is None:
            self._drop_foreign_warning()
            raise NoStoreError(f"{self._foreign_note()}; there is no Engram project store here: "
                               "use the personal store (without --project)")
        return require(self.project, "project")

    # -- stores ------------------------------------------------------------------------------

    def stores(self) -> list[Store]:
        """The existing stores this instance reads, project first."""
        if self.use == "personal":
            return [require(self.personal, "personal")]
        if self.use == "project":
            return [self.project_store()]
        found = [s for s in (self.project, self.personal) if s is not None and s.exists()]
        if not found:
            raise NoStoreError("no Engram store yet; run `engram init` (personal) or "
                               "`engram init --project` (inside a git repository)")
        return found

    def write_store(self) -> Store:
        if self.read_only is not None:
            raise UsageError(f"the stores as they were at {quote(self.read_only, 60)} are "
                             "read-only; write without --at")
        if self.use == "personal":
            return require(self.personal, "personal")
        if self.project is not None and self.project.exists():
            return self.project
        if self.use == "project":
            return self.project_store()
        return require(self.personal, "personal")

    def settings(self, store: Store | None = None) -> Settings:
        layers = []
        if self.personal.exists():
            layers.append(self.personal.config_layer())
        target = store or (self.project if self.project and self.project.exists() else None)
        if target is not None and target.kind == "project" and target.exists():
            layer = target.config_layer()
            for key in layer.ignored:
                self._warn(f"{target.root / CONFIG_FILE}: {key} is ignored in a project's "
                           f"configuration (anyone who can push could set it); set it in "
                           f"yours: engram config set {key} VALUE")
            layers.append(layer)
        actor = os.environ.get("ENGRAM_ACTOR")
        # Each layer is kept until its file changes: the same layers give the same settings.
        key = (*layers, actor)
        kept = self._settings
        if kept is not None and len(kept[0]) == len(key) and kept[0][-1] == actor and \
                all(a is b for a, b in zip(kept[0][:-1], layers)):
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
        if self._actor:
            return self._actor
        configured = self.settings(store)["actor"]
        if configured:
            return configured
        from .git import repo as git

        return git.git_identity(store.work_tree) or git.fallback_actor()

    def projection(self, store: Store) -> Projection:
        """The store's read model, brought up to date with its files once per instance call.

        A damaged line (conflict markers, invalid JSON or UTF-8, a cut-off line) is skipped and
        reported with its file and line on every read, so that one bad line never hides the rest
        of the store; `engram verify` and `engram doctor` fail on it.
        """
        proj = self._projections.get(store.root)
        if proj is None:
            proj = self._projections[store.root] = Projection(store)
        proj.refresh()
        for link in sorted({*store.symlinks, *store.top_links()}):
            self._warn(f"{store.root / link} is a symbolic link inside the store; it is not "
                       f"followed, and what it points to is not read; remove it "
                       f"(`{git_c(store)} rm -- {shlex.quote(store.repo_path(link))}`)")
        for problem in proj.problems():
            text = f"{store.root / problem.path}:{problem.line}: {problem.message}"
            if problem.severity == "error":
                text += "; this line is skipped; `engram doctor` says how to repair it"
            self._warn(text)
        return proj

    def _warn(self, text: str) -> None:
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

    def __enter__(self) -> Engram:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- init --------------------------------------------------------------------------------

    def init(self, *, project: bool = False) -> tuple[Store, bool]:
        """Create the personal store, or the project store of the current repository.

        Returns the store and whether anything was created (init is idempotent).
        """
        from .git import repo as git

        if project:
            top = find_work_tree(self.cwd)
            if top is None:
                raise UsageError(
                    f"{self.cwd} is not inside a git repository; run `git init` first, "
                    "or `engram init` without --project for the personal store"
                )
            if top.resolve() == self.personal.root.resolve():
                raise UsageError("this is the personal store's repository; "
                                 "run `engram init --project` inside a project")
            what = foreign_store(top / PROJECT_DIR)
            if what is not None:
                self._drop_foreign_warning()
                raise UsageError(
                    f"{top / PROJECT_DIR} is {what}, and Engram's project store would need "
                    "the same folder: nothing was changed; use Engram's personal store here "
                    "(its memories written in this repository follow the project, see "
                    "docs/project-identity.md) and `engram import .engram` to bring that "
                    "tool's memories in")
            store = Store(top / PROJECT_DIR, "project")
        else:
            store = self.personal
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
            self._emit(store, "store.created", {"store": store.kind}, commit=False)
        if created or fresh:
            self.commit_store(store, subject=f"engram: initialize {store.kind} store")
        if project:
            self.project = store
        return store, bool(created or fresh)

    # -- writing -----------------------------------------------------------------------------

    def _emit(self, store: Store, kind: str, data: dict[str, Any], *,
              commit: bool = True) -> ev.Event:
        return self._emit_many(store, [(kind, data)], commit=commit)[0]

    def _emit_many(self, store: Store, items: Sequence[tuple[str, dict[str, Any]]], *,
                   commit: bool = True) -> list[ev.Event]:
        """Append events in one write (one fsync), in order, with increasing clocks."""
        actor = self.actor(store)
        with store.lock():
            clock = store.next_clock()
            now = ev.format_time(ev.utc_now())
            batch = []
            for offset, (kind, data) in enumerate(items):
                batch.append(ev.Event(
                    id=ev.new_event_id(), kind=kind, clock=clock + offset, time=now,
                    actor=actor, session=self.session, machine=ev.machine_name(), data=data,
                ))
            store.append(batch, now=self.clock())
            self.warnings.extend(store.repairs)
            store.repairs.clear()
            if commit:
                self._maybe_commit(store)
        return batch

    def _due_in(self, store: Store) -> float | None:
        """Seconds until the store's batch of pending events is due for its commit (0: due
        now), or None when none waits or automatic commits are off.

        Only substantive events count (`events.substantive`): a session's start and end alone
        never make a commit; they ride with the next one.
        """
        settings = self.settings(store)
        if not settings["commit.auto"]:
            return None
        state = WriterState.load(store)
        if state.pending <= 0:
            return None
        if state.pending >= settings["commit.every_events"]:
            return 0.0
        age = self.clock() - state.pending_since
        return max(0.0, settings["commit.every_seconds"] - age)

    def _maybe_commit(self, store: Store) -> None:
        """Commit the pending events if their batch is due (the caller holds the lock)."""
        if self._due_in(store) == 0:
            try:
                self.commit_store(store, locked=True)
            except GitError as exc:
                self._warn(f"events are saved but not committed yet: {exc}")

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
                if self._due_in(store) is None:
                    continue  # the usual case, decided without the lock
                with store.lock():
                    self._maybe_commit(store)
                    left = self._due_in(store)
            except EngramError as exc:
                self._warn(f"events are saved but not committed yet: {exc}")
                continue
            if left is not None:
                soonest = left if soonest is None else min(soonest, left)
        return soonest

    def commit_store(self, store: Store, *, subject: str | None = None,
                      locked: bool = False, repo: git.StoreRepo | None = None,
                      lifecycle_alone: bool = False) -> CommitResult:
        """Commit the store's pending changes. Pending session lifecycle events alone are left
        for the next commit unless `lifecycle_alone` (an explicit `engram commit`)."""
        from .git import repo as git

        if not locked:
            with store.lock():
                return self.commit_store(store, subject=subject, locked=True, repo=repo,
                                          lifecycle_alone=lifecycle_alone)
        repo = repo or git.StoreRepo(store)
        pending = repo.pending()
        if not lifecycle_alone and pending.changes and all(
                change.new_events and not any(ev.substantive(e.kind) for e in change.new_events)
                for change in pending.changes):
            self._reset_batch(store)  # nothing substantive waits (git may have taken it)
            return CommitResult(store.kind, None, 0, pending.refused)
        for attempt in (1, 2):
            try:
                oid = repo.commit(
                    pending,
                    message=lambda events: commit_message(events, subject=subject),
                    author=self.actor(store) if pending.changes else "",
                )
                break
            except (GitError, git.pygit2.GitError, OSError) as exc:
                # A commit killed half-way leaves git's lock files (index.lock, a branch's
                # ref lock) and the index behind HEAD: once no process holds them, the next
                # commit clears them up.
                from .domain.doctor import recover_interrupted_commit

                note = recover_interrupted_commit(store) \
                    if attempt == 1 and ".lock" in str(exc) else None
                if note is not None:
                    self.warnings.append(note)
                    continue
                if isinstance(exc, GitError):
                    raise
                # Disk full or read-only part-way through: git's own files are written by
                # rename, so nothing is half-done; the events wait on disk for the next commit.
                raise GitError(f"could not commit ({ev.one_line(exc, 200)}); the events are "
                               "safe on disk: fix that, then run `engram commit`") from None
        self._reset_batch(store)
        if oid is not None:
            self.compact_if_due(store, repo)
        return CommitResult(store.kind, oid, len(pending.events), pending.refused)

    @staticmethod
    def _reset_batch(store: Store) -> None:
        state = WriterState.load(store)
        if state.pending == 0 and state.pending_since == 0.0:
            return
        state.pending = 0
        state.pending_since = 0.0
        try:
            state.save(store)
        except OSError:
            pass  # only the batching count; the commit is made

    def compact_if_due(self, store: Store, repo: git.StoreRepo) -> None:
        """Fold the months with `compact.files` committed event files or more (under the lock)."""
        from .git import compact

        months = compact.due_months(store, repo, self.settings(store)["compact.files"])
        if not months:
            return
        try:
            compact.compact(store, repo, author=self.actor(store), months=months)
        except (GitError, OSError) as exc:
            self.warnings.append(f"event files not compacted: {ev.one_line(exc, 200)}")

    def compact(self, *, dry_run: bool = False) -> list[CompactResult]:
        """Commit pending events, then fold each month's closed event files into one file, in
        one commit per store (see `engram.git.compact`)."""
        from .git import compact, repo as git

        out = []
        for store in self.stores():
            with store.lock():
                repo = git.StoreRepo(store)
                if not dry_run:
                    self.commit_store(store, locked=True, repo=repo)
                out.append(compact.compact(store, repo, author=self.actor(store),
                                           dry_run=dry_run))
        return out

    def commit(self, *, subject: str | None = None) -> list[CommitResult]:
        """Commit every pending event of the selected stores now."""
        stores = self.stores()
        if subject is not None:
            subject = self.checks(stores[0]).text(subject, field="commit subject",
                                                  limit="limits.title_chars", one_line=True)
        return [self.commit_store(store, subject=subject, lifecycle_alone=True)
                for store in stores]

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
    ) -> Remembered:
        """Store a memory durably (fsynced before this returns).

        A near-duplicate of an active memory reinforces that memory instead of adding a new one
        (`duplicate` is then True and `memory` is the existing one; the `memory.reinforced`
        event keeps the text given here). Close but different ones come back in `related`, as
        possible contradictions to supersede explicitly. However similar, a memory that says a
        different number, version, identifier, path, URL, date, quoted text or the opposite is
        not a duplicate: the new text is added and `differs_from(id)` says what differs.

        Written to the personal store inside a git repository, the memory belongs to that
        project (its root commit, `engram.identity`) and is recalled only there, unless
        `everywhere`.
        """
        store = self.write_store()
        settings = self.settings(store)
        checks = Checks(settings)
        content = self._checked_content(content, checks, redact)
        data: dict[str, Any] = {
            "memory": ev.new_entity_id(),
            "content": content,
            "kind": mem.check_kind(kind),
            "tags": list(checks.tags(tags)),
            "scope": checks.optional_name(scope, what="scope"),
            "source": mem.check_source(source),
            "importance": mem.check_importance(importance),
            "valid_from": _moment(valid_from, "--valid-from"),
            "valid_until": _moment(valid_until, "--valid-until"),
        }
        mem.check_window(data["valid_from"], data["valid_until"])
        here = self.here() if store.kind == "personal" and not everywhere else None
        if here is not None and here.root is not None:
            data["project"] = here.root
        if here is not None and here.remote is not None:
            try:
                data["project_remote"] = checks.text(here.remote, field="remote URL",
                                                     limit="limits.item_bytes")
            except UsageError:
                pass  # a hint only: a remote URL that fails the checks is not kept
        if at is not None:
            data["at"] = _moment(at, "--at", future=False)
        if task is not None:
            data["task"] = self._task(task, items=False)[1].id
        old = [self._memory(ident) for ident in supersedes]
        for old_store, old_memory in old:
            if old_store.root != store.root:
                raise UsageError(f"memory {old_memory.id[:8]} is in the {old_store.kind} store; "
                                 f"a memory can only supersede one in its own store")
            if old_memory.status != "active":
                raise UsageError(f"memory {old_memory.id[:8]} is {old_memory.status} already")
        check = settings["remember.check_duplicates"] if check_duplicates is None \
            else check_duplicates
        if old:
            data["supersedes"] = [m.id for _, m in old]
            same = self._stored_as(store, data, skip={m.id for _, m in old}) if check \
                else None
            if same is not None:
                # The text is stored already: remember added it and reported these as possible
                # contradictions, and the caller now says they are replaced. Point them at it
                # rather than storing the same text twice.
                self._emit_many(store, [("memory.superseded", {"memory": m.id, "by": same.id})
                                        for _, m in old])
                return Remembered(self._memory(same.id)[1])

        related: list[tuple[mem.Memory, float, tuple[Difference, ...]]] = []
        if check and not old:
            # `content` passed the secret checks above: the reinforcement below keeps it.
            duplicate, related = self._near(store, settings, content, kind=data["kind"],
                                            tags=data["tags"], project=data)
            if duplicate is not None:
                existing, similarity = duplicate
                self._emit(store, "memory.reinforced",
                           {"memory": existing.id, "similarity": round(similarity, 4),
                            "content": content})
                return Remembered(self._memory(existing.id)[1], duplicate=True,
                                  related=((existing, similarity),))
        items = [("memory.created", data)]
        items += [("memory.superseded", {"memory": m.id, "by": data["memory"]}) for _, m in old]
        created = self._emit_many(store, items)[0]
        memory = mem.fold([created])
        assert memory is not None
        return Remembered(mem.Memory.from_dict({**memory.to_dict(), "store": store.kind}),
                          related=tuple((m, sim) for m, sim, _ in related),
                          differences=tuple((m.id, found) for m, _, found in related if found))

    def _near(self, store: Store, settings: Settings, content: str, *, kind: str,
              tags: Sequence[str], project: Mapping[str, Any] | None = None) -> tuple[tuple[mem.Memory, float] | None,
                         list[tuple[mem.Memory, float, tuple[Difference, ...]]]]:
        """The near-duplicate of `content` among active memories, and the related ones with
        what they say otherwise (`neardup.differences`).

        A memory is a near-duplicate when it is as similar as `remember.duplicate_similarity`
        (or the same text but for case, punctuation and spacing) and says the same facts: a
        correction ("100 requests per second" -> "1000") is as similar as a rewording to the
        model, and folding it would keep the wrong value and drop the right one.

        In the personal store, a memory for every project reinforces only one for every project,
        and one of a project (`project`, its payload's `project` and `project_remote`) only one
        of the same project or for every project: the reinforced memory stays where the new text
        would have been seen.
        """
        embedder = self._embedder(store)
        if embedder is None:
            return None, []
        from .search.embed import embed_with_cache
        from .search.retrieval import embedding_text

        search = self._search(store)
        proj = self.projection(store)
        # Fold the changes since the vector index was saved into it once there are enough of
        # them (`search.vector_flush`), as recall does, so that the comparisons with changed
        # memories each write makes stay few.
        search.sync_vectors(embedder, settings)
        # Embedded as the index embeds a memory (with its kind and tags), so that it is
        # compared like with like, and cached, so indexing it later does not embed it again.
        vector, _ = embed_with_cache(embedder, search.embeddings,
                                     [embedding_text(kind, tags, content)])
        near = search.nearest(embedder, vector[0], limit=8)
        found = proj.memories_by_id([i for i, _ in near])
        now = ev.utc_now()
        related = []
        for memory_id, similarity in near:
            memory = found.get(memory_id)
            if memory is None or memory.status != "active" or not memory.valid_at(now):
                continue
            close = similarity >= settings["remember.duplicate_similarity"] or \
                _normalised(memory.content) == _normalised(content)
            if not close and similarity < settings["remember.related_similarity"]:
                continue
            found_differences = differences(memory.content, content)
            if close and not found_differences:
                if _same_reach(store, memory, project or {}):
                    return (memory, similarity), []
                continue  # the same, for another project: neither a duplicate nor different
            related.append((memory, similarity, found_differences))
        return None, related

    def _stored_as(self, store: Store, data: dict[str, Any], *, skip: set[str],
                   ) -> mem.Memory | None:
        """An active memory with the text of `data` (but for case, punctuation and spacing)."""
        embedder = self._embedder(store)
        if embedder is None:
            return None
        from .search.embed import embed_with_cache
        from .search.retrieval import embedding_text

        search = self._search(store)
        search.sync_vectors(embedder, self.settings(store))
        content = data["content"]
        vector, _ = embed_with_cache(embedder, search.embeddings,
                                     [embedding_text(data["kind"], data["tags"], content)])
        near = [i for i, _ in search.nearest(embedder, vector[0], limit=8) if i not in skip]
        now = ev.utc_now()
        for memory in self.projection(store).memories_by_id(near).values():
            if memory.status == "active" and memory.valid_at(now) and \
                    _normalised(memory.content) == _normalised(content) and \
                    not differences(memory.content, content):
                return memory
        return None

    def _embedder(self, store: Store | None = None) -> Embedder | None:
        """The configured embedding model, or None (said once) when it cannot load."""
        from .search.embed import EmbeddingUnavailable, load_embedder

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

    def _search(self, store: Store) -> StoreSearch:
        from .search.retrieval import StoreSearch

        search = self._searches.get(store.root)
        if search is None:
            search = self._searches[store.root] = StoreSearch(store, self.projection(store))
        return search

    @staticmethod
    def _checked_content(content: str, checks: Checks, redact: bool) -> str:
        return checks.text(content, field="content", limit="limits.content_bytes",
                           redact=redact,
                           hint="shorten it or split it into several memories")

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
        store, current = self._memory(memory_id)
        if current.status == "forgotten":
            raise UsageError(f"memory {current.id[:8]} was forgotten; "
                             "remember the new text instead of updating it")
        checks = self.checks(store)
        changes: dict[str, Any] = {}
        if content is not None:
            changes["content"] = self._checked_content(content, checks, redact)
        if kind is not None:
            changes["kind"] = mem.check_kind(kind)
        if tags is not None:
            changes["tags"] = list(checks.tags(tags))
        if scope is not None:
            changes["scope"] = checks.optional_name(scope, what="scope")
        if source is not None:
            changes["source"] = mem.check_source(source)
        if importance is not None:
            changes["importance"] = mem.check_importance(importance)
        if valid_from is not None:
            changes["valid_from"] = _moment(valid_from, "--valid-from")
        if valid_until is not None:
            changes["valid_until"] = _moment(valid_until, "--valid-until")
        mem.check_window(changes.get("valid_from", current.valid_from),
                         changes.get("valid_until", current.valid_until))
        old = current.to_dict()
        changes = {k: v for k, v in changes.items() if old.get(k) != v}
        if not changes:
            raise UsageError("nothing to change: give new text or a changed option")
        self._emit(store, "memory.updated", {"memory": current.id, **changes})
        return self._memory(current.id)[1]

    def forget(self, memory_id: str, *, reason: str) -> mem.Memory:
        """Retire a memory with a reason (a tombstone event). Its history stays readable."""
        if not reason or not reason.strip():
            raise UsageError("say why with --reason; it is kept with the memory's history")
        store, current = self._memory(memory_id)
        reason = self.checks(store).text(reason, field="reason", limit="limits.item_bytes")
        if current.status == "forgotten":
            raise UsageError(f"memory {current.id[:8]} is already forgotten")
        self._emit(store, "memory.forgotten", {"memory": current.id, "reason": reason})
        return self._memory(current.id)[1]

    # -- reading -----------------------------------------------------------------------------

    def _resolve(self, ident: str, *, what: str = "memory") -> list[tuple[Store, str, str]]:
        ident = reference(ident, "id" if what == "any" else f"{what} id")
        if len(ident) < MIN_PREFIX:
            raise UsageError(f"id {ident!r} is too short; give at least {MIN_PREFIX} characters")
        found: list[tuple[Store, str, str]] = []
        for store in self.stores():
            for full, kind in self.projection(store).match_ids(ident):
                if what == "any" or kind == what:
                    found.append((store, full, kind))
        exact = [f for f in found if f[1].lower() == ident.lower()]
        return exact or found

    def _memory(self, ident: str) -> tuple[Store, mem.Memory]:
        found = self._resolve(ident)
        if not found:
            raise NotFoundError("memory", ident)
        if len({f[1] for f in found}) > 1:
            raise AmbiguousIdError(ident, sorted({f[1] for f in found}))
        store, full, _ = found[0]
        memory = self.projection(store).memory(full)
        assert memory is not None
        return store, memory

    def get(self, memory_id: str) -> mem.Memory:
        return self._memory(memory_id)[1]

    def history(self, memory_id: str) -> list[tuple[ev.Event, mem.Memory]]:
        store, memory = self._memory(memory_id)
        events = self.projection(store).entity_events(memory.id)
        return [(e, mem.Memory.from_dict({**m.to_dict(), "store": store.kind}))
                for e, m in mem.history(events)]

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
        for kind in kinds:
            mem.check_kind(kind)
        checks = self.checks()
        tags = checks.filter_names(tags, what="tag")
        if scope is not None:
            scope = checks.optional_name(scope, what="scope")
        if contains is not None:
            contains = well_formed(contains, "the text to look for")
        now = ev.utc_now()
        statuses = () if include_forgotten else ("active",)
        out: list[mem.Memory] = []
        for store in self.stores():
            count = 0
            for memory in self.projection(store).memories(
                kinds=kinds, tags=tags, scope=scope, statuses=statuses, contains=contains,
            ):
                if not include_expired and not memory.valid_at(now):
                    continue
                if not self.belongs_here(store, memory):
                    continue
                out.append(memory)
                count += 1
                if limit is not None and count >= limit:
                    break
        out.sort(key=lambda m: (m.updated_clock, m.id), reverse=True)
        return out[:limit] if limit is not None else out

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
    ) -> list[Hit]:
        """Memories by meaning and by words, fused, weighted by strength, best first.

        Superseded, forgotten, expired and fully decayed memories are left out unless asked for.
        `now` is the moment strength and validity are judged at (default: now).
        """
        from .search import ranking
        from .search.retrieval import Hit, strength

        checks = self.checks()
        query = checks.query(query)
        for kind in kinds:
            mem.check_kind(kind)
        wanted_tags = set(checks.filter_names(tags, what="tag"))
        if scope is not None:
            scope = checks.optional_name(scope, what="scope")
        if task is not None:
            task = self._task(task, items=False)[1].id
        moment = now or ev.utc_now()
        since_text = _moment(since, "--since", future=False) if since else None
        until_text = _moment(until, "--until", future=False) if until else None
        intent = ranking.analyse(query, moment)
        if not ranking.has_content(query, intent):
            return []  # "the", "what is it": words that carry no meaning ask for nothing
        query_vectors: dict[str, Any] = {}
        ranked: list[tuple[float, int, Store, ranking.Candidate]] = []
        for store in self.stores():
            settings = self.settings(store)
            proj = self.projection(store)
            search = self._search(store)
            limit = max(settings["recall.candidates"], k * 5)
            text_hits, query_weight, specificity = search.text_evidence(intent.words, limit)
            bm25 = dict(text_hits)
            cosines: dict[str, float] = {}
            background = None
            embedder = self._embedder(store)
            if embedder is not None:
                if embedder.identity not in query_vectors:
                    query_vectors[embedder.identity] = embedder.embed_query(query)
                vector = query_vectors[embedder.identity]
                cosines = search.vector_scores(embedder, settings, vector, limit,
                                               extra_ids=list(bm25))
                sims = search.background(embedder) @ vector
                background = ranking.Background.of(sims)
            weight = settings["recall.weight_vector"] if embedder is not None else 0.0
            ids = list(dict.fromkeys([*bm25, *cosines]))
            if store.kind == "personal" and self.here() is not None:
                found = proj.memories_by_id(ids)
                ids = [i for i in ids if i in found and self.belongs_here(store, found[i])]
            heads = proj.heads(ids, tags=bool(wanted_tags))
            contents: dict[str, mem.Memory] = {}
            if intent.identifiers and bm25:
                # Only memories BM25 found can hold the identifier's words.
                contents = proj.memories_by_id(list(bm25))
            pool: dict[str, ranking.Candidate] = {}
            for memory_id in ids:
                if memory_id not in heads:
                    continue
                c = ranking.Candidate(memory_id, cosine=max(0.0, cosines.get(memory_id, 0.0)))
                c.share = bm25.get(memory_id, 0.0) / query_weight if query_weight > 0 else 0.0
                if memory_id in contents:
                    c.identifiers = ranking.identifiers_found(intent.identifiers,
                                                              contents[memory_id].content)
                c.words = ranking.words_evidence(c.share, specificity, c.identifiers)
                c.meaning = background.meaning(c.cosine) if background is not None else 0.0
                c.relevance = ranking.relevance(c.meaning, c.words, weight)
                pool[memory_id] = c
            context = settings["recall.context"]
            if context > 0 and pool:
                neighbours = proj.written_with(ranking.most_relevant(pool),
                                               seconds=ranking.CONTEXT_SECONDS,
                                               span=ranking.CONTEXT_SPAN)
                involved = {i for source, near in neighbours.items() for i in (source, *near)
                            if i in pool}
                tagged = proj.heads(list(involved), tags=True) if involved else {}
                ranking.add_context(pool, neighbours, context,
                                    {i: head.tags for i, head in tagged.items()})
            floor = settings["recall.strength_floor"]
            min_relevance = settings["recall.min_relevance"]
            share = settings["recall.weight_strength"]
            for memory_id, c in pool.items():
                head = heads[memory_id]
                if c.relevance <= 0 or c.relevance < min_relevance:
                    continue
                if head.status != "active" and not include_forgotten:
                    continue
                if kinds and head.kind not in kinds:
                    continue
                if wanted_tags and not wanted_tags <= head.tags:
                    continue
                if scope is not None and head.scope != scope:
                    continue
                if task is not None and head.task != task:
                    continue
                if since_text and head.moment < since_text:
                    continue
                if until_text and head.moment >= until_text:
                    continue
                if not include_expired and not head.valid_at(moment):
                    continue
                c.strength = strength(head, moment, settings)
                if c.strength < floor and not include_decayed:
                    continue
                c.time = ranking.time_factor(intent, ev.parse_time(head.moment), moment)
                c.kind = ranking.kind_factor(intent, head.kind)
                c.score = c.relevance * c.time * c.kind * ((1.0 - share) + share * c.strength)
                ranked.append((c.score, head.updated_clock, store, c))
        ranked.sort(key=lambda item: (item[0], item[1]), reverse=True)
        ranked = ranked[:max(k, ranking.SUBJECT_WINDOW)]
        # Only the best candidates read their whole memory.
        bodies: dict[Path, dict[str, mem.Memory]] = {}
        for store in {item[2].root: item[2] for item in ranked}.values():
            # The read model was refreshed above, in this same call: read it as it is.
            bodies[store.root] = self._projections[store.root].memories_by_id(
                [item[3].id for item in ranked if item[2].root == store.root])
        if intent.tense is not None and len(ranked) > 1:
            self._rank_by_subject(intent.tense, ranked, bodies, moment)
        ranked.sort(key=lambda item: (item[0], item[1]), reverse=True)
        hits: list[Hit] = []
        for _, _, store, c in ranked[:k]:
            hits.append(Hit(bodies[store.root][c.id], c))
        self.note_recalled([hit.memory.id for hit in hits[:3]])  # what this session relies on
        return hits

    def _rank_by_subject(self, tense: str, ranked: list[Any],
                         bodies: dict[Path, dict[str, mem.Memory]], now: datetime) -> None:
        """For "now" questions, an older memory on the subject of a newer one among the results
        steps back (for "originally" questions, the newer one does)."""
        from .search import ranking
        from .search.embed import embed_with_cache
        from .search.retrieval import memory_embedding_text

        by_identity: dict[str, list[int]] = {}
        for row, (_, _, store, _) in enumerate(ranked):
            embedder = self._embedder(store)
            if embedder is not None:
                by_identity.setdefault(embedder.identity, []).append(row)
        for rows in by_identity.values():
            store = ranked[rows[0]][2]
            embedder = self._embedder(store)
            memories = [bodies[ranked[r][2].root][ranked[r][3].id] for r in rows]
            vectors, _ = embed_with_cache(embedder, self._search(store).embeddings,
                                          [memory_embedding_text(m) for m in memories])
            similar = vectors @ vectors.T
            for i, row in enumerate(rows):
                for j in range(len(rows)):
                    if i == j or similar[i, j] < ranking.SUBJECT_SIMILARITY:
                        continue
                    newer = memories[j].moment > memories[i].moment
                    if newer == (tense == "current"):
                        score, clock, where, c = ranked[row]
                        c.time *= ranking.SUPERSEDED_BY_NEWER
                        c.score *= ranking.SUPERSEDED_BY_NEWER
                        c.notes.append(f"{'newer' if newer else 'older'} memory on this subject: "
                                       f"{memories[j].id[:8]}")
                        ranked[row] = (c.score, clock, where, c)
                        break

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
        kinds = [event_kind(kind) for kind in kinds]
        if task is not None:
            task = self._task(task, items=False)[1].id
        if actor is not None:
            actor = reference(actor, "actor", hint="give part of a name or an email")
        since_clock = None
        if since is not None:
            moment = since if isinstance(since, datetime) else \
                mem.parse_moment(since, what="--since")
            since_clock = int(moment.timestamp() * 1_000_000)
        out: list[tuple[str, ev.Event]] = []
        for store in self.stores():
            for event in self.projection(store).events(
                kinds=kinds, task=task, actor=actor, since_clock=since_clock, limit=limit,
            ):
                out.append((store.kind, event))
        out.sort(key=lambda pair: pair[1].sort_key, reverse=True)
        return out[:limit] if limit is not None else out

    def show(self, ident: str) -> dict[str, Any]:
        """Any record by id or prefix: a memory, task or session with its events, or one
        event."""
        found = self._resolve(ident, what="any")
        if not found:
            raise NotFoundError("record", ident)
        if len({f[1] for f in found}) > 1:
            raise AmbiguousIdError(ident, sorted({f[1] for f in found}))
        store, full, kind = found[0]
        proj = self.projection(store)
        if kind == "memory":
            memory = proj.memory(full)
            assert memory is not None
            return {
                "type": "memory",
                "store": store.kind,
                "memory": memory.to_dict(),
                "events": [e.to_dict() for e in proj.entity_events(full)],
            }
        if kind in ("task", "session"):
            return {"type": kind, "store": store.kind, "id": full,
                    "events": [e.to_dict() for e in proj.entity_events(full)]}
        event = proj.event(full)
        if event is None:
            raise NotFoundError("record", ident)
        return {"type": "event", "store": store.kind, "event": event.to_dict()}

    # -- search maintenance ------------------------------------------------------------------

    def reindex(self, *, progress: Callable[[str, int, int], None] | None = None,
                ) -> dict[str, Any]:
        """Rebuild every cache of the selected stores from the event files.

        Embeddings come from the embedding cache where the same text was embedded before by the
        same model, so a second reindex embeds nothing. `progress(stage, done, total)` is called
        as work advances.
        """
        started = time.perf_counter()
        totals = {"events": 0, "memories": 0, "embedded": 0, "reused": 0, "stores": []}
        for store in self.stores():
            search = self._searches.pop(store.root, None)
            if search is not None:
                search.close()
            proj = self._projections.get(store.root) or Projection(store)
            try:
                proj.refresh()  # first, so that events whose files vanished are noted as such
            except (OSError, EngramError):
                pass
            with store.lock():
                proj.reset()
                for name in ("text",):
                    shutil.rmtree(store.local_dir / "cache" / name, ignore_errors=True)
                for name in ("vectors.usearch", "vectors.json"):
                    (store.local_dir / "cache" / name).unlink(missing_ok=True)
            self._projections.pop(store.root, None)
            proj = self.projection(store)
            counts = proj.counts()
            total = len(proj.all_memory_ids())
            search = self._search(store)
            search.sync_text()
            report = None
            embedder = self._embedder(store)
            if embedder is not None:
                done = 0

                def step(count: int, total: int = total) -> None:
                    nonlocal done
                    done += count
                    if progress is not None:
                        progress(store.kind, done, total)

                report = search.sync_vectors(embedder, self.settings(store), force=True,
                                             progress=step)
            totals["events"] += counts["events"]
            totals["memories"] += total
            totals["embedded"] += report.embedded if report else 0
            totals["reused"] += report.reused if report else 0
            totals["stores"].append({"store": store.kind, "events": counts["events"],
                                     "memories": total,
                                     "embedded": report.embedded if report else 0,
                                     "reused": report.reused if report else 0,
                                     "vectors": embedder is not None})
        totals["seconds"] = round(time.perf_counter() - started, 3)
        return totals

    def refresh_indexes(self, *, stores: Sequence[Store] | None = None,
                        progress: Callable[[str, int, int], None] | None = None,
                        ) -> dict[str, Any]:
        """Bring every cache up to date with the event files, doing only what changed.

        What `reindex` does from scratch, this does incrementally: after a pull, a merge or a
        branch switch it reads the changed files, indexes the changed memories' words, and folds
        their vectors (embedding only texts the embedding cache has not seen) into the index.
        """
        started = time.perf_counter()
        totals: dict[str, Any] = {"events_added": 0, "events_removed": 0, "indexed_text": 0,
                                  "embedded": 0, "reused": 0}
        for store in stores if stores is not None else self.stores():
            proj = self._projections.get(store.root)
            if proj is None:
                proj = self._projections[store.root] = Projection(store)
            refreshed = proj.refresh()
            totals["events_added"] += refreshed.events_added
            totals["events_removed"] += refreshed.events_removed
            search = self._search(store)
            totals["indexed_text"] += search.sync_text().indexed_text
            if (proj.dirty_count("vec") == 0
                    and (store.local_dir / "cache" / "vectors.json").exists()):
                continue  # nothing to embed: do not load the model or the index for nothing
            embedder = self._embedder(store)
            if embedder is None:
                continue
            total = proj.dirty_count("vec")
            done = 0

            def step(count: int, total: int = total, kind: str = store.kind) -> None:
                nonlocal done
                done += count
                if progress is not None:
                    progress(kind, done, total)

            report = search.sync_vectors(embedder, self.settings(store), force=True,
                                         progress=step)
            totals["embedded"] += report.embedded
            totals["reused"] += report.reused
        totals["seconds"] = round(time.perf_counter() - started, 3)
        return totals

    def index_state(self) -> list[dict[str, Any]]:
        """Whether each store's caches are current, without changing anything.

        `current`: every cache has caught up with the files. `healthy`: nothing needs a rebuild.
        A cache that is merely behind is so by design and catches up on its own: the read model
        reads changed files on the next command, the word index takes changes on the next
        search, and the vector index saves changes in batches (`search.vector_flush`) while
        searches score the unsaved ones. Only a missing or unreadable cache, which the next
        command must rebuild from scratch, makes a store unhealthy.
        """
        import json

        out = []
        for store in self.stores():
            cache = store.local_dir / "cache"
            proj_path = cache / "projection.sqlite3"
            entry: dict[str, Any] = {"store": store.kind, "path": str(store.root)}
            if not proj_path.exists():
                entry.update(projection="missing", current=False, healthy=False,
                             behind=[], stale=["read model missing"])
                out.append(entry)
                continue
            proj = self._projections.get(store.root) or Projection(store)
            stale = proj.stale()
            dirty_text = proj.dirty_count("text")
            dirty_vec = proj.dirty_count("vec")
            text_ok = (cache / "text" / "meta.json").exists()
            identity = None
            try:
                identity = json.loads((cache / "vectors.json").read_text()).get("identity")
            except (OSError, ValueError, AttributeError):
                pass
            settings = self.settings(store)
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
                elif dirty_vec:
                    behind.append(f"{dirty_vec} change(s) not yet saved in the vector index "
                                  f"(searches score them; saved every "
                                  f"{settings['search.vector_flush']})")
            entry.update(
                projection="behind" if stale else "current",
                text_index="missing" if not text_ok else "behind" if dirty_text or stale
                else "current",
                text_pending=dirty_text,
                vector_index=("off" if model == "off" else "missing" if identity is None else
                              "behind" if dirty_vec or stale else "current"),
                vector_pending=dirty_vec,
                vector_model=identity,
                model=model,
                behind=behind,
                stale=broken,
            )
            entry["current"] = not behind and not broken
            entry["healthy"] = not broken
            if self._projections.get(store.root) is None:
                proj.close()
            out.append(entry)
        return out

    def stats(self, *, now: datetime | None = None) -> list[dict[str, Any]]:
        """Counts by kind, scope and store, average strength, and index freshness."""
        from .search.retrieval import strength

        moment = now or ev.utc_now()
        freshness = {entry["store"]: entry for entry in self.index_state()}
        out = []
        for store in self.stores():
            settings = self.settings(store)
            proj = self.projection(store)
            active = list(proj.memories())
            by_kind = Counter(m.kind for m in active)
            by_scope = Counter(m.scope or "-" for m in active)
            strengths = [strength(m, moment, settings) for m in active]
            out.append({
                "store": store.kind,
                "path": str(store.root),
                **proj.counts(),
                "by_kind": dict(by_kind.most_common()),
                "by_scope": dict(by_scope.most_common(20)),
                "average_strength": round(sum(strengths) / len(strengths), 4)
                if strengths else None,
                "decayed": sum(1 for value in strengths
                               if value < settings["recall.strength_floor"]),
                "index": freshness.get(store.kind),
            })
        return out

    def consolidate(self, *, apply: bool = False, similarity: float | None = None,
                    ) -> list[dict[str, Any]]:
        """Find clusters of near-duplicate memories; with `apply`, merge each into one.

        A merge is events only: a new memory (the longest text of the cluster, the union of its
        tags, the highest importance) that supersedes every member. Nothing is deleted. Memories
        that say a different number, version, path, ... (`neardup.differences`) are never put in
        one cluster, however similar: merging them would keep one value and drop the other.
        """
        import numpy as np

        from .search.embed import embed_with_cache

        plans = []
        for store in self.stores():
            settings = self.settings(store)
            threshold = settings["consolidate.similarity"] if similarity is None else similarity
            embedder = self._embedder(store)
            if embedder is None:
                raise EngramError("consolidate needs the embedding model, which did not load; "
                                  "see `engram stats`")
            proj = self.projection(store)
            search = self._search(store)
            active = [m for m in proj.memories() if m.valid_at(ev.utc_now())]
            if len(active) < 2:
                continue
            vectors, _ = embed_with_cache(embedder, search.embeddings, [m.content for m in active])
            parent = list(range(len(active)))
            members_of = {i: [i] for i in range(len(active))}

            def find(i: int) -> int:
                while parent[i] != i:
                    parent[i] = parent[parent[i]]
                    i = parent[i]
                return i

            def agree(a: int, b: int) -> bool:
                # Every pair across the two clusters, not only the similar pair: a chain of
                # small rewordings must not join two memories that say different values.
                return not any(differences(active[x].content, active[y].content)
                               for x in members_of[a] for y in members_of[b])

            for start in range(0, len(active), 1024):
                block = vectors[start : start + 1024] @ vectors.T
                for offset, row in enumerate(block):
                    i = start + offset
                    for j in np.nonzero(row >= threshold)[0]:
                        if j > i and active[i].kind == active[int(j)].kind:
                            a, b = find(i), find(int(j))
                            if a != b and agree(a, b):
                                parent[a] = b
                                members_of[b] += members_of.pop(a)
            clusters: dict[int, list[int]] = {}
            for i in range(len(active)):
                clusters.setdefault(find(i), []).append(i)
            for members in clusters.values():
                if len(members) < 2:
                    continue
                group = [active[i] for i in members]
                keeper = max(group, key=lambda m: (len(m.content), m.importance, m.updated_clock))
                tags = list(dict.fromkeys(t for m in group for t in m.tags))
                plan = {
                    "store": store.kind,
                    "members": [{"id": m.id, "summary": m.summary()} for m in group],
                    "content": keeper.content,
                    "kind": keeper.kind,
                    "tags": tags[: settings["limits.tags"]],
                    "importance": max(m.importance for m in group),
                    "merged_into": None,
                }
                if apply:
                    result = self._merge(store, group, plan)
                    plan["merged_into"] = result
                plans.append(plan)
        return plans

    def _merge(self, store: Store, group: list[mem.Memory], plan: dict[str, Any]) -> str:
        new_id = ev.new_entity_id()
        keeper = max(group, key=lambda m: (len(m.content), m.importance, m.updated_clock))
        data: dict[str, Any] = {
            "memory": new_id, "content": plan["content"], "kind": plan["kind"],
            "tags": plan["tags"], "scope": keeper.scope, "source": keeper.source,
            "importance": plan["importance"], "valid_from": None, "valid_until": None,
            "supersedes": [m.id for m in group],
        }
        if keeper.task:
            data["task"] = keeper.task
        items = [("memory.created", data)]
        items += [("memory.superseded", {"memory": m.id, "by": new_id}) for m in group]
        self._emit_many(store, items)
        return new_id

    def status(self) -> list[dict[str, Any]]:
        from .git import repo as git, lost

        out = []
        for store in self.stores():
            proj = self.projection(store)
            repo = git.StoreRepo(store)
            pending = repo.pending()
            lost.settle(store, proj)
            gone = lost.find(store, proj)
            out.append({
                "store": store.kind,
                "path": str(store.root),
                "branch": repo.branch(),
                "head": repo.head_id(),
                **proj.counts(),
                "uncommitted": len(pending.events),
                "uncommitted_files": [c.rel for c in pending.changes],
                "refused": pending.refused,
                "missing": pending.missing,
                "restore": git.restore_command(store, pending.missing) if pending.missing
                else None,
                "lost": gone.to_dict(),
                "busy": repo.busy(),
                "remotes": repo.remotes(),
                "upstream": repo.upstream_state(),
                "warnings": [str(p) for p in proj.problems()],
            })
        return out

    def recover(self, *, everything: bool = False) -> list[Recovered]:
        """Write back the events that git took away from the selected stores (see
        `engram.lost`): found in the reflogs, stashes and unreachable objects, else in the
        ledger, appended unchanged (same ids, clocks and bytes) to new event files and
        committed. With `everything`, also every event git still holds that is in neither the
        store nor any branch. Running it again writes nothing."""
        return [self._recover_store(store, everything=everything) for store in self.stores()]

    def _recover_store(self, store: Store, *, everything: bool) -> Recovered:
        from .git import lost

        proj = self.projection(store)
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
                    commit = self.commit_store(
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

    def verify(self) -> dict[str, Any]:
        """Re-read every event file of the selected stores from disk; report all damage."""
        from .domain.verify import verify_store

        reports = [verify_store(store) for store in self.stores()]
        return {
            "ok": all(r["ok"] for r in reports),
            "stores": reports,
        }

    def doctor(self, *, fix: bool = False) -> dict[str, Any]:
        """Diagnose the selected stores: every problem, where it is, and the command that fixes
        it. With `fix`, apply the repairs that lose nothing (keeping backups), then diagnose
        again."""
        from .domain.doctor import run

        return run(self, fix=fix)

    # -- settings ----------------------------------------------------------------------------

    def config_target(self) -> Store:
        if self.use == "project":
            return self.project_store()
        return require(self.personal, "personal")

    def config_set(self, key: str, text: str) -> Any:
        from .base.config import parse_value

        store = self.config_target()
        value = parse_value(key, text)
        if isinstance(value, str):
            self.checks(store).scan(value, field=key, redactable=False)
        if store.kind == "project" and personal_only(key, value):
            raise UsageError(f"{key} is read only from your own configuration, never from a "
                             f"project's (anyone who can push could change it); set it without "
                             f"--project")
        with store.lock():
            store.config_file.set(key, value)
        self.commit_store(store, subject=f"engram: config {key} = {value}")
        return value

    def _effective_settings(self) -> Settings:
        """Settings as they apply here: the project's on top, unless only personal is used."""
        if self.use == "personal":
            return self.settings(self.personal)
        return self.settings()

    def config_get(self, key: str) -> Any:
        return self._effective_settings()[key]

    def config_list(self) -> list[dict[str, Any]]:
        settings = self._effective_settings()
        return [
            {"key": key, "value": settings[key], "origin": settings.origin(key),
             "help": SETTINGS[key].help}
            for key in SETTINGS
        ]


def _moment(value: str | datetime | None, what: str, *, future: bool = True) -> str | None:
    if value is None or value == "":
        return None
    moment = value if isinstance(value, datetime) else mem.parse_moment(value, what=what,
                                                                       future=future)
    if moment.tzinfo is None:
        from datetime import UTC

        moment = moment.replace(tzinfo=UTC)
    return ev.format_time(moment)


def _same_reach(store: Store, memory: mem.Memory, new: Mapping[str, Any]) -> bool:
    """Whether a new memory (its payload `new`) may reinforce `memory` instead of being added:
    in the personal store, only where `memory` is seen wherever the new one would be."""
    if store.kind != "personal" or (memory.project is None and memory.project_remote is None):
        return True
    return (memory.project, memory.project_remote) == \
        (new.get("project"), new.get("project_remote")) or \
        (new.get("project") is not None and memory.project == new.get("project"))


def _normalised(text: str) -> str:
    """Text compared for duplicates: case, punctuation and spacing do not count."""
    return " ".join("".join(c if c.isalnum() else " " for c in text.casefold()).split())


def describe(event: ev.Event) -> str:
    """One line about an event, for logs and commit messages."""
    if event.kind.startswith("memory."):
        return mem.describe(event)
    if event.kind.startswith("task."):
        from .model.tasks import describe as describe_task

        return describe_task(event)
    if event.kind.startswith("checkpoint."):
        from .domain.continuity.checkpoints import describe as describe_checkpoint

        return describe_checkpoint(event)
    if event.kind.startswith("session."):
        from .model.sessions import describe as describe_session

        return describe_session(event)
    if event.kind == "store.created":
        return f"initialize {event.data.get('store', '')} store".replace("  ", " ")
    return event.kind


def commit_message(events: Sequence[ev.Event], *, subject: str | None = None) -> str:
    """A message a reviewer can read: what happened, one line per event."""
    if subject is None:
        # Named after what happened; a session's start and end that ride along are listed only.
        main = [e for e in events if ev.substantive(e.kind)] or list(events)
        if len(main) == 1:
            subject = f"engram: {describe(main[0])}"
        else:
            verbs = Counter(describe(e).split(" ", 1)[0] for e in main)
            summary = ", ".join(f"{verb} {count}" for verb, count in verbs.most_common())
            subject = f"engram: {len(main)} events ({summary})"
    lines = [subject]
    if len(events) > 1 or (events and subject != f"engram: {describe(events[0])}"):
        lines.append("")
        shown = list(events)[:50]
        lines.extend(f"- {describe(e)}" for e in shown)
        if len(events) > len(shown):
            lines.append(f"- ... and {len(events) - len(shown)} more")
    return "\n".join(lines) + "\n"


