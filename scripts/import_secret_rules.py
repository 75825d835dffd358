"""Turn a betterleaks rule file into engram/base/secret_rules.json, the provider rules the secret
scanner loads.

    .venv/bin/python scripts/import_secret_rules.py BETTERLEAKS.toml --version v1.7.0 --commit SHA

betterleaks (https://github.com/betterleaks/betterleaks, MIT, the successor of gitleaks by its
author) keeps `config/betterleaks.toml`: each rule a Go (RE2) regular expression, the keywords
that must appear for it to run, and a filter written in betterleaks' expression language. This
script keeps what can run inside Engram's write path, in Python's `re`:

- the regex, rewritten where Go and Python differ (flags in the middle of a pattern, `\\z`, POSIX
  classes, `[` inside a class), and checked to compile without warnings;
- the filter, when it is made of the forms the rules use (an entropy bound, `matchesAny` and
  `containsAny` over the secret or the match, a path test, which is false for a memory); a rule
  whose filter says more is left out and listed under "skipped" with the reason;
- `required` (a rule that counts only with another one's match within some lines) and
  `skipReport` (a helper that is never reported by itself);
- a readable type for messages and redaction, from the rule's description.

Rules that find a key with its value rather than the value alone (the generic assignment rule,
`curl -u user:pw`, Kubernetes secret manifests) are left out: Engram's own context rules find
those values, value only, with its placeholder policy (engram/base/secrets.py).

Rerun it on a new betterleaks release to update the rules; the JSON records the source, version,
commit and license, and docs/reliability.md the figures measured with it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "engram" / "base" / "secret_rules.json"

# Rules Engram's context rules replace, value only and with the placeholder policy.
REPLACED = {
    "generic-api-key": "a key named like a credential with its value: Engram's assignment rules",
    "curl-auth-user": "the secret is user:password; Engram's command rules find the password",
    "kubernetes-secret-yaml": "the secret is key: value; Engram's assignment rules find the value",
}

# Rules for values that are public by design, which Engram stores.
PUBLIC = {
    "posthog-project-api-key": "PostHog project API keys are public by design (they ship in web "
    "pages); personal keys (phx_) are still found",
}

# Rules whose expressions backtrack in Python's `re` (Go's engine is linear in the text; Python's
# is not), found by tests/test_secrets.py::test_no_rule_backtracks_on_a_hostile_text: a few KB
# made of their keywords take seconds, so a 32 KB memory could take minutes.
SLOW = {
    "ebay-client-id": "nested repetition ([\\w-]+-[\\w-]+-PRD-...) backtracks exponentially",
    "snowflake-account-host.1": "nested repetition of host labels backtracks",
    "curl-auth-header": "a lazy .*? across five lines per `curl`: quadratic; Engram's header rules "
    "find the same values",
    "azure-storage-account-key": ".{0,24}? before 86 characters, at every `key`: seconds on "
    "32 KB; Engram's AccountKey= rule finds the key",
}

_POSIX = {
    "alnum": "a-zA-Z0-9",
    "alpha": "a-zA-Z",
    "digit": "0-9",
    "xdigit": "0-9a-fA-F",
    "upper": "A-Z",
    "lower": "a-z",
    "space": r" \t\r\n\v\f",
    "word": r"\w",
    "punct": r"!-/:-@\[-`{-~",
}


def go_to_python(pattern: str) -> str:
    """The RE2 `pattern` as a Python regular expression with the same meaning."""
    out: list[str] = []
    # Per open group, the flags set inside it so far: Go applies them to the rest of the group,
    # across `|`, so each becomes a scoped group closed at `|` and at the end, and reopened
    # after `|`.
    scoped: list[list[str]] = [[]]
    # Where each open group starts in `out`, for a plain capturing group: one that repeats
    # (`([a-z]{4}-){3}`) captures only its last round, never a secret, so it becomes (?:...).
    opens: list[int | None] = [None]
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\":
            pair = pattern[i : i + 2]
            out.append(r"\Z" if pair == r"\z" else pair)
            i += 2
            continue
        if in_class:
            posix = re.match(r"\[:(\w+):\]", pattern[i:])
            if posix:
                out.append(_POSIX[posix[1]])
                i += len(posix[0])
                continue
            if c == "]" and not (out and out[-1] in ("[", "[^")):
                in_class = False
            elif c == "[" or (c in "&-|~" and i + 1 < n and pattern[i + 1] == c):
                out.append("\\" + c)
                i += 1
                continue
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            if pattern.startswith("[^", i):
                out.append("[^")
                i += 2
            else:
                out.append("[")
                i += 1
            if i < n and pattern[i] == "]":  # a leading ] is literal
                out.append(r"\]")
                i += 1
            continue
        if c == "(":
            flags = re.match(r"\(\?([a-zA-Z]*(?:-[a-zA-Z]+)?)\)", pattern[i:])
            if flags and (i > 0):
                out.append(f"(?{flags[1]}:")
                scoped[-1].append(flags[1])
                i += len(flags[0])
                continue
            if pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i):
                out.append("(?P<")
                opens.append(None)
                i += 3
            else:
                opens.append(None if pattern.startswith("(?", i) else len(out))
                out.append("(")
                i += 1
            scoped.append([])
            continue
        if c == ")":
            out.append(")" * len(scoped.pop()))
            out.append(")")
            start = opens.pop()
            if start is not None and i + 1 < n and pattern[i + 1] in "*+?{":
                out[start] = "(?:"
            i += 1
            continue
        if c == "|" and scoped[-1]:
            out.append(")" * len(scoped[-1]) + "|" + "".join(f"(?{f}:" for f in scoped[-1]))
            i += 1
            continue
        out.append(c)
        i += 1
    out.append(")" * len(scoped.pop()))
    converted = "".join(out)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        re.compile(converted, re.ASCII)
    return converted


_STRINGS = re.compile(r"`([^`]*)`|\"((?:[^\"\\]|\\.)*)\"")


def _strings(text: str) -> list[str]:
    return [a if a or not b else json.loads(f'"{b}"') for a, b in _STRINGS.findall(text)]


def _disjuncts(expression: str) -> list[str]:
    """`a || b || c` split at the top level (outside brackets, parentheses and strings)."""
    parts, depth, quote, start, i = [], 0, "", 0, 0
    while i < len(expression):
        c = expression[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 1
            elif c == quote:
                quote = ""
        elif c in '`"':
            quote = c
        elif c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif expression.startswith("||", i) and depth == 0:
            parts.append(expression[start:i].strip())
            start = i + 2
            i += 1
        i += 1
    parts.append(expression[start:].strip())
    return parts


_ENTROPY = re.compile(r'(?:filter\.)?entropy\(finding\["secret"\]\)\s*(<=|<)\s*([\d.]+)')
_CALL = re.compile(
    r'(!?)(?:filter\.)?(matchesAny|containsAny)\(\s*(finding\["(secret|match)"\]'
    r'|\(attributes\["path"\] \?\? ""\)|get\(attributes, "path", ""\))\s*,'
    r"\s*\[(.*)\]\s*\)",
    re.DOTALL,
)


def parse_filter(expression: str) -> dict[str, object]:
    """A rule's filter as data, or ValueError when it uses more than these forms."""
    expression = expression.strip()
    while (
        expression.startswith("(")
        and expression.endswith(")")
        and len(_disjuncts(expression[1:-1])) >= 1
        and _balanced(expression[1:-1])
    ):
        expression = expression[1:-1].strip()
    found: dict[str, object] = {}
    for part in _disjuncts(expression):
        entropy = _ENTROPY.fullmatch(part)
        call = _CALL.fullmatch(part)
        if entropy:
            found["entropy"] = [entropy[1], float(entropy[2])]
        elif call:
            negated, function, subject, field, items = call.groups()
            if field is None:
                continue  # a test of the file's path: a memory has none, so it is false
            values = _strings(items)
            if function == "containsAny" and not negated and field == "secret":
                found.setdefault("drop_contains", []).extend(v.lower() for v in values)
            elif function == "matchesAny" and not negated:
                key = "drop" if field == "secret" else "drop_match"
                found.setdefault(key, []).extend(go_to_python(v) for v in values)
            elif function == "matchesAny" and field == "secret":
                found.setdefault("keep_all", []).append(
                    "|".join(f"(?:{go_to_python(v)})" for v in values)
                )
            else:
                raise ValueError(f"unsupported filter: {part[:60]}")
        else:
            raise ValueError(f"unsupported filter: {part[:60]}")
    return found


def _balanced(text: str) -> bool:
    depth = 0
    for c in text:
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth < 0:
            return False
    return depth == 0


_VERB = re.compile(
    r"^(?:(?:Detected|Identified|Discovered|Found|Uncovered)\s+(?:an?|the)\s+)?"
    r"(?:pattern\s+(?:that\s+)?(?:resembl(?:es|ing)|may\s+indicate)\s+(?:an?\s+)?)?"
    r"(?:(?:possible|potential)\s+)?",
    re.IGNORECASE,
)


def type_of(rule: dict[str, object]) -> str:
    """A short readable name: `Uncovered a GitHub Personal Access Token, potentially ...` is
    `GitHub Personal Access Token`."""
    text = _VERB.sub("", str(rule.get("description", "")).strip())
    text = re.split(
        r",|\.(?:\s|$)|\s\((?!GCP)|;|\sis\s"
        r"|\s(?:which|that|used|posing|potentially|risking|"
        r"compromising|exposing|for|paired)\s",
        text,
        maxsplit=1,
    )[0].strip()
    if not text or len(text) > 60:
        return str(rule["id"])
    return text


def convert(config: dict[str, object], *, version: str, commit: str) -> dict[str, object]:
    rules, skipped = [], []
    for rule in config["rules"]:  # type: ignore[union-attr]
        rule_id = rule["id"]
        why = REPLACED.get(rule_id) or PUBLIC.get(rule_id) or SLOW.get(rule_id)
        if why:
            skipped.append({"id": rule_id, "why": why})
            continue
        if "regex" not in rule:
            skipped.append({"id": rule_id, "why": "matches file paths only"})
            continue
        try:
            converted: dict[str, object] = {
                "id": rule_id,
                "type": type_of(rule),
                "regex": go_to_python(rule["regex"]),
                "keywords": sorted({k.lower() for k in rule.get("keywords", [])}),
            }
            if rule.get("secretGroup"):
                converted["group"] = rule["secretGroup"]
            if "filter" in rule:
                converted.update(parse_filter(rule["filter"]))
        except (ValueError, re.error, FutureWarning, DeprecationWarning) as exc:
            skipped.append({"id": rule_id, "why": str(exc)})
            continue
        if "path" in rule:
            skipped.append({"id": rule_id, "why": "needs a file path"})
            continue
        if rule.get("skipReport"):
            converted["report"] = False
        if rule.get("required"):
            converted["requires"] = [[r["id"], r.get("withinLines")] for r in rule["required"]]
        rules.append(converted)
    known = {r["id"] for r in rules}
    for rule in rules:  # a rule that needs a rule left out can never count
        requires: list[list[str]] = rule.get("requires", [])  # type: ignore[assignment]
        missing = [r for r, _ in requires if r not in known]
        if missing:
            skipped.append({"id": rule["id"], "why": f"requires {missing[0]}, left out"})
    rules = [r for r in rules if r["id"] not in {s["id"] for s in skipped}]
    global_filter = parse_filter(str(config.get("filter", "")))
    return {
        "source": "betterleaks config/betterleaks.toml, https://github.com/betterleaks/betterleaks",
        "version": version,
        "commit": commit,
        "license": "MIT License, Copyright (c) 2026 Zachary Rice (the betterleaks LICENSE)",
        "converted_by": "scripts/import_secret_rules.py",
        "filter": global_filter,
        "rules": rules,
        "skipped": skipped,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("config", type=Path, help="a betterleaks.toml")
    parser.add_argument("--version", required=True, help="the betterleaks release, e.g. v1.7.0")
    parser.add_argument("--commit", required=True, help="the commit the file was taken from")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    with open(args.config, "rb") as f:
        config = tomllib.load(f)
    data = convert(config, version=args.version, commit=args.commit)
    args.out.write_text(json.dumps(data, indent=0, ensure_ascii=False) + "\n", encoding="utf-8")
    print(
        f"{args.out.relative_to(ROOT)}: {len(data['rules'])} rules, "
        f"{len(data['skipped'])} left out",
        file=sys.stderr,
    )
    for skipped in data["skipped"]:
        print(f"  left out {skipped['id']}: {skipped['why']}", file=sys.stderr)


if __name__ == "__main__":
    main()
