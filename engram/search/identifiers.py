"""Code identifiers in a query, told apart from words by their shape, and found in a memory as
whole tokens or path segments.

An identifier found verbatim in a memory is full evidence on its own (`ranking.words_evidence`),
so only what cannot be an ordinary word or a product's name counts as one:

- a flag: `--dry-run`, `-v2`;
- snake_case or an environment variable: `test_upload_retry`, `AWS_REGION`, `_private`;
- camelCase with a word in it: at least two lowercase letters, then a capital followed by a
  lowercase letter (`collectAsState`, `setUp`, `getURLParams`). Brand names written in mixed
  case have another shape: one lowercase letter before the capitals (`iOS`, `iPhone`, `eBPF`,
  `jQuery`, `gRPC`) or capitals only after the lowercase head (`macOS`, `watchOS`); and
  capitalised names (`GitHub`, `JavaScript`, `PostgreSQL`, `OAuth`, `AckWait`) are one word
  to BM25 already. A few product names that do have the shape are listed (`BRANDS`);
- a dotted, slashed or colon-joined name: `app.config.ts`, `cmd/api/main.go`, `os.path`,
  `https://example.com/x` - but not an abbreviation (`U.S.A`, `Ph.D`), a clock time (`5:30pm`),
  two ordinary words joined by a slash (`and/or`, `client/server`: see `lexicon`) or a listed
  product (`Node.js`).

A match is a whole token: the identifier is not preceded by a letter, digit, `_`, `-` or `.`,
and not followed by a letter, digit, `_` or `-` (a `.` may follow: the end of a sentence,
`os.path` in `os.path.join`). So `ios` is not found in `scenarios/`, `config.ts` is not found in
`app.config.ts`, and `app.config.ts` is found in `src/app.config.ts`. Case is ignored.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from . import lexicon

TOKEN = re.compile(r"[A-Za-z0-9_./:@#$-]+")
_PUNCTUATION = ".,:;!?()[]{}'\"`"
_FLAG = re.compile(r"^--?[A-Za-z][\w-]+$")
_SNAKE = re.compile(r"^(?:\w*[A-Za-z0-9]_\w+|_\w+)$")
_CAMEL = re.compile(r"^[a-z][a-z0-9]+[A-Z][A-Za-z0-9]*$")
_HUMP = re.compile(r"[A-Z][a-z]")
_JOINED = re.compile(r"^[\w-]+(?:[./:]+[\w-]+)+/?$|^[\w-]+/$")
_ABBREVIATION = re.compile(r"^(?:[A-Za-z]{1,2}\.)+[A-Za-z]{1,2}$")
_CLOCK = re.compile(r"^\d{1,2}:\d\d(?::\d\d)?(?:am|pm)?$", re.I)
# Product names that have an identifier's shape. The shape rules above do the work; this list
# only catches what they cannot tell.
BRANDS = frozenset(
    """
owncloud phpmyadmin pgadmin pgbouncer wxwidgets mybatis
node.js vue.js next.js nuxt.js react.js three.js d3.js chart.js socket.io asp.net ado.net
""".split()
)


def is_identifier(token: str) -> bool:
    """Is `token` (one whitespace-free token, punctuation stripped) a code identifier?"""
    if sum(c.isalnum() for c in token) < 3 or not any(c.isalpha() for c in token):
        return False
    if token.lower() in BRANDS:
        return False
    if _FLAG.match(token) or _SNAKE.match(token):
        return True
    if _CAMEL.match(token):
        return _HUMP.search(token) is not None
    if _JOINED.match(token):
        if _ABBREVIATION.match(token) or _CLOCK.match(token):
            return False
        parts = token.split("/")
        return not (len(parts) == 2 and all(p.isalpha() and lexicon.is_word(p) for p in parts))
    return False


def identifiers_in(query: str) -> tuple[str, ...]:
    """The query's identifiers, in order, each once."""
    return tuple(
        dict.fromkeys(
            token
            for token in (t.strip(_PUNCTUATION) for t in TOKEN.findall(query))
            if is_identifier(token)
        )
    )


@functools.lru_cache(maxsize=256)
def _pattern(identifier: str) -> re.Pattern[str]:
    # A path that ends in a separator (`ios/`) goes on into the path it names.
    end = r"(?![\w-])" if identifier[-1:].isalnum() or identifier[-1:] in "_-" else ""
    return re.compile(r"(?<![\w.-])" + re.escape(identifier) + end, re.I)


def occurs(identifier: str, text: str) -> bool:
    """Is `identifier` in `text` as a whole token or path segment (not inside a longer word)?"""
    return _pattern(identifier).search(text) is not None


def identifiers_found(identifiers: Sequence[str], text: str) -> float:
    """The share of `identifiers` found in `text` as whole tokens."""
    if not identifiers:
        return 0.0
    return sum(1 for i in identifiers if occurs(i, text)) / len(identifiers)
