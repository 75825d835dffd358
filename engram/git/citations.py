"""The files a memory cites, as git has them: a file's blob id in a commit's tree (one tree
lookup, no blob read), where a file went through renames, the commits that changed it since, and
its lines when a cited symbol is looked for.

`CodeAt` opens the repository of a work tree once and judges against one commit: HEAD, or a
revision given (`--at`). Nothing here reads the work tree's files: only what git committed.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pygit2

from .repo import open_repository


class CodeAt:
    """The repository of the work tree `top`, at `rev` (default HEAD)."""

    def __init__(self, top: Path, rev: str | None = None) -> None:
        self.repo = open_repository(top)
        self.commit: pygit2.Commit | None = None
        if rev is not None:
            try:
                found = self.repo.revparse_single(rev).peel(pygit2.Commit)
            except (KeyError, ValueError, pygit2.GitError):
                found = None
            self.commit = found
            self.bad_rev = found is None
        else:
            self.bad_rev = False
            if not self.repo.head_is_unborn:
                self.commit = self.repo[self.repo.head.target].peel(pygit2.Commit)
        self.shallow = self.repo.is_shallow
        self._renames: dict[str, dict[str, str]] = {}

    @property
    def head(self) -> str | None:
        return None if self.commit is None else str(self.commit.id)

    def has_commit(self, commit: str) -> bool:
        try:
            return isinstance(self.repo.get(commit), pygit2.Commit)
        except (ValueError, pygit2.GitError):
            return False

    def reaches(self, commit: str) -> bool:
        """Whether `commit` is the commit judged at or one of its ancestors."""
        if self.commit is None:
            return False
        try:
            target = pygit2.Oid(hex=commit)
            return target == self.commit.id or self.repo.descendant_of(self.commit.id, target)
        except (KeyError, ValueError, pygit2.GitError):
            return False

    def blob(self, path: str, commit: str | None = None) -> str | None:
        """The blob id of `path` in `commit`'s tree (default: the one judged at), or None when
        it holds no file there. One tree lookup; the blob itself is not read."""
        target = self.commit if commit is None else self.repo.get(commit)
        if target is None:
            return None
        try:
            entry = target.peel(pygit2.Commit).tree[path]
        except (KeyError, ValueError, pygit2.GitError):
            return None
        if entry.type_str != "blob" or entry.filemode == pygit2.enums.FileMode.LINK:
            return None  # a folder, a submodule, or a symbolic link: not a file to cite
        return str(entry.id)

    def renamed(self, commit: str, path: str) -> str | None:
        """Where `path` of `commit` is in the commit judged at, followed through git's rename
        detection over the whole span, or None when git sees no rename of it."""
        if self.commit is None:
            return None
        if commit not in self._renames:
            moves: dict[str, str] = {}
            try:
                diff = self.repo[commit].peel(pygit2.Commit).tree.diff_to_tree(self.commit.tree)
                diff.find_similar()
                for delta in diff.deltas:
                    if delta.status_char() == "R":
                        moves[delta.old_file.path] = delta.new_file.path
            except (KeyError, ValueError, pygit2.GitError):
                pass
            self._renames[commit] = moves
        return self._renames[commit].get(path)

    def history(
        self,
        path: str,
        since: str,
        now_path: str | None = None,
    ) -> tuple[int, str, str, str] | None:
        """(commits, subject, author, ISO time) of the commits after `since` up to the one
        judged at that changed `path` (or, once renamed, `now_path`); None when none did or the
        history is not all in this clone."""
        if self.commit is None:
            return None
        walker = self.repo.walk(self.commit.id, pygit2.enums.SortMode.TOPOLOGICAL)
        try:
            walker.hide(pygit2.Oid(hex=since))
        except (KeyError, ValueError, pygit2.GitError):
            return None
        names = {path} | ({now_path} if now_path else set())
        count, last = 0, None
        for commit in walker:
            parents = commit.parents
            before = parents[0].tree if parents else None
            if any(
                _entry(commit.tree, n) != (_entry(before, n) if before is not None else None)
                for n in names
            ):
                count += 1
                if last is None:
                    last = commit
        if last is None:
            return None
        moment = datetime.fromtimestamp(last.commit_time, UTC).isoformat()
        return count, last.message.splitlines()[0] if last.message else "", last.author.name, moment

    def lines(self, path: str) -> list[str] | None:
        """The lines of `path` in the commit judged at (a blob read: only when asked)."""
        if self.commit is None:
            return None
        try:
            blob = self.commit.tree[path]
            data = self.repo[blob.id].read_raw()
        except (KeyError, ValueError, AttributeError, pygit2.GitError):
            return None  # not there, or a partial clone without the blob
        return data.decode("utf-8", errors="replace").splitlines()


def _entry(tree: pygit2.Tree | None, path: str) -> str | None:
    if tree is None:
        return None
    try:
        return str(tree[path].id)
    except (KeyError, ValueError):
        return None
