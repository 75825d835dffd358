"""Freshness at read time: whether the files a memory cites changed since it was written.

For each cited file, one tree lookup at HEAD (or `--at REV`): the blob it had is still there
(`fresh`), another is (`changed`), none is but git sees a rename (`moved`), or none is
(`missing`). A clone without the commit the memory was pinned to (shallow, or another
repository) answers `unknown` rather than guess. `explain` adds, for each stale file, the commits
that changed it (how many, the last one's subject and author) and whether a cited symbol still
exists: a `git log` walk and a blob read, so only when asked.

Recall marks its results and moves stale ones a little lower (`STALE_FACTOR`), among the results
only: a stale memory still appears. `stale` lists every active memory whose citations changed,
newest change first.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..base.config import find_work_tree
from ..base.errors import UsageError
from ..model import memories as mem
from ..model.freshness import (
    STALE_FACTOR,
    Change,
    Citation,
    CitedFile,
    Freshness,
    Verdicts,
    citations_of,
)
from .citing import has_symbol

if TYPE_CHECKING:
    from ..git.citations import CodeAt
    from ..search.retrieval import Hit
    from .workspace import Workspace


def work_tree(workspace: Workspace) -> Path | None:
    """The work tree citations are judged in: the project store's, else the working
    directory's."""
    if workspace.project is not None and workspace.project.exists():
        return workspace.project.work_tree
    return find_work_tree(workspace.cwd)


class Judge:
    """Verdicts against one commit of one repository, each file looked up once."""

    def __init__(
        self, workspace: Workspace, *, at: str | None = None, explain: bool = False
    ) -> None:
        self.explain = explain
        self.at = at
        self.code: CodeAt | None = None
        top = work_tree(workspace)
        if top is not None:
            from ..git.citations import CodeAt

            try:
                self.code = CodeAt(top, at)
            except Exception:  # noqa: BLE001 - an unreadable repository judges nothing
                self.code = None
            if self.code is not None and self.code.bad_rev:
                raise UsageError(
                    f"--at {at!r} is not a commit, tag or branch of {top}; give one `git log` shows"
                )
        self._files: dict[tuple[str, str, str, int | None, str | None], CitedFile] = {}
        self._commits: dict[str, bool] = {}

    def memory(self, memory: mem.Memory) -> Freshness:
        return Freshness(memory.id, tuple(self.file(c) for c in citations_of(memory.citations)))

    def many(self, memories: Iterable[mem.Memory]) -> Verdicts:
        return Verdicts(tuple(self.memory(m) for m in memories if m.citations))

    def file(self, citation: Citation) -> CitedFile:
        key = (citation.path, citation.commit, citation.blob, citation.line, citation.symbol)
        if key not in self._files:
            self._files[key] = self._judge(citation)
        return self._files[key]

    def _judge(self, citation: Citation) -> CitedFile:
        code = self.code
        if code is None or code.head is None:
            return CitedFile(citation, "unknown", why="not inside a git repository with commits")
        if citation.commit not in self._commits:
            self._commits[citation.commit] = code.has_commit(citation.commit)
        if not self._commits[citation.commit]:
            why = (
                "a shallow clone without the commit it was written at"
                if code.shallow
                else "the commit it was written at is not in this repository"
            )
            return CitedFile(citation, "unknown", why=why)
        if self.at is not None and not code.reaches(citation.commit):
            return CitedFile(citation, "unknown", why=f"written after {self.at}")
        now = code.blob(citation.path)
        if now == citation.blob:
            return CitedFile(citation, "fresh")
        if now is not None:
            return self._detail(CitedFile(citation, "changed"))
        moved = code.renamed(citation.commit, citation.path)
        if moved is not None:
            return self._detail(CitedFile(citation, "moved", now_path=moved))
        return self._detail(CitedFile(citation, "missing"))

    def _detail(self, found: CitedFile) -> CitedFile:
        if not self.explain or self.code is None:
            return found
        citation = found.citation
        history = self.code.history(citation.path, citation.commit, found.now_path)
        change = Change(*history) if history is not None else None
        exists = None
        if citation.symbol is not None and found.state != "missing":
            lines = self.code.lines(found.now_path or citation.path)
            exists = None if lines is None else has_symbol(lines, citation.symbol)
        return replace(found, change=change, symbol_exists=exists)


def rerank(workspace: Workspace, hits: Sequence[Hit], *, explain: bool = False) -> list[Hit]:
    """`hits` with their freshness, stale ones scored `STALE_FACTOR` lower and re-sorted among
    themselves: the same results, in a slightly different order."""
    if not any(hit.memory.citations for hit in hits):
        return list(hits)
    judge = Judge(workspace, explain=explain)
    marked = []
    for hit in hits:
        verdict = judge.memory(hit.memory) if hit.memory.citations else None
        factor = STALE_FACTOR if verdict is not None and verdict.stale else 1.0
        marked.append(replace(hit, freshness=verdict, factor=factor))
    return sorted(marked, key=lambda h: -h.score)


def stale(
    workspace: Workspace,
    memories: Iterable[mem.Memory],
    *,
    at: str | None = None,
) -> list[tuple[mem.Memory, Freshness]]:
    """The memories whose citations changed, with what changed, newest change first."""
    judge = Judge(workspace, at=at, explain=True)
    found = [(m, f) for m in memories if m.citations and (f := judge.memory(m)).stale]
    found.sort(key=lambda pair: (pair[1].last_change, pair[0].updated_clock), reverse=True)
    return found
