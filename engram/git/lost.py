"""Events that git took away, noticed and brought back.

Git deletes files Engram wrote: `git clean` and `git stash -u` take uncommitted event files (they
are untracked until Engram commits them), `git worktree remove --force` takes a whole work tree,
and `git reset --hard`, `git revert` or a `git pull --rebase` after someone else's force-push drop
committed ones. Nothing in the event files can say what is missing from them, so Engram keeps a
ledger of the events that could go missing (`engram.storage.ledger`): every line this clone's
writer appends, and every event the read model drops because its file vanished. An event noted
there that is in neither the store nor the tip of any branch, tag or remote branch (in any of
its files: compaction folds the file it was noted in into another) is lost:
`status` and `doctor` count it, and `recover` writes it back. Lines cut from a file that is still
there count the same: this clone's writer noted them, the read model noted them as it dropped
them, or a commit on HEAD's history cut them (`engram.git.cuts` notes those).

Recovery reads the event lines back from git where they are: the reflogs of HEAD and every ref,
the entries of `git stash list` (their untracked-files commits included), and the objects `git
fsck --unreachable --no-reflogs` names (dropped stashes, rewritten commits), then from the ledger
for what git never had. Every line goes through `lines.classify`; events keep their ids, clocks
and bytes, and are appended to new files of this clone's writer and committed as usual. History
is never rewritten.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..base.layout import EVENTS_DIR
from ..storage import events as ev
from ..storage import lines
from ..storage.ledger import Noted, ledgers, plain, read_ledger, unique
from ..storage.ledger import settle as settle
from . import cuts

if TYPE_CHECKING:
    import pygit2

    from ..readmodel.projection import Projection
    from ..storage.store import Store

MAX_BLOB_BYTES = 64 * 1024 * 1024  # an unreachable blob larger than this is not an event file


# -- what is lost ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LostReport:
    """Events seen in this store that are gone from it and from every branch."""

    events: tuple[Noted, ...] = ()
    elsewhere: int = 0  # noted events gone from here but still on another branch or tag
    unrecorded: int = 0  # uncommitted events whose file is gone, with no copy noted anywhere
    unrecorded_file: str | None = None

    @property
    def count(self) -> int:
        return len(self.events) + self.unrecorded

    @property
    def files(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for item in self.events:
            out[item.rel] = out.get(item.rel, 0) + 1
        if self.unrecorded and self.unrecorded_file:
            out[self.unrecorded_file] = out.get(self.unrecorded_file, 0) + self.unrecorded
        return dict(sorted(out.items()))

    def to_dict(self) -> dict[str, Any]:
        return {"events": self.count, "files": self.files, "elsewhere": self.elsewhere}


class _Trees:
    """Which event ids the tips of the repository's refs hold, file by file (read lazily)."""

    def __init__(self, store: Store, repo: pygit2.Repository) -> None:
        self.store = store
        self.repo = repo
        self.head = _tree_of(repo, "HEAD")
        self.others: list[pygit2.Tree] = []
        current = None if repo.head_is_unborn or repo.head_is_detached else repo.head.name
        for name in repo.references:
            if (
                name == current
                or name == "refs/stash"
                or not name.startswith(("refs/heads/", "refs/remotes/", "refs/tags/"))
            ):
                continue
            tree = _tree_of(repo, name)
            if tree is not None:
                self.others.append(tree)
        self._ids: dict[str, set[str]] = {}
        self._all: set[str] | None = None
        self._head_all: set[str] | None = None

    def _holds(self, tree: pygit2.Tree | None, rel: str, event_id: str) -> bool:
        import pygit2

        if tree is None:
            return False
        try:
            blob = tree[self.store.repo_path(rel)]
        except (KeyError, ValueError):
            return False
        if not isinstance(blob, pygit2.Blob):
            return False
        key = str(blob.id)
        if key not in self._ids:
            self._ids[key] = {e.id for e in _events_in(blob.data)}
        return event_id in self._ids[key]

    def all_ids(self, repo: pygit2.Repository) -> set[str]:
        """Every event id in the tips, whatever its file (read once)."""
        if self._all is None:
            found = Found()
            for tree in (self.head, *self.others):
                events = _events_tree(self.store, tree) if tree is not None else None
                if events is not None:
                    _walk(repo, events, found)
            self._all = set(found.lines)
        return self._all

    def in_head(self, rel: str, event_id: str) -> bool:
        return self._holds(self.head, rel, event_id)

    def in_head_anywhere(self, event_id: str) -> bool:
        """Whether HEAD holds the event in any file: compaction folds a month's files into one,
        so an event noted in a file that is gone may be in HEAD under another name."""
        if self._head_all is None:
            found = Found()
            events = _events_tree(self.store, self.head) if self.head is not None else None
            if events is not None:
                _walk(self.repo, events, found)
            self._head_all = set(found.lines)
        return event_id in self._head_all

    def elsewhere(self, rel: str, event_id: str) -> bool:
        return any(self._holds(tree, rel, event_id) for tree in self.others)


def _tree_of(repo: pygit2.Repository, name: str) -> pygit2.Tree | None:
    import pygit2

    try:
        return repo.revparse_single(name).peel(pygit2.Tree)
    except (KeyError, ValueError, pygit2.GitError):
        return None


def _events_in(data: bytes) -> Iterator[ev.Event]:
    for line in lines.read(data)[0]:
        if line.problem is None and line.event is not None:
            yield line.event


def find(store: Store, proj: Projection) -> LostReport:
    """What is lost from `store` now (`proj` is its read model, refreshed)."""
    from ..storage.local import WriterState

    repo = _open(store)
    if repo is not None:
        try:
            cuts.note_cuts(store, repo)  # lines a commit cut from a file count as lost too
        except Exception:  # noqa: BLE001 (never fails the caller: only a cut goes unnoticed)
            pass
    noted = unique(n for worktree, path in ledgers(store) for n in read_ledger(worktree, path))
    present = proj.present({n.event.id for n in noted})
    candidates = [n for n in noted if n.event.id not in present]
    lost: list[Noted] = []
    elsewhere = 0
    if candidates:
        trees = _Trees(store, repo) if repo is not None else None
        on_disk: dict[str, set[str] | None] = {}
        for item in candidates:
            if item.rel not in on_disk:
                on_disk[item.rel] = _ids_on_disk(store, item.rel)
            held = on_disk[item.rel]
            if held is not None and item.event.id in held:
                continue  # still in its file (read or not): `verify` and `doctor` report it
            if trees is not None and trees.in_head(item.rel, item.event.id):
                continue  # committed, gone from the work tree only: `doctor` says how to restore
            if trees is not None and trees.elsewhere(item.rel, item.event.id):
                elsewhere += 1
                continue
            if trees is not None and trees.in_head_anywhere(item.event.id):
                continue  # folded by compaction into a file that is itself missing
            if trees is not None and repo is not None and item.event.id in trees.all_ids(repo):
                elsewhere += 1  # folded into a file of another branch
                continue
            lost.append(item)
    unrecorded, unrecorded_file = 0, None
    state = WriterState.load(store)
    if (
        state.pending > 0
        and state.segment
        and _file_gone(store, state)
        and not any(item.rel == state.segment for item in lost)
    ):
        unrecorded, unrecorded_file = state.pending, state.segment
    return LostReport(tuple(lost), elsewhere, unrecorded, unrecorded_file)


def _ids_on_disk(store: Store, rel: str) -> set[str] | None:
    """The ids of the events in a file of the work tree (any line that parses), or None if the
    file is not there."""
    try:
        data = (store.root / rel).read_bytes()
    except OSError:
        return None
    return {e.id for e in _events_in(data)}


def _file_gone(store: Store, state: Any) -> bool:
    """The writer's uncommitted file is missing. (Lines cut from a file that is there are in
    the ledger, each counted on its own.)"""
    return not (store.root / state.segment).exists()


def _open(store: Store) -> pygit2.Repository | None:
    from ..base.errors import EngramError
    from . import repo as git

    try:
        return git.open_repository(store.work_tree)
    except EngramError:
        return None


# -- bringing them back --------------------------------------------------------------------------


@dataclass
class Found:
    """Event lines found in git, by id (the first copy found wins)."""

    lines: dict[str, tuple[ev.Event, bytes]] = field(default_factory=dict)
    blobs: set[str] = field(default_factory=set)
    trees: set[str] = field(default_factory=set)

    def add_blob(self, blob: Any) -> None:
        key = str(blob.id)
        if key in self.blobs:
            return
        self.blobs.add(key)
        if blob.size > MAX_BLOB_BYTES:
            return
        data = blob.data
        if not data.startswith(b"{"):
            return  # not an event file; unreachable blobs are any file the repository had
        for line in lines.read(data)[0]:
            if line.problem is None and line.event is not None:
                self.lines.setdefault(line.event.id, (line.event, plain(line.raw)))


def _events_tree(store: Store, tree: pygit2.Tree) -> pygit2.Tree | None:
    import pygit2

    try:
        top = tree[store.repo_path(EVENTS_DIR)]
    except KeyError:
        return None
    return top if isinstance(top, pygit2.Tree) else None


def _walk(repo: pygit2.Repository, tree: pygit2.Tree, found: Found) -> None:
    import pygit2

    stack = [tree]
    while stack:
        node = stack.pop()
        if str(node.id) in found.trees:
            continue
        found.trees.add(str(node.id))
        for entry in node:
            obj = repo[entry.id]
            if isinstance(obj, pygit2.Tree):
                stack.append(obj)
            elif isinstance(obj, pygit2.Blob) and (entry.name or "").endswith(".jsonl"):
                found.add_blob(obj)


def _commit_trees(repo: pygit2.Repository, oid: Any) -> Iterator[pygit2.Tree]:
    """The tree of a commit, and for a stash, those of its index and untracked-files parents."""
    import pygit2

    try:
        commit = repo[oid]
    except (KeyError, ValueError):
        return
    if not isinstance(commit, pygit2.Commit):
        return
    yield commit.tree
    if len(commit.parent_ids) >= 2:
        for parent in commit.parent_ids[1:3]:
            try:
                other = repo[parent]
            except (KeyError, ValueError):
                continue
            if isinstance(other, pygit2.Commit) and other.message.startswith(
                ("index on ", "untracked files on ", "On ")
            ):
                yield other.tree


def search_reflogs(
    store: Store, repo: pygit2.Repository, found: Found, *, rels: Collection[str] | None = None
) -> None:
    """Event files in every commit the reflogs of HEAD and of every ref name (stashes too):
    only the files `rels` (store-relative) when given, else all of them."""
    import pygit2

    paths = None if rels is None else sorted({store.repo_path(rel) for rel in rels})

    names = ["HEAD", *repo.references]
    seen: set[str] = {"0" * 40}
    for name in names:
        try:
            entries = list(repo.references[name].log())
        except (KeyError, ValueError, pygit2.GitError):
            continue
        for entry in entries:
            for oid in (entry.oid_new, entry.oid_old):
                if str(oid) in seen:
                    continue
                seen.add(str(oid))
                for tree in _commit_trees(repo, oid):
                    if paths is not None:
                        for path in paths:
                            try:
                                obj = tree[path]
                            except (KeyError, ValueError):
                                continue
                            if isinstance(obj, pygit2.Blob):
                                found.add_blob(obj)
                        continue
                    events = _events_tree(store, tree)
                    if events is not None:
                        _walk(repo, events, found)


def search_unreachable(store: Store, repo: pygit2.Repository, found: Found) -> str | None:
    """Event lines in the objects no ref reaches (`git fsck --unreachable --no-reflogs`):
    dropped stashes, commits a rebase or reset left behind. Returns why it could not run."""
    import pygit2

    from ..base.errors import EngramError
    from .sync import run_git, why_failed

    try:
        done = run_git(
            store.work_tree,
            "fsck",
            "--connectivity-only",
            "--unreachable",
            "--no-reflogs",
            "--no-progress",
        )
    except (EngramError, OSError) as exc:
        return str(exc)
    if done.returncode not in (0, 1) and not done.stdout:
        return why_failed(done)
    for row in done.stdout.splitlines():
        parts = row.split()
        if len(parts) != 3 or parts[0] not in ("unreachable", "dangling"):
            continue
        try:
            obj = repo[parts[2]]
        except (KeyError, ValueError):
            continue
        if isinstance(obj, pygit2.Commit):
            for tree in _commit_trees(repo, obj.id):
                events = _events_tree(store, tree)
                if events is not None:
                    _walk(repo, events, found)
        elif isinstance(obj, pygit2.Blob):
            found.add_blob(obj)
    return None


@dataclass(frozen=True)
class Recovered:
    """What `recover` did for one store."""

    store: str
    events: int  # written back
    files: tuple[str, ...]  # the new event files holding them
    from_git: int  # of which git still had (the rest came from the ledger)
    missing: int  # lost, but no copy found anywhere
    commit: str | None = None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "events": self.events,
            "files": list(self.files),
            "from_git": self.from_git,
            "missing": self.missing,
            "commit": self.commit,
            "notes": list(self.notes),
        }


def gather(
    store: Store, proj: Projection, *, everything: bool = False
) -> tuple[list[tuple[ev.Event, bytes]], int, int, list[str]]:
    """The lines to write back: (event, line) for each lost event (with `everything`, also each
    event git still holds that is in neither the store nor a branch), how many came from git,
    how many could not be found, and notes."""
    report = find(store, proj)
    notes: list[str] = []
    wanted = {item.event.id: item for item in report.events}
    repo = _open(store)
    found = Found()
    if repo is not None and (wanted or report.unrecorded or everything):
        # Where the lost events were is known: only those files are looked up in each commit.
        search_reflogs(
            store,
            repo,
            found,
            rels=None if everything or report.unrecorded else {item.rel for item in report.events},
        )
        if everything or report.unrecorded or any(i not in found.lines for i in wanted):
            why = search_unreachable(store, repo, found)
            if why:
                notes.append(f"could not search unreachable objects: {why}")
    out: dict[str, tuple[ev.Event, bytes]] = {}
    from_git = 0
    for event_id, item in wanted.items():
        if event_id in found.lines:
            out[event_id] = found.lines[event_id]
            from_git += 1
        else:
            out[event_id] = (item.event, item.raw)
    if everything or report.unrecorded:
        extra = [i for i in found.lines if i not in out]
        present = proj.present(set(extra))
        trees = _Trees(store, repo) if repo is not None else None
        for event_id in extra:
            if event_id in present:
                continue
            if trees is not None and _on_a_branch(store, repo, trees, event_id):
                continue
            out[event_id] = found.lines[event_id]
            from_git += 1
    missing = max(0, report.unrecorded - (len(out) - len(wanted))) if not everything else 0
    return sorted(out.values(), key=lambda pair: pair[0].sort_key), from_git, missing, notes


def _on_a_branch(store: Store, repo: Any, trees: _Trees, event_id: str) -> bool:
    """Is the event in the tip of HEAD or of any branch, tag or remote branch (any file)?"""
    return event_id in trees.all_ids(repo)


def runs(found: list[tuple[ev.Event, bytes]]) -> list[list[tuple[ev.Event, bytes]]]:
    """Split events (sorted by clock) into files: one month per file, as the writer does, and
    clocks strictly increasing within each (`engram verify` requires it of every file)."""
    out: list[list[tuple[ev.Event, bytes]]] = []
    open_runs: dict[str, list[list[tuple[ev.Event, bytes]]]] = {}
    for pair in found:
        month = f"{ev.parse_time(pair[0].time):%Y-%m}"
        for run in open_runs.setdefault(month, []):
            if run[-1][0].clock < pair[0].clock:
                run.append(pair)
                break
        else:
            run = [pair]
            open_runs[month].append(run)
            out.append(run)
    return out
