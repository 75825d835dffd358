"""The ledger of event lines that could go missing: what this clone's writer appends, and what
the read model drops because the file that held them vanished.

Git deletes files Engram wrote (`git clean`, `git stash -u`, `git worktree remove --force`,
`git reset --hard`), and nothing in the event files can say what is missing from them; so every
line appended and every line dropped is noted here as it happens. Entries for events the read
model holds again are settled (removed) whenever the ledger is examined, so it holds little more
than the events written since the last read and those gone. Finding what is lost and bringing it
back from git's history is `engram.git.lost`'s work.

The ledger is `<common-git-dir>/engram/ledger/<worktree>-<store kind>.tsv`, one `<file>\\t<event
line>` per line (`layout.ledger_file`). It lives in the git directory that every work tree shares,
because `git worktree remove` deletes a linked worktree's own git directory along with its files;
`engram reindex` does not touch it. It is local state, never committed, and read as untrusted
input all the same.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol

from ..base.layout import EVENT_SUFFIX, EVENTS_DIR, LEDGER_DIR, MAIN_WORKTREE, ledger_file
from . import events as ev
from . import lines

if TYPE_CHECKING:
    from .store import Store

SETTLE_BYTES = 1024 * 1024  # a ledger past this size is settled by the next read


class Holder(Protocol):
    """What settling needs of a read model: which of some event ids it holds."""

    def present(self, ids: Collection[str]) -> set[str]: ...


def ledger_path(store: Store, worktree: str | None = None) -> Path:
    """The ledger of `worktree` (default: this one) for stores of `store`'s kind."""
    return ledger_file(store.common_dir, worktree or store.worktree_name, store.kind)


def note(store: Store, rel: str, data: bytes) -> None:
    """Note complete event lines (`data`, each ending in a newline) read from or written to
    `rel`. Never fails the caller: without the note, only a loss before the next read goes
    unnoticed."""
    entries = [line for line in data.split(b"\n") if line.strip()]
    if not entries:
        return
    prefix = rel.encode("utf-8", "surrogateescape") + b"\t"
    try:
        path = ledger_path(store)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab") as handle, locked(handle):
            handle.write(b"".join(prefix + line + b"\n" for line in entries))
    except OSError:
        pass


@contextlib.contextmanager
def locked(handle: BinaryIO) -> Iterator[None]:
    """Hold an exclusive lock on an open ledger: notes (from writers and from readers, which
    do not take the store's write lock) and settling never interleave."""
    try:
        import fcntl
    except ImportError:  # no advisory locks here: a rare lost note, never a failure
        yield
        return
    fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@dataclass(frozen=True)
class Noted:
    """An event the ledger holds, as it holds it."""

    rel: str  # the store-relative file it was in
    raw: bytes  # its line, without the newline
    event: ev.Event
    worktree: str  # whose ledger


def ledgers(store: Store) -> list[tuple[str, Path]]:
    """(worktree, ledger) for this work tree and for linked worktrees that no longer exist
    (`git worktree remove`): their events are this repository's to bring back."""
    folder = store.common_dir.joinpath(*LEDGER_DIR)
    own = store.worktree_name
    found = [(own, ledger_path(store))]
    suffix = f"-{store.kind}.tsv"
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return found
    for name in names:
        if not name.endswith(suffix):
            continue
        worktree = name[: -len(suffix)]
        if worktree in (own, MAIN_WORKTREE) or (store.common_dir / "worktrees" / worktree).is_dir():
            continue
        found.append((worktree, folder / name))
    return found


def read_ledger(worktree: str, path: Path) -> list[Noted]:
    try:
        data = path.read_bytes()
    except OSError:
        return []
    return parse(worktree, data)


def parse(worktree: str, data: bytes) -> list[Noted]:
    out = []
    for entry in data.split(b"\n"):
        rel, tab, raw = entry.partition(b"\t")
        name = event_file(rel) if tab else None
        if name is None:
            continue
        found = lines.classify(raw)
        if found.problem is not None or found.event is None:
            continue  # untrusted like any event line: skipped, never fatal
        out.append(Noted(name, plain(raw), found.event, worktree))
    return out


def event_file(rel: bytes) -> str | None:
    """`rel` as a store-relative event file (`events/.../*.jsonl`), or None if it is not one
    or could point out of the store."""
    try:
        text = rel.decode("utf-8")
    except UnicodeDecodeError:
        return None
    parts = text.split("/")
    if (
        parts[0] != EVENTS_DIR
        or len(parts) < 2
        or not text.endswith(EVENT_SUFFIX)
        or any(p in ("", ".", "..") or "\0" in p or "\\" in p for p in parts)
    ):
        return None
    return text


def plain(raw: bytes) -> bytes:
    return raw[:-1] if raw.endswith(b"\r") else raw


def settle(store: Store, proj: Holder) -> None:
    """Drop from the ledgers the events the read model holds (a later loss of those is noted
    when the read model drops them); remove the emptied ledger of a removed worktree."""
    for worktree, path in ledgers(store):
        try:
            with open(path, "r+b") as handle, locked(handle):
                data = handle.read()
                noted = parse(worktree, data)
                present = proj.present({n.event.id for n in noted})
                kept = unique(n for n in noted if n.event.id not in present)
                if len(kept) == len(noted) and noted:
                    continue
                handle.seek(0)
                handle.write(
                    b"".join(
                        n.rel.encode("utf-8", "surrogateescape") + b"\t" + n.raw + b"\n"
                        for n in kept
                    )
                )
                handle.truncate()
                if not kept and worktree != store.worktree_name:
                    path.unlink(missing_ok=True)
        except OSError:
            continue  # missing, or a read-only store: settled another time


def settle_if_large(store: Store, proj: Holder) -> None:
    """Settle the ledger when it has grown (writes with no `status` in between): past
    `SETTLE_BYTES`, and twice what the last settling left (events only on other branches stay
    in it, and are not read again on every refresh)."""
    path = ledger_path(store)
    try:
        size = path.stat().st_size
    except OSError:
        return
    if size < SETTLE_BYTES:
        return
    try:
        left = int(path.with_name(path.name + ".settled").read_text() or 0)
    except (OSError, ValueError):
        left = 0
    if size < 2 * left:
        return
    settle(store, proj)
    try:
        path.with_name(path.name + ".settled").write_text(str(path.stat().st_size))
    except OSError:
        pass


def unique(noted: Iterable[Noted]) -> list[Noted]:
    seen: set[str] = set()
    out = []
    for item in noted:
        if item.event.id not in seen:
            seen.add(item.event.id)
            out.append(item)
    return out
