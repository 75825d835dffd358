"""What a store knew at a commit, a tag or a date, from git history alone.

`engram resume --at REV` and `engram recall --at REV` answer "what did the agent know when it
made this change?" in a review. The store's committed files at that commit are written out to
`<git-dir>/engram/asof/<commit>/`, a store of its own with its own caches (a commit never
changes, so it is made once and kept; the five most recently used are kept). Its vectors come
from the live store's embedding cache, so texts embedded before are not embedded again.

The files come from git objects, which anyone who can push may have written: only regular
files with plain names are written out (a link is never followed), and every line is read by
the same classifier as any other.
"""

from __future__ import annotations

import os
import shutil
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from ..base.errors import UsageError, quote
from ..base.layout import (
    ASOF_DIR,
    ASOF_MARK,
    CONFIG_FILE,
    EMBEDDINGS_DB,
    EVENTS_DIR,
    cache_dir,
    local_dir,
)
from ..storage.store import Store

KEEP = 5  # snapshots kept per store, most recently used first


def named(store: Store, rev: str) -> Any | None:
    """The commit `rev` names in the store's repository (a commit, tag or branch), or None."""
    import pygit2

    from .repo import open_repository

    repo = open_repository(store.work_tree)
    try:
        return repo.revparse_single(rev).peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
        return None


def last_before(store: Store, moment: datetime) -> Any | None:
    """The last commit on HEAD at or before `moment`, or None."""
    import pygit2

    from .repo import open_repository

    repo = open_repository(store.work_tree)
    if repo.head_is_unborn:
        return None
    limit = moment.timestamp()
    for commit in repo.walk(repo.head.target, pygit2.enums.SortMode.TIME):
        if commit.commit_time <= limit:
            return commit
    return None


def snapshot(store: Store, commit: Any) -> Store:
    """The store as it was at `commit`, as a store of its own (made once, then reused)."""
    import pygit2

    home = store.local_dir / ASOF_DIR
    target = home / str(commit.id)
    root = target if store.kind == "personal" else target / store.prefix
    if not (local_dir(target / ".git") / ASOF_MARK).exists():
        tree = commit.tree
        if store.prefix:
            try:
                tree = tree[store.prefix]
            except KeyError:
                raise UsageError(
                    f"there was no project store at {str(commit.id)[:8]}; give a "
                    "later commit or date"
                ) from None
            if not isinstance(tree, pygit2.Tree):
                raise UsageError(f"{store.prefix} was not a folder at {str(commit.id)[:8]}")
        tmp = home / f".{commit.id}.{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        pygit2.init_repository(str(tmp))
        out = tmp if store.kind == "personal" else tmp / store.prefix
        out.mkdir(parents=True, exist_ok=True)
        for entry in tree:
            if entry.name == CONFIG_FILE and entry.filemode == pygit2.enums.FileMode.BLOB:
                (out / CONFIG_FILE).write_bytes(entry.data)
            elif entry.name == EVENTS_DIR and isinstance(entry, pygit2.Tree):
                _write_tree(entry, out / EVENTS_DIR)
        local_dir(tmp / ".git").mkdir(parents=True, exist_ok=True)
        (local_dir(tmp / ".git") / ASOF_MARK).write_text(
            f'{{"commit": "{commit.id}", "store": "{store.kind}"}}\n', encoding="utf-8"
        )
        try:
            os.replace(tmp, target)
        except OSError:  # another process made it first
            shutil.rmtree(tmp, ignore_errors=True)
    os.utime(target)
    _prune(home, keep=target)
    found = Store(root, store.kind)
    found.shared_embeddings = cache_dir(store.local_dir) / EMBEDDINGS_DB
    return found


def _write_tree(tree: Any, folder: Path) -> None:
    import pygit2

    folder.mkdir(parents=True, exist_ok=True)
    for entry in tree:
        name = entry.name
        if name in (".", "..", ".git") or "/" in name or "\0" in name:
            continue
        if isinstance(entry, pygit2.Tree):
            _write_tree(entry, folder / name)
        elif entry.filemode in (pygit2.enums.FileMode.BLOB, pygit2.enums.FileMode.BLOB_EXECUTABLE):
            (folder / name).write_bytes(entry.data)


def _prune(home: Path, *, keep: Path) -> None:
    kept = sorted(
        (p for p in home.iterdir() if p.is_dir() and not p.name.startswith(".")),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in kept[KEEP:]:
        if old != keep:
            shutil.rmtree(old, ignore_errors=True)
    for stale in home.glob(".*.tmp"):
        if time.time() - stale.stat().st_mtime > 3600:
            shutil.rmtree(stale, ignore_errors=True)


def describe(commit: Any) -> str:
    """`a1b2c3d4 (2026-11-30 17:02 UTC)`."""
    when = datetime.fromtimestamp(commit.commit_time).astimezone()
    return f"{str(commit.id)[:8]} ({when:%Y-%m-%d %H:%M %Z})"


def unknown(rev: str) -> UsageError:
    return UsageError(
        f"--at {quote(rev, 60)} names no commit, tag, branch or date in the stores' "
        "history; give one from `git log`, a tag, or a date like 2026-11-30"
    )
