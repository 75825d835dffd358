"""The working set follows the code: a file is pinned to the newest commit that changed it, with
the blob of its content when pinned, marked `uncommitted` when the work tree holds changes no
commit has, and `missing` when there is no such file. A commit given with a file (`path@commit`)
is the pin instead, kept as given (`given`), with the file's blob in that commit. A resume shows
each pinned file as it is now against its pin (unchanged, changed since, missing), so the next
agent knows which files to read again.

On the command line a file is named as git takes a path: relative to the current directory, or
absolute inside the work tree (`from_directory`); it is kept relative to the repository's top,
which is how the MCP tools and a handoff package name files.

A file that does not exist (a typo in a handoff, a file deleted since an earlier package named
it) is never pinned to a commit of its own: it is kept marked missing, and a handoff that names
one says so. What a pin holds arrives from other clones: it is read strictly (`pinned`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ...base.errors import EngramError, UsageError
from ...base.places import repo_relative
from ...base.validation import Checks, well_formed
from .checkpoints import check_files


def _tracked(top: Path) -> Any:
    from ...git.tracked import TrackedFiles  # pygit2: only when there are files

    try:
        return TrackedFiles(top)
    except EngramError:
        return None


def from_directory(top: Path, here: Path, entry: str) -> str:
    """A working-set file named on the command line, taken as git takes a path
    (`repo_relative`), with an `@commit` after it kept; inside the work tree `check_files`
    refuses symbolic links."""
    text = well_formed(entry, "working-set file").strip()
    if not text:
        return entry
    found = repo_relative(top, here, text)
    if found is None:
        raise UsageError(
            f"working-set file {text!r} is outside the repository ({top}); name a file inside it"
        )
    return found


def names_file(top: Path) -> Callable[[str], bool]:
    """Whether a working-set entry, whole, names a file the work tree `top` holds or git
    tracks: such an entry is a path even when it ends in `@` and hex digits (`split_pin`)."""
    repo: list[Any] = []  # opened when first needed

    def check(entry: str) -> bool:
        parts = PurePosixPath(entry).parts
        if not parts or PurePosixPath(entry).is_absolute() or ".." in parts:
            return False
        if os.path.lexists(top / entry):
            return True
        if not repo:
            repo.append(_tracked(top))
        return repo[0] is not None and bool(repo[0].tracks(entry))

    return check


def check_pins(top: Path, files: Sequence[dict[str, Any]]) -> None:
    """Each commit given with a working-set file (`path@commit`, `{path, commit}`), in place:
    made the full id of a commit of this clone that holds the file, and marked `given`, so that
    no pin replaces it (`pin`), in this checkpoint or in a later one that carries the file over.
    A commit this clone lacks, or that lacks the file, is refused (UsageError) before anything is
    written, never replaced by another."""
    wanted = [item for item in files if item.get("commit")]
    repo = _tracked(top) if wanted else None
    for item in wanted:
        path, commit = str(item["path"]), str(item["commit"])
        what = f"working-set file {path!r}"
        if repo is None:
            raise UsageError(
                f"{what}: commit {commit!r} cannot be checked, {top} is not a git repository "
                "that can be read; give the path alone"
            )
        try:
            full = repo.commit_id(commit)
        except UsageError as exc:
            raise UsageError(f"{what}: {exc}") from None
        if full is None:
            raise UsageError(
                f"{what}: this repository has no commit {commit!r}; give one that "
                f"`git log -- {path}` lists (fetch it first if only another clone has it), "
                "or the path alone"
            )
        if repo.blob_at(full, path) is None:
            raise UsageError(
                f"{what} is not in commit {commit}; give a commit that holds it "
                f"(`git log -- {path}`), or the path alone"
            )
        item["commit"] = full
        item["given"] = True


def touched(top: Path, checks: Checks, files: Iterable[Any], *, here: Path | None) -> list[str]:
    """The files task progress touches, checked like a working set's (relative to `here` when
    given: `from_directory`) and kept as paths. Progress names files, not versions of them: a
    commit given with one is refused rather than dropped."""
    given = [
        from_directory(top, here, f) if here is not None and isinstance(f, str) else f
        for f in files
    ]
    out = check_files(top, checks.files(given, names_file=names_file(top)))
    for item in out:
        if item["commit"]:
            raise UsageError(
                f"working-set file {item['path']!r}: task progress names the files it touches, "
                f"not commits; give it without @{item['commit']} (a handoff pins a commit)"
            )
    return [item["path"] for item in out]


def absent(top: Path, paths: Iterable[str]) -> list[str]:
    """The working-set files a handoff names that the work tree does not hold."""
    return [path for path in paths if not (top / path).is_file()]


def pin(top: Path, files: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`files` (dicts with a `path`) pinned as they are now, in place and returned: `commit`, the
    newest commit that changed the file (kept as given when git cannot say), `blob`, its
    content now, and `uncommitted` / `missing` when so. A file whose commit was `given`
    (`check_pins`) keeps it, with its blob in that commit."""
    from ...git.tracked import work_tree_blob

    repo = _tracked(top) if files else None
    lasts = repo.last_commits([str(item["path"]) for item in files]) if repo is not None else {}
    for item in files:
        item.pop("uncommitted", None)
        item.pop("missing", None)
        path = str(item["path"])
        blob = work_tree_blob(top, path)
        last = lasts.get(path)
        if item.get("given") is True and isinstance(item.get("commit"), str) and item["commit"]:
            then = repo.blob_at(item["commit"], path) if repo is not None else None
            if then is not None:  # else the blob it had (this clone may lack the commit)
                item["blob"] = then
            if blob is None:
                item["missing"] = True
            continue
        item.pop("given", None)
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
