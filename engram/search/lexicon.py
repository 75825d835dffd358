"""Which lowercase words are ordinary English words: the whole words of the WordPiece vocabulary
shipped with the built-in model (`engram/models/all-MiniLM-L6-v2/tokenizer.json`, about 21,700
alphabetic entries such as "latest", "contest", "client"), whatever model recall runs.

A word the vocabulary holds whole is a word; one it does not ("pytest", "postgresql", "gocql",
"testutil") is a name or a compound, whose pieces recall may match (`engram.search.pieces`)
and which, joined by a slash, make a path rather than a pair of words ("scylladb/gocql" against
"and/or"). Read once per process, when first asked (about 30 ms).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

VOCABULARY = (
    Path(__file__).resolve().parent.parent / "models" / "all-MiniLM-L6-v2" / "tokenizer.json"
)


@functools.cache
def words() -> frozenset[str]:
    """The vocabulary's whole alphabetic words, lowercase (none when the file is unreadable:
    then every word counts as a name)."""
    try:
        vocab = json.loads(VOCABULARY.read_text(encoding="utf-8"))["model"]["vocab"]
    except (OSError, ValueError, KeyError, TypeError):
        return frozenset()
    return frozenset(w for w in vocab if isinstance(w, str) and w.isascii() and w.isalpha())


def is_word(token: str) -> bool:
    """Is `token` (any case) an ordinary English word?"""
    return token.lower() in words()
