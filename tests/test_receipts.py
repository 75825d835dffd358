"""Write receipts: every write says where its event went and whether it is committed and
pushed, and `engram status ID` / the `memory_receipt` tool answer for any event later.

A real project repository whose remote is a bare repository served by a real `git daemon` on
127.0.0.1; writes through the CLI and through the MCP server over stdio (the SDK's client),
checked before and after `engram commit` and `engram push`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import cli, git, make_repo, run_engram
from test_mcp import call, connect, fail
from test_sync import Server

from engram.api import Engram


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[Server]:
    root = tmp_path / "server"
    root.mkdir()
    server = Server(root, "daemon")
    yield server
    server.stop()


@pytest.fixture
def repo(tmp_path: Path, remote: Server) -> Path:
    """A project store whose branch tracks `origin/main` on the daemon."""
    path = make_repo(tmp_path / "repo")
    Engram(cwd=path).init(project=True)  # committed by init
    git(path, "remote", "add", "origin", remote.url)
    git(path, "push", "-q", "-u", "origin", "main")
    return path


def line_of(repo: Path, receipt: dict[str, Any]) -> dict[str, Any]:
    """The event line the receipt points at, read from the file itself."""
    lines = (repo / ".engram" / receipt["file"]).read_text().splitlines()
    return json.loads(lines[receipt["line"] - 1])


def status(repo: Path, ident: str) -> dict[str, Any]:
    done = cli("status", ident, "--json", cwd=repo)
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def test_cli_receipts_follow_an_event_from_disk_to_commit_to_the_remote(repo: Path) -> None:
    done = cli(
        "remember", "Use Postgres for the job queue", "--kind", "decision", "--json", cwd=repo
    )
    assert done.exit_code == 0, done.output
    [receipt] = json.loads(done.stdout)["receipts"]
    assert receipt["kind"] == "memory.created" and receipt["store"] == "project"
    assert line_of(repo, receipt)["id"] == receipt["event"]
    assert receipt["committed"] is None and receipt["pushed"] is None
    assert "commit.every_events" in receipt["next"] and "engram commit" in receipt["next"]

    human = cli("task", "create", "Add OAuth login", cwd=repo)
    assert human.exit_code == 0, human.output
    saved = [line for line in human.stdout.splitlines() if line.strip().startswith("saved ")]
    # The same writer file, the next line.
    assert (
        len(saved) == 1 and f"{receipt['file']}:2 (project store); not committed yet" in saved[0]
    ), human.stdout

    event = receipt["event"]
    before = status(repo, event)
    assert (before["file"], before["line"], before["committed"]) == (
        receipt["file"],
        receipt["line"],
        None,
    )
    assert before["indexed"]["memory"] == json.loads(done.stdout)["id"]

    assert cli("commit", cwd=repo).exit_code == 0
    head = git(repo, "rev-parse", "HEAD").strip()
    committed = status(repo, event[-8:].lower())  # the short id `engram log` shows
    assert committed["committed"] == head and committed["upstream"] == "origin/main"
    assert committed["pushed"] is False and "engram push" in committed["next"]
    shown = cli("status", event, cwd=repo).stdout
    assert f"committed  {head[:12]} on main" in shown and "pushed     no" in shown

    pushed = run_engram("push", cwd=repo)
    assert pushed.returncode == 0, pushed.stderr
    assert git(repo, "rev-parse", "origin/main").strip() == head
    after = status(repo, event)
    assert after["pushed"] is True and after["next"] == ""
    assert "pushed     yes, on origin/main" in cli("status", event, cwd=repo).stdout

    assert cli("recall", "job queue", cwd=repo).exit_code == 0
    assert status(repo, event)["indexed"]["words"] == "indexed"
    # A memory's id answers with the receipt of its latest change.
    memory = json.loads(done.stdout)["id"]
    assert status(repo, memory)["event"] == event


def test_a_handoff_receipt_is_committed_at_once_and_a_forget_says_what_it_waits_for(
    repo: Path,
) -> None:
    task = json.loads(cli("task", "create", "Add OAuth login", "--json", cwd=repo).stdout)
    handed = json.loads(
        cli(
            "handoff",
            "--task",
            task["id"],
            "--summary",
            "Callback next",
            "--next",
            "Write the callback",
            "--json",
            cwd=repo,
        ).stdout
    )
    receipt = next(r for r in handed["receipts"] if r["kind"] == "checkpoint.saved")
    assert receipt["committed"] == git(repo, "rev-parse", "HEAD").strip()
    assert receipt["pushed"] is False
    memory = json.loads(cli("remember", "The callback URL is /auth/cb", "--json", cwd=repo).stdout)
    done = cli("config", "set", "--project", "commit.auto", "false", cwd=repo)
    assert done.exit_code == 0, done.output
    forgot = json.loads(cli("forget", memory["id"], "--reason", "moved", "--json", cwd=repo).stdout)
    [tombstone] = forgot["receipts"]
    assert tombstone["kind"] == "memory.forgotten" and tombstone["committed"] is None
    assert line_of(repo, tombstone)["id"] == tombstone["event"]
    assert tombstone["next"] == "commit.auto is off: `engram commit` commits it"


def test_mcp_write_results_carry_receipts_and_memory_receipt_follows_them(repo: Path) -> None:
    async def scenario() -> None:
        async with connect(repo) as client:
            remembered = await call(
                client, "memory_remember", content="Retries are capped at three", kind="decision"
            )
            [receipt] = remembered["receipts"]
            assert receipt["kind"] == "memory.created" and receipt["committed"] is None
            assert line_of(repo, receipt)["id"] == receipt["event"]
            created = await call(client, "task_create", name="Cap the retries")
            assert [r["kind"] for r in created["receipts"]] == ["task.created"]
            read = await call(client, "memory_list")
            assert "receipts" not in read  # reads carry none

            first = (await call(client, "memory_receipt", event=receipt["event"]))["receipt"]
            assert first["committed"] is None and first["file"] == receipt["file"]

            diff = await call(client, "memory_diff", range="origin/main..HEAD")
            assert diff["stores"][0]["counts"]["memories_added"] == 0  # nothing committed
            assert run_engram("commit", cwd=repo).returncode == 0
            diff = await call(client, "memory_diff", range="origin/main..HEAD")
            assert diff["stores"][0]["counts"]["memories_added"] == 1
            assert "Retries are capped at three" in diff["markdown"]
            assert len(diff["stat"]) == 1 and diff["stat"][0].startswith("project")

            second = (await call(client, "memory_receipt", event=receipt["event"]))["receipt"]
            head = git(repo, "rev-parse", "HEAD").strip()
            assert second["committed"] == head and second["pushed"] is False
            assert run_engram("push", cwd=repo).returncode == 0
            third = (await call(client, "memory_receipt", event=receipt["event"][-8:]))["receipt"]
            assert third["pushed"] is True and third["upstream"] == "origin/main"

            assert "no event with id" in await fail(client, "memory_receipt", event="zzzz9999")
            # Comparing the personal store leaves the server writing to the project store.
            assert "personal store does not exist" in await fail(
                client, "memory_diff", range="HEAD", store="personal"
            )
            later = await call(client, "memory_remember", content="Backoff doubles each try")
            assert [r["store"] for r in later["receipts"]] == ["project"]

    anyio.run(scenario)


def test_every_receipt_names_the_line_that_holds_its_event(tmp_path: Path) -> None:
    """Across a commit (a new file), a torn tail a crash left (set aside) and a whole line a
    crash left past the writer's bookkeeping (kept), each receipt's file:line holds its event."""
    path = make_repo(tmp_path / "plain-repo")
    engram = Engram(cwd=path)
    engram.init(project=True)
    engram.use = "project"
    engram.config_set("search.model", "off")
    engram.use = "both"
    store = engram.write_store()
    seen = []

    def write(text: str) -> dict[str, Any]:
        mark = engram.write_mark()
        engram.remember(text, check_duplicates=False)
        [receipt] = engram.receipts(since=mark)
        seen.append(receipt)
        return {"file": receipt.file, "line": receipt.line, "event": receipt.event}

    for n in range(5):
        write(f"note number {n}")
    engram.commit()
    first = write("after the commit")
    assert first["line"] == 1 and first["file"] != seen[0].file
    live = store.root / first["file"]
    with open(live, "ab") as handle:  # a crash mid-line
        handle.write(b'{"id": "01TORN')
    write("after a torn tail")
    kept = live.read_bytes().splitlines(keepends=True)[0]
    copy = json.loads(kept)
    copy["id"] = copy["id"][:-4] + "ZZZZ"
    with open(live, "ab") as handle:  # a whole line the writer's state never recorded
        handle.write(json.dumps(copy, separators=(",", ":")).encode() + b"\n")
    write("after a line past the bookkeeping")
    for receipt in seen:
        assert line_of(path, {"file": receipt.file, "line": receipt.line})["id"] == receipt.event, (
            receipt
        )
    assert seen[-1].line == 4
    engram.close()
