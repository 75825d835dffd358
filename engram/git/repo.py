"""Local git work through pygit2 (network work runs the git executable: `engram.git.sync`).

A commit takes exactly the store's own paths from the work tree and leaves everything else as it
was: the commit's tree is HEAD's tree with only those paths replaced, and the user's index gets
new entries for only those paths, written under git's own `index.lock` so that a concurrent
`git add` cannot be lost. The user's staged and unstaged changes are untouched.

Event files only ever grow. A commit takes each one up to its last complete line, and refuses a
file whose committed part was changed (that is damage, not an append): `engram verify` says why.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import re
import shlex
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pygit2
from pygit2.enums import FileMode, RepositoryState

from ..base.errors import GitError
from ..base.files import atomic_write
from ..base.layout import COMMITTED_STAT, EVENTS_DIR, TRACKED, local_dir
from ..storage import events as ev
from ..storage.store import Store, git_c

# The commits an operation under way brings in, named by files in the git directory.
OPERATION_HEADS = ("MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "REBASE_HEAD", "ORIG_HEAD")
_ACTOR_RE = re.compile(r"^\s*(?P<name>[^<>]*?)\s*<(?P<email>[^<>]*)>\s*$")


def restore_command(store: Store, rels: list[str]) -> str:
    """The git command that restores committed files (store-relative) as HEAD has them. Not
    `git checkout -- file`, which takes the index's copy and fails when the index lacks it."""
    paths = " ".join(shlex.quote(store.repo_path(rel)) for rel in rels)
    return f"{git_c(store)} checkout HEAD -- {paths}"


def read_blob(repo: pygit2.Repository, oid: pygit2.Oid | str) -> pygit2.Blob:
    """The blob `oid` names; KeyError when the repository holds no blob by that id."""
    found = repo[oid]
    if not isinstance(found, pygit2.Blob):
        raise KeyError(f"{oid} is not a blob")
    return found


def init_repository(path: Path) -> None:
    pygit2.init_repository(str(path), initial_head="main")


def open_repository(work_tree: Path) -> pygit2.Repository:
    try:
        return pygit2.Repository(str(work_tree))
    except pygit2.GitError as exc:
        raise GitError(f"{work_tree} is not a usable git repository ({exc})") from None


def git_identity(work_tree: Path) -> str | None:
    """`Name <email>` from the repository's git config (local, then global), if set."""
    try:
        config = pygit2.Repository(str(work_tree)).config
    except pygit2.GitError:
        return None
    name = config["user.name"] if "user.name" in config else None
    email = config["user.email"] if "user.email" in config else None
    if name and email:
        return f"{name} <{email}>"
    return name or None


def fallback_actor() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "user"
    return f"{user}@{ev.machine_name()}"


def signature(actor: str, when: int | None = None) -> pygit2.Signature:
    match = _ACTOR_RE.match(actor)
    if match and match["name"] and match["email"]:
        name, email = match["name"], match["email"]
    else:
        name = actor.strip() or "engram"
        email = re.sub(r"[^A-Za-z0-9._@+-]+", "-", name)
        if "@" not in email:
            email = f"{email}@{re.sub(r'[^A-Za-z0-9.-]+', '-', ev.machine_name())}"
    if when is None:
        return pygit2.Signature(name, email)
    return pygit2.Signature(name, email, when, 0)


@dataclass
class FileChange:
    rel: str  # store-relative path
    data: bytes  # what the commit will hold
    new_events: list[ev.Event] = field(default_factory=list)


@dataclass
class Pending:
    """What a commit would take from the work tree right now."""

    changes: list[FileChange] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # files whose committed part changed
    # Files whose uncommitted lines hold one readers skip: committed once it is set aside.
    unreadable: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # in HEAD, gone from the work tree

    @property
    def events(self) -> list[ev.Event]:
        return [e for change in self.changes for e in change.new_events]

    @property
    def problems(self) -> tuple[list[str], list[str]]:
        """The files refused and those held back (`refused`, `unreadable`), as a commit says."""
        return self.refused, self.unreadable


class StoreRepo:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.repo = open_repository(store.work_tree)

    # -- reading ---------------------------------------------------------------------------

    def blob(self, oid: pygit2.Oid | str) -> pygit2.Blob:
        """The blob `oid` names (KeyError: none)."""
        return read_blob(self.repo, oid)

    def head_tree(self) -> pygit2.Tree | None:
        if self.repo.head_is_unborn:
            return None
        return self.repo.head.peel(pygit2.Commit).tree

    def versions(self, rel: str) -> list[bytes]:
        """The file `rel` as anyone else may hold it: at HEAD, in the index (each side of a
        conflict too), in the commits an operation under way brings in (a merge's MERGE_HEAD,
        a cherry-pick's, ...), at the tip of every ref (branches, remote branches, tags) and in
        each stash. A line in any of them is someone's, not only this work tree's."""
        trees: set[pygit2.Oid] = set()
        blobs: set[pygit2.Oid] = set()

        def take(target: object) -> None:
            try:
                tree = self.repo[str(target)].peel(pygit2.Commit).tree
            except (KeyError, ValueError, pygit2.GitError):
                return  # not a commit, or not in this clone
            if tree.id not in trees:
                trees.add(tree.id)
                if (blob := self._blob(tree, rel)) is not None:
                    blobs.add(blob.id)

        if not self.repo.head_is_unborn:
            take(self.repo.head.target)
        git_dir = Path(self.repo.path)
        for name in OPERATION_HEADS:
            try:
                text = (git_dir / name).read_text(errors="replace")
            except OSError:
                continue
            for word in text.split():
                if re.fullmatch(r"[0-9a-f]{40}([0-9a-f]{24})?", word):
                    take(word)
        for name in self.repo.references:
            try:
                take(self.repo.references[name].resolve().target)
            except (KeyError, pygit2.GitError):
                continue
        with contextlib.suppress(KeyError, pygit2.GitError):
            for entry in self.repo.references["refs/stash"].log():
                take(entry.oid_new)
        path = self.store.repo_path(rel)
        with contextlib.suppress(pygit2.GitError):
            index = self.repo.index
            for entry in index:
                if entry.path == path:
                    blobs.add(entry.id)
            for sides in index.conflicts or ():
                blobs.update(e.id for e in sides if e is not None and e.path == path)
        found = (self.repo.get(oid) for oid in blobs)
        return [blob.data for blob in found if isinstance(blob, pygit2.Blob)]

    def branch(self) -> str | None:
        if self.repo.head_is_unborn:
            target = self.repo.references["HEAD"].target
            return str(target).removeprefix("refs/heads/")
        if self.repo.head_is_detached:
            return None
        return self.repo.head.shorthand

    def head_id(self) -> str | None:
        return None if self.repo.head_is_unborn else str(self.repo.head.target)

    def busy(self) -> str | None:
        """Why git is in no state to take a commit now, if it is not."""
        state = self.repo.state()
        if state == RepositoryState.NONE:
            return None
        return f"git is in the middle of a {state.name.lower().replace('_', ' ')}"

    def _blob(self, tree: pygit2.Tree | None, rel: str) -> pygit2.Blob | None:
        if tree is None:
            return None
        try:
            obj = tree[self.store.repo_path(rel)]
        except KeyError:
            return None
        return obj if isinstance(obj, pygit2.Blob) else None

    def _tracked_files(self) -> list[str]:
        found = []
        for name in TRACKED:
            path = self.store.root / name
            if name == EVENTS_DIR:
                found.extend(self.store.event_rels())
            elif path.is_dir():
                found.extend(
                    self.store.rel(p)
                    for p in sorted(path.rglob("*"))
                    if p.is_file() and not p.name.startswith(".")
                )
            elif path.is_file():
                found.append(name)
        return found

    def pending(self) -> Pending:
        tree = self.head_tree()
        committed = self.committed_event_files(tree) if tree is not None else {}
        result = Pending()
        on_disk = set()
        stat_cache = StatCache(self.store)
        root = self.store.root
        prefix = f"{root}{os.sep}"
        for rel in self._tracked_files():
            on_disk.add(rel)
            if rel.startswith(EVENTS_DIR + "/"):
                st = os.stat(prefix + rel)
                oid = committed.get(rel)
                if oid is not None and stat_cache.get(rel) == [
                    st.st_size,
                    st.st_mtime_ns,
                    st.st_ino,
                    str(oid),
                ]:
                    continue  # as committed, known from its stat: the blob is not even read
                path = root / rel
                blob = self.blob(oid) if oid is not None else None
                committed_size = blob.size if blob is not None else 0
                if st.st_size == committed_size:
                    if blob is not None and not self._same_as_committed(
                        path, rel, st, blob, stat_cache
                    ):
                        result.refused.append(rel)
                    continue
                data = path.read_bytes()
                size = len(data)
                if size < committed_size or (blob is not None and not data.startswith(blob.data)):
                    result.refused.append(rel)
                    continue
                complete = data[: data.rfind(b"\n") + 1]
                if len(complete) <= committed_size:
                    continue
                chunk = self.store.read_file(path, start=committed_size)
                if any(p.severity == "error" for p in chunk.problems):
                    result.unreadable.append(rel)
                    continue
                result.changes.append(
                    FileChange(rel, complete, [event for _, event in chunk.events])
                )
            else:
                data = (root / rel).read_bytes()
                blob = self._blob(tree, rel)
                if blob is None or blob.id != pygit2.hash(data):
                    result.changes.append(FileChange(rel, data))
        stat_cache.save()
        result.missing = [rel for rel in committed if rel not in on_disk]
        return result

    @staticmethod
    def _same_as_committed(
        path: Path, rel: str, st: os.stat_result, blob: pygit2.Blob, cache: StatCache
    ) -> bool:
        """Same size as committed: is it the same bytes? Hashes only when the stat changed."""
        key = [st.st_size, st.st_mtime_ns, st.st_ino, str(blob.id)]
        if cache.get(rel) == key:
            return True
        if pygit2.hash(path.read_bytes()) != blob.id:
            return False
        cache.put(rel, key)
        return True

    def committed_event_files(self, tree: pygit2.Tree) -> dict[str, pygit2.Oid]:
        """Every committed event file (store-relative path) and its blob's id, from one walk of
        the tree: no blob is read."""
        try:
            top = tree[self.store.repo_path(EVENTS_DIR)]
        except KeyError:
            return {}
        out: dict[str, pygit2.Oid] = {}

        def walk(node: pygit2.Tree, prefix: str) -> None:
            for entry in node:
                path = f"{prefix}/{entry.name}"
                child = self.repo[entry.id] if entry.type_str == "tree" else None
                if isinstance(child, pygit2.Tree):
                    walk(child, path)
                elif (entry.name or "").endswith(".jsonl"):
                    out[path] = entry.id

        if isinstance(top, pygit2.Tree):
            walk(top, EVENTS_DIR)
        return out

    # -- writing ---------------------------------------------------------------------------

    def commit(
        self,
        pending: Pending,
        *,
        message: Callable[[list[ev.Event]], str],
        author: str,
    ) -> str | None:
        """Commit `pending` (from `pending()`, taken under the store's write lock).

        Returns the new commit id, or None when there was nothing to commit.
        """
        if not pending.changes:
            return None
        reason = self.busy()
        if reason:
            raise GitError(f"{reason}; finish it, then run `engram commit`")
        if self.repo.head_is_detached:
            # A commit here would belong to no branch: the next checkout would leave it behind.
            kept = (
                f"the {len(pending.events)} new event(s) are saved on disk"
                if pending.events
                else "the changes stay in the work tree"
            )
            raise GitError(
                f"HEAD of {self.store.work_tree} is detached, so nothing was "
                f"committed ({kept}); switch to a branch with "
                "`git switch <branch>` (or `git switch -c <name>` for a new one), "
                "then run `engram commit`"
            )
        events = pending.events
        authors = Counter(e.actor for e in events) or Counter([author])
        main_actor = authors.most_common(1)[0][0]
        text = message(events)
        others = [a for a in authors if a != main_actor]
        if others:
            text += "\n\n" + "\n".join(f"Co-authored-by: {a}" for a in others)
        author_sig = signature(main_actor)
        committer = signature(git_identity(self.store.work_tree) or author)

        entries = [
            (self.store.repo_path(c.rel), self.repo.create_blob(c.data)) for c in pending.changes
        ]
        tree = self.head_tree()
        index = pygit2.Index()
        if tree is not None:
            index.read_tree(tree)
        for path, oid in entries:
            index.add(pygit2.IndexEntry(path, oid, FileMode.BLOB))
        new_tree = index.write_tree(self.repo)
        parents = [] if self.repo.head_is_unborn else [self.repo.head.target]

        with IndexLock(self.repo) as user_index:
            try:
                oid = self.repo.create_commit(
                    "HEAD", author_sig, committer, text, new_tree, parents
                )
            except (pygit2.GitError, ValueError) as exc:
                kept = (
                    "the events are safe on disk"
                    if pending.events
                    else "the changes stay in the work tree"
                )
                raise GitError(
                    f"could not commit ({exc}); {kept}, retry with `engram commit`"
                ) from None
            for path, blob_id in entries:
                user_index.add(pygit2.IndexEntry(path, blob_id, FileMode.BLOB))
        # Remember what was committed by stat, so the next look reads nothing it need not.
        cache = StatCache(self.store)
        for change, (_, blob_id) in zip(pending.changes, entries, strict=True):
            if change.rel.startswith(EVENTS_DIR + "/"):
                try:
                    st = (self.store.root / change.rel).stat()
                except FileNotFoundError:
                    continue
                if st.st_size == len(change.data):
                    cache.put(change.rel, [st.st_size, st.st_mtime_ns, st.st_ino, str(blob_id)])
        cache.save()
        return str(oid)

    # -- remotes ---------------------------------------------------------------------------

    def upstream_state(self) -> dict[str, object] | None:
        """Ahead/behind of the current branch against its upstream, as of the last fetch."""
        if self.repo.head_is_unborn or self.repo.head_is_detached:
            return None
        branch = self.repo.branches.local.get(self.repo.head.shorthand)
        upstream = branch.upstream if branch is not None else None
        if branch is None or upstream is None:
            return None
        ahead, behind = self.repo.ahead_behind(branch.target, upstream.target)
        return {"upstream": upstream.shorthand, "ahead": ahead, "behind": behind}

    def remotes(self) -> list[dict[str, str]]:
        return [{"name": r.name or "", "url": r.url or ""} for r in self.repo.remotes]


class StatCache:
    """Event files already checked against their committed blob, by stat (like git's index)."""

    def __init__(self, store: Store) -> None:
        self.path = store.local_dir / COMMITTED_STAT
        try:
            self.entries: dict[str, list[Any]] = orjson.loads(self.path.read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            self.entries = {}
        self.dirty = False

    def get(self, rel: str) -> list[Any] | None:
        return self.entries.get(rel)

    def put(self, rel: str, key: list[Any]) -> None:
        self.entries[rel] = key
        self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        try:
            atomic_write(self.path, orjson.dumps(self.entries), durable=False)
        except OSError:
            pass  # only a cache; a read-only store is still readable


class IndexLock:
    """Git's own protocol for changing the index: hold `index.lock`, write it, rename it over.

    Only Engram's entries change; every other entry (the user's staged work) is kept as read.
    """

    def __init__(self, repo: pygit2.Repository) -> None:
        self.git_dir = Path(repo.path)
        self.index_path = self.git_dir / "index"
        self.lock_path = self.git_dir / "index.lock"
        self.work_copy = local_dir(self.git_dir) / f"index.{os.getpid()}.tmp"
        self.fd: int | None = None
        self.index: pygit2.Index | None = None

    def __enter__(self) -> pygit2.Index:
        try:
            self.fd = os.open(self.lock_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            raise GitError(
                f"{self.lock_path} exists: another git process is running (or crashed); "
                "the events are safe on disk and will be committed on a later write or "
                "`engram commit`"
            ) from None
        self.work_copy.parent.mkdir(parents=True, exist_ok=True)
        if self.index_path.exists():
            self.work_copy.write_bytes(self.index_path.read_bytes())
        else:
            self.work_copy.unlink(missing_ok=True)
        self.index = pygit2.Index(str(self.work_copy))
        return self.index

    def __exit__(self, exc_type: object, *rest: object) -> None:
        assert self.fd is not None and self.index is not None
        try:
            if exc_type is None:
                self.index.write()
                data = self.work_copy.read_bytes()
                written = 0
                while written < len(data):
                    written += os.write(self.fd, data[written:])
                os.fsync(self.fd)
                os.close(self.fd)
                self.fd = None
                os.replace(self.lock_path, self.index_path)
        finally:
            if self.fd is not None:
                os.close(self.fd)
                self.lock_path.unlink(missing_ok=True)
            self.work_copy.unlink(missing_ok=True)
