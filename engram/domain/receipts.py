"""Receipts: where an event was written, whether it is committed and pushed, and whether the
search indexes hold it, so that a claim of "saved" can be checked.

A write's receipt comes from the write itself (the file and line it appended to, noted by the
workspace); `engram status ID` finds any event's file and line in the read model. Whether the
line is committed is read from git: the line in HEAD's tree that holds the event, and the commit
that put it there (`git blame` of that one line). Pushed: that commit is on the branch's
upstream, as of the last fetch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import orjson

from ..base.errors import AmbiguousIdError, EngramError, NotFoundError, UsageError
from ..base.validation import reference
from ..storage import events as ev
from ..storage.local import WriterState

if TYPE_CHECKING:
    from ..storage.store import Store
    from .workspace import Workspace

MIN_PREFIX = 4
WordState = Literal["indexed", "pending", "missing"]
VectorState = Literal["saved", "pending", "missing", "off"]


@dataclass(frozen=True)
class Indexed:
    """Whether the search indexes hold a memory as this event left it."""

    memory: str
    words: WordState  # pending: the next search adds it
    vectors: VectorState  # pending: searches score it from the embedding cache until saved


@dataclass(frozen=True)
class Receipt:
    """What became of one event: where it is, its commit, whether that is pushed."""

    event: str
    kind: str
    store: str
    file: str  # relative to the store
    line: int
    committed: str | None  # the commit that holds its line, or None
    branch: str | None  # the branch HEAD is on (None: detached, or no repository yet)
    upstream: str | None  # the branch's upstream (origin/main), if it has one
    pushed: bool | None  # the commit is on the upstream (as of the last fetch); None: no remote
    next: str  # what is still to happen to it, and what makes it happen ("" when pushed)
    indexed: Indexed | None = None  # for a memory's event, when asked (`engram status ID`)

    def summary(self) -> str:
        """One line: `fxf51mfs at events/2026/12/box-1a2b.jsonl:4 (project store); not
        committed yet (batched)`; `engram status ID` says the rest."""
        where = f"{self.event[-8:].lower()} at {self.file}:{self.line} ({self.store} store)"
        if self.committed is None:
            why = (
                "commit.auto is off"
                if self.next.startswith("commit.auto")
                else "HEAD is detached"
                if self.next.startswith("HEAD")
                else "batched; `engram commit` commits now"
            )
            return f"{where}; not committed yet ({why})"
        state = f"{where}; committed in {self.committed[:8]}"
        if self.pushed:
            return f"{state}, pushed to {self.upstream}"
        return f"{state}, not pushed ({'no remote' if self.pushed is None else '`engram push`'})"


class Receipts:
    """Receipts over a workspace's stores."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def written(self, since: int = 0) -> list[Receipt]:
        """Receipts for the substantive events this workspace appended after the first `since`
        it noted (`mark()`), oldest first: what a write command wrote, without the session
        events that rode along."""
        import pygit2

        written = list(self.workspace.written)[since:]
        stores: dict[str, _Git | str] = {}
        out = []
        for store, event, rel, line in written:
            if not ev.substantive(event.kind):
                continue
            state = stores.get(str(store.root))
            if state is None:
                try:
                    state = _Git(self.workspace, store)
                except (EngramError, OSError, pygit2.GitError) as exc:
                    # The event is written and durable; only what git says of it is unknown.
                    state = f"git could not be read ({ev.one_line(exc, 200)})"
                stores[str(store.root)] = state
            out.append(
                state.receipt(event.id, event.kind, rel, line)
                if isinstance(state, _Git)
                else Receipt(
                    event.id, event.kind, store.kind, rel, line, None, None, None, None, state
                )
            )
        return out

    def mark(self) -> int:
        """Where the workspace's note of written events stands now (for `written(since=)`)."""
        return len(self.workspace.written)

    def status(self, ident: str) -> Receipt:
        """The receipt of any event by id (or a unique prefix of 4 characters or more, or the
        end of its id as `engram log` shows it), with whether the search indexes hold it. A
        memory's id gives the receipt of its latest event."""
        ident = reference(ident, "event id")
        if len(ident) < MIN_PREFIX:
            raise UsageError(
                f"event id {ident!r} is too short; give at least {MIN_PREFIX} "
                "characters (`engram log` shows ids)"
            )
        matched = self.workspace.resolve(ident, what="any")
        found = [(store, full) for store, full, kind in matched if kind == "event"]
        memories = {(store.root, full): store for store, full, kind in matched if kind == "memory"}
        if not found and len(memories) == 1:  # a memory's id: the receipt of its last change
            (_, full), store = next(iter(memories.items()))
            record = self.workspace.projection(store).memory(full)
            if record is not None and record.events:
                found = [(store, record.events[-1])]
        if not found:
            raise NotFoundError("event", ident)
        if len({full for _, full in found}) > 1:
            raise AmbiguousIdError(ident, sorted({full for _, full in found}))
        store, full = found[0]
        proj = self.workspace.projection(store)
        event = proj.event(full)
        places = proj.places(full)
        if event is None or not places:
            raise NotFoundError("event", ident)
        rel, line = places[0]
        receipt = _Git(self.workspace, store).receipt(full, event.kind, rel, line)
        memory = event.entity if event.kind.startswith("memory.") else None
        if memory is not None:
            receipt = _with_index(self.workspace, store, receipt, memory)
        return receipt


class _Git:
    """One store's repository, opened once for the receipts of one call."""

    def __init__(self, workspace: Workspace, store: Store) -> None:
        from ..git import repo as git

        self.workspace = workspace
        self.store = store
        self.repo = git.StoreRepo(store)
        raw = self.repo.repo
        self.branch = self.repo.branch()
        self.head = None if raw.head_is_unborn or raw.head_is_detached else raw.head.target
        self.upstream = self.upstream_target = None
        self.remotes = [r.name for r in raw.remotes]
        if self.head is not None:
            local = raw.branches.local.get(raw.head.shorthand)
            upstream = local.upstream if local is not None else None
            if upstream is not None:
                self.upstream, self.upstream_target = upstream.shorthand, upstream.target
        self.blobs: dict[str, list[bytes] | None] = {}

    def receipt(self, event_id: str, kind: str, rel: str, line: int) -> Receipt:
        commit = self.commit_of(event_id, rel, line)
        pushed: bool | None = None
        if commit is not None and self.upstream_target is not None:
            target = self.upstream_target
            pushed = str(target) == commit or self.repo.repo.descendant_of(target, commit)
        elif commit is not None and self.remotes:
            pushed = False
        return Receipt(
            event_id,
            kind,
            self.store.kind,
            rel,
            line,
            commit,
            self.branch,
            self.upstream,
            pushed,
            self.what_next(commit, pushed),
        )

    def lines(self, rel: str) -> list[bytes] | None:
        """The lines of the file as HEAD's tree holds it (None: not committed)."""
        import pygit2

        if rel not in self.blobs:
            tree = self.repo.head_tree()
            found: list[bytes] | None = None
            if tree is not None:
                try:
                    blob = tree[self.store.repo_path(rel)]
                except KeyError:
                    blob = None
                if isinstance(blob, pygit2.Blob):
                    found = blob.data.split(b"\n")
            self.blobs[rel] = found
        return self.blobs[rel]

    def commit_of(self, event_id: str, rel: str, line: int) -> str | None:
        import pygit2

        lines = self.lines(rel)
        if lines is None or not 0 < line <= len(lines) or not _holds(lines[line - 1], event_id):
            return None
        try:
            hunk = self.repo.repo.blame(
                self.store.repo_path(rel), min_line=line, max_line=line
            ).for_line(line)
            return str(hunk.final_commit_id)
        except (KeyError, IndexError, ValueError, pygit2.GitError):
            return str(self.head) if self.head is not None else None

    def what_next(self, commit: str | None, pushed: bool | None) -> str:
        if commit is None:
            if self.head is None and self.branch is None and not self.repo.repo.head_is_unborn:
                return "HEAD is detached: nothing is committed until `git switch <branch>`"
            settings = self.workspace.settings(self.store)
            if not settings["commit.auto"]:
                return "commit.auto is off: `engram commit` commits it"
            waiting = WriterState.load(self.store).pending
            return (
                f"batched: commit.every_events={settings['commit.every_events']} ({waiting} "
                f"waiting), commit.every_seconds={settings['commit.every_seconds']}, a "
                "handoff, or `engram commit`"
            )
        if pushed:
            return ""
        if pushed is None:
            return (
                "no remote to push to: `engram remote add NAME URL`"
                if self.store.kind == "personal"
                else "the repository has no remote to push to"
            )
        if self.upstream is None:
            return "the branch has no upstream yet: `engram push` pushes it and sets one"
        return f"`engram push` or `engram sync` pushes it to {self.upstream}"


def _holds(line: bytes, event_id: str) -> bool:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return isinstance(value, dict) and value.get("id") == event_id


def _with_index(workspace: Workspace, store: Store, receipt: Receipt, memory: str) -> Receipt:
    from dataclasses import replace

    from ..base import layout

    proj = workspace.projection(store)
    cache = layout.cache_dir(store.local_dir)
    words: WordState = (
        "missing"
        if not (cache / layout.TEXT_INDEX_DIR / "meta.json").exists()
        else "pending"
        if proj.is_dirty(memory, "text")
        else "indexed"
    )
    vectors: VectorState
    if workspace.settings(store)["search.model"] == "off":
        vectors = "off"
    elif not (cache / layout.VECTOR_META).exists():
        vectors = "missing"
    else:
        vectors = "pending" if proj.is_dirty(memory, "vec") else "saved"
    return replace(receipt, indexed=Indexed(memory, words, vectors))
