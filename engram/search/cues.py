"""The tense and the kinds a question asks for, read from families of cues rather than fixed
phrases.

**Tense.** A question asks for the state *before* a change ("past") or *after* it ("current"),
or says nothing of either. The cues, over the question's lowercase words:

- *before/after a change*: "before", "until", "prior to" (past) or "after", "since", "now that"
  (current) with a word of change within the next four words, in any of its forms: switch,
  change, move, migrate, upgrade, replace, rewrite, refactor, port, adopt, introduce, update,
  bump, swap, redesign, overhaul, rework, revamp, transition, cutover, rollout ("before the
  upgrade", "until we changed it", "before moving to Redis", "since the move to Snowflake").
  "Before" with anything else counts as past when the question is put in the past tense ("what
  did we use before polars?", "what was the plugin ABI before the component model?", "...
  before?"), but not before a gerund or a time ("what should I run before merging", "the day
  before yesterday", "before April 10"); "pre" counts only before a change ("pre-migration",
  not "pre-season");
- *the direction of a change*: a change made "to" something names what is current ("what did we
  switch to", "migrated the jobs to"), one made "from", "off" or "away from" something, or a
  thing dropped ("got rid of", "dropped", "retired", "phased out", "stopped using", "in favour
  of"), names what was before. "Replace" goes both ways: "what replaced X", "the replacement
  for X" and "replace X with?" ask for the new thing; "what did we replace", "was replaced by"
  for the old one. Only past forms count ("switched to", "did we switch to"): "switching to a
  cheaper plan" states no change of ours. ("Move" is left out: "where did Caroline move from?"
  is about a house, not a setup);
- *time words*: "originally", "initially", "previously", "formerly", "at first", "in the
  beginning", "to begin with", "back then", "back when", "in the old days", "in the past",
  "earlier on", "at the time", "used to" (not "is used to", nor "use to", which says what
  for), "started out" (past; "in the beginning of November" is a time); "now", "nowadays",
  "currently", "today", "these days", "at the moment", "at present", "as of now",
  "at this point", "still", "latest", "anymore", "no longer", "up to date", "going forward",
  "as things stand" (current);
- *the superseded and the current*: "the old / previous / prior / former / original / legacy
  / earlier / initial X", "the first version" (past), "the current / present / latest X"
  (current; not "the new X", which in conversation is what someone just got), with a
  definite or possessive determiner ("which old branches can go?" asks
  about no change). These are weak cues: a stronger one of the other tense wins ("what
  replaced the old scheduler?" is current).

**Kinds.** A question names a kind by the kind's name or a near synonym: gotchas ("pitfalls",
"traps", "caveats", "footguns", "quirks", "watch out"), decisions ("decided", "chose", "choice",
"picked", "settled on", "opted for", "went with"), preferences ("prefer", "likes", "like to",
"would rather", "favourite"), conventions, failures ("failed", "broke", "crashed" as what
happened, "went wrong", "incidents", "outages"; not "a failed disk"), lessons ("learned",
"takeaways"), procedures ("steps", "step by step", "runbook", "playbook", "checklist").
"Rules" and "crash" are left out: in the development questions they name the subject as
often as the kind.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

Tense = Literal["current", "past"]

_WORDS = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
STRONG, WEAK = 2, 1


def words_of(query: str) -> list[str]:
    return _WORDS.findall(query.lower().replace("\u2019", "'"))


def _verb(*bases: str) -> frozenset[str]:
    """A verb's forms: "change" -> change, changes, changed, changing."""
    out: set[str] = set()
    for base in bases:
        stem = base[:-1] if base.endswith("e") else base
        plural = base + "es" if base.endswith(("s", "sh", "ch", "x")) else base + "s"
        out |= {base, plural, stem + "ed", stem + "ing"}
    return frozenset(out)


_CHANGE = _verb(
    "switch",
    "change",
    "move",
    "migrate",
    "upgrade",
    "replace",
    "refactor",
    "port",
    "adopt",
    "introduce",
    "update",
    "bump",
    "redesign",
    "overhaul",
    "rework",
    "revamp",
    "transition",
    "rewrite",
) | frozenset(
    "swapped swapping swap swaps rewrote rewritten migration migrations replacement "
    "adoption introduction cutover rollout upgrade upgrades".split()
)
# Verbs whose direction ("to" / "from") says which side of the change is asked for.
_DIRECTED = _verb("switch", "migrate", "port", "change", "upgrade", "transition")
_PAST_FORMS = frozenset(w for w in _CHANGE if w.endswith("ed")) | {"rewrote", "rewritten"}
_DROPPED = frozenset("dropped ditched retired abandoned deprecated removed".split())
_PAST_AUX = frozenset("did was were had didn wasn weren hadn".split())
_DETERMINERS = frozenset("the our my their your its that those his her".split())
_OLD = frozenset("old older previous prior former original legacy earlier initial".split())
_NEW = frozenset("current present latest".split())
_FIRST_OF = frozenset("version versions release iteration implementation draft design".split())
_TIME_UNITS = frozenset(
    "day days week weeks weekend month months year years night morning "
    "monday tuesday wednesday thursday friday saturday sunday".split()
)
_TIME_AFTER_BEFORE = frozenset(
    "yesterday today tonight tomorrow noon midnight lunch dinner breakfast last this "
    "next monday tuesday wednesday thursday friday saturday sunday january february march "
    "april may june july august september october november december".split()
)

_PAST_PHRASES = [
    p.split()
    for p in (
        "originally",
        "initially",
        "previously",
        "formerly",
        "at first",
        "in the beginning",
        "at the beginning",
        "at the start",
        "to begin with",
        "to start with",
        "at the outset",
        "back then",
        "back when",
        "back in the day",
        "in the old days",
        "in the past",
        "earlier on",
        "in those days",
        "at the time",
        "at that time",
        "started out",
        "start out",
        "starting out",
        "started off",
        "start off",
        "starting off",
        "early days",
        "once upon a time",
    )
]
_CURRENT_PHRASES = [
    p.split()
    for p in (
        "now",
        "nowadays",
        "currently",
        "current",
        "today",
        "today's",
        "these days",
        "at the moment",
        "right now",
        "at present",
        "presently",
        "as of now",
        "as of today",
        "as of this",
        "as of right now",
        "at this point",
        "still",
        "latest",
        "most recent",
        "newest",
        "anymore",
        "any more",
        "no longer",
        "up to date",
        "going forward",
        "from now on",
        "as things stand",
        "as it stands",
        "this day",
    )
]


def _at(words: list[str], i: int, phrase: list[str]) -> bool:
    return words[i : i + len(phrase)] == phrase


def _by_first(phrases: Iterable[list[str]]) -> dict[str, list[list[str]]]:
    """The phrases by their first word, in their order."""
    out: dict[str, list[list[str]]] = {}
    for phrase in phrases:
        out.setdefault(phrase[0], []).append(phrase)
    return out


def _phrases(words: list[str], phrases: dict[str, list[list[str]]]) -> list[tuple[int, int]]:
    """(start, length) of each phrase found (`phrases` by their first word)."""
    return [
        (i, len(p)) for i, w in enumerate(words) for p in phrases.get(w, ()) if _at(words, i, p)
    ]


_PAST_BY_FIRST = _by_first(_PAST_PHRASES)
_CURRENT_BY_FIRST = _by_first(_CURRENT_PHRASES)


def tense(query: str) -> Tense | None:
    """ "past", "current" or None: which side of a change the question asks about."""
    words = words_of(query)
    past = current = 0
    used: set[int] = set()  # change words already read as part of a before/after cue
    past_tense = any(w in _PAST_AUX for w in words)
    for i, word in enumerate(words):
        prior = word == "prior" and _at(words, i + 1, ["to"])
        if word in ("before", "until", "till", "pre") or prior:  # "pre" only before a change
            after = words[i + 2 if prior else i + 1 : i + 5]
            change = next((i + 1 + j for j, w in enumerate(after) if w in _CHANGE), None)
            if change is not None:
                past = max(past, STRONG)
                used.add(change)
            elif (
                (word == "before" or prior)
                and past_tense
                and not (
                    after
                    and (
                        after[0].endswith("ing")
                        or after[0].isdigit()
                        or after[0] in _TIME_AFTER_BEFORE
                    )
                )
                and not (i > 0 and words[i - 1] in _TIME_UNITS)
            ):
                past = max(past, STRONG)
        elif word in ("after", "since") or (word == "now" and _at(words, i + 1, ["that"])):
            after = words[i + 1 : i + 5]
            change = next((i + 1 + j for j, w in enumerate(after) if w in _CHANGE), None)
            if change is not None:
                current = max(current, STRONG)
                used.add(change)
    did = "did" in words or "have" in words or "has" in words or "had" in words
    for i, word in enumerate(words):
        if i in used:
            continue
        ahead = words[i + 1 : i + 4]
        if word in _DIRECTED and (word in _PAST_FORMS or did):
            if "to" in ahead or "over" in ahead[:1]:
                current = max(current, STRONG)
            elif any(w in ("from", "off", "away") for w in ahead[:2]):
                past = max(past, STRONG)
        if (word in _DROPPED or (did and word in ("drop", "ditch", "retire", "abandon"))) and ahead[
            :1
        ] not in (["off"], ["by"], ["in"]):  # "drop off" is to deliver
            past = max(past, STRONG)
        if (
            word in ("rid", "favour", "favor")
            and i > 0
            and words[i - 1] in ("of", "got", "get", "in")
        ):
            past = max(past, STRONG)
        if word in ("stopped", "stop") and ahead[:1] == ["using"]:
            past = max(past, STRONG)
        if (word == "phased" or (word == "phase" and did)) and ahead[:1] == ["out"]:
            past = max(past, STRONG)
        if (
            word == "used"
            and ahead[:1] == ["to"]
            and not (i > 0 and words[i - 1] in ("is", "are", "be", "being", "been", "get", "gets"))
        ):
            past = max(past, STRONG)
        passive = any(
            w in ("was", "were", "been", "got", "is", "are", "be") for w in words[max(0, i - 2) : i]
        )
        took_over = word in ("took", "taken", "takes") and ahead[:1] == ["over"]
        if word in ("replaced", "superseded") and passive:
            past = max(past, STRONG)
        elif (
            word in ("replacement", "replacements", "successor")
            or took_over
            or (word in ("replaced", "replaces", "superseded", "supersedes") and not did)
        ):
            current = max(current, STRONG)  # "what replaced X", "X's replacement"
        if word in ("swapped", "switched", "ripped", "pulled") and ahead[:1] == ["out"]:
            past = max(past, STRONG)
        elif word == "replace" and did:
            # "what did we replace polars with?" asks for the new; "what did we replace?" and
            # "what did we replace with the scheduler?" for the old.
            if words[-1] == "with" and len(words) - i > 2:
                current = max(current, STRONG)
            else:
                past = max(past, STRONG)
        if word in _DETERMINERS and len(ahead) >= 2:  # the old way, our previous setup
            if ahead[0] in _OLD:
                past = max(past, WEAK)
            elif ahead[0] in _NEW:
                current = max(current, WEAK)
        if word == "first" and ahead[:1] and ahead[0] in _FIRST_OF:
            past = max(past, WEAK)
    # "in the beginning of November" names a time, not the state before a change.
    if any(words[i + n : i + n + 1] != ["of"] for i, n in _phrases(words, _PAST_BY_FIRST)):
        past = max(past, STRONG)
    if _phrases(words, _CURRENT_BY_FIRST):
        current = max(current, STRONG)
    if past == current == 0:
        return None
    return "past" if past >= current else "current"


# The kinds: the words that name each (taken out of the words BM25 searches for), then the
# near synonyms (kept: they may be a memory's own words too).
_KIND_NAMES = {
    "gotcha": "gotcha gotchas pitfall pitfalls",
    "decision": "decision decisions decided",
    "preference": "preference preferences prefer prefers preferred",
    "convention": "convention conventions",
    "failure": "failure failures failed broke",
    "lesson": "lesson lessons learned learnt",
    "procedure": "procedure procedures steps",
}
KIND_WORDS = {w: kind for kind, names in _KIND_NAMES.items() for w in names.split()}
_KIND_SYNONYMS = {
    "gotcha": "trap traps caveat caveats footgun footguns quirk quirks|watch out|beware",
    "decision": "decide chose choose chosen choice choices pick picked opted|settled on|"
    "went with|go with|went for|go for",
    "preference": "likes favourite favorite|like to|would rather",
    "convention": "|naming scheme|style guide",
    "failure": "crashed incident incidents outage outages|went wrong|go wrong|blew up",
    "lesson": "learn takeaway takeaways|take away|take aways",
    "procedure": "runbook runbooks playbook playbooks checklist|step by step",
}
_SYNONYM_WORDS = {
    w: kind for kind, text in _KIND_SYNONYMS.items() for w in text.split("|")[0].split()
}
_SYNONYM_PHRASES = [
    (p.split(), kind) for kind, text in _KIND_SYNONYMS.items() for p in text.split("|")[1:]
]


def kinds(query: str) -> tuple[frozenset[str], list[str]]:
    """The kinds the question names, and the words naming them to leave out of BM25."""
    words = words_of(query)
    found: set[str] = set()
    names: list[str] = []
    for i, word in enumerate(words):
        kind = KIND_WORDS.get(word) or _SYNONYM_WORDS.get(word)
        if kind is None:
            continue
        # "a failed disk", "the chosen region": an adjective, not what the question asks for.
        if (
            word in ("failed", "chosen", "picked")
            and i > 0
            and words[i - 1] in ("a", "an", "the", "any", "each", "every", "this", "that")
        ):
            continue
        found.add(kind)
        if word in KIND_WORDS:
            names.append(word)
    for phrase, kind in _SYNONYM_PHRASES:
        if any(w == phrase[0] and _at(words, i, phrase) for i, w in enumerate(words)):
            found.add(kind)
    return frozenset(found), names
