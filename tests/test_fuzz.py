"""Every parser that faces input, fuzzed: it gives a valid result or a clean error, never an
unexpected exception.

The parsers: one event line (`events.parse_line`); a whole event file (`Store.read_file`) and
the state folded from it (what a command reads after a pull brings someone else's file); a
store's config.yaml (`config.parse_config`); a handoff package (`--from FILE`:
`checkpoints.parse_package`, then `normalise`); dates and ages (`memories.parse_moment`); a
discovery's citations (`discovery.parse`); an MCP client's configuration file as
`engram mcp install` edits it; a file given to `engram import`, in each of its formats
(`engram.domain.interop`); and the input checks themselves (`validation`).

`tests/corpus/<parser>/<name>` keeps inputs the fuzzing found (and a few it should keep
finding); `test_the_corpus_replays_cleanly` replays them all in the quick suite. The fuzzing
runs are marked slow.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.base import validation
from engram.base.config import SETTINGS, Settings, parse_config
from engram.base.errors import EngramError, UsageError
from engram.domain.continuity import checkpoints as cp
from engram.domain.discovery import parse as parse_citations
from engram.model.memories import parse_moment
from engram.storage import events as ev
from engram.storage.store import Store

CORPUS = Path(__file__).parent / "corpus"
# Derandomized: the same inputs on every run, so a failure in CI is one anyone can replay.
FUZZ = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)


# -- the harnesses: (input bytes, file name) -> None, or an exception that is a bug --------------


def event_line(data: bytes, name: str = "") -> None:
    try:
        event = ev.parse_line(data)
    except ev.EventFormatError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 300
        return
    again = ev.parse_line(event.to_line()[:-1])
    assert again == event


def event_file(data: bytes, name: str = "") -> None:
    """The file as one writer's event file of a store: read it, fold it, and read the state
    back the way commands do."""
    from engram.api import Engram, describe

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "store"
        store = Store(root, "personal")
        store.ensure_layout()
        (root / "config.yaml").write_text("search:\n  model: 'off'\n")
        path = root / "events" / "2026" / "01" / "fuzz.jsonl"
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
        chunk = store.read_file(path)
        assert chunk.consumed <= len(data)
        assert all(1 <= p.line <= data.count(b"\n") + 1 for p in chunk.problems)
        for _, event in chunk.events:
            describe(event)
        saved = os.environ.get("ENGRAM_HOME")
        os.environ["ENGRAM_HOME"] = str(root)
        try:
            with Engram(cwd=tmp, actor="Fuzz <fuzz@example.com>") as engram:
                engram.memories(limit=None, include_forgotten=True, include_expired=True)
                for task in engram.tasks(include_closed=True):
                    engram.task_view(task.id)
                    latest = task.latest_checkpoint
                    if latest is not None:
                        cp.render(task.to_dict(), latest, task.previous_checkpoint)
                engram.sessions()
                engram.log(limit=None)
                engram.stats()
                engram.resume(depth="full", restore="full")
        except EngramError:
            pass
        finally:
            if saved is None:
                del os.environ["ENGRAM_HOME"]
            else:
                os.environ["ENGRAM_HOME"] = saved


def config_file(data: bytes, name: str = "") -> None:
    try:
        values = parse_config(data)
    except UsageError as exc:
        assert "\n" not in str(exc)
        return
    assert set(values) <= set(SETTINGS)
    Settings(values)


_CHECKS = validation.Checks(Settings())


def package_file(data: bytes, name: str = "package.yaml") -> None:
    try:
        raw = cp.parse_package(data, name=name)
        package = cp.normalise(raw, _CHECKS)
    except UsageError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 600
        return
    assert set(package) == set(cp.empty_package())
    orjson.dumps(package)  # it can be written as an event


def moment_text(data: bytes, name: str = "") -> None:
    text = data.decode("utf-8", "surrogateescape")
    for future in (False, True):
        try:
            moment = parse_moment(text, what="--since", future=future)
        except UsageError:
            continue
        assert ev.is_moment(ev.format_time(moment))


def citations_text(data: bytes, name: str = "") -> None:
    fact, citations = parse_citations(data.decode("utf-8", "replace"))
    assert isinstance(fact, str)
    for citation in citations:
        assert citation.start >= 0 and len(citation.commit) == 40


def checked_text(data: bytes, name: str = "") -> None:
    """The input checks: whatever they let through is well formed."""
    text = data.decode("utf-8", "surrogateescape")
    for check in (
        lambda: _CHECKS.text(text, field="content", limit="limits.content_bytes"),
        lambda: _CHECKS.name(text, what="tag"),
        lambda: _CHECKS.path(text),
        lambda: validation.reference(text, "id"),
        lambda: validation.session_id(text),
        lambda: "\n".join(_CHECKS.tags([text])),
    ):
        try:
            value = check()
        except UsageError as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 600
            continue
        value.encode("utf-8")
        assert value == value.strip() and "\x00" not in value and "\x1b" not in value


def client_config(data: bytes, name: str = "config.toml") -> None:
    """An MCP client's own configuration file as `engram mcp install` finds it: Codex's TOML,
    or Claude Code's JSON."""
    from engram.mcp.install import install

    client, where = (
        ("codex", ".codex/config.toml") if name.endswith(".toml") else ("claude", ".claude.json")
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / where
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        try:
            [change] = install(client, home=Path(tmp), cwd=Path(tmp), dry_run=True)
        except UsageError as exc:
            assert "\n" not in str(exc).strip() or client == "codex"
            return
        if client == "codex":
            import tomllib

            assert "engram" in tomllib.loads(change.text)["mcp_servers"]
        else:
            assert "engram" in orjson.loads(change.text)["mcpServers"]


def import_file(data: bytes, name: str = "") -> None:
    """A file given to `engram import`, read as each format: every record comes out checked
    (an event readers accept) or skipped with a one-line reason; only the size limit stops."""
    from engram.domain.interop import (
        Checker,
        Input,
        Plan,
        engram_go,
        engram_jsonl,
        mcp_engram,
        mcp_memory,
    )

    readers: dict[str, Callable[..., Plan]] = {
        "engram": lambda path, check, source: engram_jsonl.read(
            path, check, source, "Fuzz <fuzz@example.com>"
        ),
        "mcp-engram": mcp_engram.read,
        "mcp-memory": mcp_memory.read,
        "engram-go": engram_go.read,
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events-20260101.jsonl"
        path.write_bytes(data)
        for fmt, read in readers.items():
            source = Input(Plan(fmt, path), line_bytes=4096, total_bytes=1 << 20)
            try:
                plan = read(path, Checker(_CHECKS), source)
            except UsageError as exc:
                assert "limits.import_bytes" in str(exc) and "\n" not in str(exc)
                continue
            assert plan.skipped_count >= len(plan.skipped)
            for where, why in plan.skipped:
                assert where.startswith(f"{path}:") and why.isprintable() and len(why) <= 300
            for record in plan.records:
                if record.event is not None:
                    assert ev.parse_line(record.event.to_line()[:-1]) == record.event
                else:
                    ev.check_payload(record.kind, record.data)
                    orjson.dumps(record.data)


PARSERS: dict[str, Callable[[bytes, str], None]] = {
    "client-config": client_config,
    "event-line": event_line,
    "event-file": event_file,
    "config": config_file,
    "package": package_file,
    "moment": moment_text,
    "citations": citations_text,
    "checks": checked_text,
    "import": import_file,
}


def corpus() -> list[tuple[str, Path]]:
    return sorted((path.parent.name, path) for path in CORPUS.glob("*/*") if path.is_file())


def test_the_corpus_covers_every_parser_and_only_them() -> None:
    assert {parser for parser, _ in corpus()} == set(PARSERS)


@pytest.mark.parametrize(("parser", "path"), corpus(), ids=lambda v: getattr(v, "name", v))
def test_the_corpus_replays_cleanly(parser: str, path: Path) -> None:
    PARSERS[parser](path.read_bytes(), path.name)


# -- strategies ---------------------------------------------------------------------------------

IDS = ["abcd00000001", "abcd00000002", "abce00000001", "s-open", "../x", ""]
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(IDS)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
moments = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)).map(
    lambda d: ev.format_time(d.replace(tzinfo=UTC))
) | st.sampled_from(
    ["2026-01-01", "2026-01-01T00:00:00", "9999-12-31T23:59:59-23:59", "garbage", ""]
)
plausible = (
    json_values
    | st.sampled_from(IDS)
    | moments
    | st.lists(st.text(max_size=8), max_size=3)
    | st.fixed_dictionaries(
        {
            "files": st.lists(
                st.fixed_dictionaries(
                    {"path": st.text(max_size=8), "commit": st.none() | st.text(max_size=8)}
                ),
                max_size=2,
            )
        }
    )
)
FIELDS = sorted(
    {name for required, optional in ev.PAYLOADS.values() for name in (*required, *optional)}
)


@st.composite
def events(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from([*ev.PAYLOADS, "memory.merged", "x"]))
    required, optional = ev.PAYLOADS.get(kind, ({}, {}))
    data = {name: draw(st.sampled_from(IDS[:4]) | plausible) for name in required}
    for name in draw(st.lists(st.sampled_from([*optional, *FIELDS] or ["x"]), max_size=6)):
        data[name] = draw(plausible)
    moment = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=draw(st.integers(0, 10**6)))
    event: dict[str, Any] = {
        "id": ev.new_event_id(int(moment.timestamp() * 1000)),
        "schema": 1,
        "kind": kind,
        "clock": draw(st.integers(0, 2**62)),
        "time": ev.format_time(moment),
        "actor": draw(st.text(max_size=8)),
        "session": draw(st.none() | st.sampled_from(IDS)),
        "machine": draw(st.none() | st.text(max_size=8)),
        "data": data,
    }
    if draw(st.integers(0, 9)) == 0:  # now and then, a damaged envelope
        event[draw(st.sampled_from(sorted(event)))] = draw(json_values)
    return event


def line_of(event: dict[str, Any]) -> bytes:
    return orjson.dumps(event, option=orjson.OPT_SORT_KEYS)


# -- the fuzzing runs ---------------------------------------------------------------------------


@pytest.mark.slow
@FUZZ
@given(st.binary(max_size=300) | events().map(line_of) | json_values.map(orjson.dumps))
def test_fuzz_event_lines(data: bytes) -> None:
    event_line(data)


@pytest.mark.slow
@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(
    st.lists(
        events().map(line_of)
        | st.sampled_from([b"", b"<<<<<<< HEAD", b"=======", b"{", b"\xff"])
        | st.binary(max_size=40),
        max_size=12,
    ),
    st.booleans(),
)
def test_fuzz_event_files_and_the_state_folded_from_them(lines: list[bytes], torn: bool) -> None:
    data = b"\n".join(lines) + (b"" if torn else b"\n")
    event_file(data)


setting_values = json_scalars | st.sampled_from(
    [".nan", ".inf", "-1", "1e999", "'off'", "&a [*a]", "!!binary aGk="]
)


@pytest.mark.slow
@FUZZ
@given(
    st.binary(max_size=300)
    | st.dictionaries(
        st.sampled_from([*SETTINGS, "limits", "decay.x", "a.b.c"]), setting_values, max_size=5
    ).map(lambda values: "".join(f"{key}: {value}\n" for key, value in values.items()).encode())
    | st.text(max_size=200).map(lambda text: text.encode("utf-8", "surrogatepass"))
)
def test_fuzz_config_files(data: bytes) -> None:
    config_file(data)


package_values = (
    json_values
    | st.lists(st.text(max_size=20), max_size=5)
    | st.sampled_from(["../x", "/etc/passwd", "a.py@zz", "a.py@abc123", "x" * 5000])
)


@pytest.mark.slow
@FUZZ
@given(
    st.dictionaries(
        st.sampled_from(
            [
                *cp.LIST_FIELDS,
                *cp.TEXT_FIELDS,
                "working_set",
                "files",
                "commands",
                "artifacts",
                "task",
                "mood",
            ]
        ),
        package_values
        | st.dictionaries(
            st.sampled_from(["files", "commands", "artifacts", "x"]), package_values, max_size=3
        ),
        max_size=6,
    ),
    st.sampled_from(["json", "yaml"]),
)
def test_fuzz_handoff_packages(package: dict[str, Any], form: str) -> None:
    if form == "json":
        package_file(orjson.dumps(package), "package.json")
    else:
        import io

        from ruamel.yaml import YAML

        out = io.StringIO()
        YAML(typ="safe").dump(package, out)
        package_file(out.getvalue().encode("utf-8", "surrogatepass"), "package.yaml")


@pytest.mark.slow
@FUZZ
@given(st.binary(max_size=200))
def test_fuzz_handoff_package_bytes(data: bytes) -> None:
    package_file(data, "package.yaml")
    package_file(data, "package.json")


@pytest.mark.slow
@FUZZ
@given(
    st.text(max_size=40)
    | st.from_regex(r"\A\s*\d{1,30}\s*[smhdw]\s*\Z")
    | moments
    | st.datetimes().map(lambda d: d.isoformat())
)
def test_fuzz_dates_and_ages(text: str) -> None:
    moment_text(text.encode("utf-8", "surrogatepass"))


@pytest.mark.slow
@FUZZ
@given(
    st.lists(
        st.text(max_size=30)
        | st.builds(
            lambda p, a, b: f"cite: {p}:{a}-{b}@{'a' * 40}",
            st.text(max_size=10),
            st.integers(0, 10**30),
            st.integers(0, 10**30),
        )
        | st.just("  | excerpt"),
        max_size=8,
    )
)
def test_fuzz_discovery_citations(lines: list[str]) -> None:
    citations_text("\n".join(lines).encode("utf-8", "surrogatepass"))


toml_lines = st.sampled_from(
    [
        "[mcp_servers.engram]",
        "[mcp_servers]",
        '[ mcp_servers . "engram" ]',
        "[[mcp_servers]]",
        "mcp_servers = 1",
        'command = "x"',
        'args = ["a", "b"]',
        "x = , ",
        'x = """',
        '"""',
        "[other]",
        "a.b = 1",
        "# [mcp_servers.engram]",
        "",
        'mcp_servers.engram.command = "y"',
        "[mcp_servers.engram.env]",
        "k = {a = 1}",
        '["mcp_servers".engram]',
        "x = [",
        "]",
    ]
) | st.text(max_size=20)


@pytest.mark.slow
@FUZZ
@given(
    st.lists(toml_lines, max_size=10).map(
        lambda lines: "\n".join(lines).encode("utf-8", "surrogatepass")
    )
    | st.binary(max_size=100)
)
def test_fuzz_codex_config_files(data: bytes) -> None:
    client_config(data, "config.toml")


@pytest.mark.slow
@FUZZ
@given(json_values.map(orjson.dumps) | st.binary(max_size=100))
def test_fuzz_claude_config_files(data: bytes) -> None:
    client_config(data, ".claude.json")


@pytest.mark.slow
@FUZZ
@given(
    st.text(max_size=80)
    | st.binary(max_size=80).map(lambda data: data.decode("utf-8", "surrogateescape"))
)
def test_fuzz_the_input_checks(text: str) -> None:
    checked_text(text.encode("utf-8", "surrogateescape"))


MCP_ENGRAM_KINDS = [
    "task.create",
    "task.spawn",
    "task.retry",
    "task.update",
    "checkpoint.write",
    "memory.store",
    "memory.update",
    "memory.delete",
    "session.start",
    "session.end",
    "session.outcome",
    "drift.detected",
    "x",
]
MCP_ENGRAM_FIELDS = [
    "task_id",
    "parent_task_id",
    "retry_of_task_id",
    "attempt",
    "name",
    "goal",
    "status",
    "checkpoint_id",
    "state",
    "source_memory_id",
    "source_session_id",
    "version",
    "checkpoint_reason",
    "memory_id",
    "content",
    "importance",
    "category",
    "metadata",
    "session_id",
    "end_type",
    "interruption_reason",
    "interruption_context",
    "outcome",
    "user_id",
]


@st.composite
def mcp_engram_lines(draw: st.DrawFn) -> bytes:
    payload = {
        name: draw(plausible | st.integers(0, 3))
        for name in draw(st.lists(st.sampled_from(MCP_ENGRAM_FIELDS), max_size=6))
    }
    for name in ("metadata", "state"):
        if name in payload and draw(st.booleans()):
            payload[name] = draw(
                st.dictionaries(
                    st.sampled_from(
                        [
                            "type",
                            "task_id",
                            "component",
                            "error",
                            "feature",
                            "blockers",
                            "completion",
                            "preferred_next",
                            "working_set",
                            "must_not_redo",
                            "goal",
                        ]
                    ),
                    plausible,
                    max_size=4,
                )
            )
    return orjson.dumps(
        {
            "ts": draw(moments),
            "seq": draw(json_scalars),
            "kind": draw(st.sampled_from(MCP_ENGRAM_KINDS)),
            "payload": payload,
            "schema_version": draw(st.sampled_from([1, 1, 1, 2])),
        }
    )


mcp_memory_lines = st.fixed_dictionaries(
    {"type": st.sampled_from(["entity", "relation", "x"])},
    optional={
        "name": plausible,
        "entityType": plausible,
        "observations": plausible,
        "from": plausible,
        "to": plausible,
        "relationType": plausible,
    },
).map(orjson.dumps)


GO_FIELDS = [
    "id",
    "session_id",
    "type",
    "title",
    "content",
    "project",
    "scope",
    "topic_key",
    "created_at",
    "updated_at",
    "deleted_at",
    "tool_name",
    "revision_count",
]
go_observations = (
    st.dictionaries(
        st.sampled_from(GO_FIELDS),
        plausible
        | st.sampled_from(
            [
                "2026-02-20 09:30:12",
                "2026-02-20T09:30:12Z",
                "decision",
                "../x",
                "0000-00-00 00:00:00",
                "9999-12-31 23:59:59",
            ]
        ),
        max_size=len(GO_FIELDS),
    )
    | plausible
)
go_documents = st.fixed_dictionaries(
    {},
    optional={
        "version": plausible,
        "exported_at": plausible,
        "sessions": st.none() | st.lists(plausible, max_size=2) | plausible,
        "observations": st.none() | st.lists(go_observations, max_size=6) | plausible,
        "prompts": st.none() | st.lists(plausible, max_size=2),
    },
)


@pytest.mark.slow
@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(go_documents, st.booleans())
def test_fuzz_the_go_engrams_documents(document: dict[str, Any], indent: bool) -> None:
    import_file(orjson.dumps(document, option=orjson.OPT_INDENT_2 if indent else 0))


@pytest.mark.slow
@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(
    st.lists(
        events().map(line_of)
        | mcp_engram_lines()
        | mcp_memory_lines
        | st.sampled_from([b"", b"<<<<<<< HEAD", b"{", b"\xff", b"x" * 5000])
        | st.binary(max_size=40),
        max_size=12,
    )
)
def test_fuzz_import_files(lines: list[bytes]) -> None:
    import_file(b"\n".join(lines))
