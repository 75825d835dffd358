"""Discovery records: facts about a codebase, with citations pinned to a git commit.

A discovery is an ordinary memory (kind `fact`, tag `discovery`), so it travels, merges, decays
and is recalled like any other. Its citations live in the content itself, one line each after the
fact, so no new event kind is needed and a reviewer reads them in a diff:

    The retry budget is enforced in the HTTP client, not the queue.

    cite: src/http/client.py:40-52@3f9a1c0e5b...        (40 hex digits)
    cite: src/queue/worker.py:10-11@3f9a1c0e5b...
      | retries = settings.retries   # the excerpt, kept only when git cannot give it back
      | backoff = settings.backoff

The lines a citation names are read from the file at the pinned commit. When they cannot be
(the file had uncommitted changes, or was added to the index but not committed, when the fact was
recorded), the excerpt is kept in the content, after its `cite:` line, each line prefixed with
`  | `. It is scanned for secrets like the rest of the content: refused, or redacted on request.

Only a file git tracks (one in the index) gives an excerpt. The content is pushed, so the lines
of an untracked or ignored file (a `.env`) or of a file inside `.git/` are never copied into it:
such a citation is recorded by path and line range alone, and `pin` says why in its `note`. A path
that leads outside the work tree (`..`, an absolute path, a symbolic link to a file elsewhere) is
refused.

`check` compares each citation with the current work tree: `valid` (the same lines are still
there), `moved` (the excerpt is found at other lines, which it reports), `broken` (the file is
gone or the excerpt is nowhere in it), or `unknown` (no excerpt was kept and the pinned commit
is not in this clone, so fetch it, or the file was not tracked at that commit).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..base import validation
from ..base.config import find_work_tree
from ..base.errors import EngramError, SecretError, UsageError, quote

if TYPE_CHECKING:
    from ..api import Engram, Remembered
    from ..base.validation import Checks
    from ..git.tracked import TrackedFiles
    from ..model.memories import Memory

TAG = "discovery"
KIND = "fact"
MAX_CITATIONS = 20
EXCERPT_PREFIX = "  |"

Status = Literal["valid", "moved", "broken", "unknown"]
WORSE = ("valid", "moved", "unknown", "broken")  # the statuses, from best to worst

_CITE = re.compile(r"^cite: (?P<path>.+):(?P<start>\d+)-(?P<end>\d+)@(?P<commit>[0-9a-f]{40})$")
_REDACTED = re.compile(r"\[REDACTED:[^\]\n]*\]")


@dataclass(frozen=True)
class Citation:
    path: str
    start: int
    end: int
    commit: str
    excerpt: tuple[str, ...] | None = None  # kept only when git cannot give the lines back
    note: str | None = field(default=None, compare=False)  # why no excerpt was kept

    def line(self) -> str:
        return f"cite: {self.path}:{self.start}-{self.end}@{self.commit}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "start_line": self.start,
            "end_line": self.end,
            "commit": self.commit,
            "excerpt_kept": self.excerpt is not None,
        }


@dataclass(frozen=True)
class Discovery:
    memory: Memory
    text: str
    citations: tuple[Citation, ...]


@dataclass(frozen=True)
class CitationCheck:
    citation: Citation
    status: Status
    reason: str
    moved_to: tuple[tuple[int, int], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.citation.to_dict(),
            "status": self.status,
            "reason": self.reason,
            "moved_to": [{"start_line": s, "end_line": e} for s, e in self.moved_to],
        }


# -- the text format --------------------------------------------------------------------------


def format_content(text: str, citations: Sequence[Citation]) -> str:
    lines = [text.strip(), ""]
    for citation in citations:
        lines.append(citation.line())
        for excerpt_line in citation.excerpt or ():
            lines.append(f"{EXCERPT_PREFIX} {excerpt_line}".rstrip())
    return "\n".join(lines)


def parse(content: str) -> tuple[str, list[Citation]]:
    """The fact and its citations. Only the trailing block of `cite:` lines counts, so a fact
    that mentions "cite:" in its own text is read correctly."""
    lines = content.splitlines()
    start = len(lines)
    while start > 0 and (
        _CITE.match(lines[start - 1]) or lines[start - 1].startswith(EXCERPT_PREFIX)
    ):
        start -= 1
    while start < len(lines) and not _CITE.match(lines[start]):
        start += 1  # excerpt lines without a citation above them belong to the text
    citations: list[Citation] = []
    for line in lines[start:]:
        found = _CITE.match(line)
        if found:
            citations.append(
                Citation(found["path"], int(found["start"]), int(found["end"]), found["commit"])
            )
            continue
        last = citations[-1]
        kept = line[len(EXCERPT_PREFIX) :].removeprefix(" ")
        citations[-1] = Citation(
            last.path, last.start, last.end, last.commit, (*(last.excerpt or ()), kept)
        )
    return "\n".join(lines[:start]).strip(), citations


# -- recording --------------------------------------------------------------------------------


def work_tree(engram: Engram) -> Path:
    """The git work tree whose files discoveries cite: the project store's, else the one that
    holds the working directory."""
    if engram.project is not None:
        return engram.project.work_tree
    top = find_work_tree(engram.cwd)
    if top is None:
        raise UsageError(
            f"{engram.cwd} is not inside a git repository; discoveries cite files "
            "of a repository, so run Engram from inside one"
        )
    return top


def clean_path(path: str, *, limit: int = 1024) -> str:
    """A repository-relative path, refusing anything that could escape the work tree."""
    if not (path or "").strip():
        raise UsageError("a citation needs a path relative to the repository root")
    text = validation.path(path, what="citation path", limit=limit)
    while text.startswith("./"):
        text = text[2:]
    if not text or text.endswith("/"):
        raise UsageError(f"citation path {path!r} must name a file")
    return text


def _real_path(top: Path, path: str) -> tuple[Path, str]:
    """The file `path` names, symbolic links followed, and its path relative to the work tree.
    A path that leads outside the work tree is refused."""
    root = top.resolve()
    try:
        resolved = (top / path).resolve()
    except (RuntimeError, OSError):  # a loop of symbolic links
        raise UsageError(
            f"citation path {path!r} is a loop of symbolic links; cite the file itself"
        ) from None
    if not resolved.is_relative_to(root):
        from ..git.tracked import outside  # the words a working-set file is refused in too

        raise UsageError(outside("citation path", path, "cite a file inside it"))
    return resolved, resolved.relative_to(root).as_posix()


def _read_lines(top: Path, path: str) -> list[str] | None:
    resolved, _ = _real_path(top, path)
    try:
        data = resolved.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    return data.decode("utf-8", errors="replace").splitlines()


def _matches(wanted: str, line: str) -> bool:
    """`line` is `wanted`, where a secret redacted in `wanted` stands for any text."""
    if wanted == line:
        return True
    if "[REDACTED:" not in wanted:
        return False
    pattern = ".+".join(re.escape(part) for part in _REDACTED.split(wanted))
    return re.fullmatch(pattern, line) is not None


def _same(wanted: Sequence[str], lines: Sequence[str]) -> bool:
    return len(wanted) == len(lines) and all(
        _matches(x.rstrip(), y.rstrip()) for x, y in zip(wanted, lines, strict=True)
    )


def _find(lines: Sequence[str], block: Sequence[str], limit: int = 5) -> list[tuple[int, int]]:
    """Where `block` occurs in `lines` (1-based, inclusive), ignoring indentation changes."""
    wanted = [x.strip() for x in block]
    if not wanted or not any(wanted):
        return []
    found = []
    stripped = [x.strip() for x in lines]
    for offset in range(len(stripped) - len(wanted) + 1):
        if _matches(wanted[0], stripped[offset]) and _same(
            wanted, stripped[offset : offset + len(wanted)]
        ):
            found.append((offset + 1, offset + len(wanted)))
            if len(found) >= limit:
                break
    return found


def _tracked(top: Path) -> TrackedFiles:
    from ..git.tracked import TrackedFiles  # pygit2: only when a citation is pinned or checked

    return TrackedFiles(top)


def pin(
    engram: Engram, citations: Sequence[Mapping[str, Any]], *, redact: bool = False
) -> list[Citation]:
    """Check each citation against the work tree and pin it to HEAD. An excerpt is kept only
    from a file git tracks, and is scanned for secrets (refused, or redacted if asked)."""
    if not citations:
        raise UsageError("a discovery needs at least one citation (path and line range)")
    if len(citations) > MAX_CITATIONS:
        raise UsageError(
            f"{len(citations)} citations; give at most {MAX_CITATIONS} "
            "(split the fact into several discoveries)"
        )
    checks = engram.checks()
    most_lines = checks.limit("limits.citation_lines")
    top = work_tree(engram)
    repo = _tracked(top)
    head = repo.head
    if head is None:
        raise UsageError(
            "the repository has no commit yet; commit first so that citations can be pinned to one"
        )
    pinned = []
    for raw in citations:
        path = clean_path(str(raw.get("path") or ""), limit=checks.limit("limits.path_chars"))
        start = int(raw.get("start_line") or 0)
        end = int(raw.get("end_line") or start)
        if start < 1 or end < start:
            raise UsageError(
                f"{path}: line range {start}-{end} is not valid; lines count from 1 "
                "and end_line is at least start_line"
            )
        if end - start + 1 > most_lines:
            raise UsageError(
                f"{path}:{start}-{end} is {end - start + 1} lines; cite at most "
                f"{most_lines} (setting limits.citation_lines): the lines that "
                "show the fact"
            )
        resolved, real = _real_path(top, path)
        lines = _read_lines(top, path)
        if lines is None:
            raise UsageError(
                f"{path} is not a file in {top}; cite a path relative to the repository root"
            )
        if end > len(lines):
            raise UsageError(f"{path} has {len(lines)} lines; {start}-{end} is past its end")
        current = lines[start - 1 : end]
        untracked = repo.untracked(path, resolved, real)
        excerpt = raw.get("excerpt")
        if excerpt is not None and str(excerpt).strip():
            given = str(excerpt).strip("\n").splitlines()
            if not _same([x.strip() for x in given], [x.strip() for x in current]):
                elsewhere = _find(lines, given, limit=1)
                if elsewhere:
                    s, e = elsewhere[0]
                    raise UsageError(
                        f"the excerpt is at {path}:{s}-{e}, not {start}-{end}; "
                        "cite the lines where it is"
                    )
                # The lines of a file git does not track are not shown, not even here.
                hold = "" if untracked else f" (lines {start}-{end} hold: {_preview(current)})"
                raise UsageError(
                    f"the excerpt is not in {path} as it is now; quote the file exactly{hold}"
                )
        if untracked is not None:
            pinned.append(Citation(path, start, end, head, note=f"no excerpt: {untracked}"))
            continue
        committed = repo.lines_at(head, path)
        same_as_head = (
            committed is not None
            and end <= len(committed)
            and _same(committed[start - 1 : end], current)
        )
        pinned.append(
            Citation(
                path,
                start,
                end,
                head,
                None
                if same_as_head
                else _scanned(checks, path, start, end, current, redact=redact),
            )
        )
    return pinned


def _scanned(
    checks: Checks, path: str, start: int, end: int, lines: Sequence[str], *, redact: bool
) -> tuple[str, ...]:
    """The cited lines as an excerpt to store: scanned for secrets like the rest of the
    content, so a secret in a tracked file is refused (or redacted) and never pushed."""
    field = f"citation {path}:{start}-{end}"
    try:
        text = checks.scan("\n".join(x.rstrip() for x in lines), field=field, redact=redact)
    except SecretError as exc:  # count the lines as the file does
        raise SecretError(exc.secret_type, start + exc.line - 1, exc.column, field=field) from None
    return tuple(text.split("\n"))


def _preview(lines: Sequence[str], width: int = 120) -> str:
    return quote(" ⏎ ".join(x.strip() for x in lines), width)


def record(
    engram: Engram,
    content: str,
    citations: Sequence[Mapping[str, Any]],
    *,
    tags: Sequence[str] = (),
    task: str | None = None,
    importance: float = 0.5,
    scope: str | None = None,
    redact: bool = False,
) -> tuple[Remembered, list[Citation]]:
    """Store a discovery: a `fact` memory tagged `discovery` whose content ends with its
    citations. A near-duplicate of an existing discovery reinforces it instead."""
    text = (content or "").strip()
    if not text:
        raise UsageError("content is empty; state the fact the citations show")
    if parse(text)[1]:
        raise UsageError("content must not end with `cite:` lines; pass citations separately")
    pinned = pin(engram, citations, redact=redact)
    same = _same_discovery(engram, text, pinned)
    if same is not None:
        from .memories import Remembered

        return Remembered(same.memory, duplicate=True), list(same.citations)
    all_tags = [TAG, *(t for t in tags if t.strip().lower() != TAG)]
    # No near-duplicate check by meaning: the same fact with new citations (the code moved)
    # must be stored, not folded into the old one.
    remembered = engram.remember(
        format_content(text, pinned),
        kind=KIND,
        tags=all_tags,
        task=task,
        importance=importance,
        scope=scope,
        redact=redact,
        check_duplicates=False,
    )
    return remembered, pinned


def _same_discovery(engram: Engram, text: str, pinned: Sequence[Citation]) -> Discovery | None:
    """An active discovery saying the same, citing the same lines, whose citations all still
    hold: recording it again would change nothing."""
    wanted = " ".join(text.split()).casefold()
    cited = sorted((c.path, c.start, c.end) for c in pinned)
    for found in recent(engram, limit=10_000):
        if (
            " ".join(found.text.split()).casefold() == wanted
            and sorted((c.path, c.start, c.end) for c in found.citations) == cited
            and all(c.status == "valid" for c in check(engram, found))
        ):
            return found
    return None


# -- reading and checking ---------------------------------------------------------------------


def as_discovery(memory: Memory) -> Discovery | None:
    text, citations = parse(memory.content)
    if TAG not in memory.tags or not citations:
        return None
    return Discovery(memory, text, tuple(citations))


def get(engram: Engram, ident: str) -> Discovery:
    memory = engram.get(ident)
    found = as_discovery(memory)
    if found is None:
        raise UsageError(
            f"memory {memory.id[:8]} is not a discovery (a fact tagged "
            f"'{TAG}' with citations); record one with discovery_record"
        )
    return found


def recent(engram: Engram, *, limit: int = 20) -> list[Discovery]:
    """Active discoveries, most recently changed first."""
    out = []
    for memory in engram.memories(kinds=[KIND], tags=[TAG], limit=None):
        found = as_discovery(memory)
        if found is not None:
            out.append(found)
            if len(out) >= limit:
                break
    return out


def check(engram: Engram, discovery: Discovery) -> list[CitationCheck]:
    """Is each citation still true of the current work tree?"""
    top = work_tree(engram)
    try:
        repo: TrackedFiles | None = _tracked(top)
    except EngramError:
        repo = None
    out = []
    for citation in discovery.citations:
        out.append(_check_one(top, repo, citation))
    return out


@dataclass(frozen=True)
class Checked:
    """A discovery with the check of each of its citations, and the worst of them."""

    discovery: Discovery
    checks: tuple[CitationCheck, ...]

    @property
    def status(self) -> Status:
        return max((c.status for c in self.checks), key=WORSE.index, default="valid")


@dataclass(frozen=True)
class Survey:
    """Discoveries checked against the work tree, and how many citations have each status."""

    checked: tuple[Checked, ...]
    counts: dict[str, int]


def survey(engram: Engram, ident: str | None = None, *, limit: int = 10) -> Survey:
    """Check one discovery (by id) or the `limit` most recent ones."""
    found = [get(engram, ident)] if ident else recent(engram, limit=limit)
    checked = tuple(Checked(item, tuple(check(engram, item))) for item in found)
    counts = dict.fromkeys(WORSE, 0)
    for item in checked:
        for c in item.checks:
            counts[c.status] += 1
    return Survey(checked, counts)


def _check_one(top: Path, repo: TrackedFiles | None, citation: Citation) -> CitationCheck:
    expected: list[str] | None = list(citation.excerpt) if citation.excerpt is not None else None
    if expected is None and repo is not None:
        then = repo.lines_at(citation.commit, citation.path)
        if then is not None and citation.end <= len(then):
            expected = then[citation.start - 1 : citation.end]
        elif then is None and repo.has_commit(citation.commit):
            return CitationCheck(
                citation,
                "unknown",
                f"{citation.path} was not tracked by git at commit "
                f"{citation.commit[:12]} and no excerpt was kept, so there is "
                "nothing to compare with; cite a file git tracks",
            )
    if expected is None:
        return CitationCheck(
            citation,
            "unknown",
            f"commit {citation.commit[:12]} is not in this clone and no excerpt "
            "was kept; fetch it (git fetch) and check again",
        )
    try:
        lines = _read_lines(top, citation.path)
    except UsageError as exc:
        return CitationCheck(citation, "broken", str(exc))
    if lines is None:
        return CitationCheck(citation, "broken", f"{citation.path} is gone from the work tree")
    here = lines[citation.start - 1 : citation.end]
    if _same([x.strip() for x in expected], [x.strip() for x in here]):
        return CitationCheck(citation, "valid", "the cited lines are unchanged")
    found = _find(lines, expected)
    if found:
        where = ", ".join(f"{s}-{e}" for s, e in found)
        return CitationCheck(
            citation, "moved", f"the excerpt is now at lines {where}", tuple(found)
        )
    return CitationCheck(
        citation,
        "broken",
        f"the cited lines are no longer in {citation.path}; check the fact "
        "again and record a new discovery (forget this one)",
    )
