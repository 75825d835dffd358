"""The doctor's checks of a store's own files, its disk, its locks and the leftovers of
processes that died mid-write.
"""

from __future__ import annotations

import errno
import os
import re
import shlex
import time
from pathlib import Path

from ...base import layout
from ...git.recovery import git_lock_files, open_by, process_alive, temp_files
from ...storage import events as ev
from ...storage import shapes
from ...storage.store import Store
from .report import HOLD_SECONDS, MIN_FREE_BYTES, SKELETON, Finding, Host, flag, git_c


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


def check_layout(engram: Host, store: Store) -> list[Finding]:
    out = []
    init = "engram init --project" if store.kind == "project" else "engram init"
    if not store.git_dir.exists():
        return [
            Finding(
                "layout",
                "error",
                f"{store.work_tree} is not a git repository",
                f"`{git_c(store)} init -b main`, then `{init}`",
            )
        ]
    for name in SKELETON:
        if not (store.root / name).exists():
            out.append(
                Finding(
                    "layout",
                    "warning",
                    f"{name} is missing from the store",
                    f"`{init}` recreates it and commits it (`engram doctor --fix` runs it)",
                    path=name,
                    auto=True,
                )
            )
    return out


# -- the disk -----------------------------------------------------------------------------------


def check_disk(engram: Host, store: Store) -> list[Finding]:
    """Can the store be written? A real write of a probe file says it, as the writer sees it."""
    out = []
    mount = _mount_point(store.root)
    for directory in (
        store.events_dir if store.events_dir.is_dir() else store.root,
        store.local_dir if store.local_dir.is_dir() else store.git_dir,
    ):
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
            out.append(
                Finding(
                    "disk",
                    "error",
                    f"the disk holding the store is full ({free} bytes free on {mount}); "
                    "reads work, writes will fail",
                    f"free some space on {mount} (`df -h {shlex.quote(str(mount))}` shows it); "
                    "writes work again by themselves",
                )
            )
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
            if store.kind == "project"
            else ""
        )
    elif exc.errno in (errno.ENOSPC, errno.EDQUOT):
        message = f"the disk holding the store is full ({mount}): reads work, writes fail"
        fix = f"free some space on {mount} (`df -h {where}` shows it)"
    else:
        message = f"cannot write to {directory} ({exc.strerror or exc}): writes fail"
        fix = "make the directory writable again"
    return Finding("disk", "error", message, fix)


# -- locks and crash leftovers -------------------------------------------------------------------


def check_locks(engram: Host, store: Store) -> list[Finding]:
    out = []
    for path, what in (
        (store.local_dir / layout.WRITE_LOCK, "write lock"),
        (layout.cache_dir(store.local_dir) / layout.INDEX_LOCK, "search index lock"),
    ):
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
            out.append(
                Finding(
                    "lock",
                    "warning",
                    f"the {what} has been held for over {HOLD_SECONDS:.0f}s by {who}; "
                    "writes wait for it (the system frees it the moment that process ends)",
                    f"let it finish, or if it hangs, stop it: {stop}",
                    path=str(path),
                )
            )
    for lock in git_lock_files(store):
        try:
            age = time.time() - lock.stat().st_mtime
        except FileNotFoundError:
            continue
        lock_holders = open_by(lock)
        if lock_holders or (lock_holders is None and age < 60):
            out.append(
                Finding(
                    "git-lock",
                    "note",
                    f"a git command is updating {lock.stem} ({lock})",
                    "let it finish",
                    path=str(lock),
                )
            )
        else:
            out.append(
                Finding(
                    "git-lock",
                    "warning",
                    f"{lock} was left by a git command or commit that was killed; neither git "
                    "nor Engram can commit until it is gone (the events are safe on disk)",
                    f"`engram doctor --fix {flag(store)}` (or `rm {shlex.quote(str(lock))}`)",
                    path=str(lock),
                    auto=True,
                )
            )
    return out


def stale_temp_files(store: Store) -> list[Path]:
    stale = []
    for path, pid in temp_files(store):
        if pid is not None and not process_alive(pid):
            stale.append(path)
        elif pid is None and time.time() - path.stat().st_mtime > 60:
            stale.append(path)
    return stale


def check_temp_files(engram: Host, store: Store) -> list[Finding]:
    return [
        Finding(
            "temp-file",
            "warning",
            f"leftover temporary file of a process that stopped mid-write: {path}",
            f"`engram doctor --fix {flag(store)}` removes it (it holds nothing that is "
            "not elsewhere)",
            path=str(path),
            auto=True,
        )
        for path in stale_temp_files(store)
    ]


def check_links(engram: Host, store: Store) -> list[Finding]:
    return [
        Finding(
            "symlink",
            "error",
            "a symbolic link inside the store; it is not followed (writes through it are "
            "refused, what it points to is not read)",
            f"remove it: `{git_c(store)} rm -- {shlex.quote(store.repo_path(link))}` (or "
            f"`rm` if it is not committed), then commit",
            path=link,
        )
        for link in store.links()
    ]


def check_shapes(engram: Host, store: Store) -> list[Finding]:
    """A folder where the store keeps a file, or a file where it keeps a folder (a clone can
    bring either): reads go on without it, writes under it refuse."""
    return [
        Finding("shape", "error", shapes.problem(store, rel), shapes.fix(store, rel), path=rel)
        for rel in shapes.misshapen(store)
    ]
