"""A user's prompt to an agent read as recall reads a question: clause by clause.

Recall's words evidence (`engram.search.ranking`) is the share of the query's IDF mass a memory
matches: right for a question, which asks one thing, wrong for a whole prompt ("I want to ship
the new billing page today, can we deploy on Fridays?"), which says several. Read whole, every
word the prompt adds takes a share from every memory (a word the store lacks counts with the
highest IDF), so the same request scores 1.0 alone and under 0.1 in a sentence.

So a prompt is cut into clauses, at the punctuation that ends a sentence or a clause and at the
words that join clauses ("and", "but", "so", "because", "once", ...), and each clause is scored
as recall scores a question: the same calibrated evidence, by words alone. A memory is as
relevant as the clause that names it best, whatever else the prompt says; a clause that names
something the store lacks finds nothing, as a question would.

Counting instead what share of a memory's own distinctive words a prompt names, whatever its
length, finds more (a memory whose two rarest words the prompt names) but also names a memory
for two ordinary words a long prompt shares with it by chance ("picking up ... get this done"
against "a NodePool picks ... to get"): in a store of 80 memories, where most words are rare,
it added an unrelated memory to nearly every long prompt.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from . import ranking
from .text import query_words

if TYPE_CHECKING:
    from .retrieval import StoreSearch

# The end of a sentence or clause: its punctuation before a space (not the dot of "deploy.sh"
# or "2.3"), a line break or a bracket; or a word that joins two clauses.
_BOUNDARY = re.compile(
    r"[.,;:!?]+(?=\s|$)|[\n()\[\]{}]|\s[-–—]+\s"
    r"|\b(?:and|but|so|then|because|once|after|before|when|while|if|or|since|until|unless"
    r"|although|though|whereas)\b",
    re.IGNORECASE,
)
MAX_CLAUSES = 24  # clauses of a prompt scored (each is a query of the text index)
LEAST_WORDS = 2  # words recall weighs that make a clause of their own


def clauses(text: str) -> list[str]:
    """The clauses of `text`, in order, without repeats; none for a text of one clause (the
    text itself is scored already). A clause of fewer than `LEAST_WORDS` words that recall
    weighs ("before the switch") joins the one before it (a first clause, the one after it): a
    word alone is little evidence that the prompt speaks of a memory."""
    out: list[str] = []
    short = ""  # a short first clause, waiting for the next
    for part in _BOUNDARY.split(text):
        part = " ".join(part.split())
        words = len(query_words(part))
        if not words:
            continue
        if words < LEAST_WORDS and out:
            out[-1] = f"{out[-1]} {part}"
        elif words < LEAST_WORDS or short:
            short = f"{short} {part}".strip()
            if len(query_words(short)) >= LEAST_WORDS:
                out.append(short)
                short = ""
        else:
            out.append(part)
    if short:
        out.append(short)
    out = list(dict.fromkeys(out))
    return out[:MAX_CLAUSES] if len(out) > 1 else []


def evidence(search: StoreSearch, text: str, limit: int) -> dict[str, float]:
    """Memory id -> the words evidence of the clause of `text` that names it best (see the
    module's docstring), for the best `limit` memories of each clause."""
    best: dict[str, float] = {}
    for clause in clauses(text):
        hits, weight, specificity = search.text_evidence(clause, limit)
        if weight <= 0:
            continue
        for memory_id, score in hits:
            said = ranking.words_evidence(score / weight, specificity, 0.0)
            if said > best.get(memory_id, 0.0):
                best[memory_id] = said
    return best
