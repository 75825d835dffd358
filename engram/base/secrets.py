"""Refuse credentials before they reach disk: everything Engram writes will be pushed.

Three kinds of evidence (tests/corpus/ holds the texts they are measured on,
docs/reliability.md the figures and the placeholder policy):

1. Provider formats: a token whose shape names its issuer, by the maintained betterleaks rule
   set (`secret_rules.py`, about 400 providers) and Engram's additions to it
   (`secret_additions.py`: forms it lacks, and the shape of prefixed tokens in general), plus
   PEM private keys, also JSON-escaped or cut short (`_private_keys`). Refused wherever it
   appears, whatever it says (even `EXAMPLE`), unless its random part is a stand-in word
   (`sk_test_placeholder`). A match covers the rest of the token it is in, and one that holds
   a connection string is narrowed to the password the context rules find in it.
2. Context: a value given to something that holds a credential. A key named like one
   (`PASSWORD=`, `db_password:`, `"api_key": "..."`, `X-Api-Key:`, `?access_token=`,
   `<password>`), the password part of a URL (`postgres://u:pw@host`), an Authorization header,
   a command's password option (`mysql -pX`, `curl -u user:pw`, `docker login -p`, `sshpass -p`,
   `--password=`), a `.netrc` line. What counts is the value, so code that reads a secret
   (`os.environ["API_KEY"]`, `password = args.password`), types (`password: string`), prose
   ("the password is validated with zod") and placeholders (`${DB_PASSWORD}`, `<your key>`,
   `changeme`) pass: see `_placeholder` and `_literal`.
3. Entropy, off by default (`secrets.entropy`): any long random-looking token. Commit hashes,
   digests and ids, which coding agents write all the time, look random too.

A finding covers exactly the secret value: redaction keeps the key readable
(`PASSWORD=[REDACTED:password]`). A finding never carries the secret itself, only its type and
position, and no error message quotes it (`errors.quote` redacts what this module finds). Refusing
text that holds one (`validation.guard`) is a check, made with the other checks.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .secret_rules import rule_set


@dataclass(frozen=True)
class Finding:
    type: str
    line: int  # 1-based
    column: int  # 1-based
    start: int  # offsets into the text, for redaction
    end: int


# -- 1. provider formats: the maintained rule set (secret_rules.py) --------------------------

_PEM_BEGIN = re.compile(r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----")
_PEM_BODY = re.compile(r"(?:\s|\\n|[A-Za-z-]+: [^\n]*)*[A-Za-z0-9+/=]{20}")  # not just a header

# -- 2. context -------------------------------------------------------------------------------

# A key that holds a credential ends with one of these words (any case, any separator), then
# comes an assignment: `DB_PASSWORD=`, `clientSecret:`, `"api_key": `, `x-api-key:`,
# `--password=`, `?access_token=`, `password is`.
_KEYWORDS = (
    r"passw(?:or)?d|pwd|passphrase|(?<=[_.\-])pass|secret(?:_key_base)?|token|psk"
    r"|(?<=[_.\-])pat|(?<=[_.\-])auth|(?<![a-z0-9])pw"
    r"|credentials?|api[_\- ]?key"
    r"|(?:access|secret|private|signing|encryption|master|account|app|auth|storage|hmac"
    r"|session|cookie|webhook|jwt|client)[_\-]?key"
    r"|private_key_id"
    r"|(?<=[?&])sig"
)
_KEYWORD_HINTS = (
    "pass",
    "pwd",
    "secret",
    "token",
    "credential",
    "key",
    "sig",
    "psk",
    "pat",
    "auth",
    "pw",
)
_ASSIGNED_PATTERN = (  # (the look-ahead lets the regex engine skip other letters quickly)
    rf"(?=[pstcaemhwj])(?P<kw>{_KEYWORDS})(?![A-Za-z0-9_.\-])(?P<close>[\"'`]?\]?)"
    r"(?P<sep>[ \t]*(?::=|=>|=(?!=)|:(?![:/])|<-)[ \t]*|[ \t]+(?:is|was)[ \t]+"
    r"|[ \t]*,[ \t]*(?=[\"'])|[ \t]+(?=[\"']))"
)  # define('KEY', 'v'), storePassword 'v'

# Matched against the lower-cased text, which is three times faster than ignoring case; that
# keeps offsets only for ASCII text, so other text is matched ignoring case.
_ASSIGNED = re.compile(_ASSIGNED_PATTERN)
_ASSIGNED_ANY_CASE = re.compile(_ASSIGNED_PATTERN, re.IGNORECASE)
# At most 2,000 characters (an AWS session token is about 1,000): a value is looked at once for
# each key that names it, and "password=" * 4000 must not take quadratic time.
_QUOTED_VALUE = re.compile(r"""(?P<q>["'`])(?P<v>[^"'`\n]{0,2000})(?P=q)""")
_BARE_VALUE = re.compile(r"""[^\s"'`,;&]{1,2000}""")

_URL_CREDENTIALS = re.compile(
    r"\b[A-Za-z][A-Za-z0-9+.\-]*://(?P<user>[^\s:/@'\"<>]*):(?P<v>[^\s/@'\"]+)@"
)
_AUTHORIZATION = re.compile(
    r"(?i)\b(?:proxy-)?authorization[\"']?\]?[ \t]*[:=][ \t]*[\"']?"
    r"(?:(?:bearer|basic|token|bot|digest|apikey|sso-key)[ \t]+)?(?P<v>[^\s\"',;]+)"
)
_BEARER = re.compile(r"\bBearer[ \t]+(?P<v>[A-Za-z0-9._~+/\-]{20,}=*)")
# Prose: "the admin password for the staging box is X", "log in with password X".
_PROSE_FOR_PATTERN = (
    r"\b(?=[psta])(?P<kw>passw(?:or)?d|passphrase|secret|token|api[ _\-]?key)[ \t]+"
    r"(?:for|of|on|to)[ \t]+[^\n:=]{1,40}?[ \t]+(?:is|was|:)[ \t]+(?P<v>[^\s\"'`,;]+)"
)
_PROSE_BARE_PATTERN = r"\bpassw(?:or)?d[ \t]+(?P<v>[^\s\"'`,;]{8,})"
_PROSE_FOR = re.compile(_PROSE_FOR_PATTERN)
_PROSE_BARE = re.compile(_PROSE_BARE_PATTERN)
_PROSE_FOR_ANY_CASE = re.compile(_PROSE_FOR_PATTERN, re.IGNORECASE)
_PROSE_BARE_ANY_CASE = re.compile(_PROSE_BARE_PATTERN, re.IGNORECASE)
_UPPER, _LOWER, _DIGIT = re.compile("[A-Z]"), re.compile("[a-z]"), re.compile("[0-9]")
_XML = re.compile(rf"(?i)<(?P<tag>[\w:.\-]*(?:{_KEYWORDS}))>[ \t]*(?P<v>[^<\s]+)[ \t]*</(?P=tag)>")
_NETRC = re.compile(r"\b(?:machine\s+\S+|default)\s+(?:login\s+\S+\s+)?password[ \t]+(?P<v>\S+)")
_COMMAND = r"(?:^|(?<=[\s;|&(`]))"  # at the start of a command
_OPTION_VALUE = r"(?P<q>['\"]?)(?P<v>[^\s'\"]+)(?P=q)"
_COMMANDS: list[tuple[Callable[[str], bool], re.Pattern[str]]] = [
    # mysql -pSECRET (with a space, mysql prompts instead)
    (
        lambda t: "-p" in t and ("mysql" in t or "maria" in t),
        re.compile(
            _COMMAND + r"(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)\b[^\n;|]*?[ \t]"
            r"-p" + _OPTION_VALUE
        ),
    ),
    (
        lambda t: "-p" in t or " -a " in t,
        re.compile(
            _COMMAND + r"(?:sshpass[ \t]+-p[ \t]*|redis-cli\b[^\n;|]*?[ \t]-a[ \t]+"
            r"|(?:docker|podman|buildah|nerdctl|skopeo|oras|helm(?:[ \t]+registry)?)[ \t]+login\b"
            r"[^\n;|]*?[ \t]-p(?:[ \t]+|=))" + _OPTION_VALUE
        ),
    ),
    (
        lambda t: " -u" in t or " -a" in t or "--user" in t or "--auth" in t,
        re.compile(
            # curl -u user:pw, httpie -a user:pw
            _COMMAND + r"(?:curl|wget|http|https|xh)\b[^\n;|]*?[ \t](?:-u|--user|-a|--auth)"
            r"(?:[ \t]+|=)(?P<q>['\"]?)(?P<user>[^\s:'\"]+):(?P<v>[^\s'\"]+)(?P=q)"
        ),
    ),
    (
        lambda t: "--" in t,
        re.compile(
            r"(?<![\w\-])--(?:password|passwd|pass|token|api-?key|api-token|auth-token"
            r"|access-token|secret|client-secret|secret-key|access-key)(?:[ \t]+|=)" + _OPTION_VALUE
        ),
    ),
]

# -- the placeholder policy ---------------------------------------------------------------------

_REFERENCE = re.compile(
    r"""^(?:\$|%\w+%$|%\(|<|\{|\[REDACTED|![A-Za-z]+$|#\{|op://|vault:|arn:|awssm:|gcp:|sm://"""
    r"""|@[\w.\-]*[./][\w./\-]+$"""
    r"""|ref\+|secret:|env:)""",
    re.IGNORECASE,
)
_PLACEHOLDER_PART = re.compile(
    r"\.\.\.|…|\*\*\*|xxx|change[_\-]?me|example|placeholder|dummy|redacted|your[_\-]|"
    r"[_\-]here$|^replace|^insert|^enter[_\-]|^fake|^sample|^test[_\-]",
    re.IGNORECASE,
)
_PLACEHOLDER_WORDS = frozenset(
    """
    password passwd pass pwd secret token key apikey api_key credentials test testing none null
    nil undefined empty true false yes no on off todo tbd foo bar baz string str bytes int number
    boolean bool any required optional bearer basic required hidden masked unset default
    """.split()
)
_IDENTIFIER_CHAIN = re.compile(r"^[A-Za-z_$][\w$]*(?:(?:\.|\?\.|::|->)[A-Za-z_$][\w$]*)+$")
_CALL = re.compile(r"^[A-Za-z_][\w.]*\($")
_SEALED = re.compile(r"^Ag[A-Za-z0-9+/]{200,}={0,2}$")  # a sealed-secrets ciphertext
_WORDS = re.compile(r"^[A-Za-z]+(?:[-_][A-Za-z]+)+$")
_URLISH = re.compile(r"^[a-z][a-z0-9+.\-]*://", re.IGNORECASE)
_PATHISH = re.compile(r"^(?:/|~/|\.{1,2}/|[A-Za-z]:\\)")


def _normal(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _placeholder(value: str, *names: str) -> bool:
    """A stand-in for a secret rather than one: a reference (`${VAR}`, `$VAR`, `%VAR%`,
    `<your key>`, `{{ var }}`, `op://...`), a mask (`xxx`, `***`, `...`), a conventional word
    (`changeme`, `example`, `dummy`, `your_api_key`, `password`, `none`, ...), or the name it
    is assigned to or the user it belongs to (`postgres:postgres@`, `API_KEY=API_KEY`)."""
    if len(value) < 4 or _REFERENCE.match(value) or _PLACEHOLDER_PART.search(value):
        return True
    if _SEALED.match(value):
        return True  # encrypted for the cluster: safe to commit, which is its point
    if len(set(value.lower())) <= 2:  # 00000000, ********, abababab
        return True
    normal = _normal(value)
    if normal in _PLACEHOLDER_WORDS or value.lower() in _PLACEHOLDER_WORDS:
        return True
    return any(
        normal and normal in (_normal(name), _normal(name.split(".")[-1])) for name in names if name
    )


def _stand_in_token(token: str) -> bool:
    """A provider's prefix with a stand-in word for the random part (`sk_test_placeholder`,
    `ghp_your_token_here`). A token with digits counts whatever it says (`AKIAIOSFODNN7EXAMPLE`):
    its shape is the evidence, and a real token can end in any letters."""
    return _DIGIT.search(token) is None and _PLACEHOLDER_PART.search(token) is not None


_LETTER = re.compile(r"[^\W\d_]")
_NOT_LETTER = re.compile(r"[\d\W_]")


def _mixed(value: str) -> bool:
    """Looks made to be hard to guess: letters with digits or symbols."""
    return (
        len(value) >= 6
        and _LETTER.search(value) is not None
        and _NOT_LETTER.search(value) is not None
    )


def _literal(value: str, *, key: str, quoted: bool, style: str) -> bool:
    """Whether `value`, assigned to a key that holds a credential, is a credential.

    `style` says how sure the context is that the value is literal text:
    'env'   `KEY=value` with an upper-case key, a command option: everything is a string;
    'code'  a key in code or config (`password = x`, `password: x`): a bare word may be a
            variable, a type or prose, so a bare value must mix letters with digits or symbols;
    'prose' `password is x`: like 'code'."""
    if _placeholder(value, key) or _URLISH.match(value) or _PATHISH.match(value):
        return False
    if value.isdigit() and len(value) < 8:  # a port, a count, a duration
        return False
    if not quoted and _CALL.match(value):
        return False  # SECRET_KEY = env("...") : a call that reads it
    if quoted:
        return not any(c.isspace() for c in value)  # a message, not a credential
    if style != "env":
        if "(" in value or "[" in value or _IDENTIFIER_CHAIN.match(value.rstrip("!?")):
            return False  # code that reads the secret from somewhere
        if _WORDS.match(value):
            return False  # a name (db-credentials) or a command (Read-Host), not a password
        return _mixed(value)
    return True


def _type_of(keyword: str) -> str:
    word = keyword.lower().replace("-", "_")
    if word.startswith("pass") or word == "pwd":
        return "password"
    if word == "sig":
        return "signature"
    if word.endswith("key"):  # api_key, access-key, signingKey, api key
        return ("API" if word.startswith("api") else word[:-3].strip("_ ")) + " key"
    if word.startswith("secret"):
        return "secret"
    return word  # secret, token, credential(s)


# -- the scan -----------------------------------------------------------------------------------


def find_secrets(text: str, *, entropy: bool = False) -> list[Finding]:
    """Every secret in `text`, as spans of the secret values, by position."""
    ruled = _ruled(text)
    spans: list[tuple[int, int, str]] = []
    if "PRIVATE KEY" in text:
        spans.extend(_private_keys(text))
    lower = text.lower()
    if any(word in lower for word in _KEYWORD_HINTS):
        spans.extend(_assignments(text, lower))
    if "://" in text and "@" in text:
        for match in _URL_CREDENTIALS.finditer(text):
            if not _placeholder(match["v"], match["user"]):
                spans.append((match.start("v"), match.end("v"), "password in URL"))
    if "authorization" in lower:
        for match in _AUTHORIZATION.finditer(text):
            if not _placeholder(match["v"]) and len(match["v"]) >= 8:
                spans.append((match.start("v"), match.end("v"), "authorization header"))
    if "Bearer" in text:
        for match in _BEARER.finditer(text):
            if _mixed(match["v"]) and not _placeholder(match["v"]):
                spans.append((match.start("v"), match.end("v"), "bearer token"))
    # matched in the lower-cased text when offsets allow (see _ASSIGNED); values from `text`
    ascii_text = text.isascii()
    if (" for " in lower or " of " in lower or " on " in lower or " to " in lower) and (
        "pass" in lower or "secret" in lower or "token" in lower or "key" in lower
    ):
        prose_for = _PROSE_FOR.finditer(lower) if ascii_text else _PROSE_FOR_ANY_CASE.finditer(text)
        for match in prose_for:
            value = text[match.start("v") : match.end("v")].rstrip(".")
            if _literal(value, key=match["kw"], quoted=False, style="prose"):
                spans.append(
                    (match.start("v"), match.start("v") + len(value), _type_of(match["kw"]))
                )
    if "password " in lower or "passwd " in lower:
        prose_bare = (
            _PROSE_BARE.finditer(lower) if ascii_text else _PROSE_BARE_ANY_CASE.finditer(text)
        )
        for match in prose_bare:
            value = text[match.start("v") : match.end("v")].rstrip(".")
            if (
                _UPPER.search(value)
                and _LOWER.search(value)
                and _DIGIT.search(value)
                and _literal(value, key="password", quoted=False, style="prose")
            ):
                spans.append((match.start("v"), match.start("v") + len(value), "password"))
    if "</" in text:
        for match in _XML.finditer(text):
            if _literal(match["v"], key=match["tag"], quoted=False, style="env"):
                spans.append((match.start("v"), match.end("v"), _type_of(match["tag"])))
    if "machine" in lower or "default" in lower:
        for match in _NETRC.finditer(text):
            if _literal(match["v"], key="password", quoted=False, style="env"):
                spans.append((match.start("v"), match.end("v"), "password"))
    if " -" in text:
        for wanted, pattern in _COMMANDS:
            if not wanted(lower):
                continue
            for match in pattern.finditer(text):
                user = match.groupdict().get("user") or ""
                if _literal(match["v"], key=user, quoted=False, style="env"):
                    spans.append((match.start("v"), match.end("v"), "password"))
    if entropy:
        spans.extend(_high_entropy(text))
    # A rule that finds a whole connection string is narrowed to the password found in it.
    # (and where both find the same value, the rule's type names it)
    narrowed = [
        span
        for span in ruled
        if not any(
            span[0] <= start and end <= span[1] and (start, end) != span[:2]
            for start, end, _ in spans
        )
    ]
    return _findings(text, narrowed + spans)


_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_\-]*")


def _ruled(text: str) -> list[tuple[int, int, str]]:
    """The spans the rule set finds, each to the end of the token it is in (a rule that knows
    a shorter form of a token must not leave the rest of it behind)."""
    spans = []
    for match in rule_set().matches(text):
        end = match.end
        if end < len(text) and text[end - 1].isalnum():
            end = _TOKEN_TAIL.match(text, end).end()  # type: ignore[union-attr]
        value = text[match.start : end]
        if not (_placeholder(value) if match.rule.placeholders else _stand_in_token(value)):
            spans.append((match.start, end, match.rule.type))
    return spans


def _private_keys(text: str) -> Iterator[tuple[int, int, str]]:
    for begin in _PEM_BEGIN.finditer(text):
        if not _PEM_BODY.match(text, begin.end()):
            continue  # a header named in prose, not a key
        end_marker = f"-----END {begin[1]}PRIVATE KEY{begin[2] or ''}-----"
        end = text.find(end_marker, begin.end())
        yield begin.start(), (len(text) if end < 0 else end + len(end_marker)), "private key"


def _assignments(text: str, lower: str) -> Iterator[tuple[int, int, str]]:
    matches = _ASSIGNED.finditer(lower) if text.isascii() else _ASSIGNED_ANY_CASE.finditer(text)
    covered = 0
    for match in matches:
        if match.start() < covered:
            continue  # a key inside the value found before ("password=password=...")
        keyword = text[match.start("kw") : match.end("kw")]
        first = match.start("kw")
        while (
            first > 0
            and match.start("kw") - first < 100
            and (text[first - 1].isalnum() or text[first - 1] in "_.-")
        ):
            first -= 1
        key = text[first : match.end("kw")]
        if match["sep"] == ":" and first > 0 and text[first - 1] == ":":
            continue  # one part of a colon-joined name (arn:aws:...:secret:name), not a key
        if text.endswith("://", 0, first):
            continue  # the user of a URL (https://x-access-token:...@): see _URL_CREDENTIALS
        at = match.end()
        quoted = _QUOTED_VALUE.match(text, at)
        value = quoted or _BARE_VALUE.match(text, at)
        if value is None:
            continue
        group = "v" if quoted else 0
        start, end = value.start(group), value.end(group)
        found = text[start:end]
        if not quoted:  # a value ends before closing brackets that belong to the code around it
            trimmed = found.rstrip(")]}>.")
            end -= len(found) - len(trimmed)
            found = trimmed
        sep = match["sep"].strip()
        if sep in ("", ",") and (
            quoted is None
            or (sep == "," and not (match["close"] and re.fullmatch(r"[A-Z][A-Z0-9_]*", key)))
        ):
            continue  # a bare word after a space, or a call's argument that is not a constant
        if sep in ("is", "was"):
            style = "prose"
        elif re.fullmatch(r"[A-Z][A-Z0-9_]*", key.lstrip("-")) or key.startswith("--"):
            style = "env"
        else:
            style = "code"
        if _literal(found, key=key, quoted=quoted is not None, style=style):
            covered = end
            yield start, end, _type_of(keyword)


_ENTROPY_TOKEN = re.compile(r"[A-Za-z0-9+/=_\-]{20,}")
_HEX = re.compile(r"^[0-9a-fA-F]+$")


def _high_entropy(text: str) -> Iterator[tuple[int, int, str]]:
    for match in _ENTROPY_TOKEN.finditer(text):
        token = match.group()
        limit = 3.0 if _HEX.match(token) else 4.5  # detect-secrets' defaults
        if _shannon(token) > limit:
            yield match.start(), match.end(), "high-entropy string"


def _shannon(token: str) -> float:
    counts = {c: token.count(c) for c in set(token)}
    return -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values())


def _findings(text: str, spans: list[tuple[int, int, str]]) -> list[Finding]:
    """Overlapping spans become one finding (the first by position keeps its type)."""
    merged: list[list[object]] = []
    for start, end, kind in sorted(spans, key=lambda s: (s[0], -s[1])):
        if merged and start < merged[-1][1]:  # type: ignore[operator]
            merged[-1][1] = max(end, merged[-1][1])  # type: ignore[call-overload]
            continue
        merged.append([start, end, kind])
    return [
        _finding(text, str(kind), int(start), int(end))  # type: ignore[call-overload]
        for start, end, kind in merged
    ]


def _finding(text: str, secret_type: str, start: int, end: int) -> Finding:
    line = text.count("\n", 0, start) + 1
    column = start - (text.rfind("\n", 0, start) + 1) + 1
    return Finding(secret_type, line, column, start, end)


def redact(text: str, findings: list[Finding]) -> str:
    for finding in sorted(findings, key=lambda f: f.start, reverse=True):
        text = text[: finding.start] + f"[REDACTED:{finding.type}]" + text[finding.end :]
    return text


def redacted(text: str) -> str:
    """`text` with every secret in it replaced by its type: for quoting input in messages."""
    findings = find_secrets(text)
    return redact(text, findings) if findings else text
