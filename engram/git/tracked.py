"""A work tree's files as git sees them: whether git tracks or ignores a file, a file's lines
or blob id at a commit, and the blob id of its content now. Discoveries
(`engram.domain.discovery`) pin their citations with it; checkpoints (`engram.domain.continuity`)
tell with it whether their working set changed."""

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

    def blob_at(self, commit: str, path: str) -> str | None:
        """The blob id of `path` as committed in `commit`, or None if this clone cannot say."""
        try:
            return str(self.repo.revparse_single(f"{commit}:{path}").id)
        except (KeyError, ValueError, pygit2.GitError):
            return None

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


def blob_id(path: Path) -> str | None:
    """The git blob id of a file's content now (None when it is not a readable file)."""
    try:
        return str(pygit2.hash(path.read_bytes())) if path.is_file() else None
    except OSError:
        return None
