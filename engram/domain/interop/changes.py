"""Which records of an import would change what the store already holds, and whose it is.

An import creates. A record that targets a memory, task (its progress, failures and handoffs)
or session the store already holds, rather than one this import creates, would change what
someone else (or the user, before) wrote: update, forget, supersede or reinforce a memory,
abandon a task, set its latest handoff, end a session. Such a record is refused (skipped and
reported) unless the user names it on purpose (`engram import --allow-changes`, whose dry run
lists each change first). A memory or task created again under an id the store holds counts
as a change too: the earlier creation would decide what the record says.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...readmodel import fold
from ...readmodel.projection import Projection
from ...storage import events as ev
from .plan import Record

_WHAT = {"memory": "memory", "task": "task", "checkpoint": "task", "session": "session"}


@dataclass(frozen=True)
class Change:
    """A record of an import that would change a record already in the store."""

    where: str  # the source's file:line
    target: str  # the id of the record it would change
    text: str  # one line: what it does, to what, written by whom


def target(record: Record) -> str | None:
    """The record (memory, task, session) that an imported record is about."""
    return ev.entity_of(record.event.data if record.event is not None else record.data)


def find(proj: Projection, records: list[Record], describe: list[str]) -> dict[int, Change]:
    """The records (by their index in `records`) that would change a record `proj` holds,
    each with what it does (`describe`, by index) and whose record it is."""
    targets = {t for t in map(target, records) if t is not None}
    held = fold.known_entities(proj.db, targets)
    owners: dict[str, str] = {}
    out: dict[int, Change] = {}
    for index, record in enumerate(records):
        aim = target(record)
        if aim is None or aim not in held:
            continue
        if aim not in owners:
            owners[aim] = _owner(proj, aim)
        out[index] = Change(record.where, aim, f"{describe[index]}: changes the {owners[aim]}")
    return out


def _owner(proj: Projection, entity: str) -> str:
    """ "memory abcd1234 written by X" for the record's first event."""
    events = proj.entity_events(entity)
    if not events:
        return f"record {entity}"
    first = events[0]
    what = _WHAT.get(first.kind.split(".", 1)[0], "record")
    return f"{what} {entity[:8]} written by {ev.written_by(first.actor, first.data.get('origin'))}"
