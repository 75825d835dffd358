"""The doctor's checks of the derived state in `<git-dir>/engram/`: the caches (read model,
search indexes) and the bookkeeping files, damaged or missing.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson

from ...base import layout
from ...storage.local import WriterState
from ...storage.reindexing import stopped_reindex
from ...storage.store import Store
from .report import Finding, Host, Level, flag

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


def cache_lock(store: Store) -> contextlib.AbstractContextManager[Any]:
    """The search index lock, so that no index is caught half-saved; skipped if unavailable."""
    from ...base.locks import FileLock, LockTimeout

    cache = layout.cache_dir(store.local_dir)
    if not cache.is_dir():
        return contextlib.nullcontext()
    lock = FileLock(cache / layout.INDEX_LOCK, timeout=5)
    try:
        lock.acquire()
    except (LockTimeout, OSError):
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def held() -> Iterator[None]:
        try:
            yield
        finally:
            lock.release()

    return held()


@dataclass(frozen=True)
class DamagedCache:
    """A cache that must be rebuilt: where it is, what it is for people, what is wrong with it,
    how much that matters, and what rebuilds it when nothing runs the fix first."""

    path: Path
    what: str  # "read model", "word index", ...
    why: str
    level: Level
    heals: str


# What rebuilds each cache by itself. SQLite shows damage inside a page only to a read of that
# page, so a damaged database is rebuilt by the read that meets it, which may never come.
_HEALS = {
    layout.PROJECTION_DB: (
        "read model",
        "only a read that meets the damaged part rebuilds it from the event files by itself",
    ),
    layout.EMBEDDINGS_DB: (
        "embedding cache",
        "only a read that meets the damaged part starts it again by itself (texts are then "
        "embedded again)",
    ),
    layout.TEXT_INDEX_DIR: ("word index", "the next search rebuilds it from the read model"),
    layout.VECTOR_INDEX: (
        "vector index",
        "the next search by meaning rebuilds it from the embedding cache",
    ),
}


def damaged_caches(store: Store, *, deep: bool = True) -> list[DamagedCache]:
    """Every cache that must be rebuilt: damaged (a warning) or saved by an earlier version (a
    note). The search indexes are checked against what their last save recorded (a stat of
    each file: cheap enough for `stats`); with `deep`, the SQLite databases are read through
    by `PRAGMA quick_check` too (`doctor`, `reindex --check`)."""
    from ...search.text import STAMP, intact
    from ...search.vectors import file_stamp

    cache = layout.cache_dir(store.local_dir)
    found: list[tuple[Path, str, Level]] = []
    for name, table in ((layout.PROJECTION_DB, "meta"), (layout.EMBEDDINGS_DB, "vectors")):
        path = cache / name
        if deep and path.is_file() and path.stat().st_size:
            problem = _sqlite_problem(path, table)
            if problem:
                found.append((path, f"damaged ({problem})", "warning"))
    text = cache / layout.TEXT_INDEX_DIR
    if text.is_dir() and any(text.iterdir()) and not intact(text):
        if (text / STAMP).exists():
            found.append((text, "damaged: its files are not those its last save wrote", "warning"))
        else:
            found.append((text, "saved by an earlier version of Engram", "note"))
    index, meta_path = cache / layout.VECTOR_INDEX, cache / layout.VECTOR_META
    if index.exists() or meta_path.exists():
        try:
            meta = orjson.loads(meta_path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            meta = None
        if isinstance(meta, dict) and meta.get("complete") and "file" not in meta:
            found.append((index, "saved by an earlier version of Engram", "note"))
        elif not index.exists():
            found.append((index, f"missing beside its record {meta_path.name}", "warning"))
        elif not (
            isinstance(meta, dict)
            and meta.get("complete")
            and meta.get("file") == file_stamp(index)
        ):
            found.append(
                (index, "damaged: it does not match what its last save recorded", "warning")
            )
    return [
        DamagedCache(path, _HEALS[path.name][0], why, level, _HEALS[path.name][1])
        for path, why, level in found
    ]


def check_caches(engram: Host, store: Store) -> list[Finding]:
    cache = layout.cache_dir(store.local_dir)
    reindex = f"`engram reindex {flag(store)}`"
    if not (cache / layout.PROJECTION_DB).exists():
        return [
            Finding(
                "cache", "note", "the caches are not built yet; the first read builds them", reindex
            )
        ]
    with cache_lock(store):
        damaged = damaged_caches(store)
    out = [
        Finding(
            "cache",
            found.level,
            f"the cache {found.path.name} is {found.why}; {found.heals}",
            f"{reindex} (`engram doctor --fix {flag(store)}` runs it)",
            path=str(found.path),
            auto=True,
        )
        for found in damaged
    ]
    said = {found.path.name for found in damaged}
    missing = [
        name
        for name, wanted in (
            (layout.TEXT_INDEX_DIR, True),
            (layout.VECTOR_INDEX, engram.settings(store)["search.model"] != "off"),
        )
        if wanted and name not in said and not (cache / name).exists()
    ]
    if missing:
        out.append(
            Finding(
                "cache",
                "note",
                f"not built yet (or a reindex was interrupted): "
                f"{', '.join(missing)}; the next recall builds it",
                reindex,
            )
        )
    elif stopped_reindex(store):
        out.append(
            Finding(
                "cache",
                "note",
                "an `engram reindex` stopped before it finished; the caches work meanwhile",
                f"{reindex} (it goes on from where the last one stopped)",
            )
        )
    return out


def local_state_problems(store: Store) -> list[tuple[Path, str]]:
    out = []
    writer = store.local_dir / "writer.json"
    if writer.exists():
        try:
            sound = WriterState.from_raw(orjson.loads(writer.read_bytes())) is not None
        except (OSError, orjson.JSONDecodeError):
            sound = False
        if not sound:
            out.append(
                (
                    writer,
                    "the writer's bookkeeping is damaged; the next write starts a new event file",
                )
            )
    stat_cache = store.local_dir / "committed-stat.json"
    if stat_cache.exists():
        try:
            sound = isinstance(orjson.loads(stat_cache.read_bytes()), dict)
        except (OSError, orjson.JSONDecodeError):
            sound = False
        if not sound:
            out.append(
                (
                    stat_cache,
                    "the record of committed files is damaged; commits read "
                    "every file until it is rebuilt",
                )
            )
    clock = store.local_dir / "observed-clock"
    if clock.exists():
        try:
            int(clock.read_text() or 0)
        except (OSError, ValueError):
            out.append((clock, "the highest clock seen is unreadable"))
    return out


def check_local_state(engram: Host, store: Store) -> list[Finding]:
    return [
        Finding(
            "local-state",
            "warning",
            f"damaged {path.name}: {why}",
            f"`engram doctor --fix {flag(store)}` removes it; it is rebuilt as needed",
            path=str(path),
            auto=True,
        )
        for path, why in local_state_problems(store)
    ]
