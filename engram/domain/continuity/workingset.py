"""The working set follows the code: a file is pinned to the newest commit that changed it, with
the blob of its content when pinned, marked `uncommitted` when the work tree holds changes no
commit has, and `missing` when there is no such file. A resume shows each pinned file as it is
now against its pin (unchanged, changed since, missing), so the next agent knows which files to
read again.

A file that does not exist (a typo in a handoff, a file deleted since an earlier package named
it) is never pinned: it is kept marked missing, and a handoff that names one says so. What a
pin holds arrives from other clones: it is read strictly (`pinned`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...base.errors import EngramError


def _tracked(top: Path) -> Any:
    from ...git.tracked import TrackedFiles  # pygit2: only when there are files

    try:
        return TrackedFiles(top)
    except EngramError:
        return None


def absent(top: Path, paths: Iterable[str]) -> list[str]:
    """The working-set files a handoff names that the work tree does not hold."""
    return [path for path in paths if not (top / path).is_file()]


def pin(top: Path, files: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`files` (dicts with a `path`) pinned as they are now, in place and returned: `commit`, the
    newest commit that changed the file (kept as given when git cannot say), `blob`, its
    content now, and `uncommitted` / `missing` when so."""
    from ...git.tracked import work_tree_blob

    repo = _tracked(top) if files else None
    lasts = repo.last_commits([str(item["path"]) for item in files]) if repo is not None else {}
    for item in files:
        item.pop("uncommitted", None)
        item.pop("missing", None)
        path = str(item["path"])
        blob = work_tree_blob(top, path)
        last = lasts.get(path)
        if blob is None:
            item.pop("blob", None)
            item["commit"] = None
            item["missing"] = True
            continue
        if last is not None:
            item["commit"] = last
        elif repo is not None and repo.head is not None:
            item["commit"] = None  # never committed
        item["blob"] = blob
        committed = repo.blob_at(last, path) if repo is not None and last else None
        if repo is not None and committed != blob:
            item["uncommitted"] = True
    return list(files)


@dataclass(frozen=True)
class FileState:
    """A pinned file of a package as it is now."""

    path: str
    commit: str | None  # the pin
    state: str  # "unchanged", "changed", "uncommitted", "missing" or "unknown"
    now: str | None  # the newest commit that changed it now, when that differs from the pin

    def shown(self) -> str:
        """The words a resume shows after the path."""
        pinned = f" @ {self.commit[:12]}" if self.commit else ""
        if self.state == "changed":
            return f"{pinned} — changed since: now @ {(self.now or '')[:12]}"
        if self.state == "uncommitted":
            return f"{pinned} — changed since, not committed"
        if self.state == "missing":
            return f"{pinned} — missing from the work tree"
        if self.state == "unknown":
            return f"{pinned} (state unknown)"
        return f"{pinned}" + (" (uncommitted when pinned)" if self.now == "uncommitted" else "")


def pinned(files: object) -> list[Mapping[str, Any]]:
    """The file entries of a stored working set that can be read: each a mapping with a text
    `path`; anything else from another clone is left out."""
    if not isinstance(files, list):
        return []
    return [
        f for f in files if isinstance(f, Mapping) and isinstance(f.get("path"), str) and f["path"]
    ]


def current(top: Path, files: Sequence[Mapping[str, Any]]) -> list[FileState]:
    """Each pinned file of a package against the work tree now."""
    from ...git.tracked import work_tree_blob

    repo = _tracked(top) if files else None
    entries = pinned(list(files))
    lasts = repo.last_commits([str(i["path"]) for i in entries]) if repo is not None else {}
    out = []
    for item in entries:
        path = str(item["path"])
        commit = item.get("commit") if isinstance(item.get("commit"), str) else None
        then = item.get("blob") if isinstance(item.get("blob"), str) else None
        if then is None and commit and repo is not None:
            then = repo.blob_at(commit, path)
        now_blob = work_tree_blob(top, path)
        last = lasts.get(path)
        if now_blob is None:
            state, now = "missing", None
        elif then is None:
            state, now = "unknown", None
        elif now_blob == then:
            state = "unchanged"
            now = "uncommitted" if item.get("uncommitted") is True else None
        else:
            committed = repo.blob_at(last, path) if repo is not None and last else None
            state = "changed" if committed == now_blob and last != commit else "uncommitted"
            now = last
        out.append(FileState(path, commit, state, now))
    return out
