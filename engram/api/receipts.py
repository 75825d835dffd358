"""What `Engram` says about what became of a write (`engram.domain.receipts`), kept out of the
facade: `Engram` takes these methods from `ReceiptReads`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..domain.receipts import Receipt, Receipts

if TYPE_CHECKING:
    from ..domain.workspace import Workspace


class ReceiptReads:
    workspace: Workspace

    def write_mark(self) -> int:
        """A mark to give `receipts(since=...)`: take it before a write."""
        return Receipts(self.workspace).mark()

    def receipts(self, *, since: int = 0) -> list[Receipt]:
        """The receipts of the events written since `since` (`write_mark()`): each event's id,
        the file and line it is in, and whether it is committed and pushed yet (or what will
        do it). Session events that rode along are left out."""
        return Receipts(self.workspace).written(since)

    def event_status(self, ident: str) -> Receipt:
        """The receipt of any event by id or unique prefix, with whether the search indexes
        hold the memory it changed (`engram status ID`)."""
        return Receipts(self.workspace).status(ident)
