"""Git hooks for a repository that holds a store: `engram hooks install`.

- `post-merge`, `post-checkout`, `post-rewrite`: after a pull, a merge, a branch switch or a
  rebase, bring the store's caches up to date in the background, so that the next recall does not
  wait for them. They never slow git down and never fail it.
- `pre-commit`: refuse a commit whose staged event files fail verification: a line that is not a
  valid event, a git conflict marker, a torn last line, or what looks like a secret; and a commit
  that changes a committed event file: adds lines to it, or removes or rewrites it so that one of
  its event lines is lost (a compaction, which keeps every line in the file it adds, and a
  `doctor --fix` repair, which takes out only damaged lines, pass). `git commit --no-verify`
  overrides it.

Each hook is a short block between marker lines, placed right after the shebang of the hook
script (so that an existing script's own `exit` cannot skip it), which does its work only when
this installation's Python is there (a committed hooks directory reaches machines without it);
a script that is not a shell script is left alone, and the user is told what to add. `engram
hooks uninstall` removes the blocks and nothing else.

    <python> -I -m engram.githooks pre-commit|refresh [--background]

(that command, and the refresh it runs, are `engram.cli.githooks`: installing the hooks and the
staged-file check are here). The hooks name this installation's Python with `-I` (or `-P`, see
`engram.base.entries`): git runs hooks at the top of the work tree, and a plain `python -m`
would import an `engram` package or `engram.py` from there. `stale` finds hooks that an older
version wrote that way; installing again replaces them.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

from ..base.entries import python_command, shell_command, shell_runs_from_cwd
from ..base.errors import UsageError
from ..base.files import atomic_write
from ..base.layout import EVENT_SUFFIX, EVENTS_DIR
from ..storage.store import Store

BEGIN = "# >>> engram >>>"
END = "# <<< engram <<<"
REFRESH_HOOKS = ("post-merge", "post-checkout", "post-rewrite")
HOOKS = (*REFRESH_HOOKS, "pre-commit")
_SHELLS = ("sh", "bash", "dash", "zsh", "ksh")


def hooks_dir(store: Store) -> Path:
    """Where git runs hooks from for this repository (honours core.hooksPath)."""
    from .sync import run_git

    done = run_git(store.work_tree, "rev-parse", "--git-path", "hooks")
    if done.returncode != 0:
        raise UsageError(f"{store.work_tree} is not a git repository git can read")
    path = Path(done.stdout.strip())
    return path if path.is_absolute() else store.work_tree / path


def _command(hook: str) -> str:
    """The line `hook` runs, for a user to add by hand to a hook that is not a shell script."""
    refresh = shell_command("engram.githooks", "refresh", "--background")
    if hook == "pre-commit":
        return f"{shell_command('engram.githooks', 'pre-commit')} || exit 1"
    return f"{refresh} >/dev/null 2>&1"


def _block(hook: str) -> str:
    """The block for `hook`. It runs only where this installation's Python is: a hooks directory
    can be committed (`core.hooksPath` set to `.husky`, say), and a teammate's clone without it
    must still commit. It ends with status 0 unless it refuses a commit: git returns a
    post-checkout hook's status as `git checkout`'s own, also for `git checkout -- file`."""
    python = shlex.quote(python_command("engram.githooks")[0])
    condition = f"[ -x {python} ]"
    if hook == "post-checkout":
        condition = f'[ "$3" = "1" ] && {condition}'  # branch checkouts, not `checkout -- file`
    body = _command(hook) if hook == "pre-commit" else f"{_command(hook)} || :"
    return (
        f"{BEGIN} (added by `engram hooks install`; `engram hooks uninstall` removes it)\n"
        f"if {condition}; then\n  {body}\nfi\n{END}\n"
    )


def _strip(text: str) -> str:
    out, skipping = [], False
    for line in text.splitlines(keepends=True):
        if line.startswith(BEGIN):
            skipping = True
            continue
        if skipping:
            if line.startswith(END):
                skipping = False
            continue
        out.append(line)
    return "".join(out)


def _is_shell(text: str) -> bool:
    first = text.splitlines()[0] if text else ""
    if not first.startswith("#!"):
        return False
    words = first[2:].split()
    if not words:
        return False
    program = Path(words[0]).name
    if program == "env" and len(words) > 1:
        program = words[1]
    return program in _SHELLS


def install(store: Store) -> list[str]:
    """Install or update the hooks; returns a line per hook saying what was done."""
    directory = hooks_dir(store)
    directory.mkdir(parents=True, exist_ok=True)
    report = []
    for hook in HOOKS:
        path = directory / hook
        existing = path.read_text(encoding="utf-8") if path.exists() else ""
        if existing and not _is_shell(existing):
            report.append(
                f"{hook}: left alone ({path} is not a shell script); add "
                f"`{_command(hook)}` to it yourself"
            )
            continue
        if existing:
            rest = _strip(existing).split("\n", 1)
            shebang, body = rest[0], rest[1] if len(rest) > 1 else ""
            text = f"{shebang}\n{_block(hook)}{body}"
            verb = "updated" if BEGIN in existing else "added to the existing hook"
        else:
            text = f"#!/bin/sh\n{_block(hook)}"
            verb = "installed"
        atomic_write(
            path,
            text,
            durable=False,
            mode=0o755,
            temp=path.with_name(f".{hook}.engram-{os.getpid()}"),
        )
        report.append(f"{hook}: {verb} ({path})")
    return report


def stale(store: Store) -> list[Path]:
    """The hooks of the store's repository with a line that runs `python -m engram…` from the
    working directory (as older versions of `engram hooks install` wrote them)."""
    try:
        directory = hooks_dir(store)
    except UsageError:
        return []
    found = []
    for hook in HOOKS:
        path = directory / hook
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if any(
            shell_runs_from_cwd(line)
            for line in text.splitlines()
            if not line.lstrip().startswith("#")
        ):
            found.append(path)
    return found


def uninstall(store: Store) -> list[str]:
    directory = hooks_dir(store)
    report = []
    for hook in HOOKS:
        path = directory / hook
        if not path.exists():
            continue
        existing = path.read_text(encoding="utf-8")
        if BEGIN not in existing:
            continue
        rest = _strip(existing)
        if rest.strip() in ("", "#!/bin/sh"):
            path.unlink()
            report.append(f"{hook}: removed ({path})")
        else:
            path.write_text(rest, encoding="utf-8")
            report.append(f"{hook}: engram's lines removed, the rest kept ({path})")
    return report


# -- the pre-commit check ---------------------------------------------------------------------


def staged_problems(store: Store) -> list[str]:
    """Problems in the event files as staged in git's index (what a commit would take)."""
    from ..base.secrets import find_secrets
    from ..storage import lines
    from .repo import open_repository, read_blob

    repo = open_repository(store.work_tree)
    prefix = store.repo_path(EVENTS_DIR) + "/"
    head = None if repo.head_is_unborn else repo.head.peel().tree
    problems = lost_lines(store, repo, head)
    for entry in repo.index:
        if entry.mode == 0o120000 and (
            not store.prefix or entry.path.startswith(store.prefix + "/")
        ):
            problems.append(
                f"{entry.path}: a symbolic link inside the Engram store; Engram "
                f"never follows one: `git rm --cached -- {entry.path}`"
            )
            continue
        if not (entry.path.startswith(prefix) and entry.path.endswith(EVENT_SUFFIX)):
            continue
        if head is not None:
            try:
                if head[entry.path].id == entry.id:
                    continue  # unchanged since the last commit
            except KeyError:
                pass
        data = read_blob(repo, entry.id).data
        found, torn = lines.read(data)
        if torn:
            problems.append(
                f"{entry.path}: torn last line (no newline at the end); "
                "stage the file again after the next Engram write repairs it"
            )
        for line in found:
            where = f"{entry.path}:{line.number}"
            if line.problem is not None:
                problems.append(f"{where}: {line.problem}")
                continue
            event = line.event
            assert event is not None
            for text in _strings(event.data):
                findings = find_secrets(text)
                if findings:
                    problems.append(
                        f"{where}: looks like a secret ({findings[0].type}); "
                        "remove the line before committing"
                    )
                    break
    return problems


def _event_blobs(repo: Any, node: Any, path: str) -> dict[str, Any]:
    """Every `.jsonl` file under the tree `node` (at `path`) and its blob id."""
    import pygit2

    found = {}
    for entry in node:
        where = f"{path}/{entry.name}"
        if entry.type_str == "tree":
            found.update(_event_blobs(repo, repo[entry.id], where))
        elif entry.name.endswith(EVENT_SUFFIX) and entry.filemode != pygit2.enums.FileMode.LINK:
            found[where] = entry.id
    return found


def _readable(data: bytes) -> list[bytes]:
    """The lines of an event file, as compared across files (no CR, no blank lines). A line
    readers skip counts too: a newer Engram's line is someone's event, and no repair takes a
    committed line out (`engram doctor` sets those aside; compaction leaves such files alone)."""
    return [raw.removesuffix(b"\r") for raw in data.split(b"\n")[:-1] if raw.strip()]


def _trees(repo: Any, head: Any) -> list[Any]:
    """HEAD's tree, then those of the commits an operation under way brings in: a merge's
    MERGE_HEAD (its lines are a teammate's before the merge is committed), a cherry-pick's."""
    import pygit2

    from .repo import OPERATION_HEADS

    trees = [head] if head is not None else []
    for name in OPERATION_HEADS[:-1]:  # not ORIG_HEAD: what a reset left behind on purpose
        try:
            text = (Path(repo.path) / name).read_text(errors="replace")
        except OSError:
            continue
        for word in text.split():
            try:
                tree = repo[word].peel(pygit2.Commit).tree
            except (KeyError, ValueError, pygit2.GitError):
                continue
            if all(tree.id != t.id for t in trees):
                trees.append(tree)
    return trees


def _lost(repo: Any, committed: dict[str, Any], staged: dict[str, Any]) -> dict[str, int]:
    """How many lines of each `committed` file the `staged` event files no longer hold."""
    touched = [p for p, oid in committed.items() if staged.get(p) != oid]
    if not touched:
        return {}
    present: set[bytes] = set()
    for path, oid in staged.items():
        if committed.get(path) != oid:
            present.update(_readable(repo[oid].data))
    lost: dict[str, int] = {}
    for path in touched:
        missing = [raw for raw in _readable(repo[committed[path]].data) if raw not in present]
        if missing:
            lost[path] = len(missing)
    if lost:  # a line may also be in a file this commit leaves as it was
        for path, oid in staged.items():
            if committed.get(path) == oid:
                present.update(_readable(repo[oid].data))
        lost = {
            path: sum(1 for raw in _readable(repo[committed[path]].data) if raw not in present)
            for path in lost
        }
    return {path: n for path, n in lost.items() if n}


def lost_lines(store: Store, repo: Any, head: Any) -> list[str]:
    """Committed event files the staged commit changes: removed or rewritten so that an event
    line they hold is in no staged event file any more, or extended with new lines. Files are
    added once and never changed; the one kind of commit that removes them is a compaction
    (`engram compact`), which keeps every line in the file it adds, and the one rewrite is
    `engram doctor --fix` taking damaged lines only this clone had out (or CR LF endings back
    to LF): these pass. During a merge the files it brings in count as committed too."""
    import pygit2

    top = store.repo_path(EVENTS_DIR)
    staged = {
        e.path: e.id
        for e in repo.index
        if e.path.startswith(top + "/") and e.path.endswith(EVENT_SUFFIX)
    }
    lost: dict[str, int] = {}
    committed: dict[str, Any] = {}
    for number, tree in enumerate(_trees(repo, head)):
        try:
            node = tree[top]
        except KeyError:
            continue
        if not isinstance(node, pygit2.Tree):
            continue
        files = _event_blobs(repo, node, top)
        if number == 0 and tree is head:
            committed = files
        for path, count in _lost(repo, files, staged).items():
            lost[path] = max(count, lost.get(path, 0))
    verb = {True: "removes", False: "rewrites"}
    problems = [
        f"{path}: this commit {verb[path not in staged]} a committed event file and "
        f"{count} of its event line(s) would be in no event file any more; event files "
        "are never changed after their commit (`engram compact` folds them without "
        "loss); `git commit --no-verify` commits it anyway"
        for path, count in sorted(lost.items())
    ]
    for path, oid in committed.items():
        if path in staged and staged[path] != oid and path not in lost:
            before = set(_readable(repo[oid].data))
            if any(raw not in before for raw in _readable(repo[staged[path]].data)):
                problems.append(
                    f"{path}: this commit adds lines to a committed event file; event files are "
                    "never changed after their commit (Engram writes new events to a new file), "
                    "so that merges never conflict; `git commit --no-verify` commits it anyway"
                )
    return sorted(problems)


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []
