"""Short queries matched against the pieces of names: `tests` finds "Prefer pytest fixtures",
`postgres` finds "Chose PostgreSQL 16".

BM25 matches whole words (after stemming), and the model knows a name such as `pytest` or
`postgresql` only as a string of sub-word pieces that mean little: to both, "pytest" shares
nothing with "tests". A one- or two-word query carries no other words to make up for it, so
for such a query (each word of at least four letters) a memory also matches a word when one
of its tokens is a *name* that begins or ends with the word or its stem (`pytest` ends with
`test`, `postgresql` begins with `postgr`), the rest of the name being at least two characters.
A name is a token that is not an ordinary English word (`engram.search.lexicon`): `latest`,
`contest` and `protest` also end with `test`, but they are words of their own, and `scenarios`
is not a piece of anything. Such a match counts as `PIECE_SHARE` of the word (0.7, so 0.49 of
full word evidence once squared): less than the word itself, enough to be found.

Longer queries are left alone: their other words find the memory, and a piece of one word in
a long question is weak evidence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from . import lexicon
from .text import failed, query_words, stems

if TYPE_CHECKING:
    from ..readmodel.projection import Projection
    from .retrieval import StoreSearch
    from .text import TextIndex

PIECE_SHARE = 0.7  # the share of a word a piece of a name counts for
MIN_PIECE = 4  # letters of the query word (or its stem) matched as a piece
MIN_REST = 2  # characters of the name beyond the piece
MAX_WORDS = 2  # queries of at most this many words (stop words aside) use pieces
_TOKEN = re.compile(r"[a-z0-9]+")


def short_words(query: str) -> list[str]:
    """The words of a short query to match as pieces (none for a longer query)."""
    words = query_words(query)
    if not 1 <= len(words) <= MAX_WORDS:
        return []
    return [w for w in words if w.isascii() and w.isalpha() and len(w) >= MIN_PIECE]


def _pieces(word: str) -> list[str]:
    return [p for p in dict.fromkeys([word, *stems(word)]) if len(p) >= MIN_PIECE]


def is_piece(word: str, token: str) -> bool:
    """Is `word` (or its stem) the beginning or end of the name `token`?"""
    if len(token) < MIN_PIECE + MIN_REST or lexicon.is_word(token):
        return False
    return any(
        len(token) - len(p) >= MIN_REST and (token.startswith(p) or token.endswith(p))
        for p in _pieces(word)
    )


def candidates(index: TextIndex, words: Sequence[str], limit: int) -> list[str]:
    """Ids of memories holding a term that begins or ends with one of the words' pieces (some
    of them ordinary words: `share` tells)."""
    pieces = [p for w in words for p in _pieces(w)]
    if not pieces:
        return []
    import tantivy

    pattern = "|".join(f"{p}[a-z0-9]{{{MIN_REST},}}|[a-z0-9]{{{MIN_REST},}}{p}" for p in pieces)
    try:
        searcher = index.index.searcher()
        query = tantivy.Query.regex_query(index.index.schema, "body", pattern)
        hits = searcher.search(query, limit=limit, count=False).hits
        return [searcher.doc(address)["id"][0] for _, address in hits]
    except BaseException as exc:  # no pieces is no worse than before
        if not failed(exc):
            raise
        return []


def share(words: Sequence[str], text: str) -> tuple[float, list[str]]:
    """The share of the query `words` found as pieces of names in `text`, times PIECE_SHARE,
    and those names."""
    if not words:
        return 0.0, []
    tokens: Iterable[str] = dict.fromkeys(_TOKEN.findall(text.lower()))
    names = [t for t in tokens if any(is_piece(w, t) for w in words)]
    found = sum(1 for w in words if any(is_piece(w, t) for t in names))
    return PIECE_SHARE * found / len(words), names


def found(
    search: StoreSearch, projection: Projection, query: str, limit: int
) -> dict[str, tuple[float, list[str]]]:
    """Memory id -> (share, names) for the memories of a short `query` found by pieces."""
    words = short_words(query)
    if not words:
        return {}
    ids = candidates(search.text, words, limit)
    out = {}
    for memory_id, memory in projection.memories_by_id(ids).items():
        matched, names = share(words, memory.content)
        if matched > 0:
            out[memory_id] = (matched, names)
    return out
