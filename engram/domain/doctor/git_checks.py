"""The doctor's checks of git: events not committed yet, a merge or rebase under way, files
changed in their committed part or gone, git's index behind HEAD, and events git took away.
"""

from __future__ import annotations

import shlex
import sqlite3
import time

from ...base.errors import EngramError
from ...base.wording import count as counted
from ...git.recovery import index_behind
from ...storage import events as ev
from ...storage.local import WriterState
from ...storage.store import Store
from .event_checks import git_operation
from .report import Finding, Host, flag, git_c, restore_command

# -- git ----------------------------------------------------------------------------------------


def check_git(engram: Host, store: Store) -> list[Finding]:
    from ...git import repo as git

    out: list[Finding] = []
    try:
        repo = git.StoreRepo(store)
    except EngramError as exc:
        return [
            Finding("git", "error", str(exc), f"`{git_c(store)} status` shows what git makes of it")
        ]
    busy = repo.busy()
    if busy:
        command = git_operation(busy)
        fix = (
            (
                f"finish it: `{git_c(store)} {command} --continue`, or give it up: "
                f"`{git_c(store)} {command} --abort`"
            )
            if command
            else f"finish it with git (`{git_c(store)} status` says how)"
        )
        out.append(
            Finding(
                "git-busy",
                "warning",
                f"{busy}; Engram's commits wait until it is finished (writes go on)",
                fix,
            )
        )
        out.extend(_removed_while_changed(store))
    pending = repo.pending()
    for rel in pending.refused:
        spec = shlex.quote(store.repo_path(rel))
        out.append(
            Finding(
                "committed-changed",
                "error",
                "changed in its committed part (not by Engram, which only appends); its new "
                "events cannot be committed",
                f"`{git_c(store)} diff HEAD -- {spec}` shows the "
                f"change; `{restore_command(store, [rel])}` restores the committed lines",
                path=rel,
            )
        )
    folded = _folded_elsewhere(engram, store, repo, pending.missing)
    if folded:
        shown = ", ".join(folded[:5]) + (f" and {len(folded) - 5} more" if len(folded) > 5 else "")
        out.append(
            Finding(
                "compaction-unfinished",
                "warning",
                f"{len(folded)} committed event file(s) gone from the work tree ({shown}), every "
                "event of which is read from another file: a compaction was interrupted before "
                "its commit",
                f"`engram compact {flag(store)}` finishes it",
            )
        )
    for rel in pending.missing:
        if rel in folded:
            continue
        out.append(
            Finding(
                "missing-file",
                "error",
                "committed but gone from the work tree; its events are not read",
                f"`{restore_command(store, [rel])}`",
                path=rel,
            )
        )
    behind = index_behind(store, repo)
    if behind:
        shown = (
            " ".join(shlex.quote(p) for p in behind)
            if len(behind) <= 20
            else shlex.quote(store.prefix or ".")
        )
        out.append(
            Finding(
                "git-index",
                "warning",
                f"git's index is behind the last commit for {len(behind)} of Engram's files (a "
                "commit was interrupted before it updated the index): `git status` shows them as "
                "staged deletions, changes or files a compaction folded away, and a plain "
                "`git commit` would take them back",
                f"`engram doctor --fix {flag(store)}` (or `{git_c(store)} reset -q -- {shown}`); "
                "it changes only those index entries, never the files",
                auto=True,
            )
        )
    # A session's start and end alone wait for the next commit on purpose: not a finding.
    count = sum(1 for event in pending.events if ev.substantive(event.kind))
    if count:
        settings = engram.settings(store)
        state = WriterState.load(store)
        since = state.pending_since or min(
            (
                (store.root / c.rel).stat().st_mtime
                for c in pending.changes
                if (store.root / c.rel).exists()
            ),
            default=time.time(),
        )
        age = max(0.0, time.time() - since)
        late = age > settings["commit.every_seconds"]
        out.append(
            Finding(
                "uncommitted",
                "warning" if late else "note",
                f"{counted(count, 'event')} written but not committed yet "
                f"(the oldest {_age(age)} ago)"
                + ("" if late else "; the next batched commit takes them"),
                f"`engram commit {flag(store)}`",
            )
        )
    return out


def _removed_while_changed(store: Store) -> list[Finding]:
    """A merge stopped on event files one side changed and the other removed: a compaction
    (`engram compact`) folded them into one file while another clone still appended to them."""
    from ...git.sync import changed_and_removed, run_git

    unmerged = run_git(store.work_tree, "diff", "--name-only", "--diff-filter=U").stdout.split()
    paths = changed_and_removed(store, unmerged)
    if not paths:
        return []
    shown = " ".join(shlex.quote(p) for p in paths[:20]) + (" ..." if len(paths) > 20 else "")
    return [
        Finding(
            "merge-removed-changed",
            "error",
            f"the merge stopped on {len(paths)} event file(s) that one side changed and the other "
            "removed: a compaction folded them into one file while another clone appended to them; "
            "no line is lost by keeping them (readers drop the duplicate lines)",
            f"keep the changed files: `{git_c(store)} add -- {shown}`, then "
            f"`{git_c(store)} commit --no-edit` (when `engram sync` merges, it does this itself)",
        )
    ]


def check_lost(engram: Host, store: Store) -> list[Finding]:
    """Events seen in this store that git took away (see `engram.lost`)."""
    from ...git import lost

    try:
        proj = engram.projection(store)
        lost.settle(store, proj)
        gone = lost.find(store, proj)
    except sqlite3.OperationalError:
        return []  # a read-only store: its read model cannot be brought up to date (reported)
    if not gone.count:
        return []
    where = ", ".join(f"{rel} ({count})" for rel, count in gone.files.items())
    return [
        Finding(
            "lost-events",
            "error",
            f"{counted(gone.count, 'event')} seen in this store "
            f"{'is' if gone.count == 1 else 'are'} gone from it and from every branch "
            f"(a git clean, stash, reset, revert, rebase or worktree removal took them): {where}",
            f"`engram recover {flag(store)}` (or `engram doctor --fix {flag(store)}`) writes "
            "them back from git's reflogs, stashes and unreachable objects, or from Engram's "
            "ledger, and commits them; history is not rewritten",
            auto=True,
        )
    ]


def _folded_elsewhere(engram: Host, store: Store, repo: object, missing: list[str]) -> list[str]:
    """The missing committed files whose every event the read model holds from another file
    (what a compaction killed before its commit leaves)."""
    from ...storage import lines

    if not missing:
        return []
    tree = repo.head_tree()  # type: ignore[attr-defined]
    if tree is None:
        return []
    try:
        proj = engram.projection(store)
    except (EngramError, OSError, sqlite3.Error):
        return []
    out = []
    for rel in missing:
        try:
            data = tree[store.repo_path(rel)].data
        except (KeyError, ValueError, AttributeError):
            continue
        ids = {
            line.event.id
            for line in lines.read(data)[0]
            if line.problem is None and line.event is not None
        }
        if ids and proj.present(ids) == ids:
            out.append(rel)
    return out


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"
