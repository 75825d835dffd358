"""What a query asks for besides its words: the identifiers it names, the kinds, the tense and
the time window it speaks of; and the factors these put on a memory's score (`time_factor`,
`kind_factor`, `identifiers_found`). Also the dates a memory's own relative time words mean.
"""

from __future__ import annotations

import calendar
import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from . import cues
from .cues import Tense as Tense
from .identifiers import identifiers_found as identifiers_found
from .identifiers import identifiers_in

# -- what the query asks -------------------------------------------------------------------------


_CURRENT = re.compile(
    r"\b(now|nowadays|currently|current|today|these days|at the moment|right now|at present|"
    r"still|latest|most recent|newest|anymore|any more)\b",
    re.I,
)
_RECENT = re.compile(r"\b(recently|lately|recent|latest|newest|most recent|just now)\b", re.I)
_NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "a few": 3,
    "couple of": 2,
    "a couple of": 2,
}
_UNIT_DAYS = {"day": 1, "week": 7, "fortnight": 14, "month": 30, "year": 365}
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS |= {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_AMOUNT = r"(\d+|a few|a couple of|couple of|an?|one|two|three|four|five|six|seven|eight|nine|ten)"
_UNIT = r"(day|week|fortnight|month|year)"
_AGO = re.compile(_AMOUNT + r"\s+" + _UNIT + r"s?\s+(?:ago|back)\b", re.I)
_LAST_N = re.compile(r"\b(?:last|past|previous)\s+" + _AMOUNT + r"\s+" + _UNIT + r"s?\b", re.I)
_LAST_UNIT = re.compile(r"\b(?:last|past|previous|this)\s+" + _UNIT + r"\b", re.I)
_MONTH = re.compile(
    r"\b(?:in|during|since|of|from)\s+("
    + "|".join(sorted((n for n in _MONTHS if len(n) > 3 or n == "may"), key=len, reverse=True))
    + r")\b(?:\s+(\d{4}))?",
    re.I,
)
_YEAR = re.compile(r"\b(?:in|during)\s+((?:19|20)\d\d)\b", re.I)
_YESTERDAY = re.compile(r"\b(yesterday|the day before)\b", re.I)


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
        start = now.replace(
            year=year, month=month, day=1, hour=0, minute=0, second=0, microsecond=0
        )
        end = (start + timedelta(days=32)).replace(day=1)
        window = (start, end) if not m.group(0).lower().startswith("since") else (start, now)
    elif (m := _YEAR.search(query)) is not None:
        year = int(m.group(1))
        window = (
            now.replace(year=year, month=1, day=1, hour=0, minute=0, second=0, microsecond=0),
            now.replace(year=year + 1, month=1, day=1, hour=0, minute=0, second=0, microsecond=0),
        )
    tense = cues.tense(query)
    recent = bool(_RECENT.search(query))
    for pattern in (_CURRENT, _RECENT):
        words = pattern.sub(" ", words)
    kinds, names = cues.kinds(query)
    if names:  # weighed by kind, not by words: "which gotchas" is not about the word
        words = re.sub(r"\b(" + "|".join(map(re.escape, names)) + r")\b", " ", words, flags=re.I)
    identifiers = identifiers_in(query)
    words = " ".join(words.split())
    return Intent(
        words=words, identifiers=identifiers, kinds=kinds, tense=tense, window=window, recent=recent
    )


def has_content(query: str, intent: Intent) -> bool:
    """Does the query say anything to search for (a word that is not a stop word, an
    identifier, a kind or a time)?"""
    from .text import query_words

    return bool(query_words(query) or intent.identifiers or intent.kinds or intent.window)


_SAID_DAYS = re.compile(
    r"\b(?:(yesterday|last night)|(today|tonight|this morning|this afternoon|this evening)|"
    r"(tomorrow)|" + _AMOUNT + r"\s+(day|week)s?\s+ago|(last week)|(last month)|(last year))\b",
    re.I,
)


def dates_said(text: str, moment: datetime) -> list[str]:
    """The dates a memory's relative time words mean, read against the memory's own moment
    ("yesterday" in a memory of 8 May 2023 -> "7 May 2023"), as words BM25 can match."""
    out: list[str] = []
    for m in _SAID_DAYS.finditer(text):
        yesterday, today, tomorrow, amount, unit, week, month, year = m.groups()
        if yesterday or today or tomorrow or amount:
            days = (
                -1
                if yesterday
                else 0
                if today
                else 1
                if tomorrow
                else -_amount(amount) * _UNIT_DAYS[unit.lower()]
            )
            day = moment + timedelta(days=days)
            out.append(f"{day.day} {day:%B %Y}")
        elif week:
            out.append(f"{(moment - timedelta(days=7)):%B %Y}")
        elif month:
            out.append(f"{(moment.replace(day=1) - timedelta(days=1)):%B %Y}")
        elif year:
            out.append(str(moment.year - 1))
    return list(dict.fromkeys(out))


# -- factors ------------------------------------------------------------------------------------

OUT_OF_WINDOW = 0.5  # a memory dated outside the window the query names
OTHER_KIND = 0.75  # a memory of another kind than the one the query names
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
