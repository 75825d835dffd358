"""Refuse credentials before they reach disk: everything Engram writes will be pushed.

Detection comes from detect-secrets' plugins (the regex detectors for known token formats and its
keyword detector for `password = "..."`), plus a few current formats it does not know yet. Its
high-entropy detectors are off by default because commit hashes and ids, which coding agents
write all the time, look random; `secrets.entropy: true` turns them on.

A finding never carries the secret itself: only its type and position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .errors import SecretError

_EXTRA_PATTERNS = {
    "Anthropic API Key": re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}"),
    "OpenAI API Key": re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{32,}"),
    "Google API Key": re.compile(r"\bAIza[0-9A-Za-z_\-]{35}"),
    "Private Key": re.compile(
        r"-----BEGIN[A-Z ]*PRIVATE KEY( BLOCK)?-----.*?(?:-----END[A-Z ]*PRIVATE KEY( BLOCK)?-----|\Z)",
        re.DOTALL,
    ),
}
_OFF_BY_DEFAULT = {"Base64 High Entropy String", "Hex High Entropy String"}
_NEVER = {"Public IP (ipv4)"}  # an address is not a credential
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9_\-+/=.~]")


@dataclass(frozen=True)
class Finding:
    type: str
    line: int  # 1-based
    column: int  # 1-based
    start: int  # offsets into the text, for redaction
    end: int


@lru_cache(maxsize=2)
def _plugins(entropy: bool) -> tuple[Any, ...]:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    chosen = []
    for secret_type, cls in get_mapping_from_secret_type_to_class().items():
        if secret_type in _NEVER or (secret_type in _OFF_BY_DEFAULT and not entropy):
            continue
        chosen.append(cls())
    return tuple(chosen)


def find_secrets(text: str, *, entropy: bool = False) -> list[Finding]:
    findings: list[Finding] = []
    for secret_type, pattern in _EXTRA_PATTERNS.items():
        for match in pattern.finditer(text):
            findings.append(_finding(text, secret_type, match.start(), match.end()))
    offset = 0
    for line in text.splitlines(keepends=True):
        for plugin in _plugins(entropy):
            for value in plugin.analyze_string(line):
                if not value:
                    continue
                column = line.find(value)
                if column < 0:
                    continue
                start, end = _widen(line, column, column + len(value))
                findings.append(_finding(text, plugin.secret_type, offset + start, offset + end))
        offset += len(line)
    return _merge(findings)


def _widen(line: str, start: int, end: int) -> tuple[int, int]:
    """Some detectors report only part of a token (a prefix group); redact the whole token."""
    while start > 0 and _TOKEN_CHARS.match(line[start - 1]):
        start -= 1
    while end < len(line) and _TOKEN_CHARS.match(line[end]):
        end += 1
    return start, end


def _finding(text: str, secret_type: str, start: int, end: int) -> Finding:
    line = text.count("\n", 0, start) + 1
    column = start - (text.rfind("\n", 0, start) + 1) + 1
    return Finding(secret_type, line, column, start, end)


def _merge(findings: list[Finding]) -> list[Finding]:
    """Overlapping findings become one (the first by position keeps its type)."""
    merged: list[Finding] = []
    for finding in sorted(findings, key=lambda f: (f.start, -f.end)):
        if merged and finding.start < merged[-1].end:
            last = merged[-1]
            if finding.end > last.end:
                merged[-1] = Finding(last.type, last.line, last.column, last.start, finding.end)
            continue
        merged.append(finding)
    return merged


def redact(text: str, findings: list[Finding]) -> str:
    for finding in sorted(findings, key=lambda f: f.start, reverse=True):
        text = text[: finding.start] + f"[REDACTED:{finding.type}]" + text[finding.end :]
    return text


def guard(text: str, *, field: str = "content", allow_redaction: bool = False,
          entropy: bool = False, redactable: bool = True) -> str:
    """Return `text` unchanged, or redacted when allowed; otherwise refuse the first secret."""
    findings = find_secrets(text, entropy=entropy)
    if not findings:
        return text
    if allow_redaction:
        return redact(text, findings)
    first = findings[0]
    raise SecretError(first.type, first.line, first.column, field=field, redactable=redactable)
