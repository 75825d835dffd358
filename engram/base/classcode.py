"""Engram's dataclasses, defined without compiling their methods again in every process.

`dataclasses` writes the source of each class's `__init__`, `__repr__`, `__eq__` (and, frozen,
`__setattr__`, `__delattr__`, `__hash__`) and compiles it with `exec` when the class is
defined. A quick command defines 30 to 45 of Engram's classes and spent 30-50 ms, a quarter of
its run, compiling those few hundred small functions, the same ones each time.

`install()` (called when the `engram` package is imported) gives the `dataclasses` module an
`exec` of its own that compiles such a source text once per Python and keeps the code in the
user's cache (`~/.cache/engram/classcode-<python>.marshal`, the way Python keeps a module's
`.pyc`; per module, so a process decodes only the code of the modules it loads); later
processes run the kept code. The source is the key, so a changed class is simply
compiled again; only Engram's own modules use the cache, every other caller of `exec` is passed
to the built-in unchanged. Running a code object compiled from a text with the flags a plain
`exec` of that text uses (none inherited: `dataclasses` has no `__future__` imports) is what
`exec` does itself, so the classes are the same.

The file is code this process will run: it is read only when it belongs to this user and no one
else can write it, and a file that is not a mapping of texts to code objects is ignored (and
replaced at the next write). New code is written once, when the process ends.
"""

from __future__ import annotations

import atexit
import builtins
import marshal
import os
import stat
import sys
import threading
from pathlib import Path
from types import CodeType
from typing import Any

MAX_BYTES = 8 << 20  # a larger file starts again from what this process used
PREFIX = "def __create_fn__("  # how `dataclasses` (3.11, 3.12) starts what it compiles

_lock = threading.Lock()
# The file holds, per module, the marshalled texts -> code of its classes: a process decodes
# only the modules it defines classes of.
_blobs: dict[str, bytes] | None = None
_codes: dict[str, dict[str, CodeType]] = {}  # module -> text -> code, decoded or compiled
_new: set[str] = set()  # modules with code compiled in this process
compiled = 0  # functions compiled in this process (the rest ran from the cache)


def cache_file() -> Path:
    tag = sys.implementation.cache_tag or "python"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "engram" / f"classcode-{tag}-{marshal.version}.marshal"


def _read(path: Path) -> dict[str, bytes]:
    try:
        with path.open("rb") as handle:
            info = os.fstat(handle.fileno())
            if (
                not stat.S_ISREG(info.st_mode)
                or info.st_uid != os.getuid()
                or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
                or info.st_size > MAX_BYTES
            ):
                return {}
            loaded = marshal.loads(handle.read())
    except (OSError, EOFError, ValueError, TypeError):
        return {}  # missing, damaged, or written by another Python: compiled again
    if not isinstance(loaded, dict):
        return {}
    return {k: v for k, v in loaded.items() if isinstance(k, str) and isinstance(v, bytes)}


def _module_codes(module: str) -> dict[str, CodeType]:
    global _blobs
    found = _codes.get(module)
    if found is None:
        if _blobs is None:
            _blobs = _read(cache_file())
        found = {}
        blob = _blobs.get(module)
        if blob is not None:
            try:
                loaded = marshal.loads(blob)
            except (EOFError, ValueError, TypeError):
                loaded = None
            if isinstance(loaded, dict):
                found = {
                    k: v
                    for k, v in loaded.items()
                    if isinstance(k, str) and isinstance(v, CodeType)
                }
        _codes[module] = found
    return found


def _exec(source: Any, globals: Any = None, locals: Any = None, /, **kwargs: Any) -> Any:
    module = globals.get("__name__", "") if isinstance(globals, dict) else ""
    if (
        kwargs
        or not isinstance(source, str)
        or not source.startswith(PREFIX)
        or not isinstance(module, str)
        or not (module == "engram" or module.startswith("engram."))
    ):
        return builtins.exec(source, globals, locals, **kwargs)
    global compiled
    with _lock:
        codes = _module_codes(module)
        code = codes.get(source)
        if code is None:
            code = compile(source, "<string>", "exec", dont_inherit=True)
            if not _new:
                atexit.register(save)
            codes[source] = code
            _new.add(module)
            compiled += 1
    return builtins.exec(code, globals, locals)


def install() -> None:
    """Give `dataclasses` the caching `exec` (once; where `os.getuid` exists)."""
    import dataclasses

    if hasattr(os, "getuid") and getattr(dataclasses, "exec", None) is not _exec:
        dataclasses.exec = _exec  # type: ignore[attr-defined]


def save() -> None:
    """Write the code compiled in this process into the cache, if there is any (the `engram`
    command calls this before it ends without the interpreter's teardown)."""
    with _lock:
        if not _new:
            return
        blobs = dict(_blobs or {})
        for module in _new:
            blobs[module] = marshal.dumps(_codes[module])
        if sum(len(b) for b in blobs.values()) > MAX_BYTES:
            blobs = {m: blobs[m] for m in _codes if m in blobs}
        data = marshal.dumps(blobs)
        _new.clear()
    from .files import atomic_write

    path = cache_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data, durable=False, mode=0o600)
    except OSError:
        pass  # a cache that cannot be written: compiled again next process
