"""A store's own paths of the wrong kind: a folder where a file belongs, a file where a folder does.

A clone or a pull can bring either: a committed `config.yaml/.keep`, or a file named `handoffs` or
`events`. Nothing in a store is trusted to be as Engram made it, so reads go on without such a path
(a `config.yaml` that is a folder sets nothing, with one warning), writes under it refuse before
they write anything, and `verify` and `doctor` report it, each with the command that clears it.
"""

from __future__ import annotations

import shlex
import stat
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from ..base.config import ConfigRead
from ..base.errors import EngramError
from ..base.layout import CONFIG_FILE, EVENTS_DIR, HANDOFFS_DIR, TRACKED

if TYPE_CHECKING:
    from .store import Store

FOLDERS = (EVENTS_DIR, HANDOFFS_DIR)  # the store's own folders; its other paths are files

_WHAT = {
    CONFIG_FILE: "its settings are not read",
    EVENTS_DIR: "no events are read from it and none can be written",
    HANDOFFS_DIR: "handoffs are saved as events, but their Markdown is not written",
}


def _kind(path: Path) -> str | None:
    """'folder', 'file' or None (missing, or a symbolic link: links are reported as such)."""
    try:
        mode = path.lstat().st_mode
    except OSError:
        return None
    if stat.S_ISLNK(mode):
        return None
    return "folder" if stat.S_ISDIR(mode) else "file"


def misshapen(store: Store) -> list[str]:
    """The store's own top-level paths that are of the wrong kind (a few `lstat`s)."""
    found = []
    for name in TRACKED:
        kind = _kind(store.root / name)
        if kind is not None and (kind == "folder") != (name in FOLDERS):
            found.append(name)
    return found


def problem(store: Store, rel: str, *, what: str | None = None) -> str:
    """What is wrong with the store-relative path `rel`, and what follows from it (`what`, if
    given, says what follows for the command at hand)."""
    kind = _kind(store.root / rel)
    wanted = "a file" if kind == "folder" else "a folder"
    text = f"{store.root / rel} is a {kind} where Engram keeps {wanted}"
    what = what or _WHAT.get(rel)
    return f"{text}; {what}" if what else text


def git_c(store: Store) -> str:
    """`git -C <work tree>`: a printed git command that works wherever the user stands."""
    return f"git -C {shlex.quote(str(store.work_tree))}"


def layout_warnings(store: Store) -> list[str]:
    """What every read of the store warns of in its layout: a symbolic link inside it (never
    followed), a path of the wrong kind (config.yaml's own warning comes with the settings)."""
    out = [
        f"{store.root / link} is a symbolic link inside the store; it is not followed, and "
        f"what it points to is not read; remove it "
        f"(`{git_c(store)} rm -- {shlex.quote(store.repo_path(link))}`)"
        for link in sorted({*store.symlinks, *store.top_links()})
    ]
    out += [
        f"{problem(store, rel)}; fix: {fix(store, rel)}"
        for rel in misshapen(store)
        if rel != CONFIG_FILE
    ]
    return out


def fix(store: Store, rel: str) -> str:
    """The command that clears the path (it is the store's, so nothing else is lost)."""
    remove = f"{git_c(store)} rm -r -- {shlex.quote(store.repo_path(rel))}"
    if rel == CONFIG_FILE:
        flag = " --project" if store.kind == "project" else ""
        return f"`{remove} && engram config set{flag} KEY VALUE`"
    return f"`{remove}` (or `rm -r` it if it is not committed), then commit and try again"


def config_read(store: Store) -> ConfigRead | None:
    """config.yaml's settings when it is not a file (none, with a warning); None when it is."""
    if CONFIG_FILE not in misshapen(store):
        return None
    return ConfigRead({}, (f"{problem(store, CONFIG_FILE)}; fix: {fix(store, CONFIG_FILE)}",))


def in_the_way(store: Store, path: Path) -> str | None:
    """The first path on the way to `path` (a file to write, inside the store) that is of the
    wrong kind, store-relative: a file where a folder must be, or `path` itself a folder."""
    parts = path.relative_to(store.root).parts
    for depth in range(1, len(parts) + 1):
        rel = "/".join(parts[:depth])
        kind = _kind(store.root / rel)
        if kind is None:
            continue
        if (kind == "folder") != (depth < len(parts)):
            return rel
    return None


def refuse_write(store: Store, path: Path) -> None:
    """Refuse, before anything is written, a write to `path` that a path of the wrong kind is
    in the way of."""
    rel = in_the_way(store, path)
    if rel is not None:
        refuse(store, rel)


def refuse(store: Store, rel: str) -> NoReturn:
    """Refuse a write because of the store-relative path `rel`, of the wrong kind."""
    raise EngramError(f"{problem(store, rel)}; nothing was written; fix: {fix(store, rel)}")
