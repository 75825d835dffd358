"""Where stores are: the personal store's folder, the git work tree holding a directory, the
project store at its top, and another tool's `.engram/` that is not an Engram store.

`engram.base.config` re-exports each of these, where they were first declared.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import LinkedStoreError
from .layout import CONFIG_FILE, EVENTS_DIR, PROJECT_DIR


def engram_home() -> Path:
    home = os.environ.get("ENGRAM_HOME")
    return Path(home).expanduser() if home else Path.home() / ".engram"


def find_work_tree(start: Path) -> Path | None:
    """The top of the git work tree holding `start`, found the way git finds `.git`."""
    current = start.resolve()
    for candidate in (current, *current.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def find_project_store(start: Path) -> Path | None:
    """The project store of the repository holding `start`, or None. Refuses (LinkedStoreError)
    a `.engram` that is a symbolic link: every command finds its project store here, so none
    reads or writes through one."""
    top = find_work_tree(start)
    return project_store_at(top) if top is not None else None


def project_store_at(top: Path) -> Path | None:
    """The project store at the top of the work tree `top`: a stat when there is none. A
    `.engram` that is a symbolic link is refused (LinkedStoreError)."""
    root = linked_store(top)
    if root is not None:
        raise LinkedStoreError(root)
    root = top / PROJECT_DIR
    if root.is_dir() and root.resolve() != engram_home().resolve() and foreign_store(root) is None:
        return root
    return None


def linked_store(top: Path) -> Path | None:
    """The `.engram` at the top of the work tree `top` when it is a symbolic link (to anywhere,
    or to nothing), else None. `top` itself is resolved (`find_work_tree`), so the link is the
    one component inside the work tree that could lead Engram out of it."""
    root = top / PROJECT_DIR
    return root if root.is_symlink() else None


GO_ENGRAM = "the Go engram (github.com/Gentleman-Programming/engram)"


def foreign_store(root: Path) -> str | None:
    """What `root` is when another tool keeps its files there rather than an Engram store: the
    Go engram, which shares the name, writes `.engram/manifest.json` and `.engram/chunks/` in a
    project (`engram sync`) and keeps `~/.engram/engram.db`. None for anything else."""
    if not root.is_dir() or (root / CONFIG_FILE).exists() or (root / EVENTS_DIR).is_dir():
        return None
    if (root / "manifest.json").is_file() or (root / "chunks").is_dir():
        return f"the sync folder of {GO_ENGRAM}"
    if (root / "engram.db").is_file():
        return f"the data folder of {GO_ENGRAM}"
    return None


def find_foreign_store(start: Path) -> tuple[Path, str] | None:
    """The `.engram/` of the repository holding `start` when it is another tool's, and what."""
    top = find_work_tree(start)
    if top is None:
        return None
    what = foreign_store(top / PROJECT_DIR)
    return (top / PROJECT_DIR, what) if what else None


def repo_relative(top: Path, here: Path, text: str) -> str | None:
    """A path given on the command line, taken as git takes one: relative to `here` (the
    current directory, or -C's) when that is inside the work tree `top`, else to `top`; an
    absolute one must lead into the work tree. It comes back relative to `top`, `/`-separated;
    None when it leads out of the work tree. Symbolic links are followed only above `top` (a
    link to the repository, the real path of the current directory): inside it, the caller
    decides."""
    top_real = top.resolve()
    base = here.resolve()
    if not base.is_relative_to(top_real):
        base = top_real
    given = Path(text)
    full = Path(os.path.normpath(given if given.is_absolute() else base / given))
    for ancestor in (*reversed(full.parents), full):
        if ancestor.resolve() == top_real:
            return full.relative_to(ancestor).as_posix()
    return None
