"""`engram doctor --fix`: the repairs that lose nothing, each keeping what it removes."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from ...base import layout
from ...base.errors import EngramError
from ...base.files import atomic_write
from ...base.wording import count
from ...git.recovery import open_repo, recover_interrupted_commit
from ...storage import lines, set_aside
from ...storage.store import Store
from .attribute_checks import fix_attributes
from .cache_checks import cache_lock, damaged_caches, local_state_problems
from .event_checks import committed_bytes, held_lines, scan
from .report import SKELETON, Finding, Fresh, Host, flag
from .store_checks import stale_temp_files
from .vector_checks import repair_vectors

# -- repairs ------------------------------------------------------------------------------------


def repair(
    engram: Host,
    store: Store,
    findings: list[Finding],
    reopen: Callable[[Store], Fresh] | None = None,
) -> list[str]:
    """Apply the safe fixes for `findings`; return what was done, one line each. `reopen`
    opens a new facade over the store for the repairs that run one of its commands (by
    default, one of `engram`'s class)."""
    if reopen is None:
        reopen = same_facade(engram)
    done: list[str] = []
    wanted = {f.check for f in findings if f.auto}
    if not wanted:
        return done
    if wanted & {"attributes", "line-endings"}:
        try:
            with store.lock(timeout=10):
                done += fix_attributes(store)
        except EngramError as exc:
            done.append(f"could not repair: {exc}")
            return done
    if wanted & {
        "damaged-line",
        "torn-line",
        "empty-file",
        "temp-file",
        "git-lock",
        "local-state",
        "line-endings",
    }:
        try:
            with store.lock(timeout=10):
                done += _quarantine(store)
                done += _remove_leftovers(store)
        except EngramError as exc:
            done.append(f"could not repair: {exc}")
            return done
    if "layout" in wanted:
        done += _restore_layout(reopen, store)
    if "lost-events" in wanted:
        done += _recover(reopen, store)
    if "cache" in wanted:
        done += _rebuild_caches(reopen, store)
    elif "vector-reach" in wanted:
        done += repair_vectors(engram, store)
    return done


def _quarantine(store: Store) -> list[str]:
    """Move damaged lines and torn tails that only this clone has out of the event files
    (keeping the originals in quarantine), and set aside in this clone, without touching them,
    those someone committed: a repair never takes a committed line out of history."""
    done = []
    folder: Path | None = None
    manifest: list[dict[str, Any]] = []
    repo = open_repo(store)
    for path in store.event_files():
        rel = store.rel(path)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue  # gone since the listing (a compaction, a checkout): nothing to repair
        if not data and held_lines(repo, rel) is None:
            path.unlink(missing_ok=True)
            done.append(f"{rel}: removed (empty, left by a killed process)")
            continue
        if not scan(data).damaged:
            continue
        committed = committed_bytes(repo, store, rel)
        theirs = held_lines(repo, rel) or set()
        found, torn = lines.read(data)
        kept: list[bytes] = []
        removed: list[tuple[int, bytes, str]] = []
        aside: list[tuple[int, bytes, str]] = []
        crlf = 0
        for line in found:
            if line.problem is not None:
                (aside if line.raw in theirs else removed).append(
                    (line.number, line.raw, line.problem)
                )
                if line.raw in theirs:
                    kept.append(line.raw + b"\n")
            elif line.note == lines.CRLF and (committed is None or line.raw[:-1] in theirs):
                crlf += 1
                kept.append(line.raw[:-1] + b"\n")
            else:
                kept.append(line.raw + b"\n")
        if torn and torn in theirs:
            aside.append((data.count(b"\n") + 1, torn, "torn last line"))
            kept.append(torn)
            torn = b""
        done += _set_aside(store, rel, aside)
        if not (removed or torn or crlf):
            continue
        if folder is None:
            folder = (
                store.local_dir
                / layout.QUARANTINE_DIR
                / f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
            )
        backup = folder / rel
        backup.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, backup)
        bad = b"".join(line + b"\n" for _, line, _ in removed) + torn
        backup.with_name(backup.name + ".bad").write_bytes(bad)
        atomic_write(
            path, b"".join(kept), temp=path.with_name(f".{path.name}.doctor.{os.getpid()}.tmp")
        )
        for number, raw, why in removed:
            manifest.append({"path": rel, "line": number, "problem": why, "bytes": len(raw) + 1})
        if torn:
            manifest.append(
                {
                    "path": rel,
                    "line": data.count(b"\n") + 1,
                    "problem": "torn last line",
                    "bytes": len(torn),
                }
            )
        parts = [f"{len(removed)} damaged line(s)"] if removed else []
        if torn:
            parts.append("a torn last line")
        if not parts:
            done.append(
                f"{rel}: wrote {crlf} line(s) back with LF endings (the file as "
                f"it was: {backup}); `engram commit {flag(store)}` then commits it"
            )
            continue
        done.append(
            f"{rel}: set aside {' and '.join(parts)} in {folder} (the file as it was: "
            f"{backup}); `engram commit {flag(store)}` then commits it"
        )
    if folder is not None:
        (folder / "manifest.json").write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    return done


def _set_aside(store: Store, rel: str, bad: list[tuple[int, bytes, str]]) -> list[str]:
    """Record damaged committed lines as set aside in this clone; the file is not changed."""
    if not bad:
        return []
    added = set_aside.record(store, rel, bad)
    if not added:
        return []
    return [
        f"{rel}: set aside {added} damaged line(s) of its committed part in this clone "
        f"({store.local_dir / set_aside.SET_ASIDE_FILE}); readers skip them, and the file "
        "is left as its writer committed it"
    ]


def _remove_leftovers(store: Store) -> list[str]:
    done = []
    for path in stale_temp_files(store):
        path.unlink(missing_ok=True)
        done.append(f"removed {path} (a temporary file of a process that died)")
    note = recover_interrupted_commit(store, min_age=0.0)
    if note:
        done.append(note)
    for path, _ in local_state_problems(store):
        path.unlink(missing_ok=True)
        done.append(f"removed the damaged {path}; it is rebuilt as needed")
    return done


def _rebuild_caches(reopen: Callable[[Store], Fresh], store: Store) -> list[str]:
    removed = []
    with cache_lock(store):
        for found in damaged_caches(store):
            path = found.path
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                for suffix in ("", "-wal", "-shm"):
                    Path(str(path) + suffix).unlink(missing_ok=True)
                if path.suffix == ".usearch":
                    path.with_suffix(".json").unlink(missing_ok=True)
            removed.append(path.name)
    with reopen(store) as fresh:
        try:
            fresh.reindex()
        except EngramError as exc:
            return [
                f"removed the damaged {', '.join(removed)}; could not rebuild now ({exc}); "
                "the next read rebuilds it"
            ]
    return [f"rebuilt the damaged {', '.join(removed)} (`engram reindex {flag(store)}`)"]


def _recover(reopen: Callable[[Store], Fresh], store: Store) -> list[str]:
    """`engram recover` for one store."""
    try:
        with reopen(store) as fresh:
            [result] = fresh.recover()
    except EngramError as exc:
        return [f"could not recover the lost events: {exc}"]
    done = [
        f"recovered {count(result.events, 'lost event')} into {', '.join(result.files)}"
        + (f", committed as {result.commit[:8]}" if result.commit else "")
    ]
    return done + list(result.notes)


def _restore_layout(reopen: Callable[[Store], Fresh], store: Store) -> list[str]:
    missing = [name for name in SKELETON if not (store.root / name).exists()]
    before = _head(store)
    with reopen(store) as fresh:
        try:
            fresh.init(project=store.kind == "project")
        except EngramError as exc:
            created = store.ensure_layout()
            return [
                f"recreated {', '.join(created)}; could not commit them ({exc}); run "
                f"`engram commit {flag(store)}` once that is fixed"
            ]
    if _head(store) == before:  # recreated as they were committed: nothing to commit
        return [f"recreated {', '.join(missing)} as committed"]
    return [f"recreated and committed {', '.join(missing)}"]


def _head(store: Store) -> str | None:
    repo = open_repo(store)
    tree = repo.head_tree() if repo is not None else None
    return None if tree is None else str(repo.repo.head.target)


def same_facade(engram: Host) -> Callable[[Store], Fresh]:
    """A new facade of `engram`'s class over one store, opened where `engram` was (its cwd)."""
    facade: Any = type(engram)

    def reopen(store: Store) -> Fresh:
        fresh: Fresh = facade(cwd=engram.cwd, use=store.kind)
        return fresh

    return reopen
