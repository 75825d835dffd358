"""What `Engram` reads of citations and freshness (`engram.domain.freshness`), kept out of the
facade: `Engram` takes these methods from `CitationReads`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..domain import freshness

if TYPE_CHECKING:
    from ..domain.workspace import Workspace
    from ..model import memories as mem
    from ..model.freshness import Freshness, Verdicts


class CitationReads:
    workspace: Workspace

    def freshness(
        self, memories: Iterable[mem.Memory], *, at: str | None = None, explain: bool = False
    ) -> Verdicts:
        """For each memory that cites files, whether they changed since it was written: at HEAD
        of the work tree, or at the revision `at`; `explain` adds each change's history."""
        return freshness.Judge(self.workspace, at=at, explain=explain).many(memories)

    def stale(
        self,
        *,
        at: str | None = None,
        limit: int | None = None,
    ) -> list[tuple[mem.Memory, Freshness]]:
        """The active memories whose cited files changed, moved or are gone, newest change
        first, with what changed."""
        memories = self.memories(limit=None)  # type: ignore[attr-defined]
        found = freshness.stale(self.workspace, memories, at=at)
        return found[:limit] if limit is not None else found
