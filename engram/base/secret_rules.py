"""Provider token formats by the betterleaks rule set, as Python regexes behind keyword prefilters.

`secret_rules.json` beside this module is betterleaks' `config/betterleaks.toml` (MIT, see the
file's `source`, `version`, `commit` and `license`), converted by
`scripts/import_secret_rules.py`: each rule a regular expression, the keywords one of which must
appear (in any case) for it to run, the part of the match that is the secret, and the filters
that set a match aside (an entropy bound, patterns of stand-ins). Rules that only help another
rule (`report: false`) are never reported by themselves; a rule that `requires` others counts
only when each of them matches within the given lines.

The file is read on the first scan, and a rule's expression is compiled the first time one of its
keywords appears, so a process pays only for the rules its texts call for.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, TypeAlias

from .secret_additions import ADDITIONS

RULES_FILE = Path(__file__).with_name("secret_rules.json")


@dataclass
class Rule:
    id: str
    type: str
    regex: str
    keywords: tuple[str, ...]
    group: int = 0
    entropy: tuple[str, float] | None = None
    drop: tuple[str, ...] = ()
    drop_match: tuple[str, ...] = ()
    drop_contains: tuple[str, ...] = ()
    keep_all: tuple[str, ...] = ()
    report: bool = True
    requires: tuple[tuple[str, int | None], ...] = ()
    placeholders: bool = False  # Engram's placeholder policy applies to what it finds
    gate: str = ""  # a rule without keywords runs only near where this is found:
    after: int = 0  # from 40 characters before it to this many after it
    before: str = ""  # searched in the 40 characters before a match, which counts only if found
    _compiled: re.Pattern[str] | None = field(default=None, repr=False)

    def pattern(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.regex, re.ASCII)
        return self._compiled


@dataclass(frozen=True)
class Match:
    rule: Rule
    start: int  # the secret's span in the text
    end: int
    line: int  # 0-based line of the secret's start, for `requires`


class RuleSet:
    """The rules of one file, indexed by keyword."""

    def __init__(self, data: dict[str, Any]) -> None:  # the rules file's JSON
        self.source = str(data.get("source", ""))
        self.version = str(data.get("version", ""))
        self.commit = str(data.get("commit", ""))
        self.license = str(data.get("license", ""))
        self.rules = [_rule(raw) for raw in data["rules"]]
        self.by_id = {rule.id: rule for rule in self.rules}
        common: dict[str, list[str]] = data.get("filter") or {}
        self._drop = [re.compile(p, re.ASCII) for p in common.get("drop", [])]
        self._drop_contains = tuple(common.get("drop_contains", []))
        self.unkeyed = [rule for rule in self.rules if not rule.keywords and rule.report]
        by_keyword: dict[str, list[Rule]] = {}
        for rule in self.rules:
            for keyword in rule.keywords:
                by_keyword.setdefault(keyword, []).append(rule)
        self.by_keyword = by_keyword
        # A keyword found brings the shorter keywords it starts with ("sk_live" brings "sk_").
        self._with_prefixes = {
            k: [k[:i] for i in range(1, len(k) + 1) if k[:i] in by_keyword] for k in by_keyword
        }
        self._keywords: re.Pattern[str] | None = None  # compiled on the first scan

    def keywords_in(self, lower: str) -> set[str]:
        """The keywords in `lower` (the text in lower case): one pass of a trie of them all."""
        if self._keywords is None:
            self._keywords = re.compile(f"(?=({_trie(self.by_keyword)}))")
        found: set[str] = set()
        for keyword in set(self._keywords.findall(lower)):
            found.update(self._with_prefixes[keyword])
        return found

    def rules_for(self, lower: str) -> list[Rule]:
        """The rules worth running on a text: one of their keywords is in it, every rule they
        require could match it, and they are reported (helpers run only when asked for)."""
        found = self.keywords_in(lower)
        wanted: dict[str, Rule] = {}
        for keyword in sorted(found):
            for rule in self.by_keyword[keyword]:
                wanted[rule.id] = rule
        for rule in self.unkeyed:  # last: a named format's type wins over a shape's
            wanted[rule.id] = rule
        return [
            rule
            for rule in wanted.values()
            if rule.report and all(self._possible(other, found) for other, _ in rule.requires)
        ]

    def _possible(self, rule_id: str, keywords: set[str]) -> bool:
        rule = self.by_id.get(rule_id)
        return rule is not None and (not rule.keywords or not keywords.isdisjoint(rule.keywords))

    def matches(self, text: str) -> list[Match]:
        """Every reported secret the rules find in `text`."""
        found: dict[str, list[Match]] = {}
        reported = []
        for rule in self.rules_for(text.lower()):
            for match in self._run(rule, text):
                if all(
                    self._near(found, text, match, other, lines) for other, lines in rule.requires
                ):
                    reported.append(match)
        return reported

    def _near(
        self, found: dict[str, list[Match]], text: str, match: Match, other: str, lines: int | None
    ) -> bool:
        if other not in found:
            found[other] = list(self._run(self.by_id[other], text)) if other in self.by_id else []
        return any(lines is None or abs(m.line - match.line) <= lines for m in found[other])

    def _run(self, rule: Rule, text: str) -> Iterator[Match]:
        for m in self._candidates(rule, text):
            if rule.before and not _compiled(rule.before).search(
                text, max(0, m.start() - 40), m.start()
            ):
                continue
            group = rule.group or next(
                (i for i in range(1, (m.lastindex or 0) + 1) if m.group(i)), 0
            )
            start, end = m.span(group)
            secret = text[start:end]
            if not secret or self._dropped(rule, secret, m.group()):
                continue
            yield Match(rule, start, end, text.count("\n", 0, start))

    @staticmethod
    def _candidates(rule: Rule, text: str) -> Iterator[re.Match[str]]:
        """The rule's matches; for a rule with a gate, only those that start within 40
        characters before one of its places and end within `after` characters after it (each
        place is searched once, so a long text costs time in proportion to its length)."""
        if not rule.gate:
            yield from rule.pattern().finditer(text)
            return
        done = 0
        for gate in _compiled(rule.gate).finditer(text):
            if gate.end() <= done:
                continue
            window = rule.pattern().finditer(
                text, max(done, gate.start() - 40), min(len(text), gate.end() + rule.after)
            )
            for m in window:
                done = max(done, m.end())
                yield m

    def _dropped(self, rule: Rule, secret: str, whole: str) -> bool:
        if rule.entropy is not None:
            op, bound = rule.entropy
            value = entropy(secret)
            if value < bound or (op == "<=" and value == bound):
                return True
        lower = secret.lower()
        if any(p in lower for p in self._drop_contains + rule.drop_contains):
            return True
        if any(p.search(secret) for p in self._drop) or any(
            _compiled(p).search(secret) for p in rule.drop
        ):
            return True
        if any(_compiled(p).search(whole) for p in rule.drop_match):
            return True
        return not all(_compiled(p).search(secret) for p in rule.keep_all)


def _rule(raw: dict[str, Any]) -> Rule:
    entropy_bound = raw.get("entropy")
    return Rule(
        id=str(raw["id"]),
        type=str(raw["type"]),
        regex=str(raw["regex"]),
        keywords=tuple(raw.get("keywords", ())),
        group=int(raw.get("group", 0)),
        entropy=(str(entropy_bound[0]), float(entropy_bound[1])) if entropy_bound else None,
        drop=tuple(raw.get("drop", ())),
        drop_match=tuple(raw.get("drop_match", ())),
        drop_contains=tuple(raw.get("drop_contains", ())),
        keep_all=tuple(raw.get("keep_all", ())),
        report=bool(raw.get("report", True)),
        requires=tuple((str(r[0]), r[1]) for r in raw.get("requires", ())),
        placeholders=bool(raw.get("placeholders", False)),
        gate=str(raw.get("gate", "")),
        before=str(raw.get("before", "")),
        after=int(raw.get("after", 0)),
    )


_Node: TypeAlias = "dict[str, _Node]"  # a trie's node: a child for each next character


def _trie(words: Mapping[str, object]) -> str:
    """One regular expression for all of `words`, branching one character at a time."""
    root: _Node = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def branch(node: _Node) -> str:
        ends = "" in node
        alternatives = [
            re.escape(char) + branch(child) for char, child in sorted(node.items()) if char
        ]
        if not alternatives:
            return ""
        body = "(?:" + "|".join(alternatives) + ")" if len(alternatives) > 1 else alternatives[0]
        return f"(?:{body})?" if ends else body

    return branch(root)


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.ASCII)


def entropy(token: str) -> float:
    """Shannon entropy in bits per character, as betterleaks computes it."""
    n = len(token)
    return -sum(c / n * math.log2(c / n) for c in Counter(token).values()) if n else 0.0


@cache
def rule_set() -> RuleSet:
    """The maintained rules and Engram's additions, read once per process."""
    with open(RULES_FILE, encoding="utf-8") as f:
        data = json.load(f)
    data["rules"] = data["rules"] + ADDITIONS
    return RuleSet(data)
