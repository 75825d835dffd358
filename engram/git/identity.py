"""Which project a directory belongs to, in a way that follows the code rather than the folder.

A project is named by its repository's root commit: the first commit, with no parent, that HEAD
descends from (the oldest by commit time when histories were merged, the smallest id on a tie).
Clones, forks, linked worktrees and renamed or moved folders share it, and two unrelated
repositories never do. The remote URL (`origin`, else the first remote; credentials removed) is
kept as a hint for a repository whose root cannot be seen: a shallow clone, or one without
commits yet.

Personal-store memories written inside a repository carry both as `project` and
`project_remote` (docs/project-identity.md). Finding the roots walks the history once; the
result is cached per repository in the personal store's local state, and kept while the new
HEAD descends from the HEAD it was computed at.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pygit2

from ..base.files import atomic_write
from ..base.layout import PROJECTS_CACHE

ROOT = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
CACHED_REPOSITORIES = 200


@dataclass(frozen=True)
class Project:
    """Who a repository is: `root` (None when unknown), every root HEAD reaches, the remote."""

    root: str | None
    roots: frozenset[str]
    remote: str | None

    def owns(self, project: str | None, remote: str | None) -> bool:
        """Whether a memory written with this `project` and `project_remote` belongs here (one
        written outside any repository, with neither, belongs everywhere)."""
        if project is None and remote is None:
            return True
        if project is not None and self.roots:
            return project in self.roots
        return remote is not None and remote == self.remote


def normal_remote(url: str) -> str | None:
    """`host/path` of a remote URL, without scheme, credentials, port or `.git`, so that the
    https and ssh spellings of one repository agree. None for a local path."""
    url = url.strip()
    scp = re.fullmatch(r"(?:[^@/]+@)?([^:/]+):(?!//)(.+)", url)
    if scp and "://" not in url:
        host, path = scp.groups()
    else:
        found = re.fullmatch(
            r"[a-z][a-z0-9+.-]*://(?:[^@/]*@)?([^/:]+)(?::\d+)?(/.*)?", url, re.IGNORECASE
        )
        if found is None or url.lower().startswith("file:"):
            return None
        host, path = found.group(1), found.group(2) or ""
    path = path.strip("/")
    path = path.removesuffix(".git")
    return f"{host.lower()}/{path}" if path else None


def _remote(repo: pygit2.Repository) -> str | None:
    names = [name for name in repo.remotes.names() if name is not None]
    for name in (["origin"] if "origin" in names else []) + names:
        url = repo.remotes[name].url
        if url and (normal := normal_remote(url)) is not None:
            return normal
    return None


def _roots(
    repo: pygit2.Repository,
    head: pygit2.Commit,
    *,
    since: str | None = None,
    known: Sequence[str] = (),
) -> list[str]:
    """Every parentless commit HEAD reaches, oldest first: `known` ones and those among the
    commits `since` does not reach."""
    found = {(repo[sha].peel(pygit2.Commit).commit_time, sha) for sha in known}
    walker = repo.walk(head.id, pygit2.enums.SortMode.NONE)
    if since is not None:
        walker.hide(since)
    for commit in walker:
        if not commit.parent_ids:
            found.add((commit.commit_time, str(commit.id)))
    return [sha for _, sha in sorted(found)]


def project_of(start: Path, cache_dir: Path | None = None) -> Project | None:
    """The project of the repository holding `start`; None outside any repository."""
    try:
        found = pygit2.discover_repository(str(start))
        if found is None:
            return None
        repo = pygit2.Repository(found)
    except (pygit2.GitError, OSError):
        return None
    if repo.is_bare:
        return None
    remote = _remote(repo)
    try:
        head = repo.head.peel(pygit2.Commit)
    except (pygit2.GitError, KeyError, ValueError):
        return Project(None, frozenset(), remote)  # no commits yet
    if repo.is_shallow:
        return Project(None, frozenset(), remote)  # its oldest commits are not here
    key = os.path.realpath(repo.path)  # a linked worktree has its own: it has its own HEAD
    cache = _load(cache_dir)
    entry = cache.get(key)
    roots: list[str] | None = None
    if (
        isinstance(entry, dict)
        and isinstance(entry.get("roots"), list)
        and all(isinstance(r, str) and ROOT.fullmatch(r) for r in entry["roots"])
        and isinstance(entry.get("head"), str)
    ):
        if entry["head"] == str(head.id):
            roots = entry["roots"]
        else:
            try:
                if repo.descendant_of(head.id, entry["head"]):
                    # Only the commits since: a merge of another history brings its root.
                    roots = _roots(repo, head, since=entry["head"], known=entry["roots"])
            except (pygit2.GitError, ValueError, KeyError):
                roots = None
    if roots is None or not roots:
        roots = _roots(repo, head)
    if roots and cache_dir is not None and (entry or {}).get("head") != str(head.id):
        cache.pop(key, None)
        cache[key] = {"head": str(head.id), "roots": roots}
        _save(cache_dir, dict(list(cache.items())[-CACHED_REPOSITORIES:]))
    return Project(roots[0] if roots else None, frozenset(roots), remote)


def _load(cache_dir: Path | None) -> dict[str, Any]:
    if cache_dir is None:
        return {}
    try:
        value = orjson.loads((cache_dir / PROJECTS_CACHE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def _save(cache_dir: Path, cache: dict[str, Any]) -> None:
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(cache_dir / PROJECTS_CACHE, orjson.dumps(cache), durable=False, hidden=True)
    except OSError:
        pass  # a cache: the next call walks the history again
