"""`engram verify`: re-read every event file from disk and report every line that is not sound.

This never trusts a cache. It checks what the read path tolerates or cannot see: canonical form
(the bytes are exactly what Engram would write), ids that are ULIDs and unique (the same id with
different content is damage; the same line twice is a harmless duplicate that readers drop), and
clocks that strictly increase within each file (one writer per file; in a file `engram compact`
merged, clocks never decrease).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..git.compact import is_compacted
from ..storage import lines, set_aside, shapes
from ..storage.store import Problem, Store


@dataclass(frozen=True)
class StoreVerification:
    """One store's event files re-read: how much was read, and every line that is not sound."""

    store: str
    path: str
    files: int
    lines: int
    events: int
    duplicates: int
    problems: tuple[Problem, ...]
    ok: bool


@dataclass(frozen=True)
class VerifyReport:
    """`verify` over the selected stores: sound if every store is."""

    ok: bool
    stores: tuple[StoreVerification, ...]


_PATH_RE = re.compile(r"^events/\d{4}/(0[1-9]|1[0-2])/[a-z0-9][a-z0-9-]*\.jsonl$")


def verify_store(store: Store, *, shapes_too: bool = False) -> StoreVerification:
    """Every event line of the store re-read, and its symbolic links; with `shapes_too`, also
    its own paths of the wrong kind (`engram.storage.shapes`: the doctor has a check of its own
    for them, with the fix)."""
    problems: list[Problem] = []
    seen: dict[str, tuple[bytes, str, int]] = {}
    lines_read = events_ok = duplicates = 0
    files = store.event_files()
    aside = set_aside.load(store)  # damaged committed lines `doctor --fix` set aside here
    for path in files:
        rel = store.rel(path)
        if not _PATH_RE.match(rel):
            problems.append(Problem(rel, 0, "warning", "not named events/YYYY/MM/<writer>.jsonl"))
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue  # gone since the listing (a compaction, a checkout)
        last_clock = -1
        merged = is_compacted(rel)  # clones' lines folded together: equal clocks may meet
        found, torn = lines.read(data, strict=True)
        for line in found:
            lines_read += 1
            number = line.number
            if line.problem is not None:
                if not set_aside.is_set_aside(aside, rel, line.raw):
                    problems.append(Problem(rel, number, "error", line.problem))
                continue
            event = line.event
            assert event is not None
            if line.note is not None:
                problems.append(Problem(rel, number, "error", line.note))
            if event.clock < last_clock or (event.clock == last_clock and not merged):
                problems.append(
                    Problem(
                        rel,
                        number,
                        "error",
                        f"clock {event.clock} does not increase (previous line has {last_clock})",
                    )
                )
            last_clock = max(last_clock, event.clock)
            previous = seen.get(event.id)
            if previous is None:
                seen[event.id] = (line.raw, rel, number)
                events_ok += 1
            elif previous[0] == line.raw:
                duplicates += 1
            else:
                problems.append(
                    Problem(
                        rel,
                        number,
                        "error",
                        f"id {event.id} is also at {previous[1]}:{previous[2]} "
                        "with different content",
                    )
                )
        if torn and not set_aside.is_set_aside(aside, rel, torn):
            problems.append(
                Problem(
                    rel,
                    len(found) + 1,
                    "warning",
                    "torn last line (a crash mid-write); the next write to "
                    "this file or `engram doctor --fix` sets it aside",
                )
            )
    for link in store.links():
        problems.append(
            Problem(
                link,
                0,
                "error",
                "a symbolic link inside the store (not followed: what it points to is not read)",
            )
        )
    for rel in shapes.misshapen(store) if shapes_too else ():
        problems.append(Problem(rel, 0, "error", shapes.problem(store, rel)))
    return StoreVerification(
        store=store.kind,
        path=str(store.root),
        files=len(files),
        lines=lines_read,
        events=events_ok,
        duplicates=duplicates,
        problems=tuple(problems),
        ok=not problems,
    )
