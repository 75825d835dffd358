"""A work tree's files as git sees them: whether git tracks or ignores a file, a file's lines
or blob id at a commit, and the blob id of its content now. Discoveries
(`engram.domain.discovery`) pin their citations with it; checkpoints (`engram.domain.continuity`)
tell with it whether their working set changed.

A path given for the work tree is refused in one wording wherever it is given: one that leads
outside the repository (`outside`), one inside `.git/` (`IN_GIT`). A working-set file is stricter
than a citation (`work_tree_file`): it is never reached through a symbolic link at all, so its
blob id, which a checkpoint commits and pushes, can only ever be of a file of the work tree.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pygit2

from ..base.errors import UsageError
from .repo import open_repository

IN_GIT = "is inside .git/, git's own files"
_HEX = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_QUOTED = re.compile(r'[\x00-\x1f\x7f"\\]')  # characters git quotes in a path it prints
PATHSPECS = 1000  # paths per `git log` of `last_commits`


def outside(what: str, path: str, fix: str) -> str:
    """How a path that leads out of the work tree is refused (citations, working sets)."""
    return f"{what} {path!r} leads outside the repository (through '..' or a symbolic link); {fix}"


@dataclass(frozen=True)
class Commit:
    """A commit of the work tree's history, as a reader of what changed is shown it."""

    id: str
    author: str
    time: str  # ISO 8601, as the committer's clock said
    subject: str
    files: tuple[str, ...]


class TrackedFiles:
    """The repository of the work tree `top` (opened once), asked about its files."""

    def __init__(self, top: Path) -> None:
        self.repo = open_repository(top)
        self.top = top

    def _git(self, *args: str) -> str | None:
        """Plain git's answer in the work tree (its history walks are far faster than a walk in
        Python), or None when git cannot answer."""
        try:
            done = subprocess.run(
                ["git", "-c", "core.quotepath=off", *args],
                cwd=self.top,
                capture_output=True,
                text=True,
                timeout=30,
                env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None

    def last_commit(self, path: str) -> str | None:
        """The newest commit reachable from HEAD that changed `path`, or None (not committed,
        no history, or git cannot say)."""
        out = self._git("log", "-1", "--format=%H", "HEAD", "--", f":(literal){path}")
        return (out.strip() or None) if out is not None else None

    def last_commits(self, paths: Sequence[str]) -> dict[str, str | None]:
        """`last_commit` of each of `paths`, from one walk of the history for all of them
        rather than one `git log` each (a working set of hundreds of files took seconds).

        A merge lists the files it changed against every parent (`-c`), as a walk for one path
        shows such a merge. A commit found for a path whose content there differs from HEAD's
        (the walk for many paths follows both sides of a merge that a walk for one path would
        not) is asked again for that path alone, as is a path git would print quoted."""
        wanted = list(dict.fromkeys(paths))
        if not wanted:
            return {}
        found: dict[str, str] = {}
        plain = [p for p in wanted if not _QUOTED.search(p)]
        for start in range(0, len(plain), PATHSPECS):
            chunk = plain[start : start + PATHSPECS]
            out = self._git(
                "log",
                "-c",
                "--name-only",
                "--format=%x1e%H",
                "HEAD",
                "--",
                *(f":(literal){p}" for p in chunk),
            )
            if out is None:
                return {p: self.last_commit(p) for p in wanted}
            left = set(chunk)
            for record in out.split("\x1e")[1:]:
                commit, _, names = record.partition("\n")
                for name in names.splitlines():
                    if name in left:
                        found[name] = commit.strip()
                        left.discard(name)
        head = self.head
        out_map: dict[str, str | None] = {}
        for path in wanted:
            last = found.get(path)
            if path not in plain or (
                last is not None
                and head is not None
                and self.blob_at(last, path) != self.blob_at(head, path)
            ):
                last = self.last_commit(path)
            out_map[path] = last
        return out_map

    def commits_since(
        self, commit: str | None, *, after: str | None = None, limit: int = 50
    ) -> list[Commit] | None:
        """The commits after `commit` up to HEAD, newest first (at most `limit`), each with the
        files it changed; when this clone lacks `commit` (or none is given), the commits made
        after the time `after`. None when neither can be told."""
        if commit and _HEX.fullmatch(commit) and self.has_commit(commit):
            span = [f"{commit}..HEAD"]
        elif after:
            span = [f"--since={after}", "HEAD"]
        else:
            return None
        out = self._git(
            "log",
            f"--max-count={int(limit)}",
            "--no-merges",
            "--name-only",
            "--format=%x1e%H%x1f%an <%ae>%x1f%cI%x1f%s",
            *span,
            "--",
        )
        if out is None:
            return None
        commits = []
        for record in out.split("\x1e")[1:]:
            head, _, names = record.partition("\n")
            fields = head.split("\x1f")
            if len(fields) != 4:
                continue
            commits.append(
                Commit(
                    fields[0],
                    fields[1],
                    fields[2],
                    fields[3],
                    tuple(n for n in names.splitlines() if n.strip()),
                )
            )
        return commits

    @property
    def head(self) -> str | None:
        """The commit HEAD points at, or None before the first commit."""
        return None if self.repo.head_is_unborn else str(self.repo.head.target)

    def has_commit(self, commit: str) -> bool:
        try:
            return commit in self.repo
        except (ValueError, TypeError, pygit2.GitError):  # not an object id at all
            return False

    def tracks(self, path: str) -> bool:
        """Whether git's index holds `path` (deleted from the work tree or not)."""
        try:
            return path in self.repo.index
        except (ValueError, TypeError, pygit2.GitError):
            return False

    def commit_id(self, prefix: str) -> str | None:
        """The full id of the commit whose id begins with the hex digits `prefix`, or None when
        this clone has none. Only object ids are looked up, never a branch or tag of that name.
        Refused (UsageError) when the digits begin the ids of several objects."""
        try:
            found = self.repo[prefix]
        except pygit2.AmbiguousError:
            raise UsageError(
                f"commit {prefix!r} is ambiguous in this repository; give more of its digits"
            ) from None
        except (KeyError, ValueError, TypeError, pygit2.GitError):
            return None
        return str(found.id) if isinstance(found, pygit2.Commit) else None

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
            return f"{name} {IN_GIT}"
        if real in self.repo.index:
            return None
        if self.repo.path_is_ignored(real):
            return f"{name} is ignored by git"
        return f"{name} is not tracked by git (git add it to have its lines kept)"


def work_tree_file(top: Path, path: str, *, what: str = "working-set file") -> Path:
    """The file `path` (relative, `/`-separated) names in the work tree `top`, found without
    following any symbolic link. Refused (UsageError) when it leads outside the repository, when
    any part of it is a symbolic link (the file itself too: a link inside the repository is
    named by the file it links to), or when it is inside `.git/` (any folder of that name)."""
    parts = PurePosixPath(path).parts
    if not parts or PurePosixPath(path).is_absolute() or ".." in parts:
        raise UsageError(outside(what, path, "name a file inside it"))
    if any(part.casefold() == ".git" for part in parts):
        raise UsageError(f"{what} {path!r} {IN_GIT}; name a file of the work tree")
    current = top
    for part in parts:
        current = current / part
        if not current.is_symlink():
            continue
        link = current.relative_to(top).as_posix()
        try:
            target = (top / path).resolve()
        except (RuntimeError, OSError):  # a loop of symbolic links
            target = None
        if target is None or not target.is_relative_to(top.resolve()):
            raise UsageError(outside(what, path, "name a file inside it"))
        real = target.relative_to(top.resolve()).as_posix()
        if any(p.casefold() == ".git" for p in PurePosixPath(real).parts):
            raise UsageError(
                f"{what} {path!r} (a link to {real}) {IN_GIT}; name a file of the work tree"
            )
        shown = "is a symbolic link" if link == path else f"goes through a symbolic link ({link})"
        raise UsageError(f"{what} {path!r} {shown}; name the file it links to: {real}")
    return current


def work_tree_blob(top: Path, path: str) -> str | None:
    """The blob id of the work-tree file `path` as it is now, or None when it is not a regular
    file reached without a symbolic link (`work_tree_file`): nothing outside the repository,
    behind a link or in `.git/` is ever read, so no blob id of it can be committed."""
    try:
        file = work_tree_file(top, path)
    except UsageError:
        return None
    try:  # O_NOFOLLOW: a link put in its place since the check is not followed either
        fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return str(pygit2.hash(handle.read()))
    except OSError:
        return None
    finally:
        os.close(fd)
