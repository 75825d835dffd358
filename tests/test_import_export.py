"""Import from mcp-engram, the MCP memory server and Engram's own export; export back out."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from conftest import cli, git
from engram.api import Engram
from engram.interop import DamagedInputError, detect

FIXTURES = Path(__file__).parent.parent / "fixtures"
MCP_ENGRAM = FIXTURES / "mcp-engram"
MCP_MEMORY = FIXTURES / "mcp-memory" / "memory.jsonl"
ENGRAM_EXPORT = FIXTURES / "engram-export.jsonl"
SOURCES = {"mcp-engram": MCP_ENGRAM, "mcp-memory": MCP_MEMORY, "engram": ENGRAM_EXPORT}


def store_state(engram: Engram) -> dict[str, object]:
    """Everything an import could write: the store's files and its commit."""
    root = engram.personal.root
    files = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
             if p.is_file() and ".git" not in p.relative_to(root).parts}
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
        home_store: Engram) -> None:
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
    assert [c["reason"] for c in saved] == ["plan_change", "failure", "handoff"]
    handoff = saved[-1]
    assert handoff["summary"] == "Middleware done; Redis pool next"  # from the handoff memory
    assert handoff["next"] == ["Share one pool across workers", "Load test /search at 2k rps"]
    assert handoff["must_not_redo"] == ["Create the Redis instance in staging "
                                        "(side effect emitted)"]
    assert handoff["must_preserve"] == ["Keep the public API response format unchanged"]
    assert [f["path"] for f in handoff["working_set"]["files"]] == [
        "src/ratelimit.py", "tests/test_ratelimit.py"]
    assert saved[1]["summary"].startswith("failed in ratelimit: Redis timeouts")
    # The source's own times, not the time of the import.
    assert handoff["time"].startswith("2026-05-10T11:30:44.290476")
    memories = {m.content: m for m in engram.memories(include_forgotten=True, limit=None)}
    pool = memories["A Redis pool of 32 connections handles 2k rps (measured with k6)"]
    assert (pool.kind, pool.tags, pool.importance, pool.version) == (
        "note", ("assumption",), 0.8, 2)
    gateway = memories["The API gateway is a plain nginx proxy; limits belong in the application"]
    assert gateway.status == "forgotten"
    sessions = {s.state: s for s in engram.sessions()}
    assert sessions["interrupted"].reason == "rate_limit"
    assert sessions["ended"].outcome == "success"
    # Provenance: every event says where it came from.
    for event in engram.export_events():
        if event.kind != "store.created":
            assert event.data["origin"]["format"] == "mcp-engram"
            assert event.data["origin"]["id"].split(":")[0] in ("task", "memory",
                                                                "checkpoint", "session")
            assert isinstance(event.data["origin"]["seq"], int)
    assert engram.verify()["ok"]
    # Only the handoff is rendered for review; the automatic checkpoints stay in the events.
    [rendered] = sorted((engram.personal.root / "handoffs" / task.id).iterdir())
    assert rendered.name.startswith("0003-")
    assert "Middleware done; Redis pool next" in rendered.read_text()
    assert "import: 16 events from mcp-engram" in git(engram.personal.root, "log", "-1",
                                                      "--format=%s")


def test_a_days_plain_file_wins_over_its_gzipped_copy(home_store: Engram,
                                                       tmp_path: Path) -> None:
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
        home_store: Engram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
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
def test_dry_run_shows_what_would_be_added_and_writes_nothing(home_store: Engram,
                                                              fmt: str) -> None:
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
    return source, f"{day}:3: invalid JSON"


def _damage_mcp_engram_gzip(tmp_path: Path) -> tuple[Path, str]:
    source = tmp_path / "data"
    shutil.copytree(MCP_ENGRAM, source)
    day = source / "events" / "events-20260510.jsonl.gz"
    day.write_bytes(day.read_bytes()[:300])  # a truncated gzip stream
    return source, f"{day}:"


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


@pytest.mark.parametrize("damage", [_damage_mcp_engram, _damage_mcp_engram_gzip,
                                    _damage_mcp_memory, _damage_engram_export])
def test_damaged_input_is_one_clear_line_and_nothing_is_written(
        home_store: Engram, tmp_path: Path, damage) -> None:
    source, expected = damage(tmp_path)
    before = store_state(home_store)
    result = cli("import", str(source))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"error: {expected}")
    assert "nothing was imported" in result.stderr
    assert store_state(home_store) == before


def test_a_secret_in_the_input_is_refused_unless_redacted(home_store: Engram,
                                                          tmp_path: Path) -> None:
    source = tmp_path / "memory.jsonl"
    key = "sk-ant-" + "a1B2c3D4" * 5
    source.write_text(json.dumps({"type": "entity", "name": "deploy", "entityType": "job",
                                  "observations": [f"uses the key {key}"]}))
    before = store_state(home_store)
    with pytest.raises(DamagedInputError) as caught:
        Engram().import_from(source)
    assert f"{source}:1: content contains what looks like a secret" in str(caught.value)
    assert "--redact" in str(caught.value)
    assert store_state(home_store) == before
    Engram().import_from(source, redact=True)
    [memory] = Engram().memories()
    assert key not in memory.content and "[REDACTED:" in memory.content


def _native_history(engram: Engram) -> str:
    session = engram.session_start(agent="codex")
    task = engram.task_create("Add OAuth login", goal="Users can sign in with GitHub")
    engram.progress(task.id, "Register the OAuth app", component="auth")
    engram.failure(task.id, "Callback returns 500", component="auth",
                   root_cause="cookie not set")
    engram.handoff(task.id, summary="Callback next", next=["Write the callback"],
                   must_not_redo=["Create the OAuth app"])
    engram.remember("Use PKCE for the OAuth flow", kind="decision", task=task.id)
    gone = engram.remember("The callback URL is /auth/cb", kind="fact")
    engram.forget(gone.id, reason="moved to /oauth/callback")
    engram.session_end(outcome="success", session_id=session.id)
    return task.id


def test_export_then_import_gives_back_the_same_events(
        home_store: Engram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task_id = _native_history(home_store)
    out = tmp_path / "out" / "engram.jsonl"
    result = cli("export", str(out))
    assert result.exit_code == 0 and "exported" in result.stdout
    exported = out.read_bytes()
    assert exported.endswith(b"\n") and exported.count(b"\n") == len(Engram().export_events())
    monkeypatch.setenv("ENGRAM_HOME", str(tmp_path / "elsewhere"))
    other = Engram()
    other.init()
    report = other.import_from(out)
    assert report.ignored == {"store.created (it describes the exported store)": 1}
    assert other.verify()["ok"]
    again = Engram()
    assert imported_lines(again) == sorted(line + b"\n" for line in exported.splitlines()
                                           if b'"kind":"store.created"' not in line)
    assert again.task(task_id).failures[0].root_cause == "cookie not set"
    assert [c["summary"] for c in again.checkpoints(task_id)][-1] == "Callback next"
    assert (again.personal.root / "handoffs" / task_id).is_dir()
    # And it does not come in twice.
    assert Engram().import_from(out).added == []


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
        home_store: Engram, tmp_path: Path) -> None:
    task_id = _native_history(home_store)
    out = tmp_path / "md"
    result = cli("export", "--format", "markdown", str(out))
    assert result.exit_code == 0, result.stderr
    [task_file] = (out / "tasks").iterdir()
    assert task_file.name.startswith(task_id[:8]) and task_file.name.endswith(
        "add-oauth-login.md")
    text = task_file.read_text()
    assert text.startswith("# Task: Add OAuth login")
    for expected in ("## Goal", "Users can sign in with GitHub", "[done] Register the OAuth app",
                     "[auth] Callback returns 500", "root cause: cookie not set",
                     "[decision] Use PKCE for the OAuth flow", "### Checkpoint 1 (failure)",
                     "### Checkpoint 2 (handoff)", "#### Must not redo",
                     "- Create the OAuth app", "#### Changes since checkpoint 1"):
        assert expected in text, expected
    memories = (out / "memories.md").read_text()
    assert "## Decisions (1)" in memories and "- Use PKCE for the OAuth flow" in memories
    assert "## Forgotten and superseded (1)" in memories
    assert "forgotten: moved to /oauth/callback" in memories
    index = (out / "README.md").read_text()
    assert f"(tasks/{task_file.name})" in index and "(memories.md)" in index
    # A non-empty directory is not written into unless asked.
    again = cli("export", "--format", "markdown", str(out))
    assert again.exit_code == 2 and "--force" in again.stderr


def test_a_log_that_begins_mid_history_still_imports(home_store: Engram,
                                                     tmp_path: Path) -> None:
    """Older days may be gone: what the remaining log refers to is created where needed."""
    day = tmp_path / "events" / "events-20260601.jsonl"
    day.parent.mkdir()
    lines = [
        {"ts": "2026-06-01T08:00:00.000001Z", "seq": 40, "kind": "task.update",
         "payload": {"task_id": 7, "status": "blocked", "goal": None, "metadata": None}},
        {"ts": "2026-06-01T08:00:01.000001Z", "seq": 41, "kind": "session.end",
         "payload": {"session_id": "auto-0123456789ab", "end_type": "handoff"}},
        {"ts": "2026-06-01T08:00:02.000001Z", "seq": 42, "kind": "memory.update",
         "payload": {"memory_id": 3, "content": "x", "importance": None, "metadata": None}},
        {"ts": "2026-06-01T08:00:03.000001Z", "seq": 43, "kind": "drift.detected",
         "payload": {"task_id": 7, "composite": 0.4, "violations": []}},
    ]
    day.write_text("".join(json.dumps({**line, "engram_version": "0.20.1",
                                       "schema_version": 1}) + "\n" for line in lines))
    report = home_store.import_from(tmp_path, format="mcp-engram")
    assert report.counts() == {"task.created": 1, "task.updated": 1, "session.started": 1,
                               "session.ended": 1}
    assert report.ignored == {"memory.update of a memory not imported": 1,
                              "drift.detected": 1}
    [task] = Engram().tasks()
    assert (task.name, task.status) == ("task 7", "blocked")
    assert [s.state for s in Engram().sessions()] == ["ended"]


def test_import_reports_as_json(home_store: Engram) -> None:
    result = cli("import", "--json", "--dry-run", str(MCP_MEMORY))
    report = json.loads(result.stdout)
    assert report["format"] == "mcp-memory" and report["dry_run"] is True
    assert report["added"] == 8 and report["by_kind"] == {"memory.created": 8}
    assert len(report["events"]) == 8
