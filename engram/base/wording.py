"""Counts in words, in one place, for every front end: "1 memory", "2 memories", "1 problem"."""

from __future__ import annotations

from collections.abc import Sequence

IRREGULAR = {"memory": "memories", "was": "were", "this": "these", "entry": "entries"}


def plural(word: str) -> str:
    """The plural of one of the nouns Engram counts; of a phrase, its last word's."""
    if " " in word:
        head, last = word.rsplit(" ", 1)
        return f"{head} {plural(last)}"
    if word in IRREGULAR:
        return IRREGULAR[word]
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    return word + "s"


def count(number: int, word: str, *, none: str | None = None) -> str:
    """`number` and `word`, singular for one: "1 step", "3 steps"; `none` for zero if given."""
    if number == 0 and none is not None:
        return none
    return f"{number} {word if number == 1 else plural(word)}"


def listing(parts: Sequence[str]) -> str:
    """Parts joined as a sentence would: "a", "a and b", "a, b and c"."""
    parts = [p for p in parts if p]
    if len(parts) <= 1:
        return "".join(parts)
    return f"{', '.join(parts[:-1])} and {parts[-1]}"


def first_few(names: Sequence[str], shown: int = 3) -> str:
    """A few of `names` and how many more: "a, b and c", "a, b, c and 4 more"."""
    if len(names) <= shown + 1:
        return listing(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown} more"
