"""A range of commits as git reads it (`A..B`, `A...B`, `A`), and the event lines a commit's
tree holds for a store, from git objects alone (no checkout, no cache).

`A..B` compares B with A; `A...B` compares B with the merge base of A and B (what the branch B
changed since it left A, as a pull request shows it); `A` alone is `A..HEAD`; an empty side is
HEAD. In a shallow clone the merge base may be cut off: B is then compared with A, and the range
says so. Trees come from whoever could push: only regular files named `*.jsonl` under the
store's `events/` are read, every line by the one classifier (`storage.lines`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..base.errors import UsageError, quote
from ..base.layout import EVENT_SUFFIX, EVENTS_DIR
from ..storage import lines
from ..storage.store import Store
from .repo import open_repository

MAX_FILES = 100_000  # event files read from one tree; a tree with more is not a store's


@dataclass
class Range:
    """What `engram diff` compares: `base` (None: nothing before) and `head`, as commits."""

    text: str
    base: Any | None
    head: Any
    notes: list[str] = field(default_factory=list)

    @property
    def base_id(self) -> str | None:
        return str(self.base.id) if self.base is not None else None

    @property
    def head_id(self) -> str:
        return str(self.head.id)


def split(text: str) -> tuple[str, str, bool]:
    """`(left, right, symmetric)` of `A..B` / `A...B` / `A` (then `A..HEAD`)."""
    if "..." in text:
        left, right = text.split("...", 1)
        symmetric = True
    elif ".." in text:
        left, right = text.split("..", 1)
        symmetric = False
    else:
        left, right, symmetric = text, "HEAD", False
    if ".." in right:
        raise UsageError(f"{quote(text, 60)} is not a range: give A..B, A...B or one revision")
    return left or "HEAD", right or "HEAD", symmetric


def default_base(store: Store) -> str:
    """The branch a pull request of the store's repository goes into: the one origin's HEAD
    names (the local branch of that name if there is one), else main, else master."""
    repo = open_repository(store.work_tree)
    origin = repo.references.get("refs/remotes/origin/HEAD")
    target = origin.target if origin is not None else None
    named = [target.removeprefix("refs/remotes/origin/")] if isinstance(target, str) else []
    for branch in [*named, "main", "master"]:
        for ref, name in (
            (f"refs/heads/{branch}", branch),
            (f"refs/remotes/origin/{branch}", f"origin/{branch}"),
        ):
            if repo.references.get(ref) is not None:
                return name
    raise UsageError(
        "this repository has neither main nor master, and origin names no default branch; "
        "give the range to compare, such as develop...HEAD"
    )


def _commit(repo: Any, rev: str, text: str) -> Any:
    import pygit2

    if rev.startswith("-"):
        raise UsageError(f"{quote(rev, 60)} is not a revision: give a branch, tag or commit")
    try:
        return repo.revparse_single(rev).peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
        shallow = (
            " (this clone is shallow: `git fetch --unshallow` brings the rest)"
            if repo.is_shallow
            else ""
        )
        raise UsageError(
            f"{quote(rev, 60)} in {quote(text, 60)} names no commit in this "
            f"repository{shallow}; give a branch, tag or commit from `git log`"
        ) from None


def resolve(store: Store, text: str) -> Range:
    """The commits `text` names in the store's repository. Raises UsageError for a range that
    names no commits."""
    import pygit2

    repo = open_repository(store.work_tree)
    left, right, symmetric = split(text)
    if repo.head_is_unborn and "HEAD" in (left, right):
        raise UsageError("the repository has no commits yet: commit, then compare")
    base = _commit(repo, left, text)
    head = _commit(repo, right, text)
    found = Range(text, base, head)
    if symmetric:
        try:
            merge = repo.merge_base(base.id, head.id)
        except pygit2.GitError:
            merge = None
        if merge is not None:
            found.base = repo[merge]
        elif repo.is_shallow:
            found.notes.append(
                f"this clone is shallow and the merge base of {left} and {right} "
                f"is not in it: {right} is compared with {left} itself (`git "
                "fetch --unshallow` shows what the branch alone changed)"
            )
        else:
            found.notes.append(
                f"{left} and {right} share no history: {right} is compared with {left} itself"
            )
    return found


def event_blobs(store: Store, commit: Any | None) -> Iterator[tuple[str, Any]]:
    """`(path, blob)` of every event file of the store in `commit`'s tree (path relative to
    the store root), regular files only."""
    import pygit2

    if commit is None:
        return
    tree = commit.tree
    try:
        for part in [*filter(None, store.prefix.split("/")), EVENTS_DIR]:
            tree = tree[part]
    except KeyError:
        return
    if not isinstance(tree, pygit2.Tree):
        return
    stack: list[tuple[str, Any]] = [(EVENTS_DIR, tree)]
    seen = 0
    while stack:
        where, folder = stack.pop()
        for entry in folder:
            name = entry.name
            if name in (".", "..", ".git") or "/" in name or "\0" in name:
                continue
            if isinstance(entry, pygit2.Tree):
                stack.append((f"{where}/{name}", entry))
            elif entry.filemode in (
                pygit2.enums.FileMode.BLOB,
                pygit2.enums.FileMode.BLOB_EXECUTABLE,
            ) and name.endswith(EVENT_SUFFIX):
                seen += 1
                if seen > MAX_FILES:
                    return
                yield f"{where}/{name}", entry


def read_lines(blob: Any) -> tuple[list[lines.Line], bool]:
    """The classified lines of an event file's blob, and whether it ended in a torn line."""
    found, torn = lines.read(blob.data)
    return found, bool(torn)
