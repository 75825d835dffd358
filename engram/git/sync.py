"""Git's side of moving a store between machines: remotes, fetch, merge, push, and cloning a
personal store (`engram.domain.syncing` runs a sync of every store with them).

Network work runs the `git` executable, so it goes exactly where `git fetch` and `git push` would
go, the same way: ssh keys and agents, credential helpers, `insteadOf` rewrites, proxies, hooks.
Local work stays with pygit2 (`engram.git.repo`).

Merges are plain git merges. They never conflict on Engram's own files because no commit ever
extends an event file an earlier commit created (see `engram.storage.store`): each side only adds
files, except a compaction (`engram.git.compact`), which removes the files it folded. A clone that
still appended to one of those (an older version, or a commit by hand) meets a modify/delete
conflict: sync keeps the changed file, whose lines are a superset, and commits the merge.
A conflict elsewhere (a project's own code, or both sides changing `config.yaml`) aborts the
merge and leaves everything as it was.

When nothing is at the other end (no network, a server down) these commands fail with a one-line
error; every other command works offline, and the next sync sends what was committed meanwhile.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.errors import EngramError, UsageError
from ..base.layout import CONFIG_FILE, EVENT_SUFFIX, EVENTS_DIR
from ..base.wording import first_few
from ..storage.store import Store

if TYPE_CHECKING:
    import pygit2

    from .repo import StoreRepo

_REMOTE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class SyncError(EngramError):
    """A fetch, merge or push that could not be done; nothing local was lost or changed."""

    exit_code = 1


@dataclass
class SyncResult:
    store: str
    remote: str | None = None
    branch: str | None = None
    committed: int = 0  # pending events committed before talking to the remote
    merge: str = "none"  # none | up-to-date | fast-forward | merged | no-remote-branch
    received: int = 0  # events that arrived
    pushed: int = 0  # commits sent
    skipped: str | None = None  # why this store was not synced
    indexes: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- running git ---------------------------------------------------------------------------------


def _git_env() -> dict[str, str]:
    env = dict(os.environ)
    if not sys.stdin.isatty():
        # An agent or a hook cannot answer a password prompt: fail at once instead of hanging.
        env.setdefault("GIT_TERMINAL_PROMPT", "0")
    env["LC_ALL"] = "C"  # parse git's messages in one language
    return env


def run_git(
    cwd: Path | None, *args: str, progress: bool = False, identity: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run git; stdout captured, stderr captured too unless progress is shown to the user."""
    if shutil.which("git") is None:
        raise EngramError("the git executable is not on PATH; install git, then retry")
    command = ["git"]
    if identity:
        name, email = _split_identity(identity)
        command += ["-c", f"user.name={name}", "-c", f"user.email={email}"]
    command += list(args)
    return subprocess.run(
        command,
        cwd=cwd,
        env=_git_env(),
        text=True,
        encoding="utf-8",
        errors="replace",
        stdout=subprocess.PIPE,
        stderr=None if progress else subprocess.PIPE,
        check=False,
    )


def _split_identity(actor: str) -> tuple[str, str]:
    from .repo import signature

    sig = signature(actor)
    return sig.name, sig.email


def all_git_said(done: subprocess.CompletedProcess[str]) -> str:
    """All of git's stderr folded to one line, for a failure whose every word may matter (the
    files named after "the following files:")."""
    lines = [line.strip() for line in (done.stderr or "").splitlines() if line.strip()]
    said = " ".join(line.removeprefix("error: ").removeprefix("fatal: ") for line in lines)
    return said or f"git exited with status {done.returncode}"


def why_failed(done: subprocess.CompletedProcess[str]) -> str:
    """The line of git's stderr that says what went wrong."""
    lines = [line.strip() for line in (done.stderr or "").splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("fatal:", "error:")):
            return line.split(":", 1)[1].strip()
    return lines[-1] if lines else f"git exited with status {done.returncode}"


# -- remotes -------------------------------------------------------------------------------------


def remote_list(store: Store) -> list[dict[str, str]]:
    from .repo import StoreRepo

    return StoreRepo(store).remotes()


def remote_add(store: Store, name: str, url: str) -> None:
    from .repo import open_repository

    _personal_only(store, f"git remote add {name} {url}")
    if not _REMOTE_NAME.match(name):
        raise UsageError(f"remote name {name!r} must be letters, digits, '.', '_' or '-'")
    url = _url(url)
    repo = open_repository(store.work_tree)
    if name in [r.name for r in repo.remotes]:
        raise UsageError(
            f"a remote named {name!r} exists already; remove it first with "
            f"`engram remote remove {name}`"
        )
    repo.remotes.create(name, url)


def remote_remove(store: Store, name: str) -> None:
    from .repo import open_repository

    _personal_only(store, f"git remote remove {name}")
    repo = open_repository(store.work_tree)
    if name not in [r.name for r in repo.remotes]:
        raise UsageError(f"no remote named {name!r}; list them with `engram remote list`")
    repo.remotes.delete(name)


def _url(url: str) -> str:
    """A remote URL or path as git will be given it: one line of valid text."""
    from ..base.validation import well_formed

    url = well_formed(url, "the URL").strip()
    if not url:
        raise UsageError("the URL is empty; give a git URL or path")
    if any(char in url for char in "\n\t"):
        raise UsageError("the URL contains a control character (a newline or tab); remove it")
    if url.startswith("-"):
        # git would take it for an option (--upload-pack=... runs a command).
        raise UsageError(
            f"the URL {url[:40]!r} starts with '-', which git reads as an option; "
            "give a git URL or a path (./-name for a folder named so)"
        )
    return url


def _personal_only(store: Store, git_command: str) -> None:
    if store.kind == "project":
        raise UsageError(
            "the project store uses the project repository's own remotes; "
            f"run `{git_command}` there"
        )


# -- sync, pull, push ----------------------------------------------------------------------------


@dataclass
class Target:
    remote: str
    branch: str  # local branch
    remote_branch: str  # branch name at the remote
    has_upstream: bool

    @property
    def tracking(self) -> str:
        return f"refs/remotes/{self.remote}/{self.remote_branch}"


def target(store: Store, repo: pygit2.Repository, remote: str | None) -> Target | None:
    if repo.head_is_detached:
        raise SyncError(f"HEAD of {store.work_tree} is detached; check out a branch, then sync")
    branch = (
        str(repo.references["HEAD"].target).removeprefix("refs/heads/")
        if repo.head_is_unborn
        else repo.head.shorthand
    )
    names = [r.name for r in repo.remotes if r.name is not None]  # a remote has a name
    config = repo.config
    upstream_remote = (
        config[f"branch.{branch}.remote"] if f"branch.{branch}.remote" in config else None
    )
    upstream_merge = (
        config[f"branch.{branch}.merge"] if f"branch.{branch}.merge" in config else None
    )
    if (
        remote is None
        and upstream_remote is not None
        and upstream_remote in names
        and upstream_merge
    ):
        return Target(upstream_remote, branch, upstream_merge.removeprefix("refs/heads/"), True)
    if remote is None:
        if "origin" in names:
            remote = "origin"
        elif len(names) == 1:
            remote = names[0]
        elif names:
            raise UsageError(
                f"{store.kind} store: several remotes ({', '.join(names)}) and "
                "no upstream; choose one with --remote NAME"
            )
        else:
            return None
    elif remote not in names:
        raise UsageError(f"no remote named {remote!r}; list them with `engram remote list`")
    same = remote == upstream_remote and bool(upstream_merge)
    remote_branch = (
        upstream_merge.removeprefix("refs/heads/") if same and upstream_merge else branch
    )
    return Target(remote, branch, remote_branch, same)


def no_remote_hint(store: Store) -> str:
    if store.kind == "project":
        return "the project repository has no remote; add one with `git remote add origin URL`"
    return "the personal store has no remote; add one with `engram remote add origin URL`"


def check_not_busy(store: Store, store_repo: StoreRepo) -> None:
    reason = store_repo.busy()
    if reason:
        raise SyncError(f"{reason} in {store.work_tree}; finish or abort it, then sync")


def fetch(store: Store, target: Target) -> None:
    done = run_git(store.work_tree, "fetch", "--quiet", target.remote)
    if done.returncode != 0:
        raise SyncError(
            f"could not fetch from {target.remote} ({why_failed(done)}); your events are committed "
            "here and go out with the next `engram sync`"
        )


def _tracking_id(repo: pygit2.Repository, target: Target) -> pygit2.Oid | None:
    """Where the remote-tracking branch points (as the last fetch left it), if it exists."""
    ref = repo.references.get(target.tracking)
    found = None if ref is None else ref.resolve().target  # resolved: an Oid, not a name
    return None if isinstance(found, str) else found


def merge(
    store: Store,
    repo: pygit2.Repository,
    target: Target,
    *,
    count_events: Callable[[], int],
    actor: Callable[[], str],
) -> tuple[str, int]:
    """Merge what the last fetch brought: how it went, and how many events it brought
    (`count_events` counts the store's events, before and after; `actor` is the merge commit's
    identity when git has none)."""
    theirs = _tracking_id(repo, target)
    if theirs is None:
        return "no-remote-branch", 0
    ahead, behind = (0, 1) if repo.head_is_unborn else repo.ahead_behind(repo.head.target, theirs)
    if behind == 0:
        return "up-to-date", 0
    before = count_events()
    # git needs an identity for the merge commit: the user's own when git has one.
    has_identity = run_git(store.work_tree, "var", "GIT_COMMITTER_IDENT").returncode == 0
    identity = None if has_identity else actor()
    args = ["merge", "--no-edit", "--quiet"]
    if ahead == 0:
        args.append("--ff-only")
    else:
        args += ["-m", f"engram sync: merge {target.remote}/{target.remote_branch}"]
        if store.kind == "personal":
            args.append("--allow-unrelated-histories")  # two machines that each ran init
    done = run_git(store.work_tree, *args, target.tracking, identity=identity)
    if done.returncode == 0:
        received = max(0, count_events() - before)
        return ("fast-forward" if ahead == 0 else "merged"), received
    conflicted = run_git(store.work_tree, "diff", "--name-only", "--diff-filter=U").stdout.split()
    if conflicted and _keep_changed_event_files(store, conflicted, identity):
        received = max(0, count_events() - before)
        return "merged", received
    if conflicted:
        run_git(store.work_tree, "merge", "--abort")
        shown = ", ".join(conflicted[:5]) + (", ..." if len(conflicted) > 5 else "")
        raise SyncError(
            f"merging {target.remote}/{target.remote_branch} conflicts in {shown}; nothing was "
            f"changed; merge by hand (`git merge {target.remote}/{target.remote_branch}` in "
            f"{store.work_tree}), then run `engram sync`"
        )
    changed, untracked = in_the_way(repo, theirs, fast_forward=ahead == 0)
    if changed or untracked:
        fixes = []
        if changed:
            fixes.append(f"commit or stash your changes to {first_few(changed)}")
        if untracked:
            fixes.append(f"move away the untracked {first_few(untracked)}")
        raise SyncError(
            f"could not merge {target.remote}/{target.remote_branch}: it would overwrite work "
            f"you have not committed; {', and '.join(fixes)}, then run `engram sync` again; "
            "nothing was changed"
        )
    raise SyncError(
        f"could not merge {target.remote}/{target.remote_branch} ({all_git_said(done)}); "
        "nothing was changed"
    )


def in_the_way(
    repo: pygit2.Repository, theirs: pygit2.Oid, *, fast_forward: bool
) -> tuple[list[str], list[str]]:
    """What of the user's uncommitted work makes git refuse to merge `theirs`: files changed
    (in the work tree or the index) that the merge changes too, or for a merge that is not a
    fast-forward anything staged (git wants the index as HEAD has it); and untracked files
    the merge would create. Read from the repository rather than from git's English."""
    import pygit2
    from pygit2.enums import FileStatus

    their_tree = repo[theirs].peel(pygit2.Tree)
    base = None if repo.head_is_unborn else repo.merge_base(repo.head.target, theirs)
    if base is None:
        diff = their_tree.diff_to_tree(swap=True)  # all of theirs is new here
    else:
        diff = repo[base].peel(pygit2.Tree).diff_to_tree(their_tree)
    touched = {path for d in diff.deltas for path in (d.old_file.path, d.new_file.path)}
    staged = (
        FileStatus.INDEX_NEW
        | FileStatus.INDEX_MODIFIED
        | FileStatus.INDEX_DELETED
        | FileStatus.INDEX_RENAMED
        | FileStatus.INDEX_TYPECHANGE
    )
    changed, untracked = [], []
    for path, flags in sorted(repo.status(untracked_files="all", ignored=False).items()):
        if flags == FileStatus.WT_NEW:
            if path in touched:
                untracked.append(path)
        elif path in touched or (flags & staged and not fast_forward):
            changed.append(path)
    return changed, untracked


def changed_and_removed(store: Store, conflicted: list[str]) -> list[str] | None:
    """If every conflict is an event file one side changed and the other removed (a compaction
    folded it into another file while a clone appended to it), those files; else None."""
    if not conflicted:
        return None
    prefix = store.repo_path(EVENTS_DIR) + "/"
    done = run_git(store.work_tree, "ls-files", "-u", "-z", "--", *conflicted)
    stages: dict[str, set[str]] = {}
    for record in done.stdout.split("\0"):
        if "\t" in record:
            info, path = record.split("\t", 1)
            stages.setdefault(path, set()).add(info.split()[2])
    if set(stages) != set(conflicted):
        return None
    for path, found in stages.items():
        if (
            not (path.startswith(prefix) and path.endswith(EVENT_SUFFIX))
            or "1" not in found
            or len(found) != 2
        ):
            return None
    return sorted(stages)


def _keep_changed_event_files(store: Store, conflicted: list[str], identity: str | None) -> bool:
    """Resolve modify/delete conflicts on event files by keeping the changed file: its lines
    are a superset of what the removed one held, and the side that removed it (a compaction)
    kept those lines elsewhere; readers drop the duplicates. Commits the merge; False (nothing
    done) when other conflicts are left."""
    paths = changed_and_removed(store, conflicted)
    if paths is None:
        return False
    for path in paths:
        if not (store.work_tree / path).is_file():
            return False
    if run_git(store.work_tree, "add", "--", *paths).returncode != 0:
        return False
    # --no-verify: the merge adds no line either side had not committed already.
    done = run_git(
        store.work_tree, "commit", "--no-edit", "--quiet", "--no-verify", identity=identity
    )
    return done.returncode == 0


class Rejected(Exception):
    """The remote has commits this clone lacks: fetch and merge, then push again."""


def push(store: Store, repo: pygit2.Repository, target: Target) -> int:
    """Push the branch; the number of commits sent."""
    if repo.head_is_unborn:
        return 0
    local = repo.head.target
    theirs = _tracking_id(repo, target)
    if theirs is not None:
        ahead, _ = repo.ahead_behind(local, theirs)
        if ahead == 0:
            return 0
    else:
        ahead = _new_to_the_remote(repo, local, target.remote)
    args = ["push", "--quiet", "--porcelain"]
    if not target.has_upstream:
        args.append("--set-upstream")
    args += [target.remote, f"HEAD:refs/heads/{target.remote_branch}"]
    done = run_git(store.work_tree, *args)
    if done.returncode != 0:
        if _remote_moved(done):
            raise Rejected()
        raise SyncError(
            f"could not push to {target.remote} ({why_failed(done)}); your events are committed "
            "here and go out with the next `engram sync`"
        )
    return ahead


def _remote_moved(done: subprocess.CompletedProcess[str]) -> bool:
    """Whether a push failed because the remote branch moved: before it (`[rejected]`), or while
    it ran, another clone's push taking the branch first (the remote's `[remote rejected]
    (failed to update ref)` with `cannot lock ref ...: is at X but expected Y`, or `reference
    already exists` for a branch both create). A lock file left on the remote is not that."""
    text = (done.stdout or "") + (done.stderr or "")
    if "[rejected]" in text or "non-fast-forward" in text or "fetch first" in text:
        return True
    return "cannot lock ref" in text and (
        "but expected" in text or "reference already exists" in text
    )


def _new_to_the_remote(repo: pygit2.Repository, local: pygit2.Oid | str, remote: str) -> int:
    """The commits of `local` that none of `remote`'s branches holds (as the last fetch saw
    them): what creating a branch there sends. A new branch made from main sends only its own
    commits, not main's history again."""
    walker = repo.walk(local)
    prefix = f"refs/remotes/{remote}/"
    for name in repo.references:
        if name.startswith(prefix):
            found = repo.references[name].resolve().target
            if not isinstance(found, str):  # resolved: an Oid
                walker.hide(found)
    return sum(1 for _ in walker)


# -- clone ---------------------------------------------------------------------------------------


def clone(url: str, destination: Path, *, progress: bool = False) -> None:
    """Clone a personal store into `destination`, which must not be a store already.

    The clone is made next to the destination and moved into place only when it is complete and
    holds a store: an interrupted or refused clone leaves nothing behind.
    """
    url = _url(url)
    if destination.exists() and any(destination.iterdir()):
        if (destination / CONFIG_FILE).exists():
            raise UsageError(
                f"a personal store exists already at {destination}; to bring in {url}'s "
                f"events run `engram remote add origin {url}` and then `engram sync`"
            )
        raise UsageError(
            f"{destination} exists and is not empty; move it away or set "
            "ENGRAM_HOME to another directory"
        )
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = destination.parent / f".{destination.name}.clone-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        args = ["clone", "--progress" if progress else "--quiet", url, str(staging)]
        done = run_git(None, *args, progress=progress)
        if done.returncode != 0:
            why = why_failed(done) if not progress else "see git's message above"
            raise SyncError(f"could not clone {url} ({why})")
        if run_git(staging, "rev-parse", "--verify", "--quiet", "HEAD").returncode != 0:
            _check_out_a_branch(staging)
        if run_git(staging, "rev-parse", "--verify", "--quiet", "HEAD").returncode != 0:
            raise SyncError(
                f"{url} is empty; on the machine that has the store, run "
                f"`engram remote add origin {url}` and `engram sync` first"
            )
        if not (staging / CONFIG_FILE).exists():
            raise SyncError(
                f"{url} is a git repository but not an Engram personal store "
                f"(no {CONFIG_FILE} at its top)"
            )
        if destination.exists():
            destination.rmdir()  # empty, checked above
        os.replace(staging, destination)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _check_out_a_branch(clone_dir: Path) -> None:
    """The remote's HEAD names a branch it does not have (a bare repository made by `git init`
    whose default branch differs): check out main, master, or its only branch."""
    done = run_git(clone_dir, "for-each-ref", "--format=%(refname:strip=3)", "refs/remotes/origin/")
    branches = [b for b in done.stdout.split() if b != "HEAD"]
    for choice in ("main", "master", *(branches if len(branches) == 1 else [])):
        if choice in branches:
            run_git(clone_dir, "checkout", "--quiet", "-B", choice, "--track", f"origin/{choice}")
            return
