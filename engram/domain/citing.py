"""Citations found at write time: the tracked files a memory names, pinned to HEAD.

A memory's text is read for what looks like a path (`payments/retry.py`, `scripts/migrate.sh`),
also as `path:line` or `path::symbol`; each that names a file committed at HEAD of the work tree
the memory is written in is recorded in the `memory.created` (or `memory.updated`) event with
the commit and its blob id (`engram.model.freshness.Citation`). Explicit citations (`--cite`,
the MCP `cite` parameter) must each name such a file, else the write is refused. On the command
line an explicit path is relative to the current directory, as git takes one (`from_directory`);
the MCP tool's, like the paths found in the text, are relative to the repository's top. A file is
cited once in the form that says most (`_most_precise`).

Only git's committed trees are read (a tree lookup per path; a blob only for an explicit line or
symbol): nothing outside the repository, and never an untracked or ignored file. Outside a git
repository, or before its first commit, nothing is cited.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base import validation
from ..base.config import find_work_tree
from ..base.errors import UsageError, parameter
from ..base.places import repo_relative
from ..model.freshness import MAX_CITATIONS, Citation, citations_of, well_formed_path

if TYPE_CHECKING:
    from ..git.citations import CodeAt
    from .workspace import Workspace

# A path with a folder or a file extension, then `:line` or `::symbol`, if any.
_CANDIDATE = re.compile(
    r"(?<![\w/.:@-])(?P<path>(?:[\w.-]+/)+[\w.-]+|[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,9})"
    r"(?:::(?P<symbol>[A-Za-z_][A-Za-z0-9_.]*)|:(?P<line>\d{1,7})\b)?"
)
_MOST_LOOKUPS = 64  # candidates looked up per memory: a long text costs no more than this


def candidates(text: str) -> list[tuple[str, int | None, str | None]]:
    """What in `text` looks like a cited path: (path, line, symbol), in order, once each."""
    seen, found = set(), []
    for match in _CANDIDATE.finditer(text):
        path = match["path"].rstrip(".")
        while path.startswith("./"):
            path = path[2:]
        if "://" in text[max(0, match.start() - 8) : match.start() + 3] or not well_formed_path(
            path
        ):
            continue
        key = (path, int(match["line"]) if match["line"] else None, match["symbol"])
        if key not in seen:
            seen.add(key)
            found.append(key)
        if len(found) >= _MOST_LOOKUPS:
            break
    return found


def _refused(problem: str) -> UsageError:
    """An explicit citation refused: `--cite …` to the command line, `cite …` to an agent (the
    MCP parameter of the same meaning)."""
    return UsageError(problem, mcp_problem=problem.replace("--cite", parameter("--cite")))


def parse_cite(
    value: str, *, top: Path | None = None, here: Path | None = None
) -> tuple[str, int | None, str | None]:
    """An explicit citation, `path`, `path:line` or `path::symbol`, checked. Its path is
    relative to the repository's top, or to the directory `here` when given (`from_directory`,
    which needs the work tree `top`)."""
    text = str(value or "").strip()
    symbol = line = None
    if "::" in text:
        text, symbol = text.split("::", 1)
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]{0,199}", symbol):
            raise _refused(
                f"--cite {value!r}: {symbol!r} is not a symbol name; cite "
                "path::name (a function, class or variable)"
            )
    elif re.search(r":\d+$", text):
        text, number = text.rsplit(":", 1)
        line = int(number)
        if not 1 <= line <= 10_000_000:
            raise _refused(f"--cite {value!r}: lines count from 1")
    try:
        if here is not None and top is not None:
            text = from_directory(top, here, validation.well_formed(text, "--cite path").strip())
        path = validation.path(text, what="--cite path", limit=1024)
    except UsageError as exc:
        raise _refused(str(exc)) from None
    while path.startswith("./"):
        path = path[2:]
    if not well_formed_path(path):
        raise _refused(f"--cite {value!r} must name a file inside the repository, not in .git")
    return path, line, symbol


def from_directory(top: Path, here: Path, text: str) -> str:
    """A cited path given on the command line, taken as git takes one (`repo_relative`); inside
    the work tree only what git tracks is ever cited."""
    if not text:
        return text
    found = repo_relative(top, here, text)
    if found is None:
        raise UsageError(
            f"--cite {text!r} is outside the repository ({top}); cite a file inside it"
        )
    return found


def work_tree(workspace: Workspace) -> Path | None:
    """The work tree a memory written now cites: the project store's, else the working
    directory's."""
    store = workspace.write_store()
    if store.kind == "project":
        return store.work_tree
    top = find_work_tree(workspace.cwd)
    if top is None or workspace.personal.root.resolve().is_relative_to(top.resolve()):
        return None  # outside a repository, or in the personal store's own
    return top


def has_symbol(lines: Sequence[str], symbol: str) -> bool:
    pattern = re.compile(rf"(?<![\w]){re.escape(symbol.rsplit('.', 1)[-1])}(?![\w])")
    return any(pattern.search(line) for line in lines)


def pin(
    workspace: Workspace,
    content: str,
    explicit: Sequence[str] = (),
    *,
    relative_to: Path | None = None,
    keep: Sequence[Citation] = (),
) -> dict[str, Any]:
    """`{"citations": [...]}` for the event of a memory with `content`, or `{}` when it cites
    nothing. A wrong explicit citation is refused (UsageError) before anything is written.
    Explicit paths are relative to the repository's top, or to the directory `relative_to`
    when given (as a command line's are to its current directory). `keep` (an updated memory's
    `given` citations) are pinned again where HEAD has them (`_carried`)."""
    if len(explicit) > MAX_CITATIONS:
        raise UsageError(f"{len(explicit)} citations; give at most {MAX_CITATIONS}")
    top = work_tree(workspace)
    wanted = [parse_cite(value, top=top, here=relative_to) for value in explicit]
    if top is None:
        if wanted:
            raise _refused(
                f"{workspace.cwd} is not inside a git repository; --cite names "
                "files a repository tracks, so run Engram from inside one"
            )
        return {}
    from ..git.citations import CodeAt  # pygit2: only when a memory is written in a repository

    code = CodeAt(top)
    if code.head is None:
        if wanted:
            raise UsageError(
                "the repository has no commit yet; commit first so that citations "
                "can be pinned to one"
            )
        return {}
    pinned: dict[str, Citation] = {c.label: c for c in _carried(code, keep)}
    for path, line, symbol in wanted:
        found = _pinned(code, path, line, symbol, explicit=True)
        assert found is not None
        pinned.setdefault(found.label, found)
    for path, line, symbol in candidates(content):
        if len(pinned) >= MAX_CITATIONS:
            break
        found = _pinned(code, path, line, symbol, explicit=False)
        if found is not None:
            pinned.setdefault(found.label, found)
    kept = _most_precise(list(pinned.values()))
    return {"citations": [c.to_dict() for c in kept]} if kept else {}


def given(memory_content: str, citations: Iterable[Mapping[str, Any]]) -> list[Citation]:
    """The citations of a memory that its text does not name: those given with `--cite` (or
    the MCP `cite`). An update of the text pins again what the new text names, and must keep
    these, which no text names."""
    named = {path for path, _, _ in candidates(memory_content)}
    return [c for c in citations_of(citations) if c.path not in named]


def _carried(code: CodeAt, citations: Sequence[Citation]) -> list[Citation]:
    """`citations` pinned again at HEAD: at their path, or where git's rename detection says
    the file went; a file gone from HEAD is cited no more, and a line past the file's end or a
    symbol it no longer holds falls back to the whole file."""
    found: list[Citation] = []
    for cited in citations:
        path = cited.path if code.blob(cited.path) is not None else None
        path = path or code.renamed(cited.commit, cited.path)
        if path is not None:
            pinned = _pinned(code, path, cited.line, cited.symbol, explicit=False)
            if pinned is not None:
                found.append(pinned)
    return found


def _most_precise(citations: list[Citation]) -> list[Citation]:
    """`citations` without a whole file also cited at a line or a symbol: one citation pins the
    file's blob as well as the other, so `src/db.py` named in the text adds nothing to
    `--cite src/db.py::connect`."""
    precise = {c.path for c in citations if c.line is not None or c.symbol is not None}
    return [c for c in citations if c.label != c.path or c.path not in precise]


def _pinned(
    code: CodeAt, path: str, line: int | None, symbol: str | None, *, explicit: bool
) -> Citation | None:
    head = code.head
    assert head is not None
    blob = code.blob(path)
    if blob is None:
        if explicit:
            raise _refused(
                f"--cite {path}: not a file git tracks at HEAD ({head[:8]}); cite "
                "a committed file (untracked and ignored files are never cited)"
            )
        return None
    if line is None and symbol is None:
        return Citation(path, head, blob)
    lines = code.lines(path) or []
    if line is not None and line > len(lines):
        if explicit:
            raise _refused(f"--cite {path}:{line}: {path} has {len(lines)} lines at HEAD")
        line = None
    if symbol is not None and not has_symbol(lines, symbol):
        if explicit:
            raise _refused(
                f"--cite {path}::{symbol}: {symbol!r} is not in {path} at HEAD; "
                "cite a name the file holds"
            )
        symbol = None
    return Citation(path, head, blob, line, symbol)
