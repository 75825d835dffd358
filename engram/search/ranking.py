"""Recall's ranking: what a query asks for, and how much each memory's evidence says it answers.

Two kinds of evidence, each turned into a number in [0, 1] that means the same whatever the
query, the store or its size:

- **words**: the share of the query's IDF mass a memory matches under BM25 (BM25 divided by what
  a memory matching every query word once would score), squared, so that one incidental common
  word of a five-word question counts for little and a memory matching all of them counts fully.
  An identifier in the query (`test_upload_retry`, `AWS_REGION`, `cmd/api/main.go`, `--dry-run`,
  `collectAsState`) found verbatim in a memory is full evidence on its own.
- **meaning**: the cosine similarity of query and memory against the similarities of the same
  query to a fixed background of ordinary sentences (`engram.search.background`; nothing of
  the store, so a score does not move with what else the store holds): z = (cosine - mean) /
  deviation, meaning = sigmoid(z - 3.5 - crowd discount). A memory 3.5 standard deviations
  more similar to the question than ordinary text is gets 0.5, unless many memories are that
  close (see `Background.crowded`).

Relevance joins them as independent evidence (noisy OR): 1 - (1 - meaning)(1 - words). So 0.5
reads "probably answers": one signal at its midpoint, or both weaker. `recall.weight_vector`
trades them (0.5 both in full; 1 meaning only; 0 words only).

The score then applies what the query says about time and kind, and the memory's strength:
score = relevance * time * kind * ((1 - s) + s * strength). Time: a window named in the query
("yesterday", "last week", "in March", "3 days ago") keeps memories dated in it and halves the
rest; "recently" favours the young; "now", "currently", "these days" rank a newer memory on the
same subject above an older one (and "originally", "before we switched" the other way round).
Kind: a question that names a kind ("which gotchas", "list the decisions") favours that kind.
"""

from __future__ import annotations

import calendar
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

# -- what the query asks -------------------------------------------------------------------------

Tense = Literal["current", "past"]

_KIND_WORDS = {
    "gotcha": "gotcha", "gotchas": "gotcha", "pitfall": "gotcha", "pitfalls": "gotcha",
    "decision": "decision", "decisions": "decision", "decided": "decision",
    "preference": "preference", "preferences": "preference", "prefer": "preference",
    "prefers": "preference", "preferred": "preference",
    "convention": "convention", "conventions": "convention",
    "failure": "failure", "failures": "failure", "failed": "failure", "broke": "failure",
    "lesson": "lesson", "lessons": "lesson", "learned": "lesson", "learnt": "lesson",
    "procedure": "procedure", "procedures": "procedure", "steps": "procedure",
}
_CURRENT = re.compile(
    r"\b(now|nowadays|currently|current|today|these days|at the moment|right now|at present|"
    r"still|latest|most recent|newest|anymore|any more)\b", re.I)
_PAST = re.compile(
    r"\b(originally|initially|previously|formerly|used to|at first|in the past|"
    r"before (?:we|i|they|you|it) (?:switched|changed|moved|migrated|replaced)|"
    r"before the (?:switch|change|move|migration)|the old|the previous)\b", re.I)
_RECENT = re.compile(r"\b(recently|lately|recent|latest|newest|most recent|just now)\b", re.I)
_NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
                 "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "a few": 3,
                 "couple of": 2, "a couple of": 2}
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS |= {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_AMOUNT = r"(\d+|a few|a couple of|couple of|an?|one|two|three|four|five|six|seven|eight|nine|ten)"
_AGO = re.compile(_AMOUNT + r"\s+(day|week|month|year)s?\s+ago\b", re.I)
_LAST_N = re.compile(r"\b(?:last|past|previous)\s+" + _AMOUNT + r"\s+(day|week|month|year)s?\b",
                     re.I)
_LAST_UNIT = re.compile(r"\b(?:last|past|previous|this)\s+(day|week|month|year)\b", re.I)
_MONTH = re.compile(r"\b(?:in|during|since|of|from)\s+(" + "|".join(
    sorted((n for n in _MONTHS if len(n) > 3 or n == "may"), key=len, reverse=True))
    + r")\b(?:\s+(\d{4}))?", re.I)
_YEAR = re.compile(r"\b(?:in|during)\s+((?:19|20)\d\d)\b", re.I)
_YESTERDAY = re.compile(r"\b(yesterday|the day before)\b", re.I)
# Code-like words: snake_case and ALL_CAPS_WITH_UNDERSCORES, camelCase, dotted or slashed names,
# flags. (A capitalised name such as ScyllaDB or AckWait is one word to BM25 already; as an
# identifier it would make every memory naming a product an outright match.)
_TOKEN = re.compile(r"[A-Za-z0-9_./:@#$-]+")
_IDENTIFIER = re.compile(
    r"^(?:--?[A-Za-z][\w-]+|\w*[A-Za-z0-9]_\w+|_\w+|[a-z]+[A-Z]\w*|"
    r"[\w-]+(?:[./:][\w-]+)+)$")


@dataclass(frozen=True)
class Intent:
    """What a query asks for besides its words."""

    words: str  # the query for BM25, with time phrases taken out
    identifiers: tuple[str, ...] = ()
    kinds: frozenset[str] = frozenset()
    tense: Tense | None = None
    window: tuple[datetime, datetime] | None = None
    recent: bool = False

    def describe(self) -> dict[str, object]:
        out: dict[str, object] = {}
        if self.identifiers:
            out["identifiers"] = list(self.identifiers)
        if self.kinds:
            out["kinds"] = sorted(self.kinds)
        if self.tense:
            out["tense"] = self.tense
        if self.window:
            out["window"] = [self.window[0].isoformat(), self.window[1].isoformat()]
        if self.recent:
            out["recent"] = True
        return out


def _amount(text: str) -> int:
    text = text.lower()
    return int(text) if text.isdigit() else _NUMBER_WORDS.get(text, 1)


def _day(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def analyse(query: str, now: datetime) -> Intent:
    """Read a query's identifiers, kinds, tense and time window (relative to `now`)."""
    window: tuple[datetime, datetime] | None = None
    words = query
    today = _day(now)

    def cut(match: re.Match[str]) -> None:
        nonlocal words
        words = words.replace(match.group(0), " ")

    if (m := _AGO.search(query)) is not None:
        days = _amount(m.group(1)) * _UNIT_DAYS[m.group(2).lower()]
        slack = max(1, days // 4)
        window = (today - timedelta(days=days + slack), today - timedelta(days=days - slack - 1))
        cut(m)
    elif (m := _LAST_N.search(query)) is not None:
        days = _amount(m.group(1)) * _UNIT_DAYS[m.group(2).lower()]
        window = (today - timedelta(days=days), now)
        cut(m)
    elif (m := _LAST_UNIT.search(query)) is not None:
        unit = _UNIT_DAYS[m.group(1).lower()]
        # "last week" is said of the past seven days as often as of the week before them.
        days = unit if m.group(0).lower().startswith("this") else 2 * unit
        window = (today - timedelta(days=days), now)
        cut(m)
    elif (m := _YESTERDAY.search(query)) is not None:
        window = (today - timedelta(days=2), today)
        cut(m)
    elif (m := _MONTH.search(query)) is not None:
        month = _MONTHS[m.group(1).lower()]
        year = int(m.group(2)) if m.group(2) else now.year - (1 if month > now.month else 0)
        start = now.replace(year=year, month=month, day=1, hour=0, minute=0, second=0,
                            microsecond=0)
        end = (start + timedelta(days=32)).replace(day=1)
        window = (start, end) if not m.group(0).lower().startswith("since") else (start, now)
    elif (m := _YEAR.search(query)) is not None:
        year = int(m.group(1))
        window = (now.replace(year=year, month=1, day=1, hour=0, minute=0, second=0,
                              microsecond=0),
                  now.replace(year=year + 1, month=1, day=1, hour=0, minute=0, second=0,
                              microsecond=0))
    tense: Tense | None = None
    if _PAST.search(query):
        tense = "past"
    elif _CURRENT.search(query):
        tense = "current"
    recent = bool(_RECENT.search(query))
    for pattern in (_CURRENT, _RECENT):
        words = pattern.sub(" ", words)
    lowered = re.findall(r"[a-z]+", query.lower())
    kinds = frozenset(_KIND_WORDS[w] for w in lowered if w in _KIND_WORDS)
    if kinds:  # weighed by kind, not by words: "which gotchas" is not about the word
        words = re.sub(r"\b(" + "|".join(w for w in lowered if w in _KIND_WORDS) + r")\b", " ",
                       words, flags=re.I)
    identifiers = tuple(dict.fromkeys(
        token for token in (t.strip(".,:;!?()[]{}'\"`") for t in _TOKEN.findall(query))
        if _IDENTIFIER.match(token) and sum(c.isalnum() for c in token) >= 3
        and any(c.isalpha() for c in token)))
    words = " ".join(words.split())
    return Intent(words=words, identifiers=identifiers, kinds=kinds, tense=tense,
                  window=window, recent=recent)


def has_content(query: str, intent: Intent) -> bool:
    """Does the query say anything to search for (a word that is not a stop word, an
    identifier, a kind or a time)?"""
    from .text import query_words

    return bool(query_words(query) or intent.identifiers or intent.kinds or intent.window)


_SAID_DAYS = re.compile(
    r"\b(?:(yesterday|last night)|(today|tonight|this morning|this afternoon|this evening)|"
    r"(tomorrow)|" + _AMOUNT + r"\s+(day|week)s?\s+ago|(last week)|(last month)|(last year))\b",
    re.I)


def dates_said(text: str, moment: datetime) -> list[str]:
    """The dates a memory's relative time words mean, read against the memory's own moment
    ("yesterday" in a memory of 8 May 2023 -> "7 May 2023"), as words BM25 can match."""
    out: list[str] = []
    for m in _SAID_DAYS.finditer(text):
        yesterday, today, tomorrow, amount, unit, week, month, year = m.groups()
        if yesterday or today or tomorrow or amount:
            days = -1 if yesterday else 0 if today else 1 if tomorrow else \
                -_amount(amount) * _UNIT_DAYS[unit.lower()]
            day = moment + timedelta(days=days)
            out.append(f"{day.day} {day:%B %Y}")
        elif week:
            out.append(f"{(moment - timedelta(days=7)):%B %Y}")
        elif month:
            out.append(f"{(moment.replace(day=1) - timedelta(days=1)):%B %Y}")
        elif year:
            out.append(str(moment.year - 1))
    return list(dict.fromkeys(out))


# -- evidence ------------------------------------------------------------------------------------

WORDS_POWER = 2.0  # how much a partial match of the query's words is discounted
DEVIATION_FLOOR = 0.02  # a background more uniform than this is not trusted to be that uniform
MEANING_MIDPOINT = 3.5  # standard deviations above the background that make meaning 0.5
SUBJECT_SIMILARITY = 0.55  # cosine of two memories taken to be about the same subject
SUBJECT_WINDOW = 20  # how many of the best results are compared for "now" questions


def sigmoid(x: float) -> float:
    if x < -40:
        return 0.0
    return 1.0 / (1.0 + math.exp(-x))


CROWD_SIZE = 2  # memories this close to a query that meaning can still tell apart
CROWD_WEIGHT = 1.0  # standard deviations taken off meaning per doubling of a crowd beyond that


@dataclass(frozen=True)
class Background:
    """How similar a query is to ordinary text: the mean and deviation of its cosine to the
    fixed background; and how many of the store's memories are at least as close to it as
    the midpoint (its crowd)."""

    mean: float
    deviation: float
    crowd: int = 0

    @classmethod
    def of(cls, similarities: Any) -> Background:
        return cls(float(similarities.mean()),
                   max(float(similarities.std()), DEVIATION_FLOOR))

    def z(self, cosine: float) -> float:
        return (cosine - self.mean) / self.deviation

    def crowded(self, cosines: Iterable[float]) -> Background:
        """This background with the query's crowd counted among `cosines` (the candidates'):
        when many memories are about as close to a query (every turn of a conversation that
        names the person asked about), closeness tells them apart less, as a word found in
        most memories does. Memories unrelated to the query never count."""
        crowd = sum(1 for c in cosines if self.z(c) >= MEANING_MIDPOINT)
        return Background(self.mean, self.deviation, crowd)

    @property
    def discount(self) -> float:
        """Standard deviations taken off meaning for the crowd."""
        if self.crowd <= CROWD_SIZE:
            return 0.0
        return CROWD_WEIGHT * math.log2(self.crowd / CROWD_SIZE)

    def meaning(self, cosine: float) -> float:
        return sigmoid(self.z(cosine) - MEANING_MIDPOINT - self.discount)


def words_evidence(share: float, specificity: float, identifiers_found: float) -> float:
    """Evidence from words: the matched share of the query's IDF mass, squared (one word of
    several counts little), times how specific the query's words are in the store; or the
    share of the query's identifiers found verbatim."""
    share = min(1.0, max(0.0, share))
    return max(float(share ** WORDS_POWER) * specificity, identifiers_found)


def relevance(meaning: float, words: float, weight_vector: float) -> float:
    """Noisy OR of the two kinds of evidence; `weight_vector` 0.5 counts both in full."""
    w_meaning = min(1.0, 2.0 * weight_vector)
    w_words = min(1.0, 2.0 * (1.0 - weight_vector))
    return 1.0 - (1.0 - w_meaning * meaning) * (1.0 - w_words * words)


def identifiers_found(identifiers: Sequence[str], text: str) -> float:
    if not identifiers:
        return 0.0
    lowered = text.lower()
    return sum(1 for i in identifiers if i.lower() in lowered) / len(identifiers)


OUT_OF_WINDOW = 0.5  # a memory dated outside the window the query names
OTHER_KIND = 0.75  # a memory of another kind than the one the query names
SUPERSEDED_BY_NEWER = 0.6  # an older memory on the subject of a newer one, for "now" questions
RECENT_DAYS = 30.0  # half-life-like scale of the preference for young memories on "recently"


def time_factor(intent: Intent, moment: datetime, now: datetime) -> float:
    factor = 1.0
    if intent.window is not None and not intent.window[0] <= moment < intent.window[1]:
        factor *= OUT_OF_WINDOW
    if intent.recent:
        age = max(0.0, (now - moment).total_seconds() / 86400.0)
        factor *= 0.5 + 0.5 * math.exp(-age / RECENT_DAYS)
    return factor


def kind_factor(intent: Intent, kind: str) -> float:
    return 1.0 if not intent.kinds or kind in intent.kinds else OTHER_KIND


@dataclass(slots=True)
class Candidate:
    """One memory's evidence for one query, and the factors applied to it."""

    id: str
    cosine: float = 0.0
    share: float = 0.0  # BM25 / the query's IDF mass
    identifiers: float = 0.0
    meaning: float = 0.0
    words: float = 0.0
    relevance: float = 0.0
    context: float = 0.0  # relevance gained from memories written next to it
    crowd: int = 0  # candidates as close to the query as the midpoint, when they discount it
    time: float = 1.0
    kind: float = 1.0
    variety: float = 1.0  # the share kept as a later result of a sitting already shown
    strength: float = 1.0
    score: float = 0.0
    moment: datetime | None = None  # the memory's moment, once read
    notes: list[str] = field(default_factory=list)

    def explain(self) -> dict[str, object]:
        out: dict[str, object] = {
            "score": round(self.score, 4), "relevance": round(self.relevance, 4),
            "meaning": round(self.meaning, 4), "words": round(self.words, 4),
            "bm25": round(self.share, 4), "vector": round(self.cosine, 4),
            "time": round(self.time, 4), "kind": round(self.kind, 4),
            "strength": round(self.strength, 4),
        }
        if self.identifiers:
            out["identifiers"] = round(self.identifiers, 4)
        if self.context:
            out["context"] = round(self.context, 4)
        if self.crowd:
            out["crowd"] = self.crowd
        if self.variety < 1.0:
            out["variety"] = round(self.variety, 4)
        if self.notes:
            out["notes"] = list(self.notes)
        return out


# -- context -------------------------------------------------------------------------------------

CONTEXT_TOP = 10  # the most relevant candidates whose neighbours get context
CONTEXT_SPAN = 2  # neighbours: this many written just before and just after
CONTEXT_SECONDS = 1800.0  # ... among memories whose moments are this close


def most_relevant(pool: dict[str, Candidate]) -> list[str]:
    return sorted(pool, key=lambda i: pool[i].relevance, reverse=True)[:CONTEXT_TOP]


def add_context(pool: dict[str, Candidate], neighbours: dict[str, list[str]],
                weight: float, tags: dict[str, frozenset[str]], floor: float = 0.0,
                similarity: Callable[[str, str], float] | None = None,
                least_similar: float = 0.3) -> None:
    """Memories written together are context for each other: a candidate written next to a
    relevant one gains `weight` times that one's relevance, as a further independent piece of
    evidence (an answer's turn next to the turn that names the question's words). Only
    candidates with evidence of their own (relevance at least `floor`) gain; context alone
    finds nothing. Context passes only between related memories: two memories less similar to
    each other than `least_similar` (by `similarity`, the cosine of their vectors), or
    whose tags say they are about different things (both tagged, no tag in common), are not
    context for each other, however close in time."""
    gains: dict[str, tuple[float, str]] = {}
    for source, near in neighbours.items():
        given = weight * pool[source].relevance
        for memory_id in near:
            ours, theirs = tags.get(source, frozenset()), tags.get(memory_id, frozenset())
            if ours and theirs and not ours & theirs:
                continue
            if memory_id in pool and memory_id != source and \
                    pool[memory_id].relevance >= floor and \
                    given > gains.get(memory_id, (0.0, ""))[0] and \
                    (similarity is None or similarity(source, memory_id) >= least_similar):
                gains[memory_id] = (given, source)
    for memory_id, (given, source) in gains.items():
        c = pool[memory_id]
        c.context = given
        c.relevance = 1.0 - (1.0 - c.relevance) * (1.0 - given)
        c.notes.append(f"written next to {source[:8]}")


SITTING_SECONDS = CONTEXT_SECONDS  # memories this close in time are one sitting


def vary(order: Sequence[tuple[Candidate, datetime]], penalty: float) -> list[int]:
    """Variety in the top results: taken greedily, best first, the n-th result of one sitting
    (a memory within `SITTING_SECONDS` of one already taken) keeps (1 - penalty)^(n - 1) of its
    score, so one conversation's session does not fill the top 5 when others also match.
    Returns the new order (indexes into `order`); scores and notes are updated."""
    if penalty <= 0 or len(order) < 2:
        return list(range(len(order)))
    taken: list[int] = []
    left = list(range(len(order)))
    base = [c.score for c, _ in order]

    def seen(i: int) -> int:
        moment = order[i][1]
        return sum(1 for j in taken
                   if abs((order[j][1] - moment).total_seconds()) <= SITTING_SECONDS)

    while left:
        kept = {i: (1.0 - penalty) ** seen(i) for i in left}
        best = max(left, key=lambda i: (base[i] * kept[i], -i))
        c = order[best][0]
        if kept[best] < 1.0:
            c.variety = kept[best]
            c.score = base[best] * kept[best]
            c.notes.append(f"result {seen(best) + 1} of one sitting")
        taken.append(best)
        left.remove(best)
    return taken
