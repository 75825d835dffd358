"""The user's repository stays quiet: Engram commits when there is something a person would want
in history, and nothing waits uncommitted for long. Real git, the real MCP server through the
SDK's stdio client; only the clock the commit policy reads is simulated, for the two-hour
session."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import cli, git, make_repo, run_engram
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import Implementation

from engram.api import Engram
from engram.storage import events as ev

SERVE = "engram"


@asynccontextmanager
async def connect(cwd: Path, *args: str) -> AsyncIterator[Client]:
    """The real server in a child process, through the SDK's real stdio client."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", SERVE, "serve", *args], env=dict(os.environ), cwd=cwd
    )
    async with Client(
        params,
        client_info=Implementation(name="claude-code", version="1.0"),
        read_timeout_seconds=120,
    ) as session:
        yield session


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{tool}: {result.content[0].text}"
    assert result.structured_content is not None
    return result.structured_content


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = make_repo(tmp_path / "repo", {"README.md": "a project\n", "src/app.py": "x = 1\n"})
    Engram(cwd=path).init(project=True)
    return path


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def commits(repo: Path) -> int:
    return int(git(repo, "rev-list", "--count", "HEAD"))


def kinds_in(repo: Path, commit: str) -> list[str]:
    """The kinds of the events a commit added, read from its diff."""
    diff = git(repo, "diff", f"{commit}^", commit, "--", ".engram/events")
    return [json.loads(line[1:])["kind"] for line in diff.splitlines() if line.startswith("+{")]


# -- quiet --------------------------------------------------------------------------------------


def test_ten_server_starts_add_no_commit_and_their_sessions_ride_with_the_next(
    repo: Path,
) -> None:
    # Even a batch of one event would commit at once: sessions still must not.
    Engram(cwd=repo, use="project").config_set("commit.every_events", "1")
    before = head(repo)

    async def scenario() -> None:
        for start in range(10):
            async with connect(repo) as client:
                assert len((await client.list_tools()).tools) > 10  # `claude mcp list`
                if start % 3 == 0:  # and now and then a read
                    await call(client, "memory_list")
                    await call(client, "session_resume")

    anyio.run(scenario)
    assert head(repo) == before
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""
    sessions = Engram(cwd=repo).sessions()
    assert len(sessions) == 10 and {s.state for s in sessions} == {"ended"}  # all recorded

    # The next real write commits at once (a batch of one), with the sessions riding along.
    done = run_engram("remember", "The queue retries three times, then parks the job", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert commits(repo) == int(git(repo, "rev-list", "--count", before)) + 1
    kinds = kinds_in(repo, "HEAD")
    assert kinds.count("memory.created") == 1
    assert kinds.count("session.started") == 10 and kinds.count("session.ended") == 10
    assert git(repo, "log", "-1", "--format=%s").startswith("engram: remember ")

    # resume: recent events are what was done, not twenty sessions starting and ending.
    resumed = run_engram("resume", "--depth", "brief", cwd=repo)
    assert resumed.returncode == 0, resumed.stderr
    recent = resumed.stdout.split("## Recent events (newest first)", 1)[1]
    assert "The queue retries three times" in recent and "session" not in recent


def test_a_two_hour_session_commits_once_per_window_and_never_for_sessions_alone(
    repo: Path,
) -> None:
    """50 real writes over two simulated hours, a timer that looks every 30 (simulated)
    seconds as the server's does, heartbeats, a report and reads in between."""
    engram = Engram(cwd=repo)
    settings = engram.settings()
    every_events, every_seconds = settings["commit.every_events"], settings["commit.every_seconds"]
    assert (every_events, every_seconds) == (20, 300)  # the defaults
    now = 1_000_000.0
    engram.clock = lambda: now
    first = head(repo)
    made: list[tuple[float, str]] = []  # (simulated time, commit) of each commit made
    oldest: list[float] = []  # simulated time of the oldest write each commit took

    writes: list[float] = [60.0 + i for i in range(25)]  # a burst: 25 in 25 seconds
    writes += [1000.0 + 200 * i for i in range(19)]  # then one every 200 seconds
    writes += [6000.0 + i for i in range(5)]  # a last few
    writes += [7100.0]  # and one shortly before the session ends
    assert len(writes) == 50
    waiting: list[float] = []

    def look(at: float) -> None:
        nonlocal now
        now = 1_000_000.0 + at
        current = head(repo)
        if current != (made[-1][1] if made else first):
            made.append((at, current))
            oldest.append(waiting[0])
            waiting.clear()

    engram.session_start(agent="claude-code")
    look(0)
    assert not made  # the session's start alone commits nothing
    tick = 0.0
    for number, at in enumerate(writes):
        while tick + 30 <= at:  # the timer, with no write in between
            tick += 30
            look(tick)
            engram.commit_due()
            look(tick)
            if int(tick) % 600 == 0:
                engram.heartbeat()
                engram.resume(depth="brief")
                look(tick)
        look(at)
        waiting.append(at)
        engram.remember(
            f"Finding {number}: step {number} of the migration holds",
            tags=["sim"],
            check_duplicates=False,
        )
        look(at)
    engram.report_interruption("user_away")
    look(7150)
    assert made[-1][0] < 7100  # the report did not commit the last write
    look(7200)
    engram.session_end(outcome="success")
    look(7200)
    assert not waiting  # session end committed the last write

    assert len(made) <= 7200 // every_seconds + 1
    previous = None
    for (at, commit), since in zip(made, oldest, strict=True):
        kinds = kinds_in(repo, commit)
        substantive = [k for k in kinds if ev.substantive(k)]
        assert substantive, f"a commit of session events alone at {at}: {kinds}"
        # Due by count, by the age of its oldest write, or the session's end: never sooner.
        assert len(substantive) >= every_events or at - since >= every_seconds or at == 7200
        if previous is not None and len(substantive) < every_events:
            assert at - previous >= every_seconds or at == 7200
        previous = at
    # The timer bounded the wait: after the burst, the rest went within a timer step of due.
    assert made[0][0] == 79 and made[1][0] - 80 < every_seconds + 30
    assert "session.ended" in kinds_in(repo, made[-1][1])
    started = [k for _, c in made for k in kinds_in(repo, c) if k == "session.started"]
    assert started == ["session.started"]  # rode with the first commit


def test_the_server_commits_a_due_batch_although_no_further_write_comes(repo: Path) -> None:
    Engram(cwd=repo, use="project").config_set("commit.every_seconds", "2")
    before = head(repo)

    async def scenario() -> float:
        async with connect(repo) as client:
            await call(client, "memory_remember", content="Deploys need the VPN up first")
            written = time.monotonic()
            assert head(repo) == before  # not due yet
            while head(repo) == before and time.monotonic() - written < 30:
                await anyio.sleep(0.2)  # no call at all in the meantime
            return time.monotonic() - written

    waited = anyio.run(scenario)
    assert head(repo) != before and waited < 10
    assert "memory.created" in kinds_in(repo, "HEAD")


def test_a_command_commits_a_batch_that_fell_due_at_its_exit(repo: Path) -> None:
    Engram(cwd=repo, use="project").config_set("commit.every_seconds", "2")
    before = head(repo)
    assert run_engram("remember", "The cache is warmed at boot", cwd=repo).returncode == 0
    assert head(repo) == before  # one event, not two seconds old yet
    time.sleep(2.2)
    listed = run_engram("list", cwd=repo)  # a read: nothing of its own to commit
    assert listed.returncode == 0, listed.stderr
    assert head(repo) != before and kinds_in(repo, "HEAD") == ["memory.created"]
    again = head(repo)
    assert run_engram("list", cwd=repo).returncode == 0
    assert head(repo) == again  # nothing waits: nothing more


# -- detached HEAD ------------------------------------------------------------------------------


def test_on_a_detached_head_nothing_is_committed_and_the_handoff_survives_a_checkout(
    repo: Path,
) -> None:
    task = Engram(cwd=repo).task_create("Add retries", goal="Retry failed jobs")
    Engram(cwd=repo).commit()
    (repo / "src" / "app.py").write_text("x = 2\n")
    git(repo, "commit", "-q", "-am", "more code")
    git(repo, "switch", "-q", "--detach", "HEAD~1")  # looking at an older commit
    detached = head(repo)

    done = run_engram(
        "handoff",
        "--task",
        task.id,
        "--summary",
        "Retries wired in; tests next",
        "--next",
        "Write the retry tests",
        cwd=repo,
    )
    assert done.returncode == 0, done.stderr
    assert "recorded, not committed" in done.stdout and "and committed" not in done.stdout
    [line] = [x for x in done.stderr.splitlines() if "detached" in x]
    assert "git switch <branch>" in line and "git switch -c <name>" in line
    assert head(repo) == detached

    refused = run_engram("commit", cwd=repo)
    assert refused.returncode == 1 and "committed" not in refused.stdout
    assert refused.stderr.count("\n") == 1 and "git switch" in refused.stderr
    assert head(repo) == detached

    # Automatic commits refuse too, and say so (set by hand: `config set` would commit).
    config = repo / ".engram" / "config.yaml"
    config.write_text(config.read_text().replace("every_events: 20", "every_events: 1"))
    wrote = run_engram("remember", "Retries back off exponentially", cwd=repo)
    assert wrote.returncode == 0 and "detached" in wrote.stderr
    assert head(repo) == detached
    git(repo, "checkout", "-q", "--", ".engram/config.yaml")

    git(repo, "switch", "-q", "main")
    resumed = run_engram("resume", "--task", task.id, cwd=repo)
    assert "Retries wired in; tests next" in resumed.stdout
    assert "Write the retry tests" in resumed.stdout
    committed = run_engram("commit", cwd=repo)
    assert committed.returncode == 0 and "committed" in committed.stdout
    assert git(repo, "branch", "--show-current").strip() == "main"
    assert "checkpoint.saved" in kinds_in(repo, "HEAD")
    assert git(repo, "ls-files", ".engram/handoffs").count(".md") == 1


# -- what a pull request shows ------------------------------------------------------------------


def test_a_pull_request_shows_the_handoff_not_the_automatic_checkpoints(repo: Path) -> None:
    git(repo, "switch", "-q", "-c", "feature")
    engram = Engram(cwd=repo)
    task = engram.task_create("Rate limiting", goal="Answer 429 past the limit")
    saved = [
        engram.progress(task.id, "Token bucket", files=["src/app.py"]).checkpoint,
        engram.progress(task.id, "Share the Redis pool", status="todo").checkpoint,
        engram.failure(task.id, "Redis timeouts under load", component="ratelimit").checkpoint,
        engram.failure(task.id, "Pool exhausted at 2k rps", component="ratelimit").checkpoint,
        engram.failure(task.id, "Flaky test_burst", component="tests").checkpoint,
    ]
    assert [c.reason for c in saved] == [
        "working_set",
        "plan_change",
        "failure",
        "failure",
        "failure",
    ]
    assert not (repo / ".engram" / "handoffs").exists()  # nothing rendered so far
    handed = cli(
        "handoff",
        "--task",
        task.id,
        "--summary",
        "Limiter works; pool next",
        "--next",
        "Size the pool",
        cwd=repo,
    )
    assert handed.exit_code == 0 and "recorded and committed" in handed.stdout

    changed = git(repo, "diff", "--name-only", "main...feature").split()
    rendered = [path for path in changed if path.startswith(".engram/handoffs/")]
    assert len(rendered) == 1 and rendered[0].endswith(".md")
    text = (repo / rendered[0]).read_text()
    assert "reason: handoff" in text and "Limiter works; pool next" in text
    assert "## Changes since the start" in text  # no earlier handoff: the automatic ones do
    # not count as what the reviewer saw before
    assert any(path.startswith(".engram/events/") for path in changed)
    listed = cli("checkpoints", "--task", task.id, cwd=repo).stdout
    assert [line.split()[4] for line in listed.splitlines()] == [
        "working_set",
        "plan_change",
        "failure",
        "failure",
        "failure",
        "handoff",
    ]
    resumed = cli("resume", "--task", task.id, cwd=repo).stdout
    assert "Pool exhausted at 2k rps" in resumed and "## Earlier checkpoints" in resumed

    # A second handoff says what changed since the first, not since a checkpoint in between.
    engram = Engram(cwd=repo)
    engram.failure(task.id, "Pool still small", component="ratelimit")
    second = engram.handoff(task.id, summary="Pool sized", next=["Load test"])
    path = (
        repo / ".engram" / "handoffs" / task.id / f"{second.checkpoint.seq:04d}-"
        f"{second.checkpoint.checkpoint[:8]}.md"
    )
    assert f"## Changes since checkpoint {saved[-1].seq + 1}" in path.read_text()
    assert len(list((repo / ".engram" / "handoffs" / task.id).iterdir())) == 2
