"""Crash leftovers a killed commit or write leaves behind, and undoing them safely.

A commit killed half-way leaves git's lock files (`index.lock`, HEAD's and the branch refs'
locks) and git's index behind HEAD for Engram's files; a process killed mid-write leaves its
`<name>.<pid>.tmp` files. `recover_interrupted_commit` clears what no live process holds: the
write path runs it when a commit meets a lock, and `engram doctor --fix` runs it too.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base import layout
from ..base.errors import EngramError
from ..base.layout import CONFIG_FILE

if TYPE_CHECKING:
    from ..storage.store import Store


def process_alive(pid: int | None) -> bool:
    """Is a process with this pid running on this machine? (A zombie counts as gone.)"""
    # A pid read from an event is input: one no process can have (negative, zero, or past
    # what the kernel allows) is no process, rather than an OverflowError or a signal to a
    # process group.
    if not isinstance(pid, int) or isinstance(pid, bool) or not 0 < pid < 2**22:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError, ValueError):
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped) is as good as gone.
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().split(b") ", 1)[1][:1] != b"Z"
    except (OSError, IndexError):
        return True


def open_by(path: Path) -> list[int] | None:
    """The processes with `path` open, from /proc (Linux); None when that cannot be told."""
    proc = Path("/proc")
    if not (proc / "self" / "fd").is_dir():
        return None
    try:
        target = os.stat(path)
    except FileNotFoundError:
        return []
    pids = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for fd in (entry / "fd").iterdir():
                try:
                    st = os.stat(fd)
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
                    pids.append(int(entry.name))
                    break
        except OSError:
            continue
    return pids


def git_lock_files(store: Store) -> list[Path]:
    """Git's lock files a commit takes: the index, HEAD, the branch refs, packed-refs."""
    git_dir = store.git_dir
    common = git_dir
    if (git_dir / "commondir").is_file():  # a linked worktree
        common = (git_dir / (git_dir / "commondir").read_text().strip()).resolve()
    found = [
        path
        for path in (git_dir / "index.lock", git_dir / "HEAD.lock", common / "packed-refs.lock")
        if path.exists()
    ]
    heads = common / "refs" / "heads"
    if heads.is_dir():
        found += sorted(heads.rglob("*.lock"))
    return found


def temp_files(store: Store) -> Iterator[tuple[Path, int | None]]:
    """Engram's temporary files (`<name>.<pid>.tmp`), with the pid that wrote them."""
    cache = layout.cache_dir(store.local_dir)
    places = [store.local_dir, cache, cache / layout.TEXT_INDEX_DIR]
    for place in places:
        if not place.is_dir():
            continue
        for path in place.iterdir():
            parts = path.name.split(".")
            if len(parts) >= 3 and parts[-1] == "tmp" and parts[-2].isdigit() and path.is_file():
                yield path, int(parts[-2])
    if store.events_dir.is_dir():  # doctor's rewrites and compaction's merged files
        for path in store.events_dir.rglob(".*.tmp"):
            parts = path.name.split(".")
            if len(parts) >= 4 and parts[-2].isdigit() and path.is_file():
                yield path, int(parts[-2])
    config_tmp = store.root / f"{CONFIG_FILE}.tmp"
    if config_tmp.is_file():
        yield config_tmp, None


def open_repo(store: Store) -> Any:
    """The store's git repository (a `git.StoreRepo`), or None when git cannot open it."""
    from ..git import repo as git

    try:
        return git.StoreRepo(store)
    except EngramError:
        return None


def recover_interrupted_commit(store: Store, *, min_age: float = 2.0) -> str | None:
    """Undo what a commit killed half-way leaves: git's `index.lock` (when no process has it
    open and it is older than `min_age` seconds) and index entries of Engram's files behind
    HEAD. Returns what was done, or None when there was nothing safe to do. Call under the
    store's write lock."""
    done = []
    for lock in git_lock_files(store):
        try:
            age = time.time() - lock.stat().st_mtime
        except FileNotFoundError:
            continue
        if age < min_age or open_by(lock) != []:
            return None  # a git command at work, or no way to tell: leave it
        aside = (
            store.local_dir
            / layout.QUARANTINE_DIR
            / f"{lock.name}.{time.strftime('%Y%m%dT%H%M%S')}.{os.getpid()}"
        )
        aside.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(lock), aside)
        done.append(f"moved a stale {lock}, left by a killed commit, to {aside}")
        if lock.name == "index.lock":
            for path, pid in temp_files(store):
                if path.name.startswith("index.") and pid is not None and not process_alive(pid):
                    path.unlink(missing_ok=True)  # that commit's copy of the index
    repo = open_repo(store)
    behind = index_behind(store, repo) if repo is not None else []
    if behind:
        import pygit2

        from .repo import IndexLock

        tree = repo.head_tree()
        try:
            with IndexLock(repo.repo) as index:  # git's own protocol: index.lock, rename
                for rel in behind:
                    try:
                        entry = tree[rel]
                    except KeyError:  # folded by a compaction: gone from HEAD and from disk
                        index.remove(rel)
                        continue
                    index.add(pygit2.IndexEntry(rel, entry.id, entry.filemode))
            done.append(f"brought git's index up to the last commit for {len(behind)} file(s)")
        except EngramError as exc:
            done.append(f"could not update git's index: {exc}")
    return "; ".join(done) or None


def index_behind(store: Store, repo: Any) -> list[str]:
    """Engram's committed files whose entry in git's index differs from HEAD while the file in
    the work tree is exactly HEAD's, and event files the index still holds that neither HEAD
    nor the work tree has (a compaction killed before it updated the index): an interrupted
    commit, not the user's staging."""
    import pygit2

    tree = repo.head_tree()
    if tree is None:
        return []
    try:
        index = (
            pygit2.Index(str(store.git_dir / "index"))
            if (store.git_dir / "index").exists()
            else pygit2.Index()
        )
    except pygit2.GitError:
        return []
    top: Any = tree
    if store.prefix:
        try:
            top = tree[store.prefix]
        except KeyError:
            return []
    behind = []

    def walk(node: Any, prefix: str) -> None:
        for entry in node:
            path = f"{prefix}/{entry.name}" if prefix else entry.name
            if isinstance(entry, pygit2.Tree):
                walk(entry, path)
                continue
            try:
                if index[path].id == entry.id:
                    continue
            except KeyError:
                pass
            file = store.work_tree / path
            try:
                if file.is_file() and pygit2.hash(file.read_bytes()) == entry.id:
                    behind.append(path)
            except OSError:
                continue

    if isinstance(top, pygit2.Tree):
        walk(top, store.prefix)
    events = f"{store.prefix}/{layout.EVENTS_DIR}/" if store.prefix else f"{layout.EVENTS_DIR}/"
    for staged in index:
        path = staged.path
        if not path.startswith(events) or not path.endswith(".jsonl"):
            continue
        try:
            tree[path]
            continue  # in HEAD: the walk above judged it
        except KeyError:
            pass
        if not os.path.lexists(store.work_tree / path):
            behind.append(path)
    return behind
