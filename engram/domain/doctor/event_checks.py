"""The doctor's check of the event files: torn and damaged lines, CR LF line ends,
unreadable and empty files, and what `engram verify` finds in them; and how a repaired file gets
committed.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ...base.errors import EngramError
from ...base.layout import GITATTRIBUTES_LINE
from ...git.recovery import open_repo
from ...storage import lines, set_aside
from ...storage.local import WriterState
from ...storage.store import Store
from .report import HOLD_SECONDS, Finding, Host, flag, git_c, restore_command

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


def git_operation(busy: str | None) -> str | None:
    """The git command whose operation is under way, from `StoreRepo.busy()`."""
    if not busy:
        return None
    for word, command in (
        ("rebase", "rebase"),
        ("merge", "merge"),
        ("cherrypick", "cherry-pick"),
        ("revert", "revert"),
    ):
        if word in busy:
            return command
    return None


def committed_bytes(repo: Any, store: Store, rel: str) -> bytes | None:
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


def held_lines(repo: Any, rel: str) -> set[bytes] | None:
    """The lines (and torn last lines) of every version of an event file someone else may hold
    (`StoreRepo.versions`: HEAD, the index, a merge under way, any ref, a stash), which no
    repair takes out; None when no commit or stage holds the file (only this work tree has it).
    A line a merge brings in is a teammate's even before the merge is committed."""
    versions = repo.versions(rel) if repo is not None else []
    if not versions:
        return None
    return {line for data in versions for line in data.split(b"\n")} - {b""}


def check_events(engram: Host, store: Store) -> list[Finding]:
    from ..verify import verify_store

    out: list[Finding] = []
    repo = open_repo(store)
    state = WriterState.load(store)
    known = set_aside.load(store)
    with _maybe_locked(store):
        reported: set[tuple[str, int]] = set()
        for path in store.event_files():
            rel = store.rel(path)
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue  # gone since the listing (a compaction, a checkout)
            except OSError as exc:
                out.append(
                    Finding(
                        "event-file",
                        "error",
                        f"cannot be read ({exc.strerror})",
                        f"make it readable: `chmod u+r {shlex.quote(str(path))}`",
                        path=rel,
                    )
                )
                continue
            if not data and held_lines(repo, rel) is None:
                out.append(
                    Finding(
                        "empty-file",
                        "warning",
                        "an empty event file, left by a write that never finished (a process "
                        "killed as it created the file); git sees it as an untracked file",
                        f"`engram doctor --fix {flag(store)}` removes it",
                        path=rel,
                        auto=True,
                    )
                )
                continue
            found = scan(data)
            if not found.damaged:
                continue
            if found.crlf:
                out.append(_line_endings(store, repo, rel, found.crlf))
            theirs = held_lines(repo, rel) or set()
            for number, raw, why in found.bad:
                reported.add((rel, number))
                out.append(_damaged(store, known, rel, number, raw, why, raw in theirs))
            if found.torn:
                number = data.count(b"\n") + 1
                reported.add((rel, number))
                if found.torn in theirs:
                    out.append(
                        _damaged(
                            store,
                            known,
                            rel,
                            number,
                            found.torn,
                            f"torn last line ({len(found.torn)} bytes)",
                            True,
                        )
                    )
                    continue
                own = state.segment == rel
                out.append(
                    Finding(
                        "torn-line",
                        "warning",
                        f"torn last line ({len(found.torn)} bytes) left by a crash mid-write; "
                        "readers skip it",
                        f"`engram doctor --fix {flag(store)}` sets it aside in "
                        f"{store.local_dir / 'quarantine'}/"
                        + (" (or the next write from this clone does)" if own else ""),
                        path=rel,
                        line=number,
                        auto=True,
                    )
                )
        report = verify_store(store)
    for problem in report.problems:
        if (problem.path, problem.line) in reported or problem.message.startswith(
            (
                "torn last line",
                "blank line",
                "git conflict",
                "invalid JSON",
                "line ends with CR LF",
                "a symbolic link",
            )
        ):
            continue
        out.append(
            Finding(
                "event-file",
                "error" if problem.message.startswith("id ") else "warning",
                f"{problem.message} (the line is read as it is)",
                f"if the file was edited by hand, `{git_c(store)} diff -- "
                f"{shlex.quote(store.repo_path(problem.path))}` shows how and "
                f"`{restore_command(store, [problem.path])}` restores it",
                path=problem.path,
                line=problem.line or None,
            )
        )
    return out


def _damaged(
    store: Store,
    known: dict[tuple[str, str], Any],
    rel: str,
    number: int,
    raw: bytes,
    why: str,
    committed: bool,
) -> Finding:
    """A damaged line: this clone's own (moved to quarantine by the repair), or one someone
    committed (set aside in this clone, never taken out of the file or its history)."""
    if committed and set_aside.is_set_aside(known, rel, raw):
        return Finding(
            "set-aside",
            "note",
            f"{why}; set aside in this clone by `engram doctor --fix`, readers skip it",
            "nothing to do here: the line stays as its writer committed it (only "
            "they can replace it)",
            path=rel,
            line=number,
        )
    if committed:
        fix = (
            f"`engram doctor --fix {flag(store)}` sets it aside in this clone "
            f"({store.local_dir / set_aside.SET_ASIDE_FILE}); the committed file and its "
            "history are left as they are"
        )
    else:
        fix = (
            f"`engram doctor --fix {flag(store)}` moves the line to "
            f"{store.local_dir / 'quarantine'}/ (with a copy of the whole file) and "
            f"rewrites the file without it; `engram commit {flag(store)}` then commits it"
        )
    return Finding(
        "damaged-line",
        "error",
        f"{why}; readers skip this line",
        fix,
        path=rel,
        line=number,
        auto=True,
    )


def _line_endings(store: Store, repo: Any, rel: str, count: int) -> Finding:
    """Lines git wrote with CR LF: name the attribute that asked for it."""
    cause = "a .gitattributes or core.autocrlf converts its line endings"
    if repo is not None:
        try:
            eol = repo.repo.get_attr(store.repo_path(rel), "eol")
        except Exception:  # pygit2.GitError and kin: the cause is then only guessed
            eol = None
        if eol == "crlf":
            cause = (
                "a .gitattributes gives it `eol=crlf` (`git check-attr -a -- "
                f"{shlex.quote(store.repo_path(rel))}` says which)"
            )
    return Finding(
        "line-endings",
        "warning",
        f"{count} line(s) end with CR LF: {cause}; the events are read, but the file is not "
        "as Engram writes it",
        f"`engram doctor --fix {flag(store)}` writes the store's .gitattributes line "
        f"`{GITATTRIBUTES_LINE}` back and the file with LF endings",
        path=rel,
        auto=True,
    )


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
