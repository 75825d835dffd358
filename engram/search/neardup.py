"""What tells two close texts apart when the embedding says they are the same.

A sentence embedding scores "The API rate limit is 100 requests per second" and "... 1000 ..." at
0.96: to the model they say the same thing, but to whoever reads the memory the number is the
point. So a near-duplicate only folds into an existing memory when `differences(old, new)` finds
nothing: no number, unit, version, identifier, name, path, URL, address, date or quoted text that
one says and the other does not, no negation one has and the other lacks, no word swapped for its
opposite (enable/disable, before/after, staging/production, ...), and no content word replaced by
another (supported/deprecated, likes/dislikes, pnpm/yarn: `engram.search.claims`), which catches
the opposites no list holds.

The comparison ignores what a rewording changes: case, punctuation, spacing, quoting and code
spans (`pytest -x` and pytest -x), small number words (three and 3), thousands separators, the
spelling of common units (30s, 30 sec, 30 seconds) and the order of the facts. An item counts as
different only when the other text does not hold it anywhere, so moving a path into backticks or
writing re-run as rerun is not a difference.

Pure functions of the two texts: no model, no store.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from .claims import replaced

# What a difference is about, with the article a message puts before it, in the order messages
# list them.
WHAT: dict[str, str] = {
    "number": "a number",
    "unit": "a unit",
    "version": "a version",
    "date": "a date",
    "URL": "a URL",
    "address": "an address",
    "path": "a path",
    "identifier": "an identifier",
    "name": "a name",
    "negation": "a negation",
    "opposite": "an opposite word",
    "quoted text": "quoted text",
    "word": "a word",
}


@dataclass(frozen=True)
class Difference:
    """One kind of fact that the two texts do not share: what only the old one says and what
    only the new one says (either may be empty)."""

    what: str  # a key of WHAT
    old: tuple[str, ...]
    new: tuple[str, ...]

    def __str__(self) -> str:
        """E.g. `a number: 100 -> 1000`."""
        return (
            f"{WHAT[self.what]}: {', '.join(self.old) or '(none)'} -> "
            f"{', '.join(self.new) or '(none)'}"
        )

    def to_dict(self) -> dict[str, object]:
        return {"what": self.what, "old": list(self.old), "new": list(self.new)}


def differences(old: str, new: str) -> tuple[Difference, ...]:
    """What differs between two texts beyond wording; empty when one may stand for the other."""
    a, b = _Text(old), _Text(new)
    found: list[Difference] = []
    for kind in ("number", "date", "URL", "address", "path", "identifier", "name"):
        gone, added = a.missing_from(b, kind), b.missing_from(a, kind)
        if not gone and not added:
            continue
        if kind == "number":
            if _same_values(gone, added):
                kind = "unit"
            elif any(item in a.versions for item in gone) or any(
                item in b.versions for item in added
            ):
                kind = "version"
        found.append(Difference(kind, gone, added))
    if len(a.negations) != len(b.negations):
        found.append(Difference("negation", a.negations, b.negations))
    found.extend(_opposites(a.words, b.words))
    if not found:
        # Quoted text counts last: when what is inside the quotes differs in a number, a path
        # or an identifier, that more precise difference is the one worth saying.
        gone, added = a.missing_from(b, "quoted text"), b.missing_from(a, "quoted text")
        if gone or added:
            found.append(Difference("quoted text", gone, added))
    if not found:
        # A content word replaced by another (supported -> deprecated, pnpm -> yarn) changes
        # the claim; it counts last, as the items above say more precisely what changed.
        gone, added = replaced(a.word_list, b.word_list)
        if gone:
            found.append(Difference("word", gone, added))
    found.sort(key=lambda d: list(WHAT).index(d.what))
    return tuple(found)


def describe(found: Iterable[Difference]) -> str:
    """`a number: 100 -> 1000; a path: src/ -> lib/`, for messages."""
    return "; ".join(str(d) for d in found)


# -- normalising ---------------------------------------------------------------------------------

_NUMBER_WORDS = {
    "zero": "0",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
    "eleven": "11",
    "twelve": "12",
    "twenty": "20",
    "thirty": "30",
    "forty": "40",
    "fifty": "50",
    "sixty": "60",
}  # not "one" on its own: "one of the tests", "no one"
_MULTIPLIERS = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_UNITS = {
    "ms": "ms",
    "msec": "ms",
    "millisecond": "ms",
    "milliseconds": "ms",
    "s": "s",
    "sec": "s",
    "secs": "s",
    "second": "s",
    "seconds": "s",
    "min": "min",
    "mins": "min",
    "minute": "min",
    "minutes": "min",
    "h": "h",
    "hr": "h",
    "hrs": "h",
    "hour": "h",
    "hours": "h",
    "d": "d",
    "day": "d",
    "days": "d",
    "w": "w",
    "wk": "w",
    "week": "w",
    "weeks": "w",
    "b": "B",
    "byte": "B",
    "bytes": "B",
    "kb": "KB",
    "kib": "KiB",
    "mb": "MB",
    "mib": "MiB",
    "gb": "GB",
    "gib": "GiB",
    "tb": "TB",
    "tib": "TiB",
    "%": "%",
    "percent": "%",
    "x": "x",
    "px": "px",
    "em": "em",
    "rem": "rem",
    "k": "k",
    "m": "m",
    "mhz": "MHz",
    "ghz": "GHz",
    "rps": "rps",
    "qps": "qps",
}
_UNIT_RE = "|".join(sorted((re.escape(u) for u in _UNITS), key=len, reverse=True))
_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|"
    "december|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_FILE_EXTENSIONS = frozenset(
    "py pyi js mjs cjs ts tsx jsx json jsonl yaml yml toml ini cfg conf env md rst txt csv "
    "html css scss sql sh bash zsh ps1 go rs rb java kt swift c h cc cpp hpp cs php lock log "
    "xml proto tf lua dockerfile gradle pem crt key db sqlite whl gz zip tar".split()
)

# One pass over the text; at each place the first alternative that matches wins, so the number
# inside a URL, a date or a version is not also counted as a number on its own. Case matters for
# identifiers (CamelCase), so only the parts that need it ignore case. Text may be long and come
# from anyone: every alternative starts only where a run of its characters starts and takes it
# possessively (`*+`, `++`), so a long run is read once, never retried from each of its letters.
_ITEM = re.compile(
    rf"""
    (?P<URL>(?<![\w+.-])(?i:[a-z][a-z0-9+.-]*+://[^\s<>"'`)\]]*[^\s<>"'`)\].,;:!?]))
  | (?P<address>(?<![\w.-])(?i:localhost|\d{{1,3}}(?:\.\d{{1,3}}){{3}}
        |[a-z][\w-]*+(?:\.[a-z][\w-]*+)++)(?::\d{{1,5}})?(?<=\d)\b)
  | (?P<date>\b\d{{4}}-\d{{1,2}}-\d{{1,2}}(?:[T\ ]\d{{1,2}}:\d{{2}}(?::\d{{2}})?)?\b
      | \b\d{{1,2}}/\d{{1,2}}/\d{{2,4}}\b
      | (?i:\b(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b)
      | (?i:\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:{_MONTHS})\b(?:,?\s+\d{{4}})?)
      | (?i:\b(?:{_MONTHS})\s+\d{{4}}\b)
      | (?i:\b(?:{_WEEKDAYS})\b)
      | (?i:\b\d{{1,2}}:\d{{2}}(?:\s?[ap]m)?\b))
  | (?P<path>(?<![\w.@+~/-])(?:~|\.{{1,2}})?/[\w.@+~-]++(?:/[\w.@+~-]*+)*+
      | (?i:\b[a-z]:\\[\w.\\-]++)
      | (?<![\w.@+~/-])[\w.@+~-]++(?:/[\w.@+~-]++)++/?
      | (?<![\w.@+~/-])[\w-]++(?:\.[\w-]++)*?\.(?i:{"|".join(sorted(_FILE_EXTENSIONS))})\b
      | (?<![\w.-])\.[A-Za-z][\w-]*+(?:\.[\w-]++)*+\b)
  | (?P<version>(?<![\w.])(?i:v)\d++(?:\.\d++)*+(?:-[A-Za-z][\w.]*+)?\b
      | (?<![\w.])\d++\.\d++\.\d++(?:-[A-Za-z][\w.]*+)?\b
      | (?<=@)\d++(?:\.\d++)*+\b
      | (?<=(?i:\bversion\s))\d++(?:\.\d++)*+\b
      | (?<=(?i:\brelease\s))\d++(?:\.\d++)*+\b)
  | (?P<identifier>(?<![\w-])--?[A-Za-z][\w-]*+(?:=[^\s,;`'"]++)?
      | (?<![\w.-])[A-Za-z_][\w.-]*+=[^\s,;`'"]++
      | \b(?=\w*_)[A-Za-z_]\w*+
      | \b[a-z]++[A-Z]\w*+
      | \b[A-Z][a-z0-9]++(?:[A-Z][a-z0-9]*+)++
      | (?<![\w.])[A-Za-z_]\w*+(?:\.[A-Za-z_]\w*+)++(?:\(\))?
      | \b[A-Za-z]++\d[A-Za-z\d]*+
      | (?<![\w-])(?=[\w-]*[A-Z\d])\w++(?:-\w++)++(?:\.\w++)*+
      | \b\w++\(\))
  | (?P<number>(?<![\w.])[-+]?\d++(?:\.\d++)?(?:\s?(?i:{_UNIT_RE})(?!\w))?(?![\w.]\d|\w))
    """,
    re.VERBOSE,
)
_LONG_RUN = re.compile(r"\S{200,}")  # compared whole, as one item: a blob, a very long URL
_QUOTED = re.compile(
    r"`([^`\n]+)`|\"([^\"\n]+)\"|“([^”\n]+)”|‘([^’\n]+)’"
    r"|(?<![\w])'([^'\n]+)'(?![\w])"
)
_NAME = re.compile(r"(?<![\w.'’/-])[A-Z]\w++(?![\w'’/-])")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|\n\s*|[-*]\s+|[(\"'`“‘]\s*)$")
_NAME_BEFORE = re.compile(r"(?<![\w.+#-])[A-Z][\w.+#-]*+ $")
_LOOK_BACK = 80  # characters before a word read to tell whether it starts a sentence
_WORD = re.compile(r"[a-z]+(?:['’][a-z]+)*(?:-[a-z]+)*")
# "instead" and "rather" count: "use ruff, not black" is "use ruff instead of black".
_NEGATIONS = frozenset(
    {
        "not",
        "no",
        "never",
        "without",
        "cannot",
        "none",
        "nothing",
        "nobody",
        "neither",
        "nor",
        "nowhere",
        "instead",
        "rather",
    }
)
# Words whose swap turns a memory into its opposite, as (one side, the other side).
_OPPOSITES: tuple[tuple[frozenset[str], frozenset[str]], ...] = tuple(
    (frozenset(one.split()), frozenset(other.split()))
    for one, other in [
        ("enable enables enabled enabling", "disable disables disabled disabling"),
        (
            "allow allows allowed allowing",
            "deny denies denied denying forbid forbids forbidden "
            "disallow disallows disallowed block blocks blocked",
        ),
        ("true", "false"),
        ("before", "after"),
        (
            "increase increases increased increasing",
            "decrease decreases decreased decreasing reduce reduces reduced reducing",
        ),
        (
            "higher more larger bigger greater longer above",
            "lower less fewer smaller shorter below",
        ),
        ("faster", "slower"),
        ("max maximum", "min minimum"),
        ("first", "last"),
        ("start starts started starting", "stop stops stopped stopping"),
        ("include includes included including", "exclude excludes excluded excluding"),
        ("sync synchronous synchronously", "async asynchronous asynchronously"),
        ("public", "private"),
        ("required mandatory", "optional"),
        ("succeed succeeds succeeded success passes passed", "fail fails failed failure"),
        ("accept accepts accepted", "reject rejects rejected"),
        ("add adds added adding", "remove removes removed removing delete deletes deleted"),
        ("staging", "production prod"),
        ("dev development", "production prod"),
        ("local locally", "remote remotely"),
        ("inbound incoming", "outbound outgoing"),
        ("ascending", "descending"),
        ("lowercase", "uppercase"),
        ("client", "server"),
        ("frontend", "backend"),
        ("valid", "invalid"),
        ("safe", "unsafe"),
        ("stable", "unstable"),
        ("online", "offline"),
        ("internal", "external"),
        ("read-only readonly", "writable read-write"),
    ]
)


def _normal(text: str) -> str:
    """Number words as digits; thousands separators and `10k` spelled out. Case is kept."""
    text = text.replace("’", "'")
    text = re.sub(rf"(?i)\b({_WEEKDAYS})s\b", r"\1", text)  # on Fridays: on Friday
    text = re.sub(r"\b(\d{1,3}(?:,\d{3})+)\b", lambda m: m[1].replace(",", ""), text)
    text = re.sub(r"\b(\d+)[kK]\b", lambda m: m[1] + "000", text)
    text = re.sub(
        r"(?i)\b(" + "|".join(_NUMBER_WORDS) + r")\b", lambda m: _NUMBER_WORDS[m[1].lower()], text
    )
    # "two hundred", "a thousand", "one million"
    return re.sub(
        r"(?i)\b(\d+|a|one)\s+(" + "|".join(_MULTIPLIERS) + r")\b",
        lambda m: str((int(m[1]) if m[1].isdigit() else 1) * _MULTIPLIERS[m[2].lower()]),
        text,
    )


def _tokens(text: str) -> list[str]:
    """Words and numbers apart (`30s` is 30 and s, `utf-8` and `utf8` are utf and 8). An
    underscore belongs to its word: `__main__` is not `main`."""
    return re.findall(r"\d+|[^\W\d]+|%", text.casefold())


def _number(text: str) -> str:
    """`30 seconds` -> `30 s`: the value and the one spelling of its unit."""
    match = re.match(r"([-+]?\d+(?:\.\d+)?)\s*(.*)$", text)
    assert match is not None
    value, unit = match[1], match[2].lower()
    return f"{value} {_UNITS.get(unit, unit)}" if unit else value


def _same_values(old: tuple[str, ...], new: tuple[str, ...]) -> bool:
    """Do these numbers differ only in their units?"""
    values = [sorted(item.split()[0] for item in side) for side in (old, new)]
    return bool(old) and bool(new) and values[0] == values[1]


_WINDOW = 8  # longest run of tokens compared by spelling without separators (re-run, rerun)


class _Text:
    """The facts of one text, and a way to ask whether it says something anywhere."""

    def __init__(self, text: str) -> None:
        self.items: dict[str, list[str]] = {}
        self._seen: set[tuple[str, str]] = set()
        self.versions: set[str] = set()
        normal = _LONG_RUN.sub(self._long_run, _normal(text))
        rest = []
        spans = []  # where the items are: a name inside one is not a name of its own
        last = 0
        for match in _ITEM.finditer(normal):
            kind = match.lastgroup
            assert kind is not None
            item = match[0]
            if (
                kind == "identifier"
                and "." in item
                and all(len(part) == 1 for part in item.split("."))
            ):
                continue  # e.g, i.e: an abbreviation, not a name
            rest.append(normal[last : match.start()])
            spans.append(match.span())
            last = match.end()
            if kind == "path" and not re.search(r"[^\W\d_]", item):
                kind = "number"  # 3/4: a ratio, not a path
            elif kind == "number":
                item = _number(item)
                if " " not in item and _after_name(normal, match):
                    self.versions.add(item)
            elif kind == "version":
                kind = "number"  # compared with the numbers: `3.12` and `v3.12` are one value
                self.versions.add(item.casefold())
            elif kind == "path":
                item = item.rstrip("/") or item
            self._add(kind, item)
        rest.append(normal[last:])
        for match in _QUOTED.finditer(normal):
            quoted = next(g for g in match.groups() if g is not None).strip()
            if quoted:
                self._add("quoted text", quoted)
        for match in _NAME.finditer(normal):
            if not _starts_sentence(normal, match.start()) and not any(
                start < match.end() and match.start() < end for start, end in spans
            ):
                self._add("name", match[0])
        # Negations and opposites are read from the words left once the items are taken out,
        # so `--no-verify` is a flag, not a "no".
        words = _WORD.findall(" ".join(rest).casefold())
        self.negations = tuple(sorted(w for w in words if w in _NEGATIONS or w.endswith("n't")))
        self.words = frozenset(words)
        self.word_list = [w for w in words if w not in _NEGATIONS and not w.endswith("n't")]
        self._tokens = _tokens(_normal(text))
        self._spaced = " " + " ".join(self._tokens) + " "
        self._at: dict[str, list[int]] = {}
        for index, token in enumerate(self._tokens):
            self._at.setdefault(token, []).append(index)
        self._joined = {
            "".join(self._tokens[i : i + n])
            for n in range(1, _WINDOW + 1)
            for i in range(len(self._tokens) - n + 1)
        }

    def _add(self, kind: str, item: str) -> None:
        if (kind, item.casefold()) not in self._seen:
            self._seen.add((kind, item.casefold()))
            self.items.setdefault(kind, []).append(item)

    def _long_run(self, match: re.Match[str]) -> str:
        self._add("URL" if "://" in match[0] else "identifier", match[0])
        return " "

    def missing_from(self, other: _Text, kind: str) -> tuple[str, ...]:
        """This text's items of a kind that the other text does not say anywhere."""
        return tuple(item for item in self.items.get(kind, ()) if not other.holds(item))

    def holds(self, item: str) -> bool:
        """Does this text say `item` anywhere, in whatever case, spacing or quoting?"""
        tokens = _tokens(_normal(item))
        if not tokens:
            return True
        number = re.fullmatch(r"([-+]?\d+(?:\.\d+)?)(?: (\S+))?", item)
        if number:
            # A number is held with its unit, in any spelling of it: `30 s` by `30 seconds`.
            value, unit = _tokens(number[1]), number[2]
            n = len(value)
            return any(
                self._tokens[i : i + n] == value
                and (
                    unit is None
                    or (i + n < len(self._tokens) and _UNITS.get(self._tokens[i + n]) == unit)
                )
                for i in self._at.get(value[0], ())
            )
        if len(tokens) > _WINDOW:
            return " " + " ".join(tokens) + " " in self._spaced
        return "".join(tokens) in self._joined


def _starts_sentence(text: str, at: int) -> bool:
    return _SENTENCE_START.search(text[max(0, at - _LOOK_BACK) : at]) is not None


def _after_name(text: str, match: re.Match[str]) -> bool:
    """Is this bare number right after a name, as in `Postgres 15` or `Node 20`?"""
    start = max(0, match.start() - _LOOK_BACK)
    before = _NAME_BEFORE.search(text[start : match.start()])
    return before is not None and not _starts_sentence(text, start + before.start())


def _opposites(old: frozenset[str], new: frozenset[str]) -> list[Difference]:
    found = []
    gone_all: list[str] = []
    added_all: list[str] = []
    for one, other in _OPPOSITES:
        sides = []
        for words in (old, new):
            sides.append((bool(words & one), bool(words & other)))
        (old_one, old_other), (new_one, new_other) = sides
        if (old_one or old_other) and (new_one or new_other) and sides[0] != sides[1]:
            gone = sorted((old - new) & (one | other))
            added = sorted((new - old) & (one | other))
            if gone or added:
                gone_all += [w for w in gone if w not in gone_all]
                added_all += [w for w in added if w not in added_all]
    if gone_all or added_all:
        found.append(Difference("opposite", tuple(gone_all), tuple(added_all)))
    return found
