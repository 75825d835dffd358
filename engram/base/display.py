"""Text from a store, shown: on a terminal and in Markdown.

What a store holds arrives from other people's pushes, so it is data when it is shown, never
markup or commands. On a terminal, control characters (but newline and tab), the bidi controls
that reorder a line, the line and paragraph separators (U+2028, U+2029) and the characters that
carry invisible text (Unicode tags, interlinear annotations) are shown as escapes (`\\x1b`,
`\\u202e`). In Markdown, each piece of text stays where it is put: it cannot start a heading, a
list, a quote, a fence or an HTML block, make a table (every `|` is escaped) or an image (`![`
is shown as it is, so nothing is loaded), and it holds no HTML (`<` that would open a tag and `&`
that would make an entity are escaped with a backslash, never as entities: the same text reads
as written on a terminal, to an agent and on a forge, so `Ada <ada@example.com>` stays as it
is). Code spans, links and emphasis the writer typed still read as such.

JSON for scripts (`visible_json`) and error text for agents (`hidden_shown`) escape every
invisible or format character as well (zero-width spaces and joiners, soft hyphens, byte-order
marks): in JSON as `\\u` escapes, so the value is the same once parsed.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

# C0 and C1 controls but tab and newline; the bidi embeddings, overrides, isolates and marks;
# the line and paragraph separators; interlinear annotations and tags (invisible text).
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
    "\ufff9-\ufffb\U000e0001\U000e0020-\U000e007f]"
)
# All of the above, and every other format character (Unicode category Cf): zero-width spaces
# and joiners, soft hyphens, byte-order marks, invisible operators.
_FORMAT = (
    "\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f"
)
_HIDDEN = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_FORMAT}]")

# What makes a line of Markdown a block of another kind, at the start of a line: an ATX heading,
# a quote, a table row, a bullet, a thematic break, a setext underline, a fence, a link reference
# definition; and the number of an ordered list item (group 2).
_BLOCK_START = re.compile(
    r"#{1,6}(?=[ \t]|$)|[>|]|[-+*](?=[ \t]|$)|([-*_])[ \t]*(?:\1[ \t]*){2,}$|=+[ \t]*$|-+[ \t]*$"
    r"|`{3}|~{3}|\[[^\]]*\]:|(\d{1,9})(?=[.)](?:[ \t]|$))"
)
# Outside code spans: a backslash escape (kept), a run of backticks, a `<` that could open a tag,
# a comment or a URI autolink (an address is no tag: `Ada <ada@example.com>` stays as written), a
# `![` that would open an image, a `|` that could make a table, an `&` that would make an entity;
# at the end, a backslash or a `<` that would escape or open what follows.
_INLINE = re.compile(
    r"\\[!-/:-@\[-`{-~]|`+|<(?=[A-Za-z][A-Za-z0-9-]*(?:[\s/>]|\Z)"
    r"|[A-Za-z][A-Za-z0-9+.-]{1,31}:|[/!?]|\Z)"
    r"|\\\Z|!\[|\|"
    r"|&(?=#[0-9]{1,7};|#[xX][0-9a-fA-F]{1,6};|[A-Za-z][A-Za-z0-9]{0,31};)"
)
_ESCAPES = {"<": "\\<", "&": "\\&", "\\": "\\\\", "![": "!\\[", "|": "\\|"}


def visible(text: str) -> str:
    """`text` with the characters a terminal would obey or that hide text (controls but newline
    and tab, bidi controls, line separators, tags) shown as escapes."""
    return _UNSAFE.sub(_escape_char, text)


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code <= 0xFFFF
        else f"\\U{code:08x}"
    )


def visible_json(text: str) -> str:
    """JSON text with every control, bidi and other format character written as a `\\u` escape
    (a surrogate pair beyond U+FFFF): the same JSON once parsed, safe on a terminal and in
    whatever reads it next."""
    return _HIDDEN.sub(_json_escape, text)


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def hidden_shown(text: str) -> str:
    """`text` with every control (but newline and tab), bidi and other format character shown
    as an escape: for error text an agent reads, where an invisible character could hide or
    reorder what it says."""
    return _HIDDEN.sub(_escape_char, text)


def echo(message: object = "", **options: Any) -> None:
    """`click.echo` for what people read: every line the CLI prints but JSON for scripts goes
    through here, so no command prints a store's text raw."""
    import click  # the library (and the MCP server's tools) print nothing

    click.echo(visible(str(message)), **options)


def local_time(stamp: str | None) -> str:
    """An event's time in this machine's time zone (`YYYY-MM-DD HH:MM`), or in UTC with the
    suffix ` UTC` when the local time is out of range (years 1 and 9999)."""
    if not stamp:
        return ""
    moment = datetime.fromisoformat(stamp)
    suffix = ""
    try:
        moment = moment.astimezone()
    except (OverflowError, ValueError):
        moment, suffix = moment.astimezone(UTC), " UTC"
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d} "
        f"{moment.hour:02d}:{moment.minute:02d}{suffix}"
    )


def md(text: object) -> str:
    """`text` as one line of Markdown inside a line (a heading's title, a field's value)."""
    return _inline(" ".join(visible(str(text)).split()))


def md_lines(text: object, *, indent: int = 0) -> str:
    """`text` as Markdown, line for line: a paragraph, or (with `indent`, the width of the bullet
    it follows) the body of a list item, its continuation lines indented under the bullet."""
    paragraphs: list[list[str]] = [[]]
    for line in visible(str(text)).split("\n"):
        line = line.strip()
        if line:
            paragraphs[-1].append(line)
        elif paragraphs[-1]:
            paragraphs.append([])
    lines: list[str] = []
    for paragraph in filter(None, paragraphs):
        # Code spans do not reach past a paragraph, so each is escaped on its own.
        lines += [""] if lines else []
        lines += [_unblocked(line) for line in _inline("\n".join(paragraph)).split("\n")]
    return "\n".join(
        f"{' ' * indent}{line}" if line and number else line for number, line in enumerate(lines)
    )


def md_code(text: object) -> str:
    """`text` as one inline code span, whatever backticks it holds."""
    flat = " ".join(visible(str(text)).split())
    fence = "`" * (max((len(run) for run in re.findall(r"`+", flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def _inline(text: str) -> str:
    """HTML escaped outside the code spans of `text`, which are kept as written. A backtick run
    that opens no code span, or that starts a line (a fence), is escaped: `text` then means the
    same next to any other text and once its lines are `_unblocked`."""
    out: list[str] = []
    at = 0
    while (found := _INLINE.search(text, at)) is not None:
        start, end = found.span()
        token = found.group()
        out.append(text[at:start])
        if token[0] != "`":
            out.append(_ESCAPES.get(token, token))
        elif (closer := _closer(text, start, end)) is None:
            out.append("\\`" * len(token))
        else:
            end = closer
            out.append(text[start:end])
        at = end
    out.append(text[at:])
    return "".join(out)


def _closer(text: str, start: int, end: int) -> int | None:
    """Where the code span opened by the backticks at `start:end` ends, if it does."""
    if _fence(text, start, end):
        return None
    for found in re.compile(rf"(?<!`){text[start:end]}(?!`)").finditer(text, end):
        if not _fence(text, *found.span()):
            return found.end()
    return None


def _fence(text: str, start: int, end: int) -> bool:
    return end - start >= 3 and (start == 0 or text[start - 1] == "\n")


def _unblocked(line: str) -> str:
    """A line that starts a paragraph's line, not another block."""
    found = _BLOCK_START.match(line)
    if found is None:
        return line
    if found.group(2) is not None:
        return f"{found.group(2)}\\{line[found.end() :]}"
    return f"\\{line}"
