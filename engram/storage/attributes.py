"""The store's own `.gitattributes`: the lines that keep its event files byte for byte as
written, and an older or edited file brought back to them.

Git applies attributes on checkout and commit: `working-tree-encoding` re-encodes a file, `ident`
rewrites `$Id$`, a `filter` runs a program, `eol=crlf` (or `core.autocrlf`) converts line
endings. Any of them, set by a repository's top-level `.gitattributes` that one push can change,
would make a clone read other bytes than were committed. The most specific `.gitattributes`
wins, so the store's own file pins each of them for `*.jsonl` (and marks event files generated,
so that forges fold them in pull requests). Within the file the last matching line wins, so
Engram's lines go last; lines of the user's own for other paths are kept above them.
"""

from __future__ import annotations

from ..base.layout import GITATTRIBUTES_GENERATED, GITATTRIBUTES_LINE

COMMENT = (
    "# Event files are UTF-8 JSON Lines with LF endings, byte for byte on every clone: no",
    "# attribute set elsewhere (the repository's .gitattributes, git's config) may convert their",
    "# encoding, line endings or an $Id$ in them, or run a filter on them. They are sets of lines",
    "# (readers dedupe events by id), so should two sides ever change one, keep both sides.",
)
GENERATED_COMMENT = (
    "# Forges fold generated files in pull requests (GitHub and Gitea: linguist-generated, GitLab:",
    "# gitlab-generated): event lines are for machines; the handoff notes (handoffs/) stay shown.",
)
# Comment lines earlier versions wrote, replaced with the current ones.
_OLD_COMMENTS = (
    "# Event files are LF-only JSON Lines on every platform; never convert line endings. They "
    "are sets",
    "# of lines (readers dedupe events by id), so should two sides ever change one, keep both "
    "sides.",
)
_OURS = frozenset((*COMMENT, *GENERATED_COMMENT, *_OLD_COMMENTS))

TEXT = "\n".join((*COMMENT, GITATTRIBUTES_LINE, *GENERATED_COMMENT, GITATTRIBUTES_GENERATED)) + "\n"


def pinned(text: str) -> str:
    """`text` (a store's .gitattributes) with Engram's lines for event files at the end, and no
    other line for `*.jsonl`: the user's lines for other paths are kept, in order."""
    kept = [
        line
        for line in text.splitlines()
        if line not in _OURS and not line.strip().startswith("*.jsonl")
    ]
    while kept and not kept[-1].strip():
        kept.pop()
    return "\n".join(kept) + ("\n\n" if kept else "") + TEXT


def is_pinned(text: str) -> bool:
    """Whether a store's .gitattributes holds Engram's lines, last, as `pinned` writes them."""
    return pinned(text) == text
