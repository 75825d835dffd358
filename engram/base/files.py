"""Writing a file whole or not at all: a temporary file renamed over the target.

Every write that replaces a file by rename goes through `atomic_write`, so that a crash leaves
the old file or the new one, never a mix, and no temporary file stays behind after an error.
A file written where a person said (`export`, `browse --html`) goes only into a folder that
exists (`folder_exists`): a typo in a path is refused, not made into folders.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import UsageError


def fsync_dir(path: Path) -> None:
    """Make a rename or unlink in `path` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def folder_exists(target: Path) -> None:
    """Refuse (UsageError) an output `target` whose folder does not exist, as most tools do:
    creating the missing folders would turn a mistyped path into a tree of them."""
    folder = target.parent
    if not folder.exists():
        raise UsageError(f"{folder} does not exist; create it first")
    if not folder.is_dir():
        raise UsageError(f"{folder} is not a directory; give a path inside a directory")


def temp_path(path: Path, *, hidden: bool = False) -> Path:
    """The temporary file `atomic_write` writes before renaming it to `path` (per process)."""
    return path.with_name(f"{'.' if hidden else ''}{path.name}.{os.getpid()}.tmp")


def atomic_write(
    path: Path,
    data: bytes | str,
    *,
    durable: bool = True,
    hidden: bool = False,
    mode: int | None = None,
    temp: Path | None = None,
) -> None:
    """Replace `path` with `data`: written to a temporary file beside it, renamed over it.

    `durable` fsyncs the file before the rename and the directory after it (a cache, which can
    be rebuilt, skips both). `hidden` starts the temporary file's name with a dot (in a folder
    that others list); `mode` sets its permissions before the rename; `temp` names the
    temporary file where another name is expected of it."""
    tmp = temp or temp_path(path, hidden=hidden)
    try:
        with open(tmp, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        if mode is not None:
            tmp.chmod(mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise
    if durable:
        fsync_dir(path.parent)
