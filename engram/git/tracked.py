"""A work tree's files as git sees them: whether git tracks or ignores a file, and a file's
lines at a commit. Discoveries (`engram.domain.discovery`) pin their citations with it."""

from __future__ import annotations

from pathlib import Path

import pygit2

from .repo import open_repository


class TrackedFiles:
    """The repository of the work tree `top` (opened once), asked about its files."""

    def __init__(self, top: Path) -> None:
        self.repo = open_repository(top)

    @property
    def head(self) -> str | None:
        """The commit HEAD points at, or None before the first commit."""
        return None if self.repo.head_is_unborn else str(self.repo.head.target)

    def has_commit(self, commit: str) -> bool:
        return commit in self.repo

    def lines_at(self, commit: str, path: str) -> list[str] | None:
        """The lines of `path` as committed in `commit`, or None if it holds no such file."""
        try:
            blob = self.repo.revparse_single(f"{commit}:{path}")
        except (KeyError, ValueError, pygit2.GitError):
            return None
        if not isinstance(blob, pygit2.Blob):
            return None
        return blob.data.decode("utf-8", errors="replace").splitlines()

    def untracked(self, path: str, resolved: Path, real: str) -> str | None:
        """Why git does not track the file (so its lines must not be copied into a memory, which
        is pushed), or None when it does: it is in the index."""
        name = path if real == path else f"{path} (a link to {real})"
        if real.split("/")[0] == ".git" or resolved.is_relative_to(Path(self.repo.path).resolve()):
            return f"{name} is inside .git/, git's own files"
        if real in self.repo.index:
            return None
        if self.repo.path_is_ignored(real):
            return f"{name} is ignored by git"
        return f"{name} is not tracked by git (git add it to have its lines kept)"
