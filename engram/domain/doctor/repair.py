"""`engram doctor --fix`: the repairs that lose nothing, each keeping what it removes.
"""

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
from ...git.recovery import open_repo, recover_interrupted_commit
from ...storage.store import Store
from .attribute_checks import fix_attributes
from .cache_checks import cache_lock, damaged_caches, local_state_problems
from .event_checks import after_rewrite, committed_bytes, scan
from .report import SKELETON, Finding, Fresh, Host, flag
from .store_checks import stale_temp_files
from ...base.wording import count

# -- repairs ------------------------------------------------------------------------------------


def repair(engram: Host, store: Store, findings: list[Finding],
           reopen: Callable[[Store], Fresh] | None = None) -> list[str]:
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
        done += _restore_layout(reopen, store)
    if "lost-events" in wanted:
        done += _recover(reopen, store)
    if "cache" in wanted:
        done += _rebuild_caches(reopen, store)
    return done


def _quarantine(store: Store) -> list[str]:
    """Move damaged lines and torn tails out of event files, keeping the originals."""
    done = []
    folder: Path | None = None
    manifest: list[dict[str, Any]] = []
    repo = open_repo(store)
    for path in store.event_files():
        data = path.read_bytes()
        if not data and committed_bytes(repo, store, store.rel(path)) is None:
            path.unlink()
            done.append(f"{store.rel(path)}: removed (empty, left by a killed process)")
            continue
        found = scan(data)
        if not found.damaged:
            continue
        if folder is None:
            folder = store.local_dir / layout.QUARANTINE_DIR / \
                f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
        rel = store.rel(path)
        backup = folder / rel
        backup.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, backup)
        bad = b"".join(line + b"\n" for _, line, _ in found.bad) + found.torn
        backup.with_name(backup.name + ".bad").write_bytes(bad)
        kept = b"".join(found.good)
        atomic_write(path, kept, temp=path.with_name(f".{path.name}.doctor.{os.getpid()}.tmp"))
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
                        f"it was: {backup}); {after_rewrite(store, repo, rel, kept)}")
            continue
        done.append(f"{rel}: set aside {' and '.join(parts)} in {folder} (the file as it was: "
                    f"{backup}); {after_rewrite(store, repo, rel, kept)}")
    if folder is not None:
        (folder / "manifest.json").write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    return done


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
        for path, _, _ in damaged_caches(store):
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
            return [f"removed the damaged {', '.join(removed)}; could not rebuild now ({exc}); "
                    "the next read rebuilds it"]
    return [f"rebuilt the damaged {', '.join(removed)} (`engram reindex {flag(store)}`)"]


def _recover(reopen: Callable[[Store], Fresh], store: Store) -> list[str]:
    """`engram recover` for one store."""
    try:
        with reopen(store) as fresh:
            [result] = fresh.recover()
    except EngramError as exc:
        return [f"could not recover the lost events: {exc}"]
    done = [f"recovered {count(result.events, 'lost event')} into {', '.join(result.files)}" +
            (f", committed as {result.commit[:8]}" if result.commit else "")]
    return done + list(result.notes)


def _restore_layout(reopen: Callable[[Store], Fresh], store: Store) -> list[str]:
    missing = [name for name in SKELETON if not (store.root / name).exists()]
    before = _head(store)
    with reopen(store) as fresh:
        try:
            fresh.init(project=store.kind == "project")
        except EngramError as exc:
            created = store.ensure_layout()
            return [f"recreated {', '.join(created)}; could not commit them ({exc}); run "
                    f"`engram commit {flag(store)}` once that is fixed"]
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
