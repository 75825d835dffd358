"""Checks on what callers hand to Engram, made in one place before anything reaches disk.

The CLI and the MCP server pass what they are given straight to the API (`engram.api.Engram`),
and the API checks it here. Every check raises a `UsageError` whose message is one line that names
the limit and the setting that moves it, or the fix; it quotes at most a short piece of the input.

- Text (memory content, goals, notes, handoff items, ...) is valid UTF-8, holds no control
  characters but newline and tab, is not blank, and fits its `limits.*` setting. It is scanned for
  credentials before it is stored, because it will be pushed.
- Names (tags, scopes, components) are short identifiers: letters, digits and `. _ - : / @ + #`.
  Names, task names and the actor are stored in NFC, so that one name typed two ways (`café` as
  one character or as `e` and a combining accent) is one name, and hold no format character
  (bidi controls, zero-width characters: Unicode category Cf), which would make two names look
  alike or reorder the text around them.
- Paths (working-set files, citations) are relative to the repository and never leave it. A
  working-set entry `path@commit` is split at its last `@` only when a commit id follows (see
  `split_pin`): `web/@types/index.d.ts` and `logo@2x.png` are paths.
- References (ids, id prefixes, task names, session ids) are looked up, never stored as given, so
  they only have to be well formed; they are looked up in NFC, names compared by `name_key`.

Every limit is listed in docs/limits.md.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .errors import Fix, SecretError, UsageError, quote

if TYPE_CHECKING:
    from .config import Settings

# A reference is looked up, not stored: nothing it could name is longer than this.
REFERENCE_CHARS = 1000
SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
EVENT_KIND = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$")
COMMIT = re.compile(r"^[0-9a-f]{4,64}$")
_NAME = re.compile(r"^[\w][\w.:@+#/\-]*$")


def well_formed(value: Any, field: str) -> str:
    """Text that is valid UTF-8 (and was, before it was decoded) and holds no control
    character but newline, tab and CR LF (which becomes a newline)."""
    if not isinstance(value, str):
        raise UsageError(f"{field} must be text, not {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"{field} is not valid UTF-8; re-encode it as UTF-8") from None
    if "\ufffd" in value:  # what a decoder leaves where bytes were not UTF-8
        raise UsageError(
            f"{field} holds U+FFFD, the mark of bytes that were not valid UTF-8; "
            "re-encode it as UTF-8"
        )
    text = value.replace("\r\n", "\n")
    for index, char in enumerate(text):
        if char not in "\n\t" and unicodedata.category(char) == "Cc":
            line = text.count("\n", 0, index) + 1
            where = f" on line {line}" if "\n" in text else ""
            raise UsageError(
                f"{field} contains a control character (U+{ord(char):04X}){where}; remove it"
            )
    return text


def name_form(value: str, what: str) -> str:
    """`value` as a name is stored: in NFC, and without a format character (category Cf: the
    bidi controls, zero-width characters, soft hyphen, ...)."""
    value = unicodedata.normalize("NFC", value)
    for char in value:
        if unicodedata.category(char) == "Cf":
            raise UsageError(
                f"{what} {quote(value)} holds U+{ord(char):04X} "
                f"({unicodedata.name(char, 'a format character')}); a name cannot hold bidi "
                "controls, zero-width or other invisible format characters: remove it"
            )
    return value


def name_key(value: str) -> str:
    """What two names are compared by: NFC and case-folded, so that `Café` and `cafe` with a
    combining accent are the same name however either was written."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", value).casefold())


def reference(
    value: Any, what: str, *, hint: str | Fix = "give an id (or a unique prefix of it)"
) -> str:
    """An id, an id prefix or a name to look something up by (in NFC). `hint` says how to
    find one, in each front end's words if it is a `Fix`."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise UsageError(f"{what} is empty", hint if isinstance(hint, Fix) else Fix(hint, hint))
    text = unicodedata.normalize("NFC", well_formed(value, what).strip())
    if "\n" in text or "\t" in text:
        raise UsageError(f"{what} {quote(text)} must be one line")
    if len(text) > REFERENCE_CHARS:
        raise UsageError(
            f"{what} is {len(text)} characters; no id or name is longer than {REFERENCE_CHARS}"
        )
    return text


def session_id(value: Any, what: str = "session id") -> str:
    text = reference(value, what)
    if not SESSION_ID.match(text):
        raise UsageError(
            f"{what} {quote(text)} is not a session id: 1-64 letters, digits, "
            "'.', '_' or '-', starting with a letter or digit"
        )
    return text


def chosen_session(given: str | None) -> str | None:
    """The session events are written under: `given` (checked), else `$ENGRAM_SESSION`'s."""
    if given is not None:
        return session_id(given)
    return session_from_env(os.environ.get("ENGRAM_SESSION"))


def session_from_env(value: str | None) -> str | None:
    """The session `ENGRAM_SESSION` names, if any. Unset or blank is none: that is what
    `export ENGRAM_SESSION=$(engram session start)` leaves when the start fails. Any other value
    must be a session id, or every event written would carry one its readers refuse."""
    if value is None or not value.strip():
        return None
    try:
        return session_id(value, "ENGRAM_SESSION")
    except UsageError:
        raise UsageError(
            f"ENGRAM_SESSION={quote(value)} is not a session id (as `engram session start` "
            "prints); unset it or set it to one"
        ) from None


def event_kind(value: Any) -> str:
    """An event kind or family to filter by (`memory`, `memory.created`)."""
    text = reference(value, "event kind")
    if len(text) > 64 or not EVENT_KIND.match(text):
        raise UsageError(
            f"event kind {quote(text)} is not a kind or family such as "
            "'memory' or 'memory.created'; see docs/events.md"
        )
    return text


def name(value: Any, *, what: str, limit: int) -> str:
    """A short identifier (a tag, a scope, a component), in NFC."""
    text = well_formed(value, what).strip()
    if not text:
        raise UsageError(f"{what} is empty")
    text = name_form(text, what)
    if len(text) > limit:
        raise UsageError(
            f"{what} {quote(text, 20)} is longer than {limit} characters "
            "(setting limits.name_chars)"
        )
    check_relative(text, what)
    if not _NAME.match(text):
        raise UsageError(
            f"{what} {quote(text)} may hold only letters, digits and . _ - : / @ + #, "
            "and must start with a letter or digit"
        )
    return text


def tags(
    values: Iterable[Any], *, limit: int, name_limit: int, what: str = "tag"
) -> tuple[str, ...]:
    """Tags, split on commas, lower-cased and de-duplicated; at most `limit` of them."""
    if isinstance(values, str):
        values = [values]
    out: dict[str, None] = {}
    for tag in values:
        if not isinstance(tag, str):
            raise UsageError(f"a {what} must be text, not {type(tag).__name__}")
        for part in tag.split(","):
            if part.strip():
                out[name(part, what=what, limit=name_limit).lower()] = None
                if len(out) > limit:
                    raise UsageError(
                        f"more than {limit} {what}s: over the limit of {limit} "
                        "(setting limits.tags)"
                    )
    return tuple(out)


def check_relative(name: str, what: str) -> str:
    """Refuse path-like names that could escape a directory when used as paths."""
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name) or ".." in name.split("/"):
        raise UsageError(f"{what} {quote(name)} must not be an absolute path or contain '..'")
    return name


def guard(
    text: str,
    *,
    field: str = "content",
    allow_redaction: bool = False,
    entropy: bool = False,
    redactable: bool = True,
) -> str:
    """Return `text` unchanged, or redacted when allowed; otherwise refuse the first secret."""
    from . import secrets  # its rule set loads when text is first scanned, not for reads

    findings = secrets.find_secrets(text, entropy=entropy)
    if not findings:
        return text
    if allow_redaction:
        return secrets.redact(text, findings)
    first = findings[0]
    raise SecretError(first.type, first.line, first.column, field=field, redactable=redactable)


def split_pin(text: str, names_file: Callable[[str], bool] | None = None) -> tuple[str, str | None]:
    """A working-set entry, `path` or `path@commit`, as its path and the commit it pins (None
    when it pins none). `@` is common in file names (`web/@types/index.d.ts`, `logo@2x.png`), so
    the entry is split only at its last `@`, only when 4 to 64 hex digits follow it and a file
    name (not a folder: `web/@cafe`) comes before it, and never when the whole entry names a file
    (`names_file`: one the work tree holds or git tracks)."""
    where, at, commit = text.rpartition("@")
    commit = commit.strip().lower()
    if (
        not at
        or not where.strip()
        or where.rstrip().endswith(("/", "\\"))
        or not COMMIT.match(commit)
        or (names_file is not None and names_file(text.strip()))
    ):
        return text, None
    return where, commit


def path(value: Any, *, what: str, limit: int) -> str:
    """A path relative to the repository that cannot lead out of it."""
    text = well_formed(value, what).strip().replace("\\", "/")
    if not text:
        raise UsageError(f"{what} is empty; give a path relative to the repository root")
    if "\n" in text or "\t" in text:
        raise UsageError(f"{what} {quote(text)} must be one line")
    if len(text) > limit:
        raise UsageError(
            f"{what} {quote(text, 20)} is longer than {limit} characters "
            "(setting limits.path_chars)"
        )
    if text.startswith("/") or re.match(r"^[A-Za-z]:", text) or ".." in text.split("/"):
        raise UsageError(
            f"{what} {quote(text)} must be a path inside the repository "
            "(relative: it must not be an absolute path or contain '..')"
        )
    return text


class Checks:
    """The checks, with the limits and the secret scanning of one store's settings."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def limit(self, key: str) -> int:
        return int(self.settings[key])

    def scan(self, value: str, *, field: str, redact: bool = False, redactable: bool = True) -> str:
        """Refuse (or, when asked, redact) what looks like a credential."""
        if not self.settings["secrets.scan"]:
            return value
        return guard(
            value,
            field=field,
            allow_redaction=redact and redactable,
            entropy=self.settings["secrets.entropy"],
            redactable=redactable,
        )

    def text(
        self,
        value: Any,
        *,
        field: str,
        limit: str = "limits.text_bytes",
        one_line: bool = False,
        redact: bool | None = None,
        hint: str = "shorten it",
    ) -> str:
        """Free text on its way to disk: well formed, not blank, within its limit, no secret.
        `redact` is None where the command has no way to ask for redaction: a secret's error
        then does not advise one."""
        value = well_formed(value, field).strip()
        if not value:
            raise UsageError(f"{field} is empty; give the text to store")
        if one_line and "\n" in value:
            raise UsageError(f"{field} must be one line; put details elsewhere")
        size = len(value) if limit.endswith("_chars") else len(value.encode("utf-8"))
        most = self.limit(limit)
        if size > most:
            unit = "characters" if limit.endswith("_chars") else "bytes"
            raise UsageError(
                f"{field} is {size} {unit}, over the limit of {most} (setting {limit}); {hint}"
            )
        return self.scan(value, field=field, redact=bool(redact), redactable=redact is not None)

    def items(
        self,
        values: Any,
        *,
        field: str,
        limit: str = "limits.item_bytes",
        redact: bool | None = None,
    ) -> list[str]:
        """A list of text items (next steps, commands, ...), de-duplicated, blanks dropped."""
        if values is None:
            return []
        if isinstance(values, str):
            values = [values]
        if not isinstance(values, Sequence):
            raise UsageError(f"{field} must be a list of text")
        most = self.limit("limits.list_items")
        if len(values) > most:
            raise UsageError(
                f"{field} has {len(values)} items, over the limit of {most} "
                "(setting limits.list_items)"
            )
        out: dict[str, None] = {}
        for number, item in enumerate(values, start=1):
            if not isinstance(item, str):
                raise UsageError(f"{field} item {number} must be text, not {type(item).__name__}")
            if item.strip():
                out[self.text(item, field=f"{field} item {number}", limit=limit, redact=redact)] = (
                    None
                )
        return list(out)

    def name(self, value: Any, *, what: str) -> str:
        checked = name(value, what=what, limit=self.limit("limits.name_chars"))
        return self.scan(checked, field=what, redactable=False)

    def optional_name(self, value: Any, *, what: str) -> str | None:
        """A name, or None when none (or a blank one) is given."""
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        return self.name(value, what=what)

    def tags(self, values: Iterable[Any], *, scan: bool = True) -> tuple[str, ...]:
        found = tags(
            values, limit=self.limit("limits.tags"), name_limit=self.limit("limits.name_chars")
        )
        if scan:
            for tag in found:
                self.scan(tag, field="tag", redactable=False)
        return found

    def path(self, value: Any, *, what: str = "file") -> str:
        checked = path(value, what=what, limit=self.limit("limits.path_chars"))
        return self.scan(checked, field=what, redactable=False)

    def files(
        self, values: Any, *, names_file: Callable[[str], bool] | None = None
    ) -> list[dict[str, Any]]:
        """Working-set files: `path`, `path@commit` (`split_pin`, with `names_file`) or
        `{path, commit}` each."""
        if values is None:
            return []
        if isinstance(values, (str, Mapping)):
            values = [values]
        if not isinstance(values, Sequence):
            raise UsageError("files must be a list of paths (path, path@commit, or {path, commit})")
        most = self.limit("limits.list_items")
        if len(values) > most:
            raise UsageError(
                f"{len(values)} working-set files, over the limit of {most} "
                "(setting limits.list_items)"
            )
        out: dict[str, dict[str, Any]] = {}
        for item in values:
            checked = self.file(item, names_file=names_file)
            out.setdefault(checked["path"], checked)
        return list(out.values())

    def file(self, item: Any, *, names_file: Callable[[str], bool] | None = None) -> dict[str, Any]:
        if isinstance(item, str):
            where, at = split_pin(item, names_file)
            item = {"path": where, "commit": at}
        if not isinstance(item, Mapping) or not isinstance(item.get("path"), str):
            raise UsageError("a working-set file is a path, path@commit, or {path, commit}")
        where = self.path(item["path"], what="working-set file")
        commit = item.get("commit")
        if commit is not None:
            if not isinstance(commit, str) or not COMMIT.match(commit.strip().lower()):
                raise UsageError(
                    f"working-set file {quote(where)}: commit {quote(commit)} is "
                    "not a git commit id (4 to 64 hex digits)"
                )
            return {"path": where, "commit": commit.strip().lower() or None}
        return {"path": where, "commit": None}

    def query(self, value: Any) -> str:
        text = well_formed(value, "the query").strip()
        if not text:
            raise UsageError("the query is empty; give words to look for")
        most = self.limit("limits.query_bytes")
        size = len(text.encode("utf-8"))
        if size > most:
            raise UsageError(
                f"the query is {size} bytes, over the limit of {most} "
                "(setting limits.query_bytes); shorten it"
            )
        return text

    def filter_names(self, values: Iterable[Any], *, what: str) -> list[str]:
        """Names to filter by: well formed (nothing is stored, so no secret scan)."""
        return list(
            tags(
                values,
                limit=max(self.limit("limits.tags"), 64),
                name_limit=self.limit("limits.name_chars"),
                what=what,
            )
        )
