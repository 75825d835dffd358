"""What every import reader shares: the plan it builds, its bounded input, the store's checks
and the deterministic ids that make a second import add nothing.

A reader (`mcp_engram`, `mcp_memory`, `engram_go`, `engram_jsonl`) turns a source into a `Plan`
of `Record`s, reading it through an `Input` (lines and documents within the import limits) and
checking every value with a `Checker`.
"""

from __future__ import annotations

import hashlib
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ...base.config import SETTINGS
from ...base.errors import UsageError
from ...base.vocab import IMPORT_FORMAT
from ...storage import events as ev

if TYPE_CHECKING:
    from ...base.validation import Checks

T = TypeVar("T")

FORMATS: dict[str, str] = IMPORT_FORMAT.descriptions()
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# What a report keeps: the first skipped records in full, the first reasons for not importing.
SKIPPED_SHOWN = 100
IGNORED_REASONS = 50
_SKIP_CHUNK = 1 << 20  # how much of an over-long line is read at a time, to pass over it
KNOWN_VALUES = 10_000  # names and authors whose check is remembered during one import
LINE_BYTES = SETTINGS["limits.import_line_bytes"].default
TOTAL_BYTES = SETTINGS["limits.import_bytes"].default
UTF8_MARK = b"\xef\xbb\xbf"
# Byte order marks of encodings no format is written in (UTF-32's first: it begins as UTF-16's).
_WIDE_MARKS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


def unmarked(path: Path, head: bytes) -> bytes:
    """`head`, the first bytes of a file, without a UTF-8 byte order mark (Windows tools write
    one); a `UsageError` that names the conversion when the mark says UTF-16 or UTF-32 (what
    PowerShell 5's `>` writes), which would otherwise fail line by line."""
    if head.startswith(UTF8_MARK):
        return head[len(UTF8_MARK) :]
    for mark, name in _WIDE_MARKS:
        if head.startswith(mark):
            raise UsageError(
                f"{path} is {name} text, and imports read UTF-8; nothing was imported: convert "
                f"it first (`iconv -f {name} -t UTF-8 FILE > FILE.utf8`) and import that"
            )
    return head


@dataclass
class Record:
    """One event an import would write.

    `event` is set when the whole event is fixed by the source (recognised by its id on a
    second import, or by one of `sources`, the ids of the exported events it was rebuilt
    from); otherwise the event is written now, by this actor, and `key` is the id of the record
    it creates (recognised by that id on a second import).
    """

    kind: str
    data: dict[str, Any]
    where: str
    event: ev.Event | None = None
    key: str | None = None
    sources: tuple[str, ...] = ()


@dataclass
class Plan:
    format: str
    source: Path
    records: list[Record] = field(default_factory=list)
    ignored: Counter[str] = field(default_factory=Counter)  # source records not imported, why
    read: int = 0  # source lines or records read
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file:line, why), the first
    skipped_count: int = 0

    def skip(self, path: Path | str, line: int | str, problem: str) -> None:
        """A record left out because it is damaged or fails the checks."""
        self.skipped_count += 1
        if len(self.skipped) < SKIPPED_SHOWN:
            shown = "".join(
                c if c.isprintable() else repr(c)[1:-1] for c in ev.one_line(problem, 300)
            )
            self.skipped.append((f"{path}:{line}", shown))

    def ignore(self, reason: str) -> None:
        """A record with no counterpart here (the reasons are few, however many records)."""
        if reason not in self.ignored and len(self.ignored) >= IGNORED_REASONS:
            reason = "records of other kinds"
        self.ignored[reason] += 1


class Input:
    """What one import reads: its files as lines of at most `line_bytes`, and at most
    `total_bytes` of them all, counted after decompression. A longer line is passed over in
    chunks and reported; more input in all stops the import before anything is written."""

    def __init__(
        self, plan: Plan, *, line_bytes: int = LINE_BYTES, total_bytes: int = TOTAL_BYTES
    ) -> None:
        self.plan = plan
        self.line_bytes = line_bytes
        self.total_bytes = total_bytes
        self.total = 0

    def lines(self, path: Path) -> Iterator[tuple[int, bytes]]:
        """The non-blank lines of `path` (without their line ends) with their numbers."""
        import gzip

        opener: Any = gzip.open if path.name.endswith(".gz") else open
        try:
            with opener(path, "rb") as handle:
                yield from self._lines(path, handle)
        except OSError as exc:  # opening it: what goes wrong in reading is reported below
            raise UsageError(
                f"cannot read {path}: {exc.strerror or exc}; nothing was imported"
            ) from None

    def document(self, path: Path, limit: int) -> bytes | None:
        """All of `path` (decompressed if it ends in .gz), for a format whose records are one
        JSON document; None, with the file reported, when it is over `limit` bytes or cannot
        be read. What is read counts towards `total_bytes` like lines do."""
        import gzip

        opener: Any = gzip.open if path.name.endswith(".gz") else open
        parts: list[bytes] = []
        size = 0
        try:
            with opener(path, "rb") as handle:
                while True:
                    chunk = handle.read(_SKIP_CHUNK)
                    if not chunk:
                        break
                    self._count(path, len(chunk))
                    size += len(chunk)
                    if size <= limit:
                        parts.append(chunk)
                    elif parts:
                        parts.clear()
        except OSError as exc:
            self.plan.skip(path, 1, f"cannot be read ({ev.one_line(exc, 120)})")
            return None
        except (EOFError, zlib.error) as exc:
            self.plan.skip(path, 1, f"cannot be read ({ev.one_line(exc, 120)})")
            return None
        if size > limit:
            self.plan.skip(
                path,
                1,
                f"longer than {limit} bytes (setting "
                f"limits.import_{'line_' if limit == self.line_bytes else ''}"
                "bytes)",
            )
            return None
        return unmarked(path, b"".join(parts))

    def _lines(self, path: Path, handle: Any) -> Iterator[tuple[int, bytes]]:
        number = 0
        while True:
            try:
                line = handle.readline(self.line_bytes + 1)
                if not line:
                    return
                number += 1
                self._count(path, len(line))
                if number == 1:
                    line = unmarked(path, line)
                if len(line) > self.line_bytes and not line.endswith(b"\n"):
                    self._pass_over(handle, path)
                    self.plan.skip(
                        path,
                        number,
                        f"line longer than {self.line_bytes} bytes "
                        "(setting limits.import_line_bytes)",
                    )
                    continue
            except (OSError, EOFError, zlib.error) as exc:
                self.plan.skip(
                    path,
                    number + 1,
                    f"the rest of the file cannot be read ({ev.one_line(exc, 120)})",
                )
                return
            line = line.rstrip(b"\r\n")
            if line.strip():
                yield number, line

    def _pass_over(self, handle: Any, path: Path) -> None:
        while True:
            chunk = handle.readline(_SKIP_CHUNK)
            self._count(path, len(chunk))
            if not chunk or chunk.endswith(b"\n"):
                return

    def _count(self, path: Path, size: int) -> None:
        self.total += size
        if self.total > self.total_bytes:
            raise UsageError(
                f"{path}: the input is over the limit of {self.total_bytes} bytes (setting "
                "limits.import_bytes, counted after decompression); nothing was imported: "
                "import it in parts, or raise the limit with "
                "`engram config set limits.import_bytes BYTES`"
            )


class Checker:
    """The store's input checks (limits, names, paths, secret scanning) as the readers use
    them: a failed check raises a `UsageError` whose message says why. What an input repeats
    (its authors, tags, names) is checked once."""

    def __init__(self, checks: Checks, *, redact: bool = False) -> None:
        self.checks = checks
        self.redact = redact
        self._known: dict[tuple[Any, ...], Any] = {}

    def once(self, key: tuple[Any, ...], check: Callable[[], T]) -> T:
        """`check()`, or what it returned for the same `key` before (a failure is not kept)."""
        if key in self._known:
            known: T = self._known[key]
            return known
        value = check()
        if len(self._known) < KNOWN_VALUES:
            self._known[key] = value
        return value

    def text(self, value: str, field: str, limit: str = "limits.text_bytes") -> str:
        if limit.endswith("_chars"):  # a title: cut to fit rather than refuse the import
            value = ev.one_line(value, self.checks.limit(limit))
        return self.checks.text(value, field=field, limit=limit, redact=self.redact)

    def items(self, values: Any, field: str) -> list[str]:
        return self.checks.items(values, field=field, redact=self.redact)

    def name(self, value: Any, what: str) -> str | None:
        if not isinstance(value, str):
            return self.checks.optional_name(value, what=what)
        return self.once(("name", what, value), lambda: self.checks.optional_name(value, what=what))

    def tags(self, values: Iterable[Any]) -> list[str]:
        if isinstance(values, str) or not isinstance(values, (list, tuple)):
            raise UsageError("tags must be a list of text")
        if not all(isinstance(v, str) for v in values):
            return list(self.checks.tags(values))
        return list(self.once(("tags", *values), lambda: self.checks.tags(values)))

    def file(self, path: Any) -> dict[str, Any]:
        return self.checks.file(path)

    def files(self, values: Any) -> list[dict[str, Any]]:
        return self.checks.files(values)

    def scan(self, value: str, field: str) -> None:
        """Refuse a credential in text that cannot be changed on the way in."""
        self.checks.scan(value, field=field, redactable=False)


def readable(event: ev.Event) -> ev.Event:
    """`event`, if readers will read it: checked now rather than found damaged later."""
    try:
        ev.parse_line(event.to_line()[:-1])
    except ev.EventFormatError as exc:
        raise UsageError(f"would become an unreadable event: {exc}") from None
    return event


def readable_memory(data: dict[str, Any]) -> None:
    """Refuse a `memory.created` payload readers would set aside."""
    readable(
        ev.Event(
            id=ev.new_event_id(),
            kind="memory.created",
            clock=0,
            time=ev.format_time(ev.utc_now()),
            actor="-",
            session=None,
            machine=None,
            data=data,
        )
    )


def check_format(name: str) -> str:
    return IMPORT_FORMAT.one_of(name)


# -- deterministic identities ------------------------------------------------------------------


def _digest(*parts: object) -> bytes:
    return hashlib.sha256("\x00".join(str(p) for p in parts).encode("utf-8")).digest()


def derived_id(*parts: object) -> str:
    """A record id (12 lowercase base32 characters, like `new_entity_id`) that is always the
    same for the same parts: the same source record gets the same id in every clone."""
    value = int.from_bytes(_digest(*parts)[:8], "big") >> 4
    return "".join(ev.CROCKFORD[(value >> (5 * i)) & 31] for i in range(11, -1, -1)).lower()


def derived_event_id(ms: int, *parts: object) -> str:
    """A ULID whose time is `ms` and whose 80 other bits come from the parts."""
    value = (ms << 80) | int.from_bytes(_digest(*parts)[:10], "big")
    return "".join(ev.CROCKFORD[(value >> (5 * i)) & 31] for i in range(25, -1, -1))


def micros(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1)


def from_micros(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def slug_name(text: str, limit: int = 64) -> str | None:
    """Free text as an Engram name (tag, scope, component): letters, digits and . _ - : / @ + #,
    starting with a letter or digit. None when nothing is left."""
    out = []
    for char in text.strip():
        out.append(char if char.isalnum() or char in "._-:@+#" else "-")
    name = "".join(out)
    while "--" in name:
        name = name.replace("--", "-")
    name = name.lstrip("._-:@+#").rstrip("-")[:limit].rstrip("-")
    return name or None
