"""Which words of a claim one text replaces with others: "supported" and "deprecated", "likes"
and "dislikes", "pnpm" and "yarn" make two close texts say different things about one subject.

A list of opposites always misses the next pair, so the rule is about form, not about meaning:
two texts differ in a claim when each holds a content word that the other does not hold in any
form. A rewording only adds, drops or moves words ("we", "always", "the", "is", a clause put
first), changes a word's form (tests and test, caching and cached, ran and run) or swaps small
words for each other (is and are, to and into); none of that counts. A synonym does count
("needs" and "requires"): telling it from a changed claim takes knowing the words, and keeping
a near-duplicate costs less than folding a correction away.

Pure functions of the words given: no model, no store.
"""

from __future__ import annotations

import os.path
from collections.abc import Iterable

# Words whose swap for one another changes how a sentence reads, not what it claims: articles,
# pronouns, the forms of be, have and do, conjunctions and the prepositions a rewording trades
# ("in" and "into", "at"). Quantifiers (all, some, most, few), modal verbs (must, may, should),
# adverbs and the prepositions that carry a direction (to, from, on, off, up, down) are content.
SMALL = frozenset(
    """
a an the this that these those it its it's they them their theirs he him his she her hers we us
our ours you your yours i me my one ones itself themselves ourselves yourself
be is are was were been being am have has had having do does did get gets got
and or but so as if than then also just there here what which who whom whose when where why how
of in into at by for within onto via per
""".split()
)
# Common irregular forms, read as the word they are a form of (a tense is not a new claim), and
# "each", which says what "every" says.
_FORMS = {
    "each": "every",
    "ran": "run",
    "wrote": "write",
    "written": "write",
    "built": "build",
    "made": "make",
    "took": "take",
    "taken": "take",
    "went": "go",
    "gone": "go",
    "broke": "break",
    "found": "find",
    "sent": "send",
    "kept": "keep",
    "held": "hold",
    "began": "begin",
    "begun": "begin",
    "chose": "choose",
    "chosen": "choose",
    "gave": "give",
    "given": "give",
    "shown": "show",
    "knew": "know",
    "known": "know",
    "felt": "feel",
    "met": "meet",
    "paid": "pay",
    "said": "say",
    "spent": "spend",
    "stood": "stand",
    "told": "tell",
    "thought": "think",
    "brought": "bring",
    "bought": "buy",
    "caught": "catch",
}
# What a word's form may add to its stem: plural and third person, tenses, -ly adverbs, the
# -y/-ies/-ied of retry, retries, retried, and the nouns of verbs (deploy, deployment; indent,
# indentation). Not -er: use and user, build and builder are not one thing.
_ENDINGS = frozenset(
    {"", "s", "es", "ed", "d", "ing", "ly", "y", "ies", "ied", "ying"}
    | {"ion", "ions", "ation", "ations", "ment", "ments"}
)


def replaced(old: Iterable[str], new: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The content words of `old` that `new` holds in no form, and those of `new` that `old`
    holds in none, each in the order of its text; both empty unless both are not, since words
    only added or only dropped (a detail, an adverb) are a rewording, not a replaced claim.

    The words are lowercase, as `neardup` reads them, with negations taken out."""
    a, b = _content(old), _content(new)
    # Each word of one text answers for one word of the other: "merge pull requests with a
    # squash commit" and "... a merge commit" replace squash by a second merge.
    unmatched = list(b)
    gone = []
    for word in a:
        match = next((i for i, other in enumerate(unmatched) if same_word(word, other)), None)
        if match is None:
            gone.append(word)
        else:
            del unmatched[match]
    if not gone or not unmatched:
        return (), ()
    return tuple(dict.fromkeys(gone)), tuple(dict.fromkeys(unmatched))


def same_word(a: str, b: str) -> bool:
    """Are `a` and `b` forms of one word (use, uses, used, using; commit, committing; policy,
    policies)? Compared by what follows their common start, so that no list of stems is
    needed and "likes" and "dislikes", which share no start, stay two words."""
    a, b = _FORMS.get(a, a), _FORMS.get(b, b)
    if a == b:
        return True
    # A final e goes before an ending (use, using; cache, cached), so it is not compared.
    a, b = a.removesuffix("e"), b.removesuffix("e")
    stem = os.path.commonprefix([a, b])
    if len(stem) < 2:
        return False
    return _ending(a, stem) in _ENDINGS and _ending(b, stem) in _ENDINGS


def _ending(word: str, stem: str) -> str:
    """What `word` adds to `stem`, without the doubled consonant of stopped or committing."""
    rest = word[len(stem) :]
    if len(rest) > 1 and rest[0] == stem[-1] and rest[0] not in "aeiouy" and rest[1:] in _ENDINGS:
        return rest[1:]
    return rest


def _content(words: Iterable[str]) -> list[str]:
    """The words that carry the claim: hyphens dropped (re-run is rerun), a possessive 's
    dropped, small words left out."""
    out = []
    for word in words:
        word = word.replace("-", "").removesuffix("'s")
        if word and word not in SMALL and not (len(word) == 1 and word.isalpha()):
            out.append(word)
    return out
