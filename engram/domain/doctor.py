"""`engram doctor`: what is wrong with a store, where, and the command that fixes it.

It looks at everything a crash, a bad merge, a full disk or a hand edit can leave behind:

- event files: a torn last line, damaged lines (conflict markers, invalid JSON or UTF-8, a line
  cut short in the middle), files changed in their committed part or gone from the work tree;
- crash leftovers: a lock held by a process that hangs, temporary files of processes that died,
  git's `index.lock` left by a killed commit;
- git: events not committed yet, a merge or rebase in progress, events that git took away (a
  clean, a dropped stash, a reset, a revert, a rebase, a removed worktree: see `engram.lost`);
- derived state in `<git-dir>/engram/`: damaged or missing caches, damaged bookkeeping files;
- the disk: a read-only or full file system;
- the store's own files: config.yaml, README.md, .gitattributes.

Diagnosis repairs nothing (it writes a probe file, removed at once, to learn whether the disk
takes writes, and brings the read model and the ledger of lost events up to date, as any read
does). `--fix` applies only the repairs that lose nothing: damaged lines and torn
tails move to `<git-dir>/engram/quarantine/<time>/` (with a copy of the file as it was) and the
file is rewritten without them; empty event files, dead processes' temporary files and a stale
`index.lock` are removed, and git's index entries for Engram's files are brought up to HEAD;
damaged bookkeeping files are removed and damaged caches rebuilt; missing store files are
recreated and committed; lost events are written back and committed (`engram recover`).
Everything else is reported with the command a person should run.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shlex
import shutil
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

import orjson

from ..storage import events as ev
from ..storage import lines
from ..model.sessions import process_alive
from ..base.config import CONFIG_FILE
from ..base.errors import EngramError, NoStoreError
from ..storage.store import EVENTS_DIR, GITATTRIBUTES_LINE, Store, WriterState

if TYPE_CHECKING:
    from ..api import Engram

Level = Literal["error", "warning", "note"]

HOLD_SECONDS = 1.0  # a lock held this long by one process is worth reporting
MIN_FREE_BYTES = 1024 * 1024  # below this, a store's disk counts as full
_SKELETON = (CONFIG_FILE, "README.md", ".gitattributes")


@dataclass(frozen=True)
class Finding:
    """One thing wrong (error, warning) or worth knowing (note), with its fix."""

    check: str  # a stable name: torn-line, damaged-line, uncommitted, cache, ...
    level: Level
    message: str
    fix: str  # the command (or action) that fixes it
    path: str | None = None  # an event file (store-relative) or a local file (absolute)
    line: int | None = None
    auto: bool = False  # `engram doctor --fix` applies the fix

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class StoreReport:
    store: Store
    findings: list[Finding] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(f.level != "note" for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "store": self.store.kind,
            "path": str(self.store.root),
            "ok": self.ok,
            "findings": [f.to_dict() for f in self.findings],
            "fixed": self.fixed,
        }


# -- which stores -------------------------------------------------------------------------------


def _present(store: Store | None) -> bool:
    """A store worth examining: its directory exists and holds something of a store."""
    if store is None or not store.root.is_dir():
        return False
    return any((store.root / name).exists() for name in (CONFIG_FILE, EVENTS_DIR, ".git"))


def stores_to_examine(engram: Engram) -> list[Store]:
    """Like `Engram.stores()`, but a store that lost its config.yaml is examined, not refused."""
    personal, project = engram.personal, engram.project
    if engram.use == "project":
        if project is None and engram.foreign is not None:
            engram.project_store()  # refuses, saying whose the .engram/ folder is
        if project is None or not project.root.is_dir():
            raise NoStoreError("no project store here; run `engram init --project` at the top "
                               "of the repository")
        return [project]
    if engram.use == "personal":
        if not _present(personal):
            raise NoStoreError("no personal store yet; run `engram init` to create one")
        return [personal]
    found = [s for s in (project, personal) if _present(s)]
    if not found:
        raise NoStoreError("no Engram store yet; run `engram init` (personal) or "
                           "`engram init --project` (inside a git repository)")
    return found


# -- the whole run ------------------------------------------------------------------------------


def run(engram: Engram, *, fix: bool = False) -> dict[str, Any]:
    reports = []
    for store in stores_to_examine(engram):
        report = StoreReport(store, diagnose(engram, store))
        if fix:
            report.fixed = repair(engram, store, report.findings)
            report.findings = diagnose(engram, store)
        reports.append(report)
    return {"ok": all(r.ok for r in reports), "stores": [r.to_dict() for r in reports]}


def diagnose(engram: Engram, store: Store) -> list[Finding]:
    """Every finding for one store."""
    out: list[Finding] = []
    checks = (_check_layout, _check_links, _check_disk, _check_locks, _check_temp_files,
              _check_events,
              _check_git, _check_caches, _check_local_state, _check_lost)
    for check in checks:
        try:
            out.extend(check(engram, store))
        except Exception as exc:  # one failing check must not hide what the others find
            out.append(Finding("doctor", "warning",
                               f"could not run the {check.__name__[7:]} check: "
                               f"{ev.one_line(exc, 200)}", "report this as a bug"))
    # A file with damaged lines is also one whose committed part changed: say it once, with
    # the fix for its lines.
    damaged = {f.path for f in out if f.check in ("damaged-line", "torn-line", "line-endings")}
    return [f for f in out if not (f.check == "committed-changed" and f.path in damaged)]


# -- helpers --------------------------------------------------------------------------------------


def _flag(store: Store) -> str:
    return f"--{store.kind}"


def _git_c(store: Store) -> str:
    from ..git.repo import git_c

    return git_c(store)


def restore_command(store: Store, rels: list[str]) -> str:
    from ..git.repo import restore_command as command

    return command(store, rels)


def _describe(pid: int) -> str:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").strip()
        return f"process {pid} ({ev.one_line(cmdline.decode(errors='replace'), 60)})"
    except OSError:
        return f"process {pid}"


def _flock_held(path: Path) -> bool | None:
    """Is the flock on `path` held (by another open file)? None when it cannot be told."""
    try:
        import fcntl
    except ImportError:
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        os.close(fd)  # closing drops a lock this probe took
    return False


def _flock_holders(path: Path) -> list[int]:
    """The processes holding a flock on `path`, from /proc/locks (Linux)."""
    try:
        inode = os.stat(path).st_ino
        text = Path("/proc/locks").read_text()
    except OSError:
        return []
    pids = []
    for row in text.splitlines():
        parts = row.split()
        if "->" in parts or len(parts) < 6:
            continue  # a waiter, not a holder
        try:
            if int(parts[5].rsplit(":", 1)[1]) == inode:
                pids.append(int(parts[4]))
        except (ValueError, IndexError):
            continue
    return pids


def _open_by(path: Path) -> list[int] | None:
    """The processes with `path` open, from /proc (Linux); None when that cannot be told."""
    proc = Path("/proc")
    if not (proc / "self" / "fd").is_dir():
        return None
    try:
        target = os.stat(path)
    except FileNotFoundError:
        return []
    pids = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for fd in (entry / "fd").iterdir():
                try:
                    st = os.stat(fd)
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
                    pids.append(int(entry.name))
                    break
        except OSError:
            continue
    return pids


def _mount_point(path: Path) -> Path:
    """The mount point of the file system holding `path` (bind mounts included, on Linux)."""
    path = path.resolve()
    try:
        table = Path("/proc/self/mountinfo").read_text()
    except OSError:
        while not os.path.ismount(path) and path != path.parent:
            path = path.parent
        return path
    best = Path("/")
    for row in table.splitlines():
        fields = row.split()
        if len(fields) < 5:
            continue
        point = Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields[4]))
        if (point == path or point in path.parents) and len(point.parts) >= len(best.parts):
            best = point
    return best


# -- the store's own files ------------------------------------------------------------------------


def _check_layout(engram: Engram, store: Store) -> list[Finding]:
    out = []
    init = "engram init --project" if store.kind == "project" else "engram init"
    if not store.git_dir.exists():
        return [Finding("layout", "error", f"{store.work_tree} is not a git repository",
                        f"`{_git_c(store)} init -b main`, then `{init}`")]
    for name in _SKELETON:
        if not (store.root / name).exists():
            out.append(Finding(
                "layout", "warning", f"{name} is missing from the store",
                f"`{init}` recreates it and commits it (`engram doctor --fix` runs it)",
                path=name, auto=True,
            ))
    return out


# -- the disk -----------------------------------------------------------------------------------


def _check_disk(engram: Engram, store: Store) -> list[Finding]:
    """Can the store be written? A real write of a probe file says it, as the writer sees it."""
    out = []
    mount = _mount_point(store.root)
    for directory in (store.events_dir if store.events_dir.is_dir() else store.root,
                      store.local_dir if store.local_dir.is_dir() else store.git_dir):
        probe = directory / f".engram-doctor-{os.getpid()}.probe"
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, b"probe\n")
                os.fsync(fd)
            finally:
                os.close(fd)
                probe.unlink(missing_ok=True)
        except OSError as exc:
            out.append(_unwritable(store, directory, mount, exc))
            break
    if not out:
        try:
            st = os.statvfs(store.root)
        except OSError:
            return out
        free = st.f_bavail * st.f_frsize
        if free < MIN_FREE_BYTES or (st.f_files and st.f_favail == 0):
            out.append(Finding(
                "disk", "error",
                f"the disk holding the store is full ({free} bytes free on {mount}); "
                "reads work, writes will fail",
                f"free some space on {mount} (`df -h {shlex.quote(str(mount))}` shows it); "
                "writes work again by themselves",
            ))
    return out


def _unwritable(store: Store, directory: Path, mount: Path, exc: OSError) -> Finding:
    where = shlex.quote(str(mount))
    if exc.errno == errno.EROFS:
        message = f"the store's file system ({mount}) is read-only: reads work, writes fail"
        fix = f"remount it read-write: `mount -o remount,rw {where}`"
    elif exc.errno in (errno.EACCES, errno.EPERM):
        message = f"{directory} is not writable (permission denied): reads work, writes fail"
        fix = f"`chmod -R u+w {shlex.quote(str(store.root))}`" + (
            f" and `chmod -R u+w {shlex.quote(str(store.local_dir))}`"
            if store.kind == "project" else "")
    elif exc.errno in (errno.ENOSPC, errno.EDQUOT):
        message = f"the disk holding the store is full ({mount}): reads work, writes fail"
        fix = f"free some space on {mount} (`df -h {where}` shows it)"
    else:
        message = f"cannot write to {directory} ({exc.strerror or exc}): writes fail"
        fix = "make the directory writable again"
    return Finding("disk", "error", message, fix)


# -- locks and crash leftovers -------------------------------------------------------------------


def _check_locks(engram: Engram, store: Store) -> list[Finding]:
    out = []
    for path, what in ((store.local_dir / "write.lock", "write lock"),
                       (store.local_dir / "cache" / "index.lock", "search index lock")):
        if not path.exists():
            continue
        deadline = time.monotonic() + HOLD_SECONDS
        held = _flock_held(path)
        while held and time.monotonic() < deadline:
            time.sleep(0.05)
            held = _flock_held(path)
        if held:
            holders = _flock_holders(path)
            who = ", ".join(_describe(p) for p in holders) or "another process"
            stop = f"`kill {' '.join(map(str, holders))}`" if holders else "stop it"
            out.append(Finding(
                "lock", "warning",
                f"the {what} has been held for over {HOLD_SECONDS:.0f}s by {who}; "
                "writes wait for it (the system frees it the moment that process ends)",
                f"let it finish, or if it hangs, stop it: {stop}", path=str(path),
            ))
    for lock in git_lock_files(store):
        try:
            age = time.time() - lock.stat().st_mtime
        except FileNotFoundError:
            continue
        holders = _open_by(lock)
        if holders or (holders is None and age < 60):
            out.append(Finding("git-lock", "note",
                               f"a git command is updating {lock.stem} ({lock})",
                               "let it finish", path=str(lock)))
        else:
            out.append(Finding(
                "git-lock", "warning",
                f"{lock} was left by a git command or commit that was killed; neither git "
                "nor Engram can commit until it is gone (the events are safe on disk)",
                f"`engram doctor --fix {_flag(store)}` (or `rm {shlex.quote(str(lock))}`)",
                path=str(lock), auto=True,
            ))
    return out


def git_lock_files(store: Store) -> list[Path]:
    """Git's lock files a commit takes: the index, HEAD, the branch refs, packed-refs."""
    git_dir = store.git_dir
    common = git_dir
    if (git_dir / "commondir").is_file():  # a linked worktree
        common = (git_dir / (git_dir / "commondir").read_text().strip()).resolve()
    found = [path for path in (git_dir / "index.lock", git_dir / "HEAD.lock",
                               common / "packed-refs.lock") if path.exists()]
    heads = common / "refs" / "heads"
    if heads.is_dir():
        found += sorted(heads.rglob("*.lock"))
    return found


def _temp_files(store: Store) -> Iterator[tuple[Path, int | None]]:
    """Engram's temporary files (`<name>.<pid>.tmp`), with the pid that wrote them."""
    places = [store.local_dir, store.local_dir / "cache", store.local_dir / "cache" / "text"]
    for place in places:
        if not place.is_dir():
            continue
        for path in place.iterdir():
            parts = path.name.split(".")
            if len(parts) >= 3 and parts[-1] == "tmp" and parts[-2].isdigit() and path.is_file():
                yield path, int(parts[-2])
    if store.events_dir.is_dir():  # doctor's rewrites and compaction's merged files
        for path in store.events_dir.rglob(".*.tmp"):
            parts = path.name.split(".")
            if len(parts) >= 4 and parts[-2].isdigit() and path.is_file():
                yield path, int(parts[-2])
    config_tmp = store.root / f"{CONFIG_FILE}.tmp"
    if config_tmp.is_file():
        yield config_tmp, None


def _stale_temp_files(store: Store) -> list[Path]:
    stale = []
    for path, pid in _temp_files(store):
        if pid is not None and not process_alive(pid):
            stale.append(path)
        elif pid is None and time.time() - path.stat().st_mtime > 60:
            stale.append(path)
    return stale


def _check_temp_files(engram: Engram, store: Store) -> list[Finding]:
    return [
        Finding("temp-file", "warning",
                f"leftover temporary file of a process that stopped mid-write: {path}",
                f"`engram doctor --fix {_flag(store)}` removes it (it holds nothing that is "
                "not elsewhere)", path=str(path), auto=True)
        for path in _stale_temp_files(store)
    ]


# -- event files --------------------------------------------------------------------------------


@dataclass
class Scan:
    """An event file split into the lines readers use and the rest."""

    good: list[bytes] = field(default_factory=list)  # whole lines, with their newline (LF)
    bad: list[tuple[int, bytes, str]] = field(default_factory=list)  # (line, bytes, why)
    torn: bytes = b""  # an unterminated last line
    crlf: int = 0  # lines git converted to CR LF (read; written back with LF)

    @property
    def damaged(self) -> bool:
        return bool(self.bad or self.torn or self.crlf)


def scan(data: bytes) -> Scan:
    """Classify every line the way the read path does (`lines.classify`)."""
    result = Scan()
    found, result.torn = lines.read(data)
    for line in found:
        if line.problem is not None:
            result.bad.append((line.number, line.raw, line.problem))
        elif line.note == lines.CRLF:
            result.crlf += 1
            result.good.append(line.raw[:-1] + b"\n")
        else:
            result.good.append(line.raw + b"\n")
    return result


def _repo(store: Store) -> Any:
    """The store's git repository (a `git.StoreRepo`), or None when git cannot open it."""
    from ..git import repo as git

    try:
        return git.StoreRepo(store)
    except EngramError:
        return None


def _git_operation(busy: str | None) -> str | None:
    """The git command whose operation is under way, from `StoreRepo.busy()`."""
    if not busy:
        return None
    for word, command in (("rebase", "rebase"), ("merge", "merge"),
                          ("cherrypick", "cherry-pick"), ("revert", "revert")):
        if word in busy:
            return command
    return None


def _committed_bytes(repo: Any, store: Store, rel: str) -> bytes | None:
    if repo is None:
        return None
    tree = repo.head_tree()
    if tree is None:
        return None
    try:
        obj = tree[store.repo_path(rel)]
    except KeyError:
        return None
    data = getattr(obj, "data", None)
    return data if isinstance(data, bytes) else None


def _plain_commit(store: Store, repo: Any, rel: str) -> str:
    """The git commands that commit a repaired event file."""
    path = shlex.quote(store.repo_path(rel))
    operation = _git_operation(repo.busy() if repo is not None else None)
    if operation:
        return (f"`{_git_c(store)} add -- {path}`, then finish the {operation}: "
                f"`{_git_c(store)} {operation} --continue`")
    return f"`{_git_c(store)} commit -m 'engram: set damaged lines aside' -- {path}`"


def _after_rewrite(store: Store, repo: Any, rel: str, kept: bytes) -> str:
    """How the repaired file gets committed: Engram's commit refuses a changed committed part."""
    committed = _committed_bytes(repo, store, rel)
    if committed is None or kept.startswith(committed):
        return f"`engram commit {_flag(store)}` then commits it"
    return ("its committed part changes, which `engram commit` refuses: commit it with plain "
            f"git, {_plain_commit(store, repo, rel)}")


def _check_events(engram: Engram, store: Store) -> list[Finding]:
    from .verify import verify_store

    out: list[Finding] = []
    repo = _repo(store)
    state = WriterState.load(store)
    with _maybe_locked(store):
        reported: set[tuple[str, int]] = set()
        for path in store.event_files():
            rel = store.rel(path)
            try:
                data = path.read_bytes()
            except OSError as exc:
                out.append(Finding("event-file", "error", f"cannot be read ({exc.strerror})",
                                   f"make it readable: `chmod u+r {shlex.quote(str(path))}`",
                                   path=rel))
                continue
            if not data and _committed_bytes(repo, store, rel) is None:
                out.append(Finding(
                    "empty-file", "warning",
                    "an empty event file, left by a write that never finished (a process "
                    "killed as it created the file); git sees it as an untracked file",
                    f"`engram doctor --fix {_flag(store)}` removes it", path=rel, auto=True,
                ))
                continue
            found = scan(data)
            if not found.damaged:
                continue
            kept = b"".join(found.good)
            commit_hint = _after_rewrite(store, repo, rel, kept)
            if found.crlf:
                out.append(_line_endings(store, repo, rel, found.crlf))
            fix = (f"`engram doctor --fix {_flag(store)}` moves the line to "
                   f"{store.local_dir / 'quarantine'}/ (with a copy of the whole file) and "
                   f"rewrites the file without it; {commit_hint}")
            for number, _, why in found.bad:
                reported.add((rel, number))
                out.append(Finding("damaged-line", "error", f"{why}; readers skip this line",
                                   fix, path=rel, line=number, auto=True))
            if found.torn:
                number = data.count(b"\n") + 1
                reported.add((rel, number))
                own = state.segment == rel
                out.append(Finding(
                    "torn-line", "warning",
                    f"torn last line ({len(found.torn)} bytes) left by a crash mid-write; "
                    "readers skip it",
                    f"`engram doctor --fix {_flag(store)}` sets it aside in "
                    f"{store.local_dir / 'quarantine'}/" +
                    (" (or the next write from this clone does)" if own else ""),
                    path=rel, line=number, auto=True,
                ))
        report = verify_store(store)
    for problem in report["problems"]:
        if (problem["path"], problem["line"]) in reported or \
                problem["message"].startswith(("torn last line", "blank line", "git conflict",
                                               "invalid JSON", "line ends with CR LF",
                                               "a symbolic link")):
            continue
        out.append(Finding(
            "event-file", "error" if problem["message"].startswith("id ") else "warning",
            f"{problem['message']} (the line is read as it is)",
            f"if the file was edited by hand, `{_git_c(store)} diff -- "
            f"{shlex.quote(store.repo_path(problem['path']))}` shows how and "
            f"`{restore_command(store, [problem['path']])}` restores it",
            path=problem["path"], line=problem["line"] or None,
        ))
    return out


def _line_endings(store: Store, repo: Any, rel: str, count: int) -> Finding:
    """Lines git wrote with CR LF: name the attribute that asked for it."""
    cause = "a .gitattributes or core.autocrlf converts its line endings"
    if repo is not None:
        try:
            eol = repo.repo.get_attr(store.repo_path(rel), "eol")
        except Exception:  # pygit2.GitError and kin: the cause is then only guessed
            eol = None
        if eol == "crlf":
            cause = "a .gitattributes gives it `eol=crlf` (`git check-attr -a -- " \
                    f"{shlex.quote(store.repo_path(rel))}` says which)"
    return Finding(
        "line-endings", "warning",
        f"{count} line(s) end with CR LF: {cause}; the events are read, but the file is not "
        "as Engram writes it",
        f"`engram doctor --fix {_flag(store)}` writes the store's .gitattributes line "
        f"`{GITATTRIBUTES_LINE}` back and the file with LF endings", path=rel, auto=True)


def _check_links(engram: Engram, store: Store) -> list[Finding]:
    return [
        Finding("symlink", "error",
                "a symbolic link inside the store; it is not followed (writes through it are "
                "refused, what it points to is not read)",
                f"remove it: `{_git_c(store)} rm -- {shlex.quote(store.repo_path(link))}` (or "
                f"`rm` if it is not committed), then commit", path=link)
        for link in store.links()
    ]


@contextlib.contextmanager
def _maybe_locked(store: Store, timeout: float = HOLD_SECONDS) -> Iterator[bool]:
    """Hold the write lock if it can be had (so no append is caught half-way); a store that
    cannot be locked (read-only) is examined all the same."""
    try:
        lock = store.lock(timeout=timeout)
        lock.__enter__()
    except EngramError:
        yield False
        return
    try:
        yield True
    finally:
        lock.__exit__(None, None, None)


# -- git ----------------------------------------------------------------------------------------


def _check_git(engram: Engram, store: Store) -> list[Finding]:
    from ..git import repo as git

    out: list[Finding] = []
    try:
        repo = git.StoreRepo(store)
    except EngramError as exc:
        return [Finding("git", "error", str(exc), f"`{_git_c(store)} status` shows what git "
                                                  "makes of it")]
    busy = repo.busy()
    if busy:
        command = _git_operation(busy)
        fix = (f"finish it: `{_git_c(store)} {command} --continue`, or give it up: "
               f"`{_git_c(store)} {command} --abort`") if command else \
            f"finish it with git (`{_git_c(store)} status` says how)"
        out.append(Finding("git-busy", "warning", f"{busy}; Engram's commits wait until it is "
                                                  "finished (writes go on)", fix))
        out.extend(_removed_while_changed(store))
    pending = repo.pending()
    repaired = _quarantined(store)
    for rel in pending.refused:
        spec = shlex.quote(store.repo_path(rel))
        if rel in repaired:
            kept = (store.root / rel).read_bytes()
            if not scan(kept).damaged:
                out.append(Finding(
                    "repaired", "warning",
                    "repaired by `engram doctor --fix` (its damaged lines are in quarantine); "
                    "new events in it wait until the repair is committed",
                    f"commit the repair with plain git: {_plain_commit(store, repo, rel)}",
                    path=rel,
                ))
                continue
        out.append(Finding(
            "committed-changed", "error",
            "changed in its committed part (not by Engram, which only appends); its new "
            "events cannot be committed", f"`{_git_c(store)} diff HEAD -- {spec}` shows the "
            f"change; `{restore_command(store, [rel])}` restores the committed lines", path=rel,
        ))
    for rel in pending.missing:
        out.append(Finding(
            "missing-file", "error", "committed but gone from the work tree; its events are "
            "not read", f"`{restore_command(store, [rel])}`", path=rel,
        ))
    behind = _index_behind(store, repo)
    if behind:
        shown = " ".join(shlex.quote(p) for p in behind) if len(behind) <= 20 else \
            shlex.quote(store.prefix or ".")
        out.append(Finding(
            "git-index", "warning",
            f"git's index is behind the last commit for {len(behind)} of Engram's files (a "
            "commit was interrupted before it updated the index): `git status` shows them as "
            "staged deletions or changes, and a plain `git commit` would take them back",
            f"`engram doctor --fix {_flag(store)}` (or `{_git_c(store)} reset -q -- {shown}`); "
            "it changes only those index entries, never the files", auto=True,
        ))
    # A session's start and end alone wait for the next commit on purpose: not a finding.
    count = sum(1 for event in pending.events if ev.substantive(event.kind))
    if count:
        settings = engram.settings(store)
        state = WriterState.load(store)
        since = state.pending_since or min(
            ((store.root / c.rel).stat().st_mtime for c in pending.changes
             if (store.root / c.rel).exists()), default=time.time())
        age = max(0.0, time.time() - since)
        late = age > settings["commit.every_seconds"]
        out.append(Finding(
            "uncommitted", "warning" if late else "note",
            f"{count} event(s) written but not committed yet (the oldest {_age(age)} ago)" +
            ("" if late else "; the next batched commit takes them"),
            f"`engram commit {_flag(store)}`",
        ))
    return out


def _removed_while_changed(store: Store) -> list[Finding]:
    """A merge stopped on event files one side changed and the other removed: a compaction
    (`engram compact`) folded them into one file while another clone still appended to them."""
    from ..git.sync import changed_and_removed, run_git

    unmerged = run_git(store.work_tree, "diff", "--name-only", "--diff-filter=U").stdout.split()
    paths = changed_and_removed(store, unmerged)
    if not paths:
        return []
    shown = " ".join(shlex.quote(p) for p in paths[:20]) + (" ..." if len(paths) > 20 else "")
    return [Finding(
        "merge-removed-changed", "error",
        f"the merge stopped on {len(paths)} event file(s) that one side changed and the other "
        "removed: a compaction folded them into one file while another clone appended to them; "
        "no line is lost by keeping them (readers drop the duplicate lines)",
        f"keep the changed files: `{_git_c(store)} add -- {shown}`, then "
        f"`{_git_c(store)} commit --no-edit` (when `engram sync` merges, it does this itself)",
    )]


def _check_lost(engram: Engram, store: Store) -> list[Finding]:
    """Events seen in this store that git took away (see `engram.lost`)."""
    from ..git import lost

    try:
        proj = engram.projection(store)
        lost.settle(store, proj)
        gone = lost.find(store, proj)
    except sqlite3.OperationalError:
        return []  # a read-only store: its read model cannot be brought up to date (reported)
    if not gone.count:
        return []
    where = ", ".join(f"{rel} ({count})" for rel, count in gone.files.items())
    return [Finding(
        "lost-events", "error",
        f"{gone.count} event(s) seen in this store are gone from it and from every branch "
        f"(a git clean, stash, reset, revert, rebase or worktree removal took them): {where}",
        f"`engram recover {_flag(store)}` (or `engram doctor --fix {_flag(store)}`) writes "
        "them back from git's reflogs, stashes and unreachable objects, or from Engram's "
        "ledger, and commits them; history is not rewritten",
        auto=True,
    )]


def _index_behind(store: Store, repo: Any) -> list[str]:
    """Engram's committed files whose entry in git's index differs from HEAD while the file in
    the work tree is exactly HEAD's: an interrupted commit, not the user's staging."""
    import pygit2

    tree = repo.head_tree()
    if tree is None:
        return []
    try:
        index = pygit2.Index(str(store.git_dir / "index")) \
            if (store.git_dir / "index").exists() else pygit2.Index()
    except pygit2.GitError:
        return []
    top: Any = tree
    if store.prefix:
        try:
            top = tree[store.prefix]
        except KeyError:
            return []
    behind = []

    def walk(node: Any, prefix: str) -> None:
        for entry in node:
            path = f"{prefix}/{entry.name}" if prefix else entry.name
            if isinstance(entry, pygit2.Tree):
                walk(entry, path)
                continue
            try:
                if index[path].id == entry.id:
                    continue
            except KeyError:
                pass
            file = store.work_tree / path
            try:
                if file.is_file() and pygit2.hash(file.read_bytes()) == entry.id:
                    behind.append(path)
            except OSError:
                continue

    if isinstance(top, pygit2.Tree):
        walk(top, store.prefix)
    return behind


def _quarantined(store: Store) -> set[str]:
    """Event files that `engram doctor --fix` has repaired (from the quarantine manifests)."""
    found: set[str] = set()
    for manifest in (store.local_dir / "quarantine").glob("*/manifest.json"):
        try:
            found.update(entry["path"] for entry in orjson.loads(manifest.read_bytes()))
        except (OSError, orjson.JSONDecodeError, TypeError, KeyError):
            continue
    return found


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"


# -- caches and bookkeeping ------------------------------------------------------------------------


def _sqlite_problem(path: Path, table: str) -> str | None:
    """What is wrong with a cache database, or None; read-only, changes nothing."""
    for mode in ("ro", "immutable"):
        uri = f"file:{quote(str(path))}?" + ("mode=ro" if mode == "ro" else "immutable=1")
        try:
            db = sqlite3.connect(uri, uri=True, timeout=5)
        except sqlite3.Error as exc:
            return str(exc)
        try:
            check = db.execute("PRAGMA quick_check").fetchone()
            if not check or check[0] != "ok":
                return f"SQLite finds it damaged ({check[0] if check else 'no answer'})"
            db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
            return None
        except sqlite3.OperationalError as exc:
            if mode == "ro" and "unable to open" in str(exc):
                continue  # a read-only directory without its -shm file
            return str(exc)
        except sqlite3.DatabaseError as exc:
            return str(exc)
        finally:
            db.close()
    return None


def _cache_lock(store: Store) -> contextlib.AbstractContextManager[Any]:
    """The search index lock, so that no index is caught half-saved; skipped if unavailable."""
    from filelock import FileLock, Timeout

    cache = store.local_dir / "cache"
    if not cache.is_dir():
        return contextlib.nullcontext()
    lock = FileLock(cache / "index.lock", timeout=5, thread_local=False)
    try:
        lock.acquire()
    except (Timeout, OSError):
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def held() -> Iterator[None]:
        try:
            yield
        finally:
            lock.release()

    return held()


def damaged_caches(store: Store) -> list[tuple[Path, str, Level]]:
    """(file or directory, what is wrong, how much it matters) for every cache that the next
    use would rebuild: a warning when damaged, a note when saved by an earlier version."""
    from ..search.text import STAMP, intact
    from ..search.vectors import file_stamp

    cache = store.local_dir / "cache"
    out: list[tuple[Path, str, Level]] = []
    for name, table in (("projection.sqlite3", "meta"), ("embeddings.sqlite3", "vectors")):
        path = cache / name
        if path.is_file() and path.stat().st_size:
            problem = _sqlite_problem(path, table)
            if problem:
                out.append((path, f"damaged ({problem})", "warning"))
    text = cache / "text"
    if text.is_dir() and any(text.iterdir()) and not intact(text):
        if (text / STAMP).exists():
            out.append((text, "damaged: its files are not those its last save wrote",
                        "warning"))
        else:
            out.append((text, "saved by an earlier version of Engram", "note"))
    index, meta_path = cache / "vectors.usearch", cache / "vectors.json"
    if index.exists() or meta_path.exists():
        try:
            meta = orjson.loads(meta_path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            meta = None
        if isinstance(meta, dict) and meta.get("complete") and "file" not in meta:
            out.append((index, "saved by an earlier version of Engram", "note"))
        elif not (isinstance(meta, dict) and meta.get("complete")
                  and meta.get("file") == file_stamp(index)):
            out.append((index, "damaged: it does not match what its last save recorded",
                        "warning"))
    return out


def _check_caches(engram: Engram, store: Store) -> list[Finding]:
    cache = store.local_dir / "cache"
    reindex = f"`engram reindex {_flag(store)}`"
    if not (cache / "projection.sqlite3").exists():
        return [Finding("cache", "note", "the caches are not built yet; the first read builds "
                                         "them", reindex)]
    with _cache_lock(store):
        damaged = damaged_caches(store)
    out = [
        Finding("cache", level, f"the cache {path.name} is {why}; the next use rebuilds it "
                                "from the event files",
                f"{reindex} (`engram doctor --fix {_flag(store)}` runs it)", path=str(path),
                auto=True)
        for path, why, level in damaged
    ]
    missing = [name for name, wanted in (
        ("text", True), ("vectors.usearch", engram.settings(store)["search.model"] != "off"),
    ) if wanted and not (cache / name).exists()]
    if missing:
        out.append(Finding("cache", "note", f"not built yet (or a reindex was interrupted): "
                                            f"{', '.join(missing)}; the next recall builds it",
                           reindex))
    return out


def _local_state_problems(store: Store) -> list[tuple[Path, str]]:
    out = []
    writer = store.local_dir / "writer.json"
    if writer.exists():
        try:
            sound = WriterState.from_raw(orjson.loads(writer.read_bytes())) is not None
        except (OSError, orjson.JSONDecodeError):
            sound = False
        if not sound:
            out.append((writer, "the writer's bookkeeping is damaged; the next write starts a "
                                "new event file"))
    stat_cache = store.local_dir / "committed-stat.json"
    if stat_cache.exists():
        try:
            sound = isinstance(orjson.loads(stat_cache.read_bytes()), dict)
        except (OSError, orjson.JSONDecodeError):
            sound = False
        if not sound:
            out.append((stat_cache, "the record of committed files is damaged; commits read "
                                    "every file until it is rebuilt"))
    clock = store.local_dir / "observed-clock"
    if clock.exists():
        try:
            int(clock.read_text() or 0)
        except (OSError, ValueError):
            out.append((clock, "the highest clock seen is unreadable"))
    return out


def _check_local_state(engram: Engram, store: Store) -> list[Finding]:
    return [
        Finding("local-state", "warning", f"damaged {path.name}: {why}",
                f"`engram doctor --fix {_flag(store)}` removes it; it is rebuilt as needed",
                path=str(path), auto=True)
        for path, why in _local_state_problems(store)
    ]


# -- repairs ------------------------------------------------------------------------------------


def repair(engram: Engram, store: Store, findings: list[Finding]) -> list[str]:
    """Apply the safe fixes for `findings`; return what was done, one line each."""
    done: list[str] = []
    wanted = {f.check for f in findings if f.auto}
    if not wanted:
        return done
    if "line-endings" in wanted:
        done += _restore_attributes(store)
    if wanted & {"damaged-line", "torn-line", "empty-file", "temp-file", "git-lock",
                 "local-state", "line-endings"}:
        try:
            with store.lock(timeout=10):
                done += _quarantine(store)
                done += _remove_leftovers(store)
        except EngramError as exc:
            done.append(f"could not repair: {exc}")
            return done
    if "layout" in wanted:
        done += _restore_layout(engram, store)
    if "lost-events" in wanted:
        done += _recover(engram, store)
    if "cache" in wanted:
        done += _rebuild_caches(engram, store)
    return done


def _quarantine(store: Store) -> list[str]:
    """Move damaged lines and torn tails out of event files, keeping the originals."""
    done = []
    folder: Path | None = None
    manifest: list[dict[str, Any]] = []
    repo = _repo(store)
    for path in store.event_files():
        data = path.read_bytes()
        if not data and _committed_bytes(repo, store, store.rel(path)) is None:
            path.unlink()
            done.append(f"{store.rel(path)}: removed (empty, left by a killed process)")
            continue
        found = scan(data)
        if not found.damaged:
            continue
        if folder is None:
            folder = store.local_dir / "quarantine" / \
                f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
        rel = store.rel(path)
        backup = folder / rel
        backup.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, backup)
        bad = b"".join(line + b"\n" for _, line, _ in found.bad) + found.torn
        backup.with_name(backup.name + ".bad").write_bytes(bad)
        kept = b"".join(found.good)
        tmp = path.with_name(f".{path.name}.doctor.{os.getpid()}.tmp")
        with open(tmp, "wb") as handle:
            handle.write(kept)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        for number, line, why in found.bad:
            manifest.append({"path": rel, "line": number, "problem": why,
                             "bytes": len(line) + 1})
        if found.torn:
            manifest.append({"path": rel, "line": data.count(b"\n") + 1,
                             "problem": "torn last line", "bytes": len(found.torn)})
        parts = [f"{len(found.bad)} damaged line(s)"] if found.bad else []
        if found.torn:
            parts.append("a torn last line")
        if not parts:
            done.append(f"{rel}: wrote {found.crlf} line(s) back with LF endings (the file as "
                        f"it was: {backup}); {_after_rewrite(store, repo, rel, kept)}")
            continue
        done.append(f"{rel}: set aside {' and '.join(parts)} in {folder} (the file as it was: "
                    f"{backup}); {_after_rewrite(store, repo, rel, kept)}")
    if folder is not None:
        (folder / "manifest.json").write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    return done


def _restore_attributes(store: Store) -> list[str]:
    """The store's .gitattributes keeps event files LF-only (a more specific file wins over the
    repository's), whatever was committed over it."""
    path = store.root / ".gitattributes"
    if path.is_symlink():
        return []  # reported as a link; removing it is the user's call
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    if GITATTRIBUTES_LINE in text.splitlines():
        return []
    kept = [line for line in text.splitlines() if not line.startswith("*.jsonl")]
    path.write_text("\n".join([*kept, GITATTRIBUTES_LINE]) + "\n", encoding="utf-8")
    return [f"{store.rel(path)}: event files are LF-only again (`{GITATTRIBUTES_LINE}`); "
            f"`engram commit {_flag(store)}` commits it"]


def _remove_leftovers(store: Store) -> list[str]:
    done = []
    for path in _stale_temp_files(store):
        path.unlink(missing_ok=True)
        done.append(f"removed {path} (a temporary file of a process that died)")
    note = recover_interrupted_commit(store, min_age=0.0)
    if note:
        done.append(note)
    for path, _ in _local_state_problems(store):
        path.unlink(missing_ok=True)
        done.append(f"removed the damaged {path}; it is rebuilt as needed")
    return done


def recover_interrupted_commit(store: Store, *, min_age: float = 2.0) -> str | None:
    """Undo what a commit killed half-way leaves: git's `index.lock` (when no process has it
    open and it is older than `min_age` seconds) and index entries of Engram's files behind
    HEAD. Returns what was done, or None when there was nothing safe to do. Call under the
    store's write lock."""
    done = []
    for lock in git_lock_files(store):
        try:
            age = time.time() - lock.stat().st_mtime
        except FileNotFoundError:
            continue
        if age < min_age or _open_by(lock) != []:
            return None  # a git command at work, or no way to tell: leave it
        aside = store.local_dir / "quarantine" / \
            f"{lock.name}.{time.strftime('%Y%m%dT%H%M%S')}.{os.getpid()}"
        aside.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(lock), aside)
        done.append(f"moved a stale {lock}, left by a killed commit, to {aside}")
        if lock.name == "index.lock":
            for path, pid in _temp_files(store):
                if (path.name.startswith("index.") and pid is not None
                        and not process_alive(pid)):
                    path.unlink(missing_ok=True)  # that commit's copy of the index
    repo = _repo(store)
    behind = _index_behind(store, repo) if repo is not None else []
    if behind:
        import pygit2

        from ..git.repo import _IndexLock

        tree = repo.head_tree()
        try:
            with _IndexLock(repo.repo) as index:  # git's own protocol: index.lock, rename
                for path in behind:
                    index.add(pygit2.IndexEntry(path, tree[path].id, tree[path].filemode))
            done.append(f"brought git's index up to the last commit for {len(behind)} file(s)")
        except EngramError as exc:
            done.append(f"could not update git's index: {exc}")
    return "; ".join(done) or None


def _rebuild_caches(engram: Engram, store: Store) -> list[str]:
    from ..api import Engram as Api

    removed = []
    with _cache_lock(store):
        for path, _, _ in damaged_caches(store):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                for suffix in ("", "-wal", "-shm"):
                    Path(str(path) + suffix).unlink(missing_ok=True)
                if path.suffix == ".usearch":
                    path.with_suffix(".json").unlink(missing_ok=True)
            removed.append(path.name)
    with Api(cwd=engram.cwd, use=store.kind) as fresh:
        try:
            fresh.reindex()
        except EngramError as exc:
            return [f"removed the damaged {', '.join(removed)}; could not rebuild now ({exc}); "
                    "the next read rebuilds it"]
    return [f"rebuilt the damaged {', '.join(removed)} (`engram reindex {_flag(store)}`)"]


def _recover(engram: Engram, store: Store) -> list[str]:
    """`engram recover` for one store."""
    from ..api import Engram as Api

    try:
        with Api(cwd=engram.cwd, use=store.kind) as fresh:
            [result] = fresh.recover()
    except EngramError as exc:
        return [f"could not recover the lost events: {exc}"]
    done = [f"recovered {result.events} lost event(s) into {', '.join(result.files)}" +
            (f", committed as {result.commit[:8]}" if result.commit else "")]
    return done + list(result.notes)


def _restore_layout(engram: Engram, store: Store) -> list[str]:
    from ..api import Engram as Api

    missing = [name for name in _SKELETON if not (store.root / name).exists()]
    with Api(cwd=engram.cwd, use=store.kind) as fresh:
        try:
            fresh.init(project=store.kind == "project")
        except EngramError as exc:
            created = store.ensure_layout()
            return [f"recreated {', '.join(created)}; could not commit them ({exc}); run "
                    f"`engram commit {_flag(store)}` once that is fixed"]
    return [f"recreated and committed {', '.join(missing)}"]
