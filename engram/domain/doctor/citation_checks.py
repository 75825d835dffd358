"""The doctor's count of stale memories: those whose cited files changed, moved or are gone
since they were written (`engram.domain.freshness`). A note, not an error: the memories may
still hold; `engram stale` lists them with the command to confirm or retire each."""

from __future__ import annotations

from ...storage.store import Store
from .report import Finding, Host, flag


def check_citations(engram: Host, store: Store) -> list[Finding]:
    try:
        found = [m for m, _ in engram.stale() if m.store == store.kind]
    except Exception:  # noqa: BLE001 - a store that cannot be read is the other checks' finding
        return []
    if not found:
        return []
    many = len(found) != 1
    return [
        Finding(
            "stale-memories",
            "note",
            f"{len(found)} memor{'ies' if many else 'y'} cite{'' if many else 's'} code "
            "that changed since written",
            f"`engram stale {flag(store)}` lists them, with the command to confirm "
            "(engram update) or retire (engram forget) each",
        )
    ]
