"""Import from mcp-engram, the MCP memory server and Engram's own export; export back out."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from conftest import ACTOR, cli, git, markdown_sections

from engram.api import Engram
from engram.domain.interop import detect, from_micros
from engram.storage import events as ev

FIXTURES = Path(__file__).parent.parent / "fixtures"
MCP_ENGRAM = FIXTURES / "mcp-engram"
MCP_MEMORY = FIXTURES / "mcp-memory" / "memory.jsonl"
ENGRAM_EXPORT = FIXTURES / "engram-export.jsonl"
SOURCES = {"mcp-engram": MCP_ENGRAM, "mcp-memory": MCP_MEMORY, "engram": ENGRAM_EXPORT}


def store_state(engram: Engram) -> dict[str, object]:
    """Everything an import could write: the store's files and its commit."""
    root = engram.personal.root
    files = {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }
    return {"files": files, "head": git(root, "rev-parse", "HEAD").strip()}


def imported_lines(engram: Engram) -> list[bytes]:
    return sorted(e.to_line() for e in engram.export_events() if e.kind != "store.created")


def test_formats_are_told_apart_by_layout_and_content() -> None:
    assert detect(MCP_ENGRAM) == "mcp-engram"
    assert detect(MCP_ENGRAM / "events") == "mcp-engram"
    assert detect(MCP_ENGRAM / "events" / "events-20260511.jsonl") == "mcp-engram"
    assert detect(MCP_MEMORY) == "mcp-memory"
    assert detect(MCP_MEMORY.parent) == "mcp-memory"
    assert detect(ENGRAM_EXPORT) == "engram"


def test_an_unknown_file_asks_for_the_format(home_store: Engram, tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("just some text\n")
    result = cli("import", str(other))
    assert result.exit_code == 2
    assert "cannot tell the format" in result.stderr and "--format" in result.stderr


def test_mcp_engram_log_becomes_tasks_checkpoints_failures_memories_sessions(
    home_store: Engram,
) -> None:
    report = home_store.import_from(MCP_ENGRAM)
    assert report.ignored == {"session.memory_recall": 1, "snapshot.create": 1}
    assert report.commit is not None
    engram = Engram()
    [task] = engram.tasks(include_closed=True)
    assert task.name == "Add rate limiting to the public API"
    assert task.status == "done"  # planning -> in_progress -> done
    assert task.goal.startswith("Every public endpoint answers 429")
    [progress] = task.progress
    assert (progress.feature, progress.status) == ("Token bucket middleware", "done")
    [failure] = task.failures
    assert failure.component == "ratelimit"
    assert failure.root_cause == "one Redis connection per request"
    assert failure.fix == "share a connection pool"
    saved = engram.checkpoints(task.id)
    assert [c.reason for c in saved] == ["plan_change", "failure", "handoff"]
    handoff = saved[-1]
    assert handoff.summary == "Middleware done; Redis pool next"  # from the handoff memory
    assert handoff.record["next"] == [
        "Share one pool across workers",
        "Load test /search at 2k rps",
    ]
    assert handoff.record["must_not_redo"] == [
        "Create the Redis instance in staging (side effect emitted)"
    ]
    assert handoff.record["must_preserve"] == ["Keep the public API response format unchanged"]
    assert [f["path"] for f in handoff.record["working_set"]["files"]] == [
        "src/ratelimit.py",
        "tests/test_ratelimit.py",
    ]
    assert saved[1].summary.startswith("failed in ratelimit: Redis timeouts")
    # The source's own times, not the time of the import.
    assert handoff.time.startswith("2026-05-10T11:30:44.290476")
    memories = {m.content: m for m in engram.memories(include_forgotten=True, limit=None)}
    pool = memories["A Redis pool of 32 connections handles 2k rps (measured with k6)"]
    assert (pool.kind, pool.tags, pool.importance, pool.version) == (
        "note",
        ("assumption",),
        0.8,
        2,
    )
    gateway = memories["The API gateway is a plain nginx proxy; limits belong in the application"]
    assert gateway.status == "forgotten"
    sessions = {s.state: s for s in engram.sessions()}
    assert sessions["interrupted"].reason == "rate_limit"
    assert sessions["ended"].outcome == "success"
    # Provenance: every event says where it came from.
    for event in engram.export_events():
        if event.kind != "store.created":
            assert event.data["origin"]["format"] == "mcp-engram"
            assert event.data["origin"]["id"].split(":")[0] in (
                "task",
                "memory",
                "checkpoint",
                "session",
            )
            assert isinstance(event.data["origin"]["seq"], int)
    assert engram.verify().ok
    # Only the handoff is rendered for review; the automatic checkpoints stay in the events.
    [rendered] = sorted((engram.personal.root / "handoffs" / task.id).iterdir())
    assert rendered.name.startswith("0003-")
    assert "Middleware done; Redis pool next" in rendered.read_text()
    assert "import: 16 events from mcp-engram" in git(
        engram.personal.root, "log", "-1", "--format=%s"
    )


def test_a_days_plain_file_wins_over_its_gzipped_copy(home_store: Engram, tmp_path: Path) -> None:
    """mcp-engram gzips a finished day; a .jsonl left beside its .gz is the one it reads."""
    source = tmp_path / "data"
    shutil.copytree(MCP_ENGRAM, source)
    day = source / "events" / "events-20260511.jsonl"
    with gzip.open(day.with_name(day.name + ".gz"), "wb") as handle:
        handle.write(b"this copy is never read\n")
    report = home_store.import_from(source)
    assert len(report.added) == 16


def test_mcp_memory_graph_becomes_memories(home_store: Engram) -> None:
    report = home_store.import_from(MCP_MEMORY)
    assert report.counts() == {"memory.created": 8}
    found = {m.content: m for m in Engram().memories(limit=None)}
    assert found["billing-service: Written in Go 1.22"].tags == ("service",)
    assert found["Priya: Owns the billing service"].tags == ("person",)
    assert "Priya maintains billing-service" in found
    assert found["billing-service consumes Stripe webhooks"].tags == ("consumes",)
    assert "Stripe webhooks is an entity of type integration" in found  # no observations
    created = [e for e in Engram().export_events() if e.kind == "memory.created"]
    origins = {e.data["origin"]["id"] for e in created}
    assert {"entity:Priya", "relation:Priya|maintains|billing-service"} <= origins
    assert {e.data["origin"]["format"] for e in created} == {"mcp-memory"}


def test_a_file_saved_on_windows_imports_and_utf16_is_refused_naming_the_conversion(
    home_store: Engram, tmp_path: Path
) -> None:
    """A UTF-8 byte order mark and CRLF line ends (Notepad, PowerShell 7) change nothing; UTF-16
    (PowerShell 5's `>`) stops the import, with nothing written, naming how to convert it."""
    text = MCP_MEMORY.read_text(encoding="utf-8").replace("\n", "\r\n")
    windows = tmp_path / "memory.jsonl"
    windows.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    result = cli("import", str(windows))
    assert result.exit_code == 0, result.stderr
    assert "skipped" not in result.stdout
    assert "imported 8 events from mcp-memory" in result.stdout
    assert "Priya: Owns the billing service" in {m.content for m in Engram().memories(limit=None)}
    before = store_state(home_store)
    wide = tmp_path / "wide.jsonl"
    wide.write_bytes(text.encode("utf-16"))
    for args in ([str(wide)], [str(wide), "--format", "mcp-memory"]):
        result = cli("import", *args)
        assert result.exit_code == 2
        assert result.stderr.startswith(f"error: {wide} is UTF-16 text")
        assert "nothing was imported" in result.stderr and "iconv -f UTF-16" in result.stderr
    assert store_state(home_store) == before


@pytest.mark.parametrize("fmt", sorted(SOURCES))
def test_importing_twice_adds_nothing(home_store: Engram, fmt: str) -> None:
    first = home_store.import_from(SOURCES[fmt])
    assert first.added
    before = store_state(home_store)
    second = Engram().import_from(SOURCES[fmt])
    assert second.added == [] and second.already == len(first.added)
    assert second.commit is None
    assert store_state(home_store) == before


def test_two_clones_importing_the_same_log_write_identical_lines(
    home_store: Engram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """So that git merges their two imports as one: same ids, same bytes."""
    home_store.import_from(MCP_ENGRAM)
    monkeypatch.setenv("ENGRAM_HOME", str(tmp_path / "second"))
    monkeypatch.setenv("ENGRAM_ACTOR", "Someone Else <else@example.com>")
    monkeypatch.setenv("ENGRAM_MACHINE", "elsewhere")
    other = Engram()
    other.init()
    other.import_from(MCP_ENGRAM)
    monkeypatch.setenv("ENGRAM_HOME", str(tmp_path / "home" / ".engram"))
    assert imported_lines(Engram()) == imported_lines(other)


@pytest.mark.parametrize("fmt", sorted(SOURCES))
def test_dry_run_shows_what_would_be_added_and_writes_nothing(home_store: Engram, fmt: str) -> None:
    before = store_state(home_store)
    result = cli("import", "--dry-run", str(SOURCES[fmt]))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count("would add: ") >= 8
    assert "dry run: nothing written" in result.stdout
    assert store_state(home_store) == before
    assert Engram().export_events()[-1].kind == "store.created"  # still only that


def _damage_mcp_engram(tmp_path: Path) -> tuple[Path, str]:
    source = tmp_path / "data"
    shutil.copytree(MCP_ENGRAM, source)
    day = source / "events" / "events-20260511.jsonl"
    lines = day.read_text().splitlines(keepends=True)
    lines[2] = lines[2][:40] + "\n"  # a line cut short
    day.write_text("".join(lines))
    return source, f"{day}:3: invalid JSON (unexpected end of data)"


def _damage_mcp_engram_gzip(tmp_path: Path) -> tuple[Path, str]:
    source = tmp_path / "data"
    shutil.copytree(MCP_ENGRAM, source)
    day = source / "events" / "events-20260510.jsonl.gz"
    day.write_bytes(day.read_bytes()[:300])  # a truncated gzip stream
    return source, f"{day}:"  # the line where the stream breaks


def _damage_mcp_memory(tmp_path: Path) -> tuple[Path, str]:
    source = tmp_path / "memory.jsonl"
    lines = MCP_MEMORY.read_text().split("\n")
    lines[3] = json.dumps({"type": "relation", "from": "Priya", "to": "billing-service"})
    source.write_text("\n".join(lines))
    return source, f"{source}:4: relation without 'relationType'"


def _damage_engram_export(tmp_path: Path) -> tuple[Path, str]:
    source = tmp_path / "export.jsonl"
    lines = ENGRAM_EXPORT.read_bytes().split(b"\n")
    lines.insert(4, b"<<<<<<< HEAD")
    source.write_bytes(b"\n".join(lines))
    return source, f"{source}:5: git conflict marker"


@pytest.mark.parametrize(
    "damage",
    [_damage_mcp_engram, _damage_mcp_engram_gzip, _damage_mcp_memory, _damage_engram_export],
)
def test_a_damaged_line_is_skipped_and_reported_and_the_rest_imported(
    home_store: Engram, tmp_path: Path, damage
) -> None:
    source, expected = damage(tmp_path)
    result = cli("import", str(source))
    assert result.exit_code == 0, result.stderr
    assert "skipped 1 damaged or refused source records" in result.stdout
    [reported] = [line.strip() for line in result.stdout.splitlines() if line.startswith("    ")]
    assert reported.startswith(expected)
    engram = Engram()
    assert len(engram.export_events()) > 2  # more than the store's own event and one more
    assert engram.verify().ok


def test_a_secret_in_the_input_is_refused_unless_redacted(
    home_store: Engram, tmp_path: Path
) -> None:
    source = tmp_path / "memory.jsonl"
    key = "sk-ant-" + "a1B2c3D4" * 5
    source.write_text(
        json.dumps(
            {
                "type": "entity",
                "name": "deploy",
                "entityType": "job",
                "observations": [f"uses the key {key}"],
            }
        )
        + "\n"
        + json.dumps(
            {
                "type": "entity",
                "name": "api",
                "entityType": "service",
                "observations": ["Written in Go"],
            }
        )
    )
    report = Engram().import_from(source)
    [(where, why)] = report.skipped
    assert where == f"{source}:1" and why.startswith("content contains what looks like a secret")
    assert "--redact" in why and key not in why
    assert [m.content for m in Engram().memories()] == ["api: Written in Go"]
    Engram().import_from(source, redact=True)
    [memory] = [m for m in Engram().memories() if m.content.startswith("deploy")]
    assert key not in memory.content and "[REDACTED:" in memory.content


def _native_history(engram: Engram) -> str:
    session = engram.session_start(agent="codex")
    task = engram.task_create("Add OAuth login", goal="Users can sign in with GitHub")
    engram.progress(task.id, "Register the OAuth app", component="auth")
    engram.failure(task.id, "Callback returns 500", component="auth", root_cause="cookie not set")
    engram.handoff(
        task.id,
        summary="Callback next",
        next=["Write the callback"],
        must_not_redo=["Create the OAuth app"],
    )
    engram.remember("Use PKCE for the OAuth flow", kind="decision", task=task.id)
    gone = engram.remember("The callback URL is /auth/cb", kind="fact")
    engram.forget(gone.id, reason="moved to /oauth/callback")
    engram.session_end(outcome="success", session_id=session.id)
    return task.id


def test_export_then_import_gives_back_the_same_events(
    home_store: Engram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task_id = _native_history(home_store)
    out = tmp_path / "out" / "engram.jsonl"
    out.parent.mkdir()
    result = cli("export", str(out))
    assert result.exit_code == 0 and "exported" in result.stdout
    exported = out.read_bytes()
    assert exported.endswith(b"\n") and exported.count(b"\n") == len(Engram().export_events())
    monkeypatch.setenv("ENGRAM_HOME", str(tmp_path / "elsewhere"))
    other = Engram()
    other.init()
    report = other.import_from(out)
    assert report.ignored == {"store.created (it describes the exported store)": 1}
    assert other.verify().ok
    again = Engram()
    assert imported_lines(again) == sorted(
        line + b"\n" for line in exported.splitlines() if b'"kind":"store.created"' not in line
    )
    assert again.task(task_id).failures[0].root_cause == "cookie not set"
    assert [c.summary for c in again.checkpoints(task_id)][-1] == "Callback next"
    assert (again.personal.root / "handoffs" / task_id).is_dir()
    # And it does not come in twice.
    assert Engram().import_from(out).added == []


def test_citations_pinned_files_and_failure_candidates_come_back_unchanged(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a write in a repository adds (a memory's citations, a handoff's pinned blobs, the
    command a failure is linked to) is part of the events: an export restores byte for byte."""
    (project / "src").mkdir()
    (project / "src" / "auth.py").write_text("def login():\n    return True\n")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "auth")
    command = {"event": "command", "command": "pytest tests/test_auth.py", "exit_code": 1}
    captured = json.dumps({**command, "output": "FAILED test_login: callback state mismatch"})
    assert cli("capture", input=captured + "\n", cwd=project).exit_code == 0
    with Engram(cwd=project) as engram:
        task = engram.task_create("Add OAuth login")
        engram.failure(task.id, "pytest tests/test_auth.py fails: callback state mismatch")
        engram.handoff(task.id, summary="Callback next", files=["src/auth.py"])
        memory = engram.remember("The login lives in src/auth.py", cite=["src/auth.py"])
        engram.update(memory.id, "The login lives in src/auth.py, def login")
    assert Engram(cwd=project).task(task.id).failures[0].candidate
    out = tmp_path / "engram.jsonl"
    assert cli("export", "--project", str(out), cwd=project).exit_code == 0
    exported = [line for line in out.read_bytes().splitlines() if b"store.created" not in line]
    assert b'"citations":[{' in out.read_bytes() and b'"blob"' in out.read_bytes()
    monkeypatch.setenv("ENGRAM_HOME", str(tmp_path / "elsewhere"))
    other = Engram()
    other.init()
    report = other.import_from(out)
    assert report.skipped == [] and len(report.added) == len(exported)
    assert imported_lines(Engram()) == sorted(line + b"\n" for line in exported)
    assert Engram().get(memory.id).citations[0]["path"] == "src/auth.py"


def test_export_refuses_to_overwrite_unless_forced(home_store: Engram, tmp_path: Path) -> None:
    out = tmp_path / "engram.jsonl"
    out.write_text("keep me\n")
    result = cli("export", str(out))
    assert result.exit_code == 2 and "--force" in result.stderr
    assert out.read_text() == "keep me\n"
    assert cli("export", "--force", str(out)).exit_code == 0
    assert out.read_text() != "keep me\n"


def test_export_to_stdout(home_store: Engram) -> None:
    home_store.remember("Tests need ENGRAM_HOME set", kind="gotcha")
    result = cli("export", "-")
    kinds = [json.loads(line)["kind"] for line in result.stdout.splitlines()]
    assert kinds == ["store.created", "memory.created"]
    result = cli("export", "--format", "markdown", "-")
    assert result.exit_code == 2 and "directory" in result.stderr


def test_markdown_export_has_a_file_per_task_and_memories_by_kind(
    home_store: Engram, tmp_path: Path
) -> None:
    task_id = _native_history(home_store)
    home_store.remember("Staging runs on the old VPN", valid_until="2020-01-01", at="2019-06-01")
    home_store.remember("Deploys freeze over the holidays", valid_from="2999-12-20")
    out = tmp_path / "md"
    result = cli("export", "--format", "markdown", str(out))
    assert result.exit_code == 0, result.stderr
    [task_file] = (out / "tasks").iterdir()
    assert task_file.name.startswith(task_id[:8]) and task_file.name.endswith("add-oauth-login.md")
    text = task_file.read_text()
    assert text.startswith("# Task: Add OAuth login")
    for expected in (
        "## Goal",
        "Users can sign in with GitHub",
        "[done] Register the OAuth app",
        "[auth] Callback returns 500",
        "root cause: cookie not set",
        "[decision] Use PKCE for the OAuth flow",
        "### Checkpoint 1 (failure)",
        "### Checkpoint 2 (handoff)",
        "#### Must not redo",
        "- Create the OAuth app",
        "#### Changes since checkpoint 1",
    ):
        assert expected in text, expected
    memories = (out / "memories.md").read_text()
    assert "## Decisions (1)" in memories and "- Use PKCE for the OAuth flow" in memories
    assert "## Forgotten and superseded (1)" in memories
    assert "forgotten: moved to /oauth/callback" in memories
    # Out of its validity window, a memory says so: recall leaves it out, the archive does not.
    assert "happened 2019-06-01 · valid until 2020-01-01 (expired)</sub>" in memories
    assert "valid from 2999-12-20 (not yet valid)</sub>" in memories
    index = (out / "README.md").read_text()
    assert f"(tasks/{task_file.name})" in index and "(memories.md)" in index
    # A non-empty directory is not written into unless asked.
    again = cli("export", "--format", "markdown", str(out))
    assert again.exit_code == 2 and "--force" in again.stderr


def test_markdown_export_shows_hostile_text_as_text(
    home_store: Engram,
    tmp_path: Path,
) -> None:
    """Text from other clones cannot add a heading, hide a section or carry HTML in the
    export."""
    task = home_store.task_create("Fix <!-- the ] login", goal="# Progress\n<script>x</script>")
    home_store.progress(task.id, "one\n## Failures\n- fake", note="<!-- hide")
    home_store.failure(task.id, "```\nunclosed", root_cause="> quoted")
    home_store.remember("first\n\n## Forgotten and superseded (9)\n<!--", task=task.id)
    assert cli("export", "--format", "markdown", str(tmp_path / "md")).exit_code == 0
    [task_file] = (tmp_path / "md" / "tasks").iterdir()
    headings, items = markdown_sections(task_file.read_text(), nested=True)
    assert headings == [
        "Task: Fix <!-- the ] login",
        "Goal",
        "Progress",
        "Failures",
        "Memories of this task",
        "Checkpoints",
        "Checkpoint 1 (failure)",
        "Summary",
        "Goal",
        "Completed",
        "In progress",
        "Blocked",
        "Next steps (in order)",
        "Must not redo",
        "Must preserve",
        "Open questions",
        "Working set",
        "Changes since the start",
    ]
    assert items["Memories of this task"] == ["[fact] first ## Forgotten and superseded (9) <!--"]
    memories = (tmp_path / "md" / "memories.md").read_text()
    headings, _ = markdown_sections(memories.replace("<sub>", "").replace("</sub>", ""))
    assert headings == ["Memories", "Facts (1)"]
    _, index = markdown_sections((tmp_path / "md" / "README.md").read_text())
    assert index["Tasks"][0] == "Fix <!-- the ] login — in_progress, 1 checkpoint"


def test_a_log_that_begins_mid_history_still_imports(home_store: Engram, tmp_path: Path) -> None:
    """Older days may be gone: what the remaining log refers to is created where needed."""
    day = tmp_path / "events" / "events-20260601.jsonl"
    day.parent.mkdir()
    lines = [
        {
            "ts": "2026-06-01T08:00:00.000001Z",
            "seq": 40,
            "kind": "task.update",
            "payload": {"task_id": 7, "status": "blocked", "goal": None, "metadata": None},
        },
        {
            "ts": "2026-06-01T08:00:01.000001Z",
            "seq": 41,
            "kind": "session.end",
            "payload": {"session_id": "auto-0123456789ab", "end_type": "handoff"},
        },
        {
            "ts": "2026-06-01T08:00:02.000001Z",
            "seq": 42,
            "kind": "memory.update",
            "payload": {"memory_id": 3, "content": "x", "importance": None, "metadata": None},
        },
        {
            "ts": "2026-06-01T08:00:03.000001Z",
            "seq": 43,
            "kind": "drift.detected",
            "payload": {"task_id": 7, "composite": 0.4, "violations": []},
        },
    ]
    day.write_text(
        "".join(
            json.dumps({**line, "engram_version": "0.20.1", "schema_version": 1}) + "\n"
            for line in lines
        )
    )
    report = home_store.import_from(tmp_path, format="mcp-engram")
    assert report.counts() == {
        "task.created": 1,
        "task.updated": 1,
        "session.started": 1,
        "session.ended": 1,
    }
    assert report.ignored == {"memory.update of a memory not imported": 1, "drift.detected": 1}
    [task] = Engram().tasks()
    assert (task.name, task.status) == ("task 7", "blocked")
    assert [s.state for s in Engram().sessions()] == ["ended"]


def test_import_reports_as_json(home_store: Engram) -> None:
    result = cli("import", "--json", "--dry-run", str(MCP_MEMORY))
    report = json.loads(result.stdout)
    assert report["format"] == "mcp-memory" and report["dry_run"] is True
    assert report["added"] == 8 and report["by_kind"] == {"memory.created": 8}
    assert len(report["events"]) == 8


# -- untrusted input -------------------------------------------------------------------------

LINUS = "Linus Torvalds <torvalds@example.org>"


def _event(
    kind: str,
    data: dict[str, object],
    *,
    actor: str = LINUS,
    machine: str = "laptop",
    clock: int | None = None,
    session: str | None = None,
) -> bytes:
    """An event line as `engram export` writes it (an hour old unless `clock` says)."""
    clock = clock or time.time_ns() // 1000 - 3_600_000_000
    return ev.Event(
        id=ev.new_event_id(clock // 1000),
        kind=kind,
        clock=clock,
        time=ev.format_time(from_micros(clock)),
        actor=actor,
        session=session,
        machine=machine,
        data=data,
    ).to_line()


def _memory(content: str = "The deploy runs from main only", **fields: object) -> dict[str, object]:
    return {
        "memory": ev.new_entity_id(),
        "content": content,
        "kind": "fact",
        "tags": [],
        "scope": None,
        "source": "user-said",
        "importance": 0.5,
        "valid_from": None,
        "valid_until": None,
        **fields,
    }


HOSTILE_EXPORT = [  # (line, what the report says of it)
    (
        lambda: _event("memory.created", _memory("x" * 200_000)),
        "content is 200000 bytes, over the limit of 32768 (setting limits.content_bytes)",
    ),
    (
        lambda: _event("memory.created", _memory(tags=["../../etc"])),
        "tag '../../etc' must not be an absolute path or contain '..'",
    ),
    (
        lambda: _event("memory.created", _memory(scope="a scope")),
        "scope 'a scope' may hold only letters, digits",
    ),
    (
        lambda: _event(
            "task.created",
            {
                "task": "t1aaaaaaaaaa",
                "name": "Deploy\nrm -rf /",
                "goal": "",
                "status": "open",
                "parent": None,
                "tags": [],
            },
        ),
        "name must be one line",
    ),
    (
        lambda: _event(
            "task.created",
            {
                "task": "t2aaaaaaaaaa",
                "name": "../../etc/passwd",
                "goal": "",
                "status": "open",
                "parent": None,
                "tags": [],
            },
        ),
        "task name '../../etc/passwd' must not be an absolute path",
    ),
    (lambda: _event("memory.created", _memory(kind="nonsense")), "unknown memory kind"),
    (
        lambda: _event("memory.created", _memory(), actor="Mallory\nCo-authored-by: Linus"),
        "actor is longer than 256 characters or holds control characters",
    ),
    (
        lambda: _event("memory.created", _memory(), machine="box\x1b[2J"),
        "machine is longer than 256 characters or holds control characters",
    ),
    (
        lambda: _event("memory.created", _memory(note="kept?")),
        "memory.created with unknown field(s) 'note'",
    ),
    (
        lambda: _event("memory.created", _memory(), clock=4_000_000_000_000_000),
        "days ahead of this machine's time",
    ),
    (lambda: _event("memory.created", _memory(), session="../x"), "is not a session id"),
    (
        lambda: _event(
            "checkpoint.saved",
            {
                "task": "t3aaaaaaaaaa",
                "checkpoint": "c1aaaaaaaaaa",
                "seq": 1,
                "reason": "handoff",
                "next": ["a step"] * 2 + [f"step {i}" for i in range(300)],
            },
        ),
        "next has 302 items, over the limit of 200 (setting limits.list_items)",
    ),
    (
        lambda: _event(
            "checkpoint.saved",
            {
                "task": "t3aaaaaaaaaa",
                "checkpoint": "c2aaaaaaaaaa",
                "seq": 1,
                "reason": "handoff",
                "working_set": {"files": [{"path": "/etc/shadow", "commit": None}]},
            },
        ),
        "working-set file '/etc/shadow' must be a path inside the repository",
    ),
    (
        lambda: _event(
            "memory.created",
            _memory(citations=[{"path": "../../etc/passwd", "commit": "a" * 40, "blob": "b" * 40}]),
        ),
        "citation 1 is not a tracked file pinned to a commit and blob id",
    ),
    (
        lambda: _event(
            "checkpoint.saved",
            {
                "task": "t3aaaaaaaaaa",
                "checkpoint": "c3aaaaaaaaaa",
                "seq": 1,
                "reason": "handoff",
                "working_set": {"files": [{"path": "a.py", "commit": None, "blob": "HEAD"}]},
            },
        ),
        "working-set file 'a.py': blob is not a git id",
    ),
    (
        lambda: _event(
            "session.started",
            {"session_id": "s1aaaaaaaaaa", "agent": "evil", "pid": 1, "head": None},
        ),
        "unknown agent 'evil'; use one of",
    ),
    (
        lambda: _event(
            "memory.created", _memory(origin={"format": "engram", "id": "x", "actor": "a\nb"})
        ),
        "origin actor 'a\\nb' must be one line",
    ),
    (
        lambda: _event("plugin.installed", {"url": "https://example.org/x.sh"}),
        "event kind 'plugin.installed' is not one this Engram writes",
    ),
]


def test_an_export_is_checked_like_a_write_and_a_bad_record_is_skipped(
    home_store: Engram, tmp_path: Path
) -> None:
    """Engram's own format gets the checks of the API: each bad line is skipped and reported
    with its number and why, and the good lines around them are imported."""
    source = tmp_path / "export.jsonl"
    good = _event("memory.created", _memory("Staging is rebuilt every night"))
    lines = (
        [good]
        + [make() for make, _ in HOSTILE_EXPORT]
        + [_event("memory.created", _memory("Releases are tagged vX.Y.Z"))]
    )
    source.write_bytes(b"".join(lines))
    result = cli("import", str(source))
    assert result.exit_code == 0, result.stderr
    assert f"skipped {len(HOSTILE_EXPORT)} damaged or refused source records" in result.stdout
    reported = [line.strip() for line in result.stdout.splitlines() if line.startswith("    ")]
    assert len(reported) == len(HOSTILE_EXPORT)
    for number, ((_, why), line) in enumerate(zip(HOSTILE_EXPORT, reported, strict=True), start=2):
        assert line.startswith(f"{source}:{number}: "), line
        assert why in line, (why, line)
        assert "\n" not in line and "\x1b" not in line
    engram = Engram()
    assert sorted(m.content for m in engram.memories()) == [
        "Releases are tagged vX.Y.Z",
        "Staging is rebuilt every night",
    ]
    assert engram.tasks(include_closed=True) == [] and engram.sessions() == []
    assert engram.verify().ok


def test_a_secret_in_an_export_is_refused_or_redacted_like_in_a_write(
    home_store: Engram, tmp_path: Path
) -> None:
    key = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2
    source = tmp_path / "export.jsonl"
    source.write_bytes(
        _event("memory.created", _memory(f"CI pushes with {key}"))
        + _event("memory.created", _memory("tagged", tags=[key.lower()]))
    )
    report = Engram().import_from(source, dry_run=True)
    assert [w for w, _ in report.skipped] == [f"{source}:1", f"{source}:2"]
    assert "--redact" in report.skipped[0][1] and key not in str(report.skipped)
    assert "--redact" not in report.skipped[1][1]  # a tag cannot be redacted
    report = Engram().import_from(source, redact=True)
    assert [w for w, _ in report.skipped] == [f"{source}:2"]
    [memory] = Engram().memories()
    assert memory.content == "CI pushes with [REDACTED:GitHub Personal Access Token]"


def test_imported_events_are_written_by_the_importer_with_the_author_as_provenance(
    home_store: Engram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An export may say anything about who wrote it: the import is written in the name of
    whoever runs it, and the author it claims is kept only in `data.origin`."""
    ada = "Ada Lovelace <ada@example.com>"
    report = home_store.import_from(ENGRAM_EXPORT)
    assert report.added and not report.skipped
    root = home_store.personal.root
    imported = [e for e in Engram().export_events() if e.kind != "store.created"]
    assert {e.actor for e in imported} == {ACTOR}
    assert {e.machine for e in imported} == {None}
    assert {e.data["origin"]["actor"] for e in imported} == {ada}
    assert {e.data["origin"]["machine"] for e in imported} == {"laptop"}
    exported = [json.loads(line) for line in ENGRAM_EXPORT.read_text().splitlines()]
    assert {e.data["origin"]["id"] for e in imported} == {
        e["id"] for e in exported if e["kind"] != "store.created"
    }
    assert not {e.id for e in imported} & {e["id"] for e in exported}
    assert git(root, "log", "-1", "--format=%an <%ae>").strip() == ACTOR
    assert "Ada" not in git(root, "log", "-1", "--format=%B")
    # The log shows who wrote each event here, and whom it was imported from.
    logged = cli("log", "-n", "500").stdout.splitlines()
    assert logged and all(
        line.endswith(f"— {ACTOR} (imported from {ada}, from an Engram export)")
        for line in logged
        if "initialize" not in line
    )
    assert Engram().import_from(ENGRAM_EXPORT).added == []
    ours = tmp_path / "ours.jsonl"
    home_store.export(ours)
    # Ada restores her own archive: her events come back unchanged, byte for byte.
    monkeypatch.setenv("ENGRAM_HOME", str(tmp_path / "ada"))
    monkeypatch.setenv("ENGRAM_ACTOR", ada)
    mine = Engram()
    mine.init()
    mine.import_from(ENGRAM_EXPORT)
    assert imported_lines(Engram()) == sorted(
        line.encode() + b"\n"
        for line in ENGRAM_EXPORT.read_text().splitlines()
        if '"kind":"store.created"' not in line
    )
    # What was rebuilt from her events is recognised as hers: nothing comes back twice.
    assert Engram().import_from(ours).added == []


def _with_long_line(fmt: str, tmp_path: Path) -> Path:
    """A source of each format with a 2 MB line after its first line."""
    long = b'{"content": "' + b"x" * 2_000_000 + b'"}\n'
    if fmt == "mcp-engram":
        source = tmp_path / "data" / "events"
        source.mkdir(parents=True)
        day = MCP_ENGRAM / "events" / "events-20260511.jsonl"
        lines = day.read_bytes().splitlines(keepends=True)
        (source / day.name).write_bytes(lines[0] + long + b"".join(lines[1:]))
        return source / day.name
    original = SOURCES[fmt].read_bytes().splitlines(keepends=True)
    original[0] = original[0] if original[0].endswith(b"\n") else original[0] + b"\n"
    source = tmp_path / f"{fmt}.jsonl"
    source.write_bytes(original[0] + long + b"".join(original[1:]))
    return source


@pytest.mark.parametrize("fmt", sorted(SOURCES))
def test_a_line_over_the_limit_is_skipped_and_the_rest_imported(
    home_store: Engram, tmp_path: Path, fmt: str
) -> None:
    home_store.config_set("limits.import_line_bytes", "65536")
    source = _with_long_line(fmt, tmp_path)
    result = cli("import", "--format", fmt, str(source))
    assert result.exit_code == 0, result.stderr
    assert (
        f"    {source}:2: line longer than 65536 bytes (setting limits.import_line_bytes)"
    ) in result.stdout.splitlines()
    assert len(result.stdout.splitlines()) < 10
    report = Engram().import_from(SOURCES[fmt])
    assert report.added == [] or fmt == "mcp-engram"  # the rest came in the first time


@pytest.mark.parametrize("fmt", sorted(SOURCES))
def test_input_over_the_size_limit_stops_the_import_and_writes_nothing(
    home_store: Engram, fmt: str
) -> None:
    home_store.config_set("limits.import_bytes", "500")
    before = store_state(home_store)
    result = cli("import", str(SOURCES[fmt]))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "over the limit of 500 bytes (setting limits.import_bytes" in result.stderr
    assert "nothing was imported" in result.stderr
    assert "engram config set limits.import_bytes" in result.stderr
    assert store_state(home_store) == before


PEAK_RSS = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[1:])
_, status, usage = os.wait4(child.pid, 0)
print(usage.ru_maxrss, os.waitstatus_to_exitcode(status))  # KiB on Linux
"""


def test_a_gzip_bomb_stops_at_the_size_limit_in_little_memory(
    home_store: Engram, tmp_path: Path
) -> None:
    """300 MB of zeros without a newline, gzipped to 300 KB: the import stops with the limit
    named and never holds the line whole."""
    bomb = tmp_path / "events-20260101.jsonl.gz"
    packer = zlib.compressobj(1, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    with open(bomb, "wb") as handle:
        handle.writelines(packer.compress(zeros) for _ in range(300))
        handle.write(packer.flush())
    assert bomb.stat().st_size < 2_000_000
    before = store_state(home_store)
    # Measured from a small parent: a child's peak RSS counts the memory of the process that
    # forked it (pytest's, here) until it runs the new program.
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            PEAK_RSS,
            sys.executable,
            "-m",
            "engram",
            "import",
            "--dry-run",
            str(bomb),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    peak_kib, code = map(int, done.stdout.split()[-2:])
    assert code == 2, done.stderr
    assert done.stderr.count("\n") == 1
    assert "over the limit of 268435456 bytes (setting limits.import_bytes" in done.stderr
    assert peak_kib < 200 * 1024, f"peak RSS {peak_kib} KiB"
    assert store_state(home_store) == before


def _log_line(seq: object, kind: str, payload: dict[str, object]) -> str:
    """A line of mcp-engram's log, an hour old."""
    moment = ev.format_time(from_micros(time.time_ns() // 1000 - 3_600_000_000))
    return (
        json.dumps(
            {
                "ts": moment,
                "seq": seq,
                "kind": kind,
                "payload": payload,
                "engram_version": "0.20.1",
                "schema_version": 1,
            }
        )
        + "\n"
    )


def test_an_mcp_engram_log_is_checked_like_writes(home_store: Engram, tmp_path: Path) -> None:
    day = tmp_path / "events" / "events-20260601.jsonl"
    day.parent.mkdir()
    lines = [
        _log_line(1, "task.create", {"task_id": 1, "name": "Ship the API", "goal": "v1"}),
        _log_line(2, "memory.store", {"memory_id": 1, "content": "x" * 200_000}),
        _log_line(3, "task.create", {"task_id": 2, "name": "../../etc/passwd"}),
        _log_line(
            4,
            "checkpoint.write",
            {
                "checkpoint_id": 1,
                "task_id": 1,
                "state": {"preferred_next": [f"step {i}" for i in range(500)]},
            },
        ),
        _log_line(5, "task.update", {"task_id": "7" * 200, "status": "done"}),
        _log_line(
            {"not": "a number"},
            "memory.store",
            {"memory_id": 2, "content": "Rate limits are per key"},
        ),
        _log_line(7, "weird\x1b[2Jkind", {}),
        _log_line(
            8,
            "memory.store",
            {
                "memory_id": 3,
                "content": "The gateway is nginx",
                "metadata": {"type": "failure", "component": "ghp_" + "a1B2c3D4e5" * 4},
            },
        ),
        _log_line(
            9,
            "memory.store",
            {"memory_id": 4, "content": "Keys rotate monthly", "metadata": {"task_id": 1}},
        ),
    ]
    day.write_text("".join(lines))
    report = home_store.import_from(tmp_path, format="mcp-engram")
    assert [where for where, _ in report.skipped] == [f"{day}:{n}" for n in (2, 3, 4, 5, 6, 8)]
    why = dict(report.skipped)
    assert "content is 200000 bytes, over the limit of 32768" in why[f"{day}:2"]
    assert "task name '../../etc/passwd' must not be an absolute path" in why[f"{day}:3"]
    assert (
        "next has 500 items, over the limit of 200 (setting limits.list_items)" in why[f"{day}:4"]
    )
    assert "is not an id (one line of at most 128 characters)" in why[f"{day}:5"]
    assert "is not a whole number" in why[f"{day}:6"]
    assert "looks like a secret" in why[f"{day}:8"]
    assert report.ignored == {"'weird\\x1b[2Jkind' (not a kind)": 1}
    engram = Engram()
    [task] = engram.tasks()
    assert task.name == "Ship the API" and task.checkpoints == ()
    assert [m.content for m in engram.memories()] == ["Keys rotate monthly"]
    assert engram.verify().ok


def test_an_mcp_memory_graph_is_checked_like_writes(home_store: Engram, tmp_path: Path) -> None:
    source = tmp_path / "memory.jsonl"
    token = "ghp_" + "a1B2c3D4e5" * 4
    source.write_text(
        "\n".join(
            json.dumps(item)
            for item in [
                {
                    "type": "entity",
                    "name": "api",
                    "entityType": "service",
                    "observations": ["Written in Go", "x" * 40_000],
                },
                {
                    "type": "entity",
                    "name": "deploy",
                    "entityType": token,
                    "observations": ["nightly"],
                },
                {
                    "type": "entity",
                    "name": "billing",
                    "entityType": "service",
                    "observations": ["Owned by Priya"],
                },
            ]
        )
    )
    report = home_store.import_from(source)
    assert [where for where, _ in report.skipped] == [f"{source}:1", f"{source}:2"]
    assert "content is 40005 bytes, over the limit of 32768" in report.skipped[0][1]
    assert "tag contains what looks like a secret" in report.skipped[1][1]
    assert token not in str(report.to_dict())
    assert [m.content for m in Engram().memories()] == ["billing: Owned by Priya"]
