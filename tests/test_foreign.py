"""The Go engram (github.com/Gentleman-Programming/engram): its `.engram/` sync folder is named
for what it is, never read or overwritten as an Engram store, and its data imports."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from conftest import cli, git, make_repo

from engram.api import Engram
from engram.domain.interop import detect

GO = Path(__file__).parent.parent / "fixtures" / "engram-go"
EXPORT = GO / "engram-export.json"
FOLDER = GO / "project" / ".engram"


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def go_repo(tmp_path: Path) -> Path:
    """A project whose team syncs the Go engram's memories in git (`engram sync`)."""
    repo = make_repo(tmp_path / "payments-api")
    shutil.copytree(FOLDER, repo / ".engram")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "sync engram memories")
    return repo


def write_chunk(folder: Path, document: dict[str, object]) -> str:
    data = json.dumps(document, separators=(",", ":")).encode()
    chunk_id = hashlib.sha256(data).hexdigest()[:8]
    (folder / "chunks" / f"{chunk_id}.jsonl.gz").write_bytes(gzip.compress(data))
    return chunk_id


def test_its_export_and_sync_folder_are_recognised() -> None:
    assert detect(EXPORT) == "engram-go"
    assert detect(FOLDER) == "engram-go"
    assert detect(FOLDER / "manifest.json") == "engram-go"
    assert all(detect(chunk) == "engram-go" for chunk in (FOLDER / "chunks").iterdir())


def test_its_observations_become_memories_once(home_store: Engram) -> None:
    report = home_store.import_from(EXPORT)
    assert report.format == "engram-go" and report.skipped_count == 0
    assert report.ignored == {"observations deleted there": 1, "sessions": 1, "user prompts": 1}
    memories = {m.content.split("\n")[0]: m for m in home_store.memories(limit=None)}
    assert set(memories) == {
        "Idempotency keys for charges",
        "Webhook retry double charge",
        "Session summary: payments-api",
    }
    decision = memories["Idempotency keys for charges"]
    assert decision.kind == "decision"
    assert set(decision.tags) == {"decision", "project:payments-api"}
    assert "Idempotency-Key header" in decision.content
    assert decision.at == "2026-02-20T09:30:12.000000Z"
    assert memories["Webhook retry double charge"].kind == "lesson"

    # The team's sync folder holds the same first chunk and a colleague's: only hers is new.
    again = home_store.import_from(FOLDER)
    assert again.already == 3 and len(again.added) == 2
    assert {m.content.split("\n")[0] for m in home_store.memories(limit=None)} >= {
        "Money as integer cents",
        "Stripe test keys",
    }
    assert "<Money>" in next(
        m.content for m in home_store.memories(limit=None) if m.content.startswith("Money")
    )
    assert home_store.import_from(FOLDER).added == []


def test_a_bad_chunk_or_observation_is_skipped_and_the_rest_imported(
    home_store: Engram, tmp_path: Path
) -> None:
    folder = tmp_path / ".engram"
    shutil.copytree(FOLDER, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    good = {
        "id": 7,
        "session_id": "s1",
        "type": "learning",
        "title": "Kept",
        "content": "the rest is imported",
        "project": "p",
        "scope": "project",
        "created_at": "2026-03-01 10:00:00",
        "updated_at": "2026-03-01 10:00:00",
    }
    bad = [
        {**good, "content": 42},
        {**good, "created_at": "yesterday"},
        {**good, "title": "token", "content": "ghp_" + "a1B2c3D4e5" * 4},
        "not an object",
    ]
    mixed = write_chunk(folder, {"sessions": None, "observations": [*bad, good], "prompts": None})
    (folder / "chunks" / "0badc0de.jsonl.gz").write_bytes(b"\x1f\x8b not gzip at all")
    manifest["chunks"] += [
        {"id": mixed},
        {"id": "0badc0de"},
        {"id": "../../../etc/passwd"},
        {"id": "deadbeef"},
    ]
    (folder / "manifest.json").write_text(json.dumps(manifest))

    report = home_store.import_from(folder)
    assert len(report.added) == 6  # the fixture's five, and the good one of the mixed chunk
    assert "the rest is imported" in {
        m.content.split("\n\n")[-1] for m in home_store.memories(limit=None)
    }
    why = dict(report.skipped)
    chunk = folder / "chunks" / f"{mixed}.jsonl.gz"
    assert why[f"{chunk}:observations[1]"] == "observation without 'content' (text)"
    assert "is not a time" in why[f"{chunk}:observations[2]"]
    assert "looks like a secret" in why[f"{chunk}:observations[3]"]
    assert why[f"{chunk}:observations[4]"] == "not a JSON object"
    assert "cannot be read" in why[f"{folder / 'chunks' / '0badc0de.jsonl.gz'}:1"]
    assert "not a hexadecimal digest" in why[f"{folder / 'manifest.json'}:chunks[5]"]
    assert "missing" in why[f"{folder / 'chunks' / 'deadbeef.jsonl.gz'}:1"]
    assert report.skipped_count == 7


def test_a_chunk_over_the_line_limit_is_skipped(home_store: Engram, tmp_path: Path) -> None:
    folder = tmp_path / ".engram"
    shutil.copytree(FOLDER, folder)
    big = write_chunk(
        folder,
        {
            "observations": [
                {
                    "session_id": "s",
                    "type": "manual",
                    "title": "big",
                    "content": "x" * 5000,
                    "created_at": "2026-03-01 10:00:00",
                }
            ]
        },
    )
    cli("config", "set", "limits.import_line_bytes", "4096")
    result = cli("import", str(folder))
    assert result.exit_code == 0, result.output
    assert (
        f"{big}.jsonl.gz:1: longer than 4096 bytes (setting limits.import_line_bytes)"
        in result.output
    )
    assert "imported 5 events from engram-go" in result.output


def test_commands_in_its_repository_say_what_the_folder_is(
    home_store: Engram, tmp_path: Path
) -> None:
    repo = go_repo(tmp_path)
    before = tree(repo / ".engram")
    note = "is the sync folder of the Go engram (github.com/Gentleman-Programming/engram)"

    listed = cli("list", cwd=repo)
    assert listed.exit_code == 0 and note in listed.stderr
    assert "Engram uses the personal store here" in listed.stderr

    only_project = cli("list", "--project", cwd=repo)
    assert only_project.exit_code != 0
    assert note in only_project.stderr and "without --project" in only_project.stderr

    checked = cli("doctor", "--project", cwd=repo)
    assert checked.exit_code != 0 and note in checked.stderr

    refused = cli("init", "--project", cwd=repo)
    assert refused.exit_code != 0
    assert note in refused.stderr and "nothing was changed" in refused.stderr
    assert refused.stderr.count("\n") == 1  # one line: the error, not a warning besides
    assert "engram import .engram" in refused.stderr

    remembered = cli("remember", "charges are retried by the queue", cwd=repo)
    assert remembered.exit_code == 0
    assert any("retried by the queue" in m.content for m in Engram().memories(limit=None))

    imported = cli("import", ".engram", cwd=repo)
    assert imported.exit_code == 0 and "imported 5 events from engram-go" in imported.output
    assert tree(repo / ".engram") == before
    assert git(repo, "status", "--porcelain") == ""
    # The folder holds this project's memories: they belong to it, as if written here.
    root = git(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    assert {
        m.project for m in Engram().memories(limit=None) if "payments-api" in " ".join(m.tags)
    } == {root}
    assert "Money as integer cents" in cli("list", cwd=repo).output
    other = make_repo(tmp_path / "blog", {"post.md": "hello\n"})
    assert "Money as integer cents" not in cli("list", cwd=other).output
    assert "retried by the queue" not in cli("list", cwd=other).output


def test_its_data_folder_as_engram_home_is_not_taken_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "go-home"
    home.mkdir()
    (home / "engram.db").write_bytes(b"SQLite format 3\x00")
    monkeypatch.setenv("ENGRAM_HOME", str(home))
    result = cli("init")
    assert result.exit_code != 0
    assert "is the data folder of the Go engram" in result.stderr
    assert "set ENGRAM_HOME to another directory" in result.stderr
    assert tree(home) == {"engram.db": b"SQLite format 3\x00"}


def test_a_hostile_export_imports_what_passes_and_reports_the_rest(home_store: Engram) -> None:
    hostile = Path(__file__).parent / "corpus" / "import" / "engram-go-hostile"
    report = home_store.import_from(hostile)
    assert report.format == "engram-go"
    assert len(report.added) == 4  # the three of the fixture, and the one with odd text
    why = {where.rsplit(":", 1)[1]: reason for where, reason in report.skipped}
    assert why["sessions"] == "not a list (nothing of it is imported anyway)"
    assert why["observations[6]"] == "created_at '2026-13-45 99:99:99' is not a time"
    assert why["observations[9]"].startswith("content is 40030 bytes, over the limit")
    assert why["observations[12]"] == "observation without 'project' (text)"
    assert why["observations[15]"] == "not a JSON object"
    assert report.skipped_count == 11
    odd = next(m for m in home_store.memories() if "<script>" in m.content)
    assert odd.content == "\u202eevil\u202c\n\n<script>alert(1)</script>"
