"""The MCP server, driven by the SDK's own client: over stdio against `engram serve` in a child
process, plus in-process checks of the tool surface, client installers and hooks."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import click
import pytest
from conftest import ACTOR, cli, git, make_repo, run_engram
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import Implementation, ListRootsResult, Root

from engram.api import Engram
from engram.cli.main import main as engram_main

ROOT = Path(__file__).parent.parent
# `python -m engram serve`: engram.cli.main always registers the MCP commands.
SERVE_MODULE = "engram"

APP = '''import os


def retry_budget():
    """Retries are capped here, not in the queue."""
    return int(os.environ.get("RETRIES", "3"))
'''


def serve_args(*args: str) -> list[str]:
    return ["-m", SERVE_MODULE, "serve", *args]


@asynccontextmanager
async def connect(
    cwd: Path,
    *args: str,
    client: str = "claude-code",
    env: dict[str, str] | None = None,
    roots: list[Path] | None = None,
) -> AsyncIterator[Client]:
    """The real server in a child process, through the SDK's real stdio client; with `roots`,
    a client that offers these folders as its roots and speaks the handshake-era protocol (as
    Cursor and Claude Code do: from 2026-07-28 a stdio server cannot ask the client)."""
    params = StdioServerParameters(
        command=sys.executable, args=serve_args(*args), env={**os.environ, **(env or {})}, cwd=cwd
    )

    async def list_roots(context: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=p.as_uri(), name=p.name) for p in roots or ()])

    async with Client(
        params,
        client_info=Implementation(name=client, version="1.0"),
        read_timeout_seconds=120,
        list_roots_callback=list_roots if roots is not None else None,
        mode="legacy" if roots is not None else "auto",
    ) as session:
        yield session


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{tool}: {result.content[0].text}"
    assert result.structured_content is not None
    return result.structured_content


async def fail(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool} should have failed: {result.structured_content}"
    return result.content[0].text


def run(scenario: Callable[[], Any]) -> Any:
    return anyio.run(scenario)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with some code and a project store."""
    path = make_repo(tmp_path / "repo", {"README.md": "a project\n", "src/app.py": APP})
    Engram(cwd=path).init(project=True)
    return path


@pytest.fixture
def with_mcp_commands() -> click.Group:
    """`engram serve` / `engram mcp` on the in-process CLI, as engram/cli.py will have them."""
    from engram.cli.mcp import register

    if "serve" not in engram_main.commands:
        register(engram_main)
    return engram_main


# -- the surface agents see ---------------------------------------------------------------------

# name: (required parameters, optional parameters, read-only, destructive, idempotent)
SURFACE: dict[str, tuple[list[str], list[str], bool, bool, bool]] = {
    "memory_remember": (
        ["content"],
        ["kind", "tags", "scope", "importance", "source", "task", "valid_until", "redact", "cite"],
        False,
        False,
        False,
    ),
    "memory_recall": (
        ["query"],
        ["k", "kinds", "tags", "scope", "task", "since", "include_all"],
        True,
        False,
        False,
    ),
    "memory_list": ([], ["limit", "kinds", "tags", "scope", "include_all"], True, False, False),
    "memory_get": (["id"], ["history"], True, False, False),
    "memory_update": (
        ["id"],
        ["content", "kind", "tags", "scope", "importance", "valid_until", "redact"],
        False,
        False,
        True,
    ),
    "memory_forget": (["id"], ["reason", "replace_with"], False, True, True),
    "memory_consolidate": ([], ["apply", "similarity"], False, True, True),
    "memory_stats": ([], [], True, False, False),
    "task_create": (["name"], ["goal", "parent", "tags", "status"], False, False, False),
    "task_get": (["task"], ["checkpoints"], True, False, False),
    "task_update": (["task"], ["name", "goal", "status", "parent", "tags"], False, False, True),
    "task_list": ([], ["statuses", "include_closed", "limit"], True, False, False),
    "task_progress": (
        ["task", "feature"],
        ["status", "note", "component", "files"],
        False,
        False,
        False,
    ),
    "task_failure": (["task", "error"], ["component", "root_cause", "fix"], False, False, False),
    "task_continuity": (["task"], ["before", "after"], True, False, False),
    "session_handoff": (
        ["task", "summary"],
        [
            "completed",
            "in_progress",
            "blocked",
            "next",
            "must_not_redo",
            "must_preserve",
            "files",
            "commands",
            "artifacts",
            "open_questions",
            "goal",
        ],
        False,
        False,
        False,
    ),
    "session_resume": (
        [],
        ["task", "session", "depth", "since", "restore", "max_chars"],
        False,
        False,
        True,
    ),
    "session_list": ([], ["state", "limit"], True, False, False),
    "session_report": ([], ["outcome", "interruption", "note"], False, False, False),
    "discovery_record": (
        ["content", "citations"],
        ["tags", "task", "importance", "redact"],
        False,
        False,
        False,
    ),
    "discovery_check": ([], ["id", "limit"], True, False, False),
    "memory_receipt": (["event"], [], True, False, False),
    "memory_diff": ([], ["range", "store"], True, False, False),
}


def test_the_tool_surface_is_pinned() -> None:
    """A change to what agents see (names, parameters, annotations) must be deliberate: update
    SURFACE here and regenerate docs/mcp-tools.md."""
    from engram.mcp.server import build_server

    server = build_server()
    tools = {tool.name: tool for tool in run(server.list_tools)}
    assert list(tools) == list(SURFACE)
    for name, (required, optional, read_only, destructive, idempotent) in SURFACE.items():
        tool = tools[name]
        schema = tool.input_schema
        assert sorted(schema.get("required", [])) == sorted(required), name
        assert sorted(schema["properties"]) == sorted([*required, *optional]), name
        notes = tool.annotations
        assert notes is not None and notes.title, name
        assert tool.title == notes.title, f"{name} has no title of its own"
        assert notes.read_only_hint is read_only, name
        assert notes.open_world_hint is False, name
        if not read_only:
            assert notes.destructive_hint is destructive, name
            assert notes.idempotent_hint is idempotent, name
        assert tool.output_schema and tool.output_schema["type"] == "object", name
        assert "warnings" in tool.output_schema["properties"], name
        assert len(tool.description or "") > 150, f"{name} needs a fuller description"
        for parameter, spec in schema["properties"].items():
            assert spec.get("description"), f"{name}.{parameter} has no description"
    assert len(tools) <= 23
    prompts = run(server.list_prompts)
    assert [p.name for p in prompts] == ["resume"]
    assert [(a.name, a.required) for a in prompts[0].arguments or []] == [("task", False)]
    assert all(a.description for a in prompts[0].arguments or []), "describe every argument"
    assert server.instructions and len(server.instructions.encode()) < 2048


def test_the_kind_and_reason_literals_match_the_library() -> None:
    from typing import get_args

    from engram.mcp.models import Interruption, Kind, Outcome, ProgressStatus, TaskStatus
    from engram.model import sessions
    from engram.model.memories import MEMORY_KINDS
    from engram.model.tasks import PROGRESS_STATUSES, STATUSES

    assert list(get_args(Kind)) == list(MEMORY_KINDS)
    assert get_args(TaskStatus) == STATUSES
    assert get_args(ProgressStatus) == PROGRESS_STATUSES
    assert get_args(Outcome) == sessions.OUTCOMES
    assert get_args(Interruption) == sessions.REASONS


def test_the_tool_reference_is_generated_from_the_server() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_mcp_docs.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_importing_the_cli_commands_does_not_import_the_sdk() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import engram.cli.mcp"],
        capture_output=True,
        text=True,
    )
    loaded = {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "engram" in loaded and not loaded & {"mcp", "fastembed", "usearch", "onnxruntime"}


# -- every tool, over stdio ---------------------------------------------------------------------


def test_every_tool_over_stdio(repo: Path) -> None:
    async def scenario() -> dict[str, Any]:
        async with connect(repo) as client:
            seen: dict[str, Any] = {}
            stats = await call(client, "memory_stats")
            runtime = stats["runtime"]
            assert runtime["session"] and runtime["agent"] == "claude-code"
            assert runtime["client"] == "claude-code" and runtime["actor"] == ACTOR
            assert stats["stores"][0]["store"] == "project"
            seen["session"] = runtime["session"]

            made = await call(
                client,
                "memory_remember",
                content="Use Postgres for the job queue: we need SKIP LOCKED",
                kind="decision",
                tags=["db"],
            )
            memory_id = made["memory"]["id"]
            assert made["duplicate"] is False and made["memory"]["kind"] == "decision"
            again = await call(
                client,
                "memory_remember",
                content="use postgres for the job queue: we need skip locked",
                kind="decision",
            )
            assert again["duplicate"] is True and again["memory"]["id"] == memory_id

            found = await call(client, "memory_recall", query="which database for jobs")
            assert found["hits"][0]["memory"]["id"] == memory_id
            listed = await call(client, "memory_list", limit=5)
            assert [m["id"] for m in listed["memories"]] == [memory_id]

            updated = await call(client, "memory_update", id=memory_id[:6], tags=["db", "queue"])
            assert updated["memory"]["version"] == 2
            got = await call(client, "memory_get", id=memory_id, history=True)
            assert [v["kind"] for v in got["history"]][-1] == "memory.updated"

            old = await call(
                client, "memory_remember", content="The API listens on port 8080", kind="fact"
            )
            replaced = await call(
                client,
                "memory_forget",
                id=old["memory"]["id"],
                replace_with="The API listens on port 9090",
            )
            assert replaced["memory"]["status"] == "superseded"
            assert replaced["replacement"]["content"] == "The API listens on port 9090"
            gone = await call(client, "memory_remember", content="Deploys happen on Fridays")
            forgot = await call(
                client,
                "memory_forget",
                id=gone["memory"]["id"],
                reason="we deploy on every merge now",
            )
            assert forgot["memory"]["status"] == "forgotten"
            merged = await call(client, "memory_consolidate")
            assert merged["applied"] is False and merged["note"]

            task = (
                await call(
                    client,
                    "task_create",
                    name="Add OAuth login",
                    goal="Users can sign in with GitHub",
                )
            )["task"]
            progress = await call(
                client,
                "task_progress",
                task=task["id"],
                feature="Register the OAuth app",
                component="auth",
                files=["src/app.py"],
            )
            assert progress["task"]["status"] == "in_progress"
            failure = await call(
                client,
                "task_failure",
                task="Add OAuth login",
                error="Callback returns 500: state mismatch",
                component="auth",
                root_cause="cookie not set before redirect",
            )
            assert failure["checkpoint"]["reason"] == "failure"
            again_failed = await call(
                client,
                "task_progress",
                task=task["id"],
                feature="Write the callback",
                status="in_progress",
                component="auth",
            )
            assert (
                again_failed["earlier_failures"][0]["root_cause"]
                == "cookie not set before redirect"
            )
            await call(
                client,
                "memory_remember",
                content="OAuth state lives in a signed cookie",
                kind="decision",
                task=task["id"],
            )
            first = await call(
                client,
                "session_handoff",
                task=task["id"],
                summary="App registered; callback next",
                next=["Write the callback", "Write callback tests"],
                must_not_redo=["Create the GitHub OAuth app"],
                must_preserve=["Do not touch main"],
            )
            second = await call(
                client,
                "session_handoff",
                task=task["id"],
                summary="Callback written",
                completed=["Write the callback"],
                next=["Write callback tests"],
            )
            assert second["checkpoint"]["seq"] == first["checkpoint"]["seq"] + 1
            assert second["checkpoint"]["must_not_redo"] == ["Create the GitHub OAuth app"]
            scores = await call(client, "task_continuity", task=task["id"])
            assert 0 <= scores["composite"] <= 1 and scores["after"] == second["checkpoint"]["seq"]
            changed = await call(client, "task_update", task=task["id"], status="blocked")
            assert changed["task"]["status"] == "blocked"
            tasks = await call(client, "task_list")
            assert [t["id"] for t in tasks["tasks"]] == [task["id"]]
            view = await call(client, "task_get", task=task["id"][:5], checkpoints=True)
            assert len(view["checkpoints"]) == view["task"]["checkpoints"] >= 3
            assert view["memories"][0]["content"] == "OAuth state lives in a signed cookie"
            resumed = await call(client, "session_resume", depth="brief")
            assert resumed["task"] == task["id"]
            for text in (
                "Users can sign in with GitHub",
                "Write callback tests",
                "Create the GitHub OAuth app",
                "Do not touch main",
                "cookie not set before redirect",
            ):
                assert text in resumed["markdown"]
            prompt = await client.get_prompt("resume", {"task": task["id"]})
            assert "Write callback tests" in prompt.messages[0].content.text

            sessions = await call(client, "session_list")
            assert [s["current"] for s in sessions["sessions"]] == [True]
            report = await call(
                client, "session_report", outcome="success", interruption="user_away", note="lunch"
            )
            assert report["outcome"] == "success" and report["interruption"] == "user_away"

            recorded = await call(
                client,
                "discovery_record",
                content="Retries are capped in retry_budget, not the queue",
                citations=[
                    {
                        "path": "src/app.py",
                        "start_line": 4,
                        "end_line": 6,
                        "excerpt": "def retry_budget():"
                        '\n    """Retries are capped here, '
                        'not in the queue."""\n    return '
                        'int(os.environ.get("RETRIES", '
                        '"3"))',
                    }
                ],
            )
            cite = recorded["citations"][0]
            head = git(repo, "rev-parse", "HEAD").strip()
            assert cite == {
                "path": "src/app.py",
                "start_line": 4,
                "end_line": 6,
                "commit": head,
                "excerpt_kept": False,
            }
            assert f"cite: src/app.py:4-6@{head}" in recorded["memory"]["content"]
            discovery_id = recorded["memory"]["id"]
            checked = await call(client, "discovery_check", id=discovery_id)
            assert checked["discoveries"][0]["status"] == "valid"
            same = await call(
                client,
                "discovery_record",
                content="Retries are capped in retry_budget, not the queue",
                citations=[{"path": "src/app.py", "start_line": 4, "end_line": 6}],
            )
            assert same["duplicate"] is True and same["memory"]["id"] == discovery_id

            (repo / "src" / "app.py").write_text("# retries\n\n" + APP)
            moved = await call(client, "discovery_check")
            assert moved["discoveries"][0]["status"] == "moved"
            assert moved["discoveries"][0]["citations"][0]["moved_to"] == [
                {"start_line": 6, "end_line": 8}
            ]
            again = await call(
                client,
                "discovery_record",
                content="Retries are capped in retry_budget, not the queue",
                citations=[{"path": "src/app.py", "start_line": 6, "end_line": 8}],
            )
            assert again["duplicate"] is False and again["citations"][0]["excerpt_kept"]
            (repo / "src" / "new.py").write_text("LIMIT = 3\n")
            untracked = await call(
                client,
                "discovery_record",
                content="The limit is three",
                citations=[{"path": "src/new.py", "start_line": 1}],
            )
            assert untracked["citations"][0]["excerpt_kept"] is False
            assert untracked["warnings"] == [
                "no excerpt: src/new.py is not tracked by git (git add it to have its lines kept)"
            ]
            assert "LIMIT" not in untracked["memory"]["content"]
            git(repo, "add", "src/new.py")
            fresh = await call(
                client,
                "discovery_record",
                content="The limit is three",
                citations=[{"path": "src/new.py", "start_line": 1}],
            )
            assert fresh["citations"][0]["excerpt_kept"] is True and fresh["warnings"] == []
            assert fresh["memory"]["content"].endswith("\n  | LIMIT = 3")
            (repo / "src" / "app.py").write_text("def retry_budget():\n    return 5\n")
            (repo / "src" / "new.py").unlink()
            broken = await call(client, "discovery_check", limit=5)
            assert [d["status"] for d in broken["discoveries"]] == [
                "broken",
                "unknown",
                "broken",
                "broken",
            ]
            assert (
                "src/new.py was not tracked by git"
                in broken["discoveries"][1]["citations"][0]["reason"]
            )
            assert broken["counts"] == {"valid": 0, "moved": 0, "unknown": 1, "broken": 3}
            return seen

    seen = run(scenario)
    # The session was closed when the client went away, with the outcome the agent reported.
    with Engram(cwd=repo) as engram:
        session = engram.session_info(seen["session"])
        assert (session.state, session.how, session.outcome, session.agent) == (
            "ended",
            "exit",
            "success",
            "claude-code",
        )
        assert session.reported == "user_away"
        written = [e for _, e in engram.log(kinds=["memory.created"], limit=None)]
        assert written and all(e.session == seen["session"] and e.actor == ACTOR for e in written)
        # The two handoffs are rendered for review; the automatic checkpoints are not.
        handoffs = list((repo / ".engram" / "handoffs").rglob("*.md"))
        assert len(handoffs) == 2


def test_discovery_record_copies_no_lines_git_does_not_track(repo: Path) -> None:
    """An ignored `.env` is cited without its lines, and the uncommitted lines of a tracked file
    are scanned for secrets: refused, or redacted when the agent asks."""
    (repo / ".gitignore").write_text(".env\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore .env")
    (repo / ".env").write_text("API_KEY=Zq7vR2mXk9Lp4Wd8\nSESSION_SALT=pepper-moon-42\n")
    (repo / "src" / "app.py").write_text(APP + 'PASSWORD = "Hx4tW9qLm2Zr7Kd3"\n')

    async def scenario() -> None:
        async with connect(repo) as client:
            cited = await call(
                client,
                "discovery_record",
                content="The salt is in .env",
                citations=[{"path": ".env", "start_line": 1, "end_line": 2}],
            )
            assert cited["warnings"] == ["no excerpt: .env is ignored by git"]
            assert cited["citations"][0]["excerpt_kept"] is False
            assert cited["memory"]["content"].endswith(
                "cite: .env:1-2@" + git(repo, "rev-parse", "HEAD").strip()
            )
            message = await fail(
                client,
                "discovery_record",
                content="The password is set",
                citations=[{"path": "src/app.py", "start_line": 7}],
            )
            assert message.endswith(
                "citation src/app.py:7-7 contains what looks like a secret "
                "(password) at line 7, column 13; remove it, or pass "
                "redact=true to store it as [REDACTED:password]"
            ), message
            redacted = await call(
                client,
                "discovery_record",
                content="The password is set",
                citations=[{"path": "src/app.py", "start_line": 7}],
                redact=True,
            )
            assert redacted["memory"]["content"].endswith('\n  | PASSWORD = "[REDACTED:password]"')
            checked = await call(client, "discovery_check", id=redacted["memory"]["id"])
            assert checked["discoveries"][0]["status"] == "valid"

    run(scenario)
    events = "".join(p.read_text() for p in (repo / ".engram").rglob("*.jsonl"))
    assert "cite: .env:1-2@" in events and "[REDACTED:password]" in events
    for secret in ("Zq7vR2mXk9Lp4Wd8", "pepper-moon-42", "Hx4tW9qLm2Zr7Kd3"):
        assert secret not in events


def test_every_tool_reports_errors_the_agent_can_act_on(repo: Path) -> None:
    with Engram(cwd=repo) as engram:
        plain = engram.remember("Tests need ENGRAM_HOME set", kind="gotcha")
        lonely = engram.task_create("Write docs")
        engram.task_create("Fix the flaky test")

    async def scenario() -> None:
        async with connect(repo) as client:
            cases: dict[str, tuple[dict[str, Any], str]] = {
                "memory_remember": ({"content": "   "}, "content is empty"),
                "memory_recall": ({"query": " "}, "the query is empty"),
                "memory_list": ({"limit": 500}, "limit: 500 is over the maximum 100"),
                "memory_get": ({"id": "zzzzzzzz"}, "find ids with memory_list"),
                "memory_update": ({"id": plain.id, "kind": "gotcha"}, "nothing to change"),
                "memory_forget": ({"id": plain.id}, "say why in reason"),
                "memory_consolidate": ({"similarity": 2}, "similarity: 2 is over the maximum 1"),
                "task_create": ({"name": ""}, "name is empty"),
                "task_get": ({"task": "no-such-task"}, "find ids with task_list"),
                "task_update": ({"task": lonely.id, "name": "Write docs"}, "nothing to change"),
                "task_list": (
                    {"statuses": ["finished"]},
                    (
                        "statuses[0]: 'finished' is not one of open, in_progress, blocked, done, "
                        "abandoned"
                    ),
                ),
                "task_progress": (
                    {"task": lonely.id, "feature": "x", "files": ["/etc/passwd"]},
                    "must be a path inside the repository",
                ),
                "task_failure": ({"task": lonely.id, "error": " "}, "error is empty"),
                "task_continuity": ({"task": lonely.id}, "record a handoff first"),
                "session_handoff": ({"task": lonely.id, "summary": " "}, "needs a summary"),
                "session_resume": ({}, "call session_resume again with task=<id>"),
                "session_list": (
                    {"state": "gone"},
                    "state: 'gone' is not one of open, ended, interrupted",
                ),
                "session_report": ({}, "give an outcome, an interruption reason, or both"),
                "discovery_record": (
                    {"content": "x", "citations": [{"path": "../secrets.txt", "start_line": 1}]},
                    "contain '..'",
                ),
                "discovery_check": ({"id": plain.id}, "is not a discovery"),
            }
            for tool, (arguments, expected) in cases.items():
                message = await fail(client, tool, **arguments)
                assert expected in message, f"{tool}: {message}"
                assert message.startswith(f"Error executing tool {tool}"), message
            # Citations are checked against the work tree before anything is stored.
            for citation, expected in (
                ({"path": "/etc/hosts", "start_line": 1}, "absolute path"),
                ({"path": "src/app.py", "start_line": 40}, "past its end"),
                ({"path": "src/nope.py", "start_line": 1}, "is not a file"),
                (
                    {"path": "src/app.py", "start_line": 4, "excerpt": "import os"},
                    "the excerpt is at src/app.py:1-1",
                ),
                ({"path": "src/app.py", "start_line": 1, "end_line": 500}, "cite at most 200"),
            ):
                message = await fail(client, "discovery_record", content="x", citations=[citation])
                assert expected in message, message
            # The server is still healthy after every error.
            assert (await call(client, "memory_stats"))["runtime"]["problems"] == []

    run(scenario)
    with Engram(cwd=repo) as engram:
        assert engram.memories(tags=["discovery"]) == []


def test_bad_arguments_and_library_errors_read_as_tools_and_parameters(repo: Path) -> None:
    """An agent is told in one line which parameter was wrong, how, and what is allowed, and
    what to do next in its own terms (tools and parameters, not command-line options)."""
    with Engram(cwd=repo) as engram:
        engram.task_create("Write docs")
        engram.task_create("Fix the flaky test")

    async def scenario() -> None:
        async with connect(repo) as client:
            schema: list[tuple[str, dict[str, Any], str]] = [
                (
                    "memory_remember",
                    {"kind": "nonsense"},
                    (
                        "content: required; kind: 'nonsense' is not one of fact, decision, "
                        "preference, convention, gotcha, failure, lesson, procedure, note"
                    ),
                ),
                ("memory_recall", {"query": "queue", "k": 1000}, "k: 1000 is over the maximum 50"),
                (
                    "memory_remember",
                    {"content": "x", "importance": "high"},
                    "importance: 'high' is not a number",
                ),
                (
                    "discovery_record",
                    {"content": "x", "citations": [{"path": "src/app.py", "start_line": 0}]},
                    "citations[0].start_line: 0 is under the minimum 1",
                ),
                (
                    "discovery_record",
                    {"content": "x", "citations": []},
                    "citations: needs at least 1 item(s)",
                ),
                (
                    "memory_remember",
                    {"content": "x", "kidn": "decision"},
                    (
                        "kidn: not a parameter of memory_remember (did you mean kind?); it takes "
                        "content, kind, tags, scope, importance, source, task, valid_until, "
                        "redact, cite"
                    ),
                ),
                ("memory_consolidate", {"apply": "yes"}, "apply: 'yes' is not true or false"),
                ("memory_list", {"limit": "5"}, "limit: '5' is not a whole number"),
            ]
            for tool, arguments, expected in schema:
                message = await fail(client, tool, **arguments)
                assert message == f"Error executing tool {tool}: {expected}", message
            library: list[tuple[str, dict[str, Any], str, str]] = [
                (
                    "task_get",
                    {"task": "no-such-task"},
                    "no task with id 'no-such-task'; find ids with task_list",
                    "engram task",
                ),
                (
                    "task_progress",
                    {"task": " ", "feature": "x"},
                    "task is empty; give a task id (or its exact name); find ids with task_list",
                    "engram task",
                ),
                (
                    "memory_recall",
                    {"query": "queue", "since": "yesterday-ish"},
                    "since 'yesterday-ish' is not a date; use an ISO date like 2026-12-01",
                    "--since",
                ),
                (
                    "memory_remember",
                    {"content": "x", "valid_until": "someday"},
                    "valid_until 'someday' is not a date",
                    "--valid-until",
                ),
                (
                    "session_resume",
                    {},
                    "call session_resume again with task=<id> (or the exact name)",
                    "--task",
                ),
                (
                    "memory_remember",
                    {"content": "db password=Zq7vR2mXk9Lp4Wd8"},
                    "remove it, or pass redact=true to store it as [REDACTED:",
                    "--redact",
                ),
                (
                    "memory_get",
                    {"id": "zzzz"},
                    "no memory with id 'zzzz'; find ids with memory_list or memory_recall",
                    "engram list",
                ),
            ]
            for tool, arguments, expected, cli_words in library:
                message = await fail(client, tool, **arguments)
                assert expected in message and cli_words not in message, message
                assert "\n" not in message, message

    run(scenario)
    # The command line keeps its own words for the same errors.
    missing = cli("task", "show", "no-such-task", cwd=repo)
    assert missing.exit_code == 2
    assert "no task with id 'no-such-task'; list them with `engram task list`" in missing.stderr
    since = cli("recall", "queue", "--since", "yesterday-ish", cwd=repo)
    assert "--since 'yesterday-ish' is not a date" in since.stderr


def test_messages_name_parameters_defaults_fit_the_repository_and_retired_stays_retired(
    tmp_path: Path,
) -> None:
    """In a repository whose default branch is master: memory_diff's default compares with it;
    a refused citation names the parameter `cite`; a memory already expired when written is
    said to be; a superseded memory is not forgotten again."""
    repo = tmp_path / "old-style"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "master")
    (repo / "README.md").write_text("a project\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    Engram(cwd=repo).init(project=True)
    git(repo, "switch", "-q", "-c", "feature")

    async def scenario() -> None:
        async with connect(repo) as client:
            diff = await call(client, "memory_diff")
            assert diff["range"] == "master...HEAD"
            message = await fail(client, "memory_remember", content="x", cite=["nosuch.py"])
            assert "cite nosuch.py: not a file git tracks" in message
            assert "--cite" not in message
            expired = await call(client, "memory_remember", content="Old", valid_until="2001-01-01")
            assert [w for w in expired["warnings"] if "expired already" in w] == [
                "the memory is valid until 2001-01-01, which has passed: it is expired already, "
                "and recall and lists leave it out (give a later date, or none)"
            ]
            old = await call(client, "memory_remember", content="The API listens on port 8080")
            old_id = old["memory"]["id"]
            new = await call(
                client, "memory_forget", id=old_id, replace_with="The API listens on port 9090"
            )
            message = await fail(client, "memory_forget", id=old_id, reason="wrong")
            by = new["replacement"]["id"][:8]
            assert f"is superseded already (by {by})" in message
            assert f"memory_forget id={by}" in message
            assert "superseded already" in await fail(
                client, "memory_forget", id=old_id, replace_with="port 7070"
            )

    run(scenario)
    with Engram(cwd=repo) as engram:
        assert "memory.forgotten" not in [event.kind for _, event in engram.log()]
    # The command line says it in its words.
    done = cli("remember", "Older", "--valid-until", "2001-01-01", cwd=repo)
    assert done.exit_code == 0 and "expired already" in done.stderr
    cited = cli("remember", "x", "--cite", "nosuch.py", cwd=repo)
    assert cited.exit_code == 2 and "--cite nosuch.py: not a file git tracks" in cited.stderr


def test_scopes_limit_what_a_connection_may_do(repo: Path) -> None:
    async def scenario() -> None:
        async with connect(repo, "--scopes", "memory:read") as client:
            assert (await call(client, "memory_list"))["memories"] == []
            message = await fail(client, "memory_remember", content="x")
            assert "memory_remember needs the scope memory:write" in message
            message = await fail(client, "session_handoff", task="x", summary="y")
            assert "needs the scope session:write" in message
            runtime = (await call(client, "memory_stats"))["runtime"]
            assert runtime["scopes"] == ["memory:read"]

    run(scenario)


def written(repo: Path) -> tuple[dict[str, bytes], str, str]:
    """The store's event files, its git history and the work tree's status."""
    with Engram(cwd=repo) as engram:
        files = {str(p): p.read_bytes() for s in engram.stores() for p in s.event_files()}
    return files, git(repo, "log", "--all", "--format=%H %s"), git(repo, "status", "--porcelain")


def test_a_read_only_server_writes_nothing(repo: Path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with Engram(cwd=repo) as engram:
        engram.remember("The staging database is read-only on Sundays", kind="gotcha")
        crashed = engram.session_start(agent="codex", pid=int(dead))
        engram.commit()
    before = written(repo)

    async def scenario() -> None:
        async with connect(repo, "--scopes", "memory:read") as client:
            assert "memory_recall" in {t.name for t in (await client.list_tools()).tools}
            found = await call(client, "memory_recall", query="staging database")
            assert found["hits"]
            await call(client, "session_resume")
            runtime = (await call(client, "memory_stats"))["runtime"]
            assert runtime["session"] is None and runtime["interruptions_found"] == []

    run(scenario)
    assert written(repo) == before
    with Engram(cwd=repo) as engram:
        assert engram.session_info(crashed.id).state == "open"
        assert [s.id for s in engram.sessions()] == [crashed.id]


def test_every_tool_is_refused_without_its_scope(repo: Path) -> None:
    """In-process, for speed: each tool checks its scope before touching the store."""
    from engram.mcp.server import build_server

    server = build_server(cwd=repo, scopes=[])

    async def scenario() -> None:
        async with Client(server) as client:
            for name, (required, *_) in SURFACE.items():
                arguments: dict[str, Any] = {p: "x" for p in required}
                if "citations" in arguments:
                    arguments["citations"] = [{"path": "README.md", "start_line": 1}]
                message = await fail(client, name, **arguments)
                assert f"{name} needs the scope" in message, message

    run(scenario)


def test_results_are_bounded_and_say_so(repo: Path) -> None:
    with Engram(cwd=repo) as engram:
        for number in range(40):
            engram.remember(
                f"Note {number}: " + "lorem ipsum dolor sit amet " * 120,
                kind="note",
                check_duplicates=False,
            )
        long = engram.remember(
            "The deploy checklist: " + "step and check " * 1500,
            kind="procedure",
            check_duplicates=False,
        )
        task = engram.task_create("Big task", goal="Many steps")
        for number in range(60):
            engram.progress(task.id, f"Step {number} " + "detail " * 50)

    async def scenario() -> None:
        async with connect(repo) as client:
            listed = await call(client, "memory_list", limit=100)
            assert listed["truncated"] is True and 3 <= len(listed["memories"]) < 41
            assert len(json.dumps(listed)) < 30_000
            assert all(m["content_truncated"] for m in listed["memories"])
            whole = await call(client, "memory_get", id=long.id)
            assert whole["memory"]["content_truncated"] is False
            assert len(whole["memory"]["content"]) == len(long.content)
            resumed = await call(
                client, "session_resume", task=task.id, depth="full", max_chars=2000
            )
            assert resumed["truncated"] is True and len(resumed["markdown"]) <= 2100
            assert resumed["markdown"].endswith(
                "cut at 2000 characters; ask for less with depth=brief or since, or raise the "
                "limit with max_chars\n"
            )
            view = await call(client, "task_get", task=task.id)
            assert len(view["task"]["progress"]) == 50  # the latest 50
            assert view["truncated"] is True and "early progress" in view["note"]

    run(scenario)


def test_task_get_shows_the_memories_task_show_does(repo: Path) -> None:
    with Engram(cwd=repo) as engram:
        task = engram.task_create("Move the queue", goal="Jobs on Postgres")
        expired = engram.remember(
            "The queue runs on Redis until the migration", task=task.id, valid_until="2020-01-01"
        )
        live = engram.remember(
            "The queue runs on Postgres: we need SKIP LOCKED", kind="decision", task=task.id
        )
    shown = json.loads(cli("task", "show", task.id, "--json", cwd=repo).output)
    assert {m["id"] for m in shown["memories"]} == {expired.memory.id, live.memory.id}

    async def scenario() -> None:
        async with connect(repo) as client:
            view = await call(client, "task_get", task=task.id)
            assert [m["id"] for m in view["memories"]] == [m["id"] for m in shown["memories"]]
            assert [m["content"] for m in view["memories"]] == [
                m["content"] for m in shown["memories"]
            ]

    run(scenario)


def test_session_agent_comes_from_the_client_and_interruptions_are_found(repo: Path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    with Engram(cwd=repo) as engram:
        crashed = engram.session_start(agent="codex", pid=int(dead))

    async def scenario() -> str:
        async with connect(repo, client="cursor-vscode") as client:
            runtime = (await call(client, "memory_stats"))["runtime"]
            assert runtime["agent"] == "cursor" and runtime["client"] == "cursor-vscode"
            assert runtime["interruptions_found"] == [f"{crashed.id} (codex): crash"]
            return runtime["session"]

    session_id = run(scenario)
    with Engram(cwd=repo) as engram:
        assert engram.session_info(crashed.id).state == "interrupted"
        assert engram.session_info(session_id).state == "ended"


def test_sigterm_closes_the_session(repo: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, *serve_args("--agent", "codex")],
        cwd=repo,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        opened = []
        while not opened and time.monotonic() < deadline:
            time.sleep(0.1)
            with Engram(cwd=repo) as engram:
                opened = engram.sessions(states=["open"])
        assert opened, "the server opened no session"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 143
    finally:
        proc.kill()
        proc.wait()
    with Engram(cwd=repo) as engram:
        session = engram.session_info(opened[0].id)
        assert (session.state, session.how, session.agent) == ("ended", "sigterm", "codex")


def test_without_a_store_the_server_says_how_to_start_and_recovers(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with connect(tmp_path) as client:
            stats = await call(client, "memory_stats")
            assert stats["runtime"]["session"] is None
            assert any("engram init" in p for p in stats["runtime"]["problems"])
            message = await fail(client, "memory_remember", content="x")
            assert "run `engram init`" in message
            Engram().init()  # what the agent does next, from its shell
            await call(client, "memory_remember", content="The store exists now")
            assert (await call(client, "memory_stats"))["runtime"]["session"]

    run(scenario)


def test_a_server_with_an_invalid_engram_session_says_so_and_writes_nothing(repo: Path) -> None:
    files = {p: p.read_bytes() for p in (repo / ".engram").rglob("*.jsonl")}

    async def scenario() -> None:
        async with connect(repo, env={"ENGRAM_SESSION": "bad id!"}) as client:
            message = await fail(client, "memory_remember", content="Use Postgres")
            assert "ENGRAM_SESSION='bad id!' is not a session id" in message
            assert "unset it or set it to one" in message

    run(scenario)
    assert {p: p.read_bytes() for p in (repo / ".engram").rglob("*.jsonl")} == files
    assert git(repo, "status", "--porcelain") == ""


def test_a_running_server_finds_a_project_store_made_after_it_started(tmp_path: Path) -> None:
    """`engram init --project` while the server runs: the next call reads it, with no restart."""
    bare = make_repo(tmp_path / "bare")

    async def scenario() -> None:
        async with connect(bare) as client:
            message = await fail(client, "memory_list")
            assert "engram init --project" in message
            # A write says the same: either store would take it.
            message = await fail(client, "memory_remember", content="Not yet")
            assert "engram init` (personal) or `engram init --project`" in message
            assert run_engram("init", "--project", cwd=bare).returncode == 0
            assert (await call(client, "memory_list"))["memories"] == []
            stored = await call(client, "memory_remember", content="The store came later")
            assert stored["memory"]["store"] == "project"

    run(scenario)
    with Engram(cwd=bare, use="project") as engram:
        assert [m.content for m in engram.memories()] == ["The store came later"]


def test_a_project_store_made_after_the_server_started_takes_the_writes(tmp_path: Path) -> None:
    """With a personal store already there, writes go to the project store once it exists,
    as they would after a restart: never silently on to the personal store."""
    Engram().init()
    late = make_repo(tmp_path / "late")

    async def scenario() -> None:
        async with connect(late) as client:
            before = await call(client, "memory_remember", content="Written before the project")
            assert before["memory"]["store"] == "personal"
            assert run_engram("init", "--project", cwd=late).returncode == 0
            after = await call(client, "memory_remember", content="Written after the project")
            assert after["memory"]["store"] == "project"
            stores = [s["store"] for s in (await call(client, "memory_stats"))["stores"]]
            assert stores == ["project", "personal"]

    run(scenario)
    with Engram(cwd=late, use="project") as engram:
        assert [m.content for m in engram.memories()] == ["Written after the project"]


def test_a_server_started_outside_the_project_works_in_the_clients_roots(
    repo: Path, tmp_path: Path
) -> None:
    """Cursor may start a stdio server in `/`: the project comes from the client's roots."""
    elsewhere = tmp_path / "not-a-project"
    elsewhere.mkdir()

    async def scenario() -> None:
        async with connect(
            Path("/"), client="cursor-vscode", roots=[elsewhere, repo / "src"]
        ) as client:
            stored = await call(
                client, "memory_remember", content="Retries are capped in the HTTP client"
            )
            assert stored["memory"]["store"] == "project"
            stats = await call(client, "memory_stats")
            assert stats["runtime"]["cwd"] == str(repo / "src")
            assert stats["stores"][0]["store"] == "project"
            assert stats["runtime"]["session"]
            task = await call(client, "task_create", name="Cap retries")
            listed = await call(client, "task_list")
            assert [t["id"] for t in listed["tasks"]] == [task["task"]["id"]]

    run(scenario)
    with Engram(cwd=repo) as engram:
        assert [m.content for m in engram.memories()] == ["Retries are capped in the HTTP client"]
        assert [t.name for t in engram.tasks()] == ["Cap retries"]
        assert [s.agent for s in engram.sessions()] == ["cursor"]
    assert not (elsewhere / ".engram").exists()


def test_without_roots_the_server_uses_workspace_folder_paths(repo: Path, tmp_path: Path) -> None:
    with Engram(cwd=repo) as engram:
        engram.remember("Migrations run in CI, never by hand", kind="convention")
    elsewhere = tmp_path / "not-a-project"
    elsewhere.mkdir()

    async def scenario() -> None:
        async with connect(elsewhere, env={"WORKSPACE_FOLDER_PATHS": str(repo)}) as client:
            listed = await call(client, "memory_list")
            assert [m["content"] for m in listed["memories"]] == [
                "Migrations run in CI, never by hand"
            ]
            assert (await call(client, "memory_stats"))["runtime"]["cwd"] == str(repo)

    run(scenario)


# -- client configuration -----------------------------------------------------------------------


def test_install_claude_merges_user_and_project_config(
    repo: Path, with_mcp_commands: Any, tmp_path: Path
) -> None:
    home = Path(os.environ["HOME"])
    (home / ".claude.json").write_text(
        json.dumps(
            {
                "numStartups": 12,
                "mcpServers": {
                    "other": {"command": "other-server"},
                    "engram": {"command": "old", "env": {"X": "1"}},
                },
                "projects": {"/somewhere": {"allowedTools": []}},
            },
            indent=2,
        )
    )
    os.chmod(home / ".claude.json", 0o600)
    result = cli("mcp", "install", "claude")
    assert result.exit_code == 0, result.output
    assert "dropped env (Engram writes its entry in full)" in result.output
    data = json.loads((home / ".claude.json").read_text())
    assert data["numStartups"] == 12 and data["projects"] == {"/somewhere": {"allowedTools": []}}
    assert data["mcpServers"]["other"] == {"command": "other-server"}
    entry = data["mcpServers"]["engram"]
    assert set(entry) == {"type", "command", "args"} and entry["type"] == "stdio"
    assert entry["args"][-3:] == ["serve", "--agent", "claude-code"]
    assert (home / ".claude.json").stat().st_mode & 0o777 == 0o600
    before = (home / ".claude.json").read_text()
    assert cli("mcp", "install", "claude").exit_code == 0
    assert (home / ".claude.json").read_text() == before  # idempotent

    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(
        json.dumps(
            {
                "permissions": {"allow": ["Bash(ls)"]},
                "hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "echo hi"}]}]},
            }
        )
    )
    result = cli("mcp", "install", "claude", "--project", "--hooks", cwd=repo / "src")
    assert result.exit_code == 0, result.output
    project = json.loads((repo / ".mcp.json").read_text())
    assert project["mcpServers"]["engram"] == {
        "type": "stdio",
        "command": "engram",
        "args": ["serve", "--agent", "claude-code"],
    }
    hooks = json.loads(settings.read_text())
    assert hooks["permissions"] == {"allow": ["Bash(ls)"]}
    commands = {
        event: [h["command"] for g in groups for h in g["hooks"]]
        for event, groups in hooks["hooks"].items()
    }
    assert commands == {
        "SessionStart": ["echo hi", "engram mcp hook session-start"],
        "PreCompact": ["engram mcp hook precompact"],
        "SessionEnd": ["engram mcp hook session-end"],
        "PostToolUse": ["engram mcp hook capture"],
        "PostToolUseFailure": ["engram mcp hook capture"],
        "UserPromptSubmit": ["engram mcp hook prompt"],
    }
    assert cli("mcp", "install", "claude", "--project", "--hooks", cwd=repo).exit_code == 0
    assert json.loads(settings.read_text()) == hooks  # no duplicates
    user_hooks = cli("mcp", "install", "claude", "--hooks")
    assert user_hooks.exit_code == 0
    user = json.loads((home / ".claude" / "settings.json").read_text())
    assert (
        user["hooks"]["PreCompact"][0]["hooks"][0]["command"]
        == f"{sys.executable} -I -m engram.hooks precompact"
    )


def test_install_cursor_and_codex(repo: Path, with_mcp_commands: Any) -> None:
    home = Path(os.environ["HOME"])
    assert cli("mcp", "install", "cursor").exit_code == 0
    user = json.loads((home / ".cursor" / "mcp.json").read_text())
    assert user["mcpServers"]["engram"]["args"][-3:] == ["serve", "--agent", "cursor"]
    assert cli("mcp", "install", "cursor", "--project", cwd=repo).exit_code == 0
    assert (
        json.loads((repo / ".cursor" / "mcp.json").read_text())["mcpServers"]["engram"]["command"]
        == "engram"
    )

    config = home / ".codex" / "config.toml"
    config.parent.mkdir()
    original = (
        '# my settings\nmodel = "o4-mini"  # fast\n\n[mcp_servers.other]\n'
        'command = "other"\nargs = ["--flag"]\n\n[mcp_servers.engram]\ncommand = "old"\n'
        '\n[mcp_servers.engram.env]\nENGRAM_HOME = "/data/engram"\n\n'
        '[profiles.deep]\nmodel = "o3"\nnotes = """\n[not a table]\n"""\n'
    )
    config.write_text(original)
    result = cli("mcp", "install", "codex")
    assert result.exit_code == 0, result.output
    text = config.read_text()
    assert text.startswith('# my settings\nmodel = "o4-mini"  # fast\n')
    assert '[profiles.deep]\nmodel = "o3"\nnotes = """\n[not a table]\n"""' in text
    data = tomllib.loads(text)
    assert data["model"] == "o4-mini" and data["profiles"]["deep"]["notes"] == "[not a table]\n"
    assert data["mcp_servers"]["other"] == {"command": "other", "args": ["--flag"]}
    engram_entry = data["mcp_servers"]["engram"]
    assert set(engram_entry) == {"command", "args"}  # its env subtable dropped, and said
    assert "dropped env" in result.output
    assert engram_entry["args"][-3:] == ["serve", "--agent", "codex"]
    assert cli("mcp", "install", "codex").exit_code == 0
    assert config.read_text() == text  # idempotent

    config.write_text('mcp_servers = { engram = { command = "x" } }\n')
    refused = cli("mcp", "install", "codex")
    assert refused.exit_code == 2 and "add this table by hand" in refused.stderr
    assert config.read_text() == 'mcp_servers = { engram = { command = "x" } }\n'
    (repo / ".cursor" / "mcp.json").write_text("{not json")
    refused = cli("mcp", "install", "cursor", "--project", cwd=repo)
    assert refused.exit_code == 2 and "is not valid JSON" in refused.stderr
    assert cli("mcp", "install", "codex", "--hooks").exit_code == 2


def test_install_claude_project_says_it_awaits_approval_and_approves_for_this_user(
    repo: Path, with_mcp_commands: Any
) -> None:
    local = repo / ".claude" / "settings.local.json"
    result = cli("mcp", "install", "claude", "--project", cwd=repo)
    assert result.exit_code == 0, result.output
    assert "shows 'engram' as \"Pending approval\" until you approve it" in result.output
    assert "--approve" in result.output and not local.exists()

    local.parent.mkdir()
    local.write_text(
        json.dumps(
            {
                "permissions": {"allow": ["Bash(ls)"]},
                "enabledMcpjsonServers": ["other"],
                "disabledMcpjsonServers": ["engram", "old"],
            }
        )
    )
    (repo / ".gitignore").write_text(".claude/settings.local.json\n")
    result = cli("mcp", "install", "claude", "--project", "--approve", cwd=repo / "src")
    assert result.exit_code == 0, result.output
    assert f"updated {local}: project MCP server 'engram' approved for you" in result.output
    assert json.loads(local.read_text()) == {
        "permissions": {"allow": ["Bash(ls)"]},
        "enabledMcpjsonServers": ["other", "engram"],
        "disabledMcpjsonServers": ["old"],
    }
    assert "Pending approval" not in result.output and "not ignored" not in result.output
    before = local.read_text()
    again = cli("mcp", "install", "claude", "--project", "--approve", cwd=repo)
    assert "already approved for you" in again.output and local.read_text() == before

    (repo / ".gitignore").unlink()
    unignored = cli("mcp", "install", "claude", "--project", cwd=repo)
    assert ".claude/settings.local.json kept out of git" in unignored.output
    assert "/.claude/settings.local.json" in (repo / ".git/info/exclude").read_text()
    assert "is not ignored by git" not in unignored.output
    git(repo, "add", "-f", ".claude/settings.local.json")
    committed = cli("mcp", "install", "claude", "--project", cwd=repo)
    assert f"{local} is committed" in committed.output
    assert "git rm --cached .claude/settings.local.json" in committed.output
    git(repo, "rm", "-q", "--cached", ".claude/settings.local.json")

    local.write_text("{not json")
    refused = cli("mcp", "install", "claude", "--project", "--approve", cwd=repo)
    assert refused.exit_code == 2 and "is not valid JSON" in refused.stderr
    assert local.read_text() == "{not json"
    wrong = cli("mcp", "install", "cursor", "--project", "--approve", cwd=repo)
    assert wrong.exit_code == 2 and "--approve is for Claude Code's project servers" in wrong.stderr


def test_install_claude_in_two_scopes_says_which_to_keep(
    repo: Path, with_mcp_commands: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = Path(os.environ["HOME"])
    # `engram` on the PATH, as a project's config needs it (else a warning says so too).
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    alone = cli("mcp", "install", "claude", "--hooks", cwd=repo)
    assert alone.exit_code == 0 and "warning" not in alone.output
    both = cli("mcp", "install", "claude", "--project", "--hooks", cwd=repo)
    assert both.exit_code == 0, both.output
    warning = [line for line in both.stderr.splitlines() if line.startswith("warning:")]
    user_hooks = home / ".claude" / "settings.json"
    assert warning == [
        (
            f"warning: 'engram' is configured for Claude Code in user ({home / '.claude.json'}) "
            f"and project ({repo / '.mcp.json'}): Claude Code warns about the conflict. Keep the "
            "project entry (it is this repository's) and remove the other: `claude mcp remove "
            "--scope user engram`"
        ),
        (
            f"warning: Engram's hooks are in both {user_hooks} and "
            f"{repo / '.claude' / 'settings.json'}, so they run twice in this project; keep the "
            f"project's and remove them from {user_hooks}"
        ),
    ]
    # The same from the other side, and for Claude Code's local scope (this project, this user).
    data = json.loads((home / ".claude.json").read_text())
    del data["mcpServers"]["engram"]
    data["projects"] = {str(repo): {"mcpServers": {"engram": {"command": "engram"}}}}
    (home / ".claude.json").write_text(json.dumps(data))
    local = cli("mcp", "install", "claude", "--project", cwd=repo)
    assert (
        "in local (" in local.stderr and "`claude mcp remove --scope local engram`" in local.stderr
    )
    assert "hooks are in both" in local.stderr
    (home / ".claude" / "settings.json").unlink()
    assert "hooks are in both" not in cli("mcp", "install", "claude", "--project", cwd=repo).stderr


def test_mcp_instructions_prints_a_block_for_agents_md(with_mcp_commands: Any) -> None:
    result = cli("mcp", "instructions")
    assert result.exit_code == 0
    assert result.output.startswith("## Memory and continuity (Engram)")
    assert "session_resume" in result.output and "session_handoff" in result.output


def test_serve_refuses_auth_options_on_stdio(with_mcp_commands: Any) -> None:
    result = cli("serve", "--oidc-issuer", "https://id.example.com")
    assert result.exit_code == 2 and "apply to --http only" in result.stderr


# -- Claude Code hooks --------------------------------------------------------------------------


def hook(name: str, payload: dict[str, Any] | str, cwd: Path) -> subprocess.CompletedProcess[str]:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "engram.hooks", name],
        input=text,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
    )
    assert time.perf_counter() - started < 10
    assert done.returncode == 0, done.stderr
    return done


def test_hooks_inject_the_resume_and_checkpoint_before_compaction(repo: Path) -> None:
    with Engram(cwd=repo) as engram:
        task = engram.task_create("Add OAuth login", goal="Users can sign in with GitHub")
        engram.handoff(task.id, summary="App registered", next=["Write the callback"])
    started = hook("session-start", {"cwd": str(repo), "source": "startup"}, repo)
    context = json.loads(started.stdout)["hookSpecificOutput"]
    assert context["hookEventName"] == "SessionStart"
    assert "Write the callback" in context["additionalContext"]

    assert hook("precompact", {"cwd": str(repo), "trigger": "auto"}, repo).stdout == ""
    with Engram(cwd=repo) as engram:
        latest = engram.checkpoints(task.id)[-1]
        assert latest.reason == "overflow" and latest.record["next"] == ["Write the callback"]
        assert latest.summary.startswith("App registered [saved before the context")

    # Never blocks the client: bad input, no store, several tasks.
    assert hook("precompact", "not json", repo).stdout == ""
    nowhere = repo.parent / "elsewhere"
    nowhere.mkdir()
    assert hook("session-start", {"cwd": str(nowhere)}, nowhere).stdout.strip() in (
        "",
        json.dumps(
            {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": ""}}
        ),
    )
    with Engram(cwd=repo) as engram:
        engram.task_create("Second task")
    several = json.loads(hook("session-start", {"cwd": str(repo)}, repo).stdout)
    assert "several active tasks" in several["hookSpecificOutput"]["additionalContext"]


def test_session_end_hook_closes_this_clients_session(repo: Path) -> None:
    """The hook and the server are both children of the client (here, this test process)."""

    async def scenario() -> tuple[str, str]:
        async with connect(repo) as client:
            first = (await call(client, "memory_stats"))["runtime"]["session"]
            hook("session-end", {"cwd": str(repo), "reason": "clear"}, repo)
            with Engram(cwd=repo) as engram:
                assert engram.session_info(first).state == "ended"
            # The next call (a new conversation after /clear) opens a new session.
            await call(client, "memory_remember", content="After the clear")
            second = (await call(client, "memory_stats"))["runtime"]["session"]
            assert second != first
            return first, second

    first, second = run(scenario)
    with Engram(cwd=repo) as engram:
        assert engram.session_info(second).state == "ended"
        assert engram.session_info(first).how == "exit"


# -- cold start ---------------------------------------------------------------------------------


def cold_start(tmp_path: Path, runs: int) -> dict[str, Any]:
    """benchmarks/mcp_cold_start.py's report: medians of `runs` alternating starts of a bare SDK
    server and of `engram serve`, spawn to the first `tools/list`."""
    out = tmp_path / "cold.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "mcp_cold_start.py"),
            "--runs",
            str(runs),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


@pytest.mark.slow
def test_cold_start_stays_close_to_a_bare_server(tmp_path: Path) -> None:
    """The timing claim (the first tools/list within 0.5 s of a bare SDK server's) is the
    benchmark's, measured on an idle machine (docs/benchmarks.md). Here, on a machine that may be
    busy, the bound is a generous ratio to a bare server measured in the same run: Engram's
    median of 5 alternating starts is within twice the bare server's (or 0.5 s of it, where both
    are fast). A failing measurement is taken once more before the test fails, since noise does
    not repeat and a regression does. What would slow the start without doubling it (loading the
    embedding model or an index) is caught without a clock by
    test_the_server_answers_without_loading_the_embedding_model_or_an_index."""

    def over(report: dict[str, Any]) -> bool:
        median = report["median_seconds"]
        return median["engram"] > max(2 * median["bare"], median["bare"] + 0.5)

    report = cold_start(tmp_path, runs=5)
    if over(report):
        report = cold_start(tmp_path, runs=5)
    assert not over(report), report


SEARCH_LIBRARIES = {"fastembed", "onnxruntime", "tokenizers", "usearch", "tantivy", "torch"}


def test_the_server_answers_without_loading_the_embedding_model_or_an_index(repo: Path) -> None:
    """`engram serve` opens its session in the background and loads the embedding model and
    the search indexes only when a tool needs them: started, asked for its tools and closed, it
    has imported none of their libraries (`python -X importtime` lists every import)."""
    log = repo.parent / "imports.txt"
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-X", "importtime", *serve_args()],
            cwd=repo,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict[str, Any]) -> None:
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    try:
        send(
            {
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "probe", "version": "1"},
                },
            }
        )
        assert json.loads(proc.stdout.readline())["id"] == 1
        send({"method": "notifications/initialized"})
        send({"id": 2, "method": "tools/list"})
        answer = json.loads(proc.stdout.readline())
        assert answer["id"] == 2 and answer["result"]["tools"]
        proc.communicate(timeout=60)  # end of input: the server ends its session and exits
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in log.read_text().splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "engram.mcp.server" in imported  # the measurement works
    assert {name for name in imported if name.split(".")[0] in SEARCH_LIBRARIES} == set()


def test_the_approved_project_server_is_the_one_that_serves(
    repo: Path, with_mcp_commands: Any
) -> None:
    """The server `install claude --project --approve` writes and approves is started exactly as
    Claude Code starts it (its `.mcp.json` entry, through the SDK's real stdio client): it
    serves this project's store."""
    assert cli("mcp", "install", "claude", "--project", "--approve", cwd=repo).exit_code == 0
    servers = json.loads((repo / ".mcp.json").read_text())["mcpServers"]
    approved = json.loads((repo / ".claude" / "settings.local.json").read_text())
    assert list(servers) == approved["enabledMcpjsonServers"] == ["engram"]
    entry = servers["engram"]
    # `engram` on PATH, as the install guide leaves it (here: this environment's scripts).
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    command = shutil.which(entry["command"], path=path)
    assert command is not None, entry
    params = StdioServerParameters(
        command=command,
        args=entry.get("args", []),
        env={**os.environ, "PATH": path, **entry.get("env", {})},
        cwd=repo,
    )

    async def scenario() -> None:
        async with Client(
            params,
            client_info=Implementation(name="claude-code", version="2.1"),
            read_timeout_seconds=120,
        ) as client:
            assert "memory_remember" in {t.name for t in (await client.list_tools()).tools}
            await call(
                client, "memory_remember", content="The approved server writes to the project store"
            )

    run(scenario)
    assert "The approved server writes" in cli("list", "--project", cwd=repo).stdout
