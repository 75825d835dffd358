"""`engram diff`: what a range of commits changed in the stores, from git history alone.

Reads the event files of the range's two commits straight from git objects (no checkout, no
read model, no index), folds the events the head holds and the base does not
(`domain.review.summary`), and renders them (`domain.review.render`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..base.errors import UsageError
from ..base.validation import well_formed
from ..domain.review.summary import Review, review
from ..git import ranges
from ..storage import events as ev

if TYPE_CHECKING:
    from ..storage.store import Store
    from .facade import Engram


def _events(
    store: Store, commit: object | None, cache: dict[str, tuple[list[ev.Event], int]]
) -> tuple[dict[str, ev.Event], int]:
    """The events of `commit`'s tree by id, and how many lines were not events."""
    found: dict[str, ev.Event] = {}
    skipped = 0
    for _, blob in ranges.event_blobs(store, commit):
        key = str(blob.id)
        if key not in cache:
            lines, torn = ranges.read_lines(blob)
            events = [line.event for line in lines if line.event is not None]
            cache[key] = (events, len(lines) - len(events) + torn)
        events, bad = cache[key]
        skipped += bad
        for event in events:
            found.setdefault(event.id, event)
    return found, skipped


def diff_store(store: Store, text: str) -> Review:
    """What the range `text` changed in `store`."""
    found = ranges.resolve(store, text)
    cache: dict[str, tuple[list[ev.Event], int]] = {}
    base, skipped_base = _events(store, found.base, cache)
    head, skipped_head = _events(store, found.head, cache)
    return review(
        store.kind,
        text,
        found.base_id,
        found.head_id,
        base,
        head,
        skipped=max(0, skipped_head - skipped_base),
        notes=found.notes,
    )


def diff(engram: Engram, text: str | None) -> list[Review]:
    """What the range `text` (`A..B`, `A...B`, or `A` for `A..HEAD`) changed in the stores
    `engram` reads: the project store unless told `--personal`, as git reads the range in
    that store's repository. None: what this branch changed since it left the repository's
    default branch (`ranges.default_base`), a pull request's view."""
    if text is not None:
        text = well_formed(text, "RANGE")
        if not text.strip():
            raise UsageError("RANGE is empty; give A..B, A...B or one revision")
    stores: Sequence[Store]
    if engram.use == "personal":
        stores = [engram.personal]
    elif engram.project is not None:
        stores = [engram.project]
    elif engram.use == "project":
        raise UsageError(
            "there is no project store here: `engram init --project` makes one, or give --personal"
        )
    else:
        stores = [engram.personal]
    if not stores[0].exists():
        raise UsageError(f"the {stores[0].kind} store does not exist yet: `engram init` makes it")
    return [
        diff_store(store, text if text is not None else f"{ranges.default_base(store)}...HEAD")
        for store in stores
    ]
