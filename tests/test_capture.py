"""Capture from client hooks: recorded Claude Code payloads through the installed hook commands
(real processes), `engram capture` for other harnesses, the prompt hook's bounded context."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from engram.api import Engram
from tests.conftest import cli, git, make_repo

PAYLOADS = Path(__file__).parent.parent / "fixtures" / "claude-code-hooks" / "session.jsonl"
SESSION = "9f1c2a4e-5b6d-4c3e-8a7f-0d1e2f3a4b5c"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = make_repo(
        tmp_path / "shop", {"README.md": "a shop\n", "src/payments.py": "amount = 0\n"}
    )
    with Engram(cwd=repo) as engram:
        engram.init(project=True)
        engram.remember(
            "The payments tests need the stripe mock server running on port 12111: "
            "start it with `stripe-mock -http-port 12111` first",
            kind="gotcha",
        )
        engram.remember(
            "Refunds are issued through the ledger service, never directly", kind="decision"
        )
        engram.remember("Release notes are written in the changelog by hand", kind="convention")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "engram")
    return repo


def installed_hooks() -> dict[str, tuple[str, str | None]]:
    """What `engram mcp install claude --hooks` wrote: event -> (command, matcher)."""
    result = cli("mcp", "install", "claude", "--hooks")
    assert result.exit_code == 0, result.output
    settings = json.loads((Path(os.environ["HOME"]) / ".claude" / "settings.json").read_text())
    out = {}
    for event, groups in settings["hooks"].items():
        [group] = groups
        [entry] = group["hooks"]
        out[event] = (entry["command"], group.get("matcher"))
    return out


def run_hook(command: str, payload: dict[str, Any], cwd: Path) -> tuple[str, float]:
    """Run one installed hook command as Claude Code does: a shell, the payload on stdin."""
    started = time.perf_counter()
    done = subprocess.run(
        command,
        shell=True,
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
    )
    took = time.perf_counter() - started
    assert done.returncode == 0
    assert done.stderr == "", done.stderr
    return done.stdout, took


def recorded(repo: Path) -> list[dict[str, Any]]:
    text = PAYLOADS.read_text().replace("$REPO", str(repo)).replace("$HOME", os.environ["HOME"])
    return [json.loads(line) for line in text.splitlines()]


def test_recorded_claude_code_session_through_the_installed_hooks(repo: Path) -> None:
    hooks = installed_hooks()
    assert set(hooks) == {
        "SessionStart",
        "PreCompact",
        "SessionEnd",
        "PostToolUse",
        "PostToolUseFailure",
        "UserPromptSubmit",
    }
    assert hooks["PostToolUse"][1] == "Edit|Write|MultiEdit|NotebookEdit|Bash"
    assert hooks["PostToolUseFailure"][1] == "Bash"
    assert all(" -m engram.hooks " in c and " -I " in c for c, _ in hooks.values())
    with Engram(cwd=repo) as engram:
        task = engram.task_create("Take card payments", goal="Charges go through stripe")
        engram.handoff(
            task.id,
            summary="Charge path drafted",
            files=["README.md"],
            next=["Make the payments tests pass"],
        )
    with Engram(cwd=repo, use="project") as engram:
        engram.config_set("capture.recall_tokens", "60")
    (repo / "src" / "refunds.py").write_text("def refund(charge):\n    return charge\n")

    contexts = []
    head = git(repo, "rev-parse", "HEAD")
    for payload in recorded(repo):
        if payload["hook_event_name"] == "PreCompact":
            assert git(repo, "rev-parse", "HEAD") == head  # capturing commits nothing
        matcher = hooks[payload["hook_event_name"]][1]
        if matcher is not None:
            assert payload["tool_name"] in matcher.split("|")
        out, _ = run_hook(hooks[payload["hook_event_name"]][0], payload, repo)
        if payload["hook_event_name"] == "UserPromptSubmit":
            contexts.append(out)
        else:
            assert out == ""  # nothing outside its JSON, and capture says nothing

    # The journal: files of the work tree (a repeat folded), failures with a count, the
    # credential redacted, the interrupt and the file outside the repository not failures.
    stats = json.loads(cli("capture", "--stats", "--json", cwd=repo).output)
    [mine] = [s for s in stats if s["session"] == SESSION]
    assert mine["files"] == ["src/refunds.py", "src/payments.py"]
    assert mine["outside"] == 1 and mine["commands"] == 1
    failures = {f["command"]: f for f in mine["failures"]}
    tests = failures["python -m pytest -q tests/test_payments.py"]
    assert tests["count"] == 2 and tests["exit_code"] == 1
    assert "ConnectionRefusedError" in tests["output"] and tests["output"].startswith("F.")
    [secret] = [f for f in mine["failures"] if "curl" in f["command"]]
    assert "sk_live" not in json.dumps(stats) and "[REDACTED:" in secret["command"]
    assert secret["exit_code"] == 7 and secret["redacted"] is True
    assert len(mine["failures"]) == 2 and mine["folded"] == 2  # a file and a failure

    # The prompt hook: the relevant gotcha with its id, within budget; nothing for an unrelated
    # prompt; the same memory not again in the session.
    relevant, unrelated, again = contexts
    added = json.loads(relevant)["hookSpecificOutput"]
    assert added["hookEventName"] == "UserPromptSubmit"
    with Engram(cwd=repo) as engram:
        [gotcha] = engram.memories(kinds=["gotcha"])
    assert f"`{gotcha.id}`" in added["additionalContext"]
    assert "stripe" in added["additionalContext"]
    assert "Refunds" not in added["additionalContext"]
    assert len(added["additionalContext"]) <= 60 * 4
    assert unrelated == "" and again == ""

    # The PreCompact checkpoint carries what was captured, and nothing was committed by it.
    with Engram(cwd=repo) as engram:
        latest = engram.checkpoints(task.id)[-1]
        assert latest.reason == "overflow"
        paths = [f["path"] for f in latest.record["working_set"]["files"]]
        assert paths == ["README.md", "src/refunds.py", "src/payments.py"]
        commands = latest.record["working_set"]["commands"]
        assert any("pytest" in c and "exit 1, 2 times" in c for c in commands)
        assert not any("sk_live" in c for c in commands)
        assert latest.record["next"] == ["Make the payments tests pass"]
        resumed = engram.resume(task=task.id).markdown
    assert "src/refunds.py" in resumed and "exit 1, 2 times" in resumed


def test_a_changed_memory_is_shown_again_and_the_prompt_hook_can_be_turned_off(repo: Path) -> None:
    hooks = installed_hooks()
    command = hooks["UserPromptSubmit"][0]
    prompt = {
        "session_id": "s1",
        "cwd": str(repo),
        "hook_event_name": "UserPromptSubmit",
        "prompt": "why do the payments tests need the stripe mock server?",
    }
    first, _ = run_hook(command, prompt, repo)
    assert "stripe" in first
    assert run_hook(command, prompt, repo)[0] == ""
    with Engram(cwd=repo) as engram:
        [gotcha] = engram.memories(kinds=["gotcha"])
        engram.update(
            gotcha.id,
            "The payments tests need the stripe mock server on port "
            "12112 now: `stripe-mock -http-port 12112`",
        )
    assert "12112" in run_hook(command, prompt, repo)[0]
    with Engram(cwd=repo, use="project") as engram:
        engram.config_set("capture.recall", "false")
        engram.update(gotcha.id, "The payments tests need the stripe mock server on 12113")
    assert run_hook(command, {**prompt, "session_id": "s2"}, repo)[0] == ""


def test_the_prompt_hook_reads_a_prompt_clause_by_clause_and_adds_nothing_unrelated(
    repo: Path,
) -> None:
    """A memory named by one clause of a prompt is added however much else the prompt says;
    prompts of any length that name no memory add nothing; and a memory written next to the
    one added does not ride along."""
    with Engram(cwd=repo) as engram:
        deploy = engram.remember(
            "Deploys go through the blue-green script in ops/deploy.sh; never deploy on Fridays",
            kind="convention",
        )
        suite = engram.remember(
            "We use pytest -q; never run the integration suite locally, it needs the staging "
            "database",
            kind="convention",
        )
    command = installed_hooks()["UserPromptSubmit"][0]
    seen = iter(range(100))

    def added(prompt: str) -> str:
        payload = {
            "session_id": f"p{next(seen)}",
            "cwd": str(repo),
            "hook_event_name": "UserPromptSubmit",
            "prompt": prompt,
        }
        out, _ = run_hook(command, payload, repo)
        return json.loads(out)["hookSpecificOutput"]["additionalContext"] if out else ""

    def ids(prompt: str) -> set[str]:
        return {i for i in (deploy.id, suite.id) if f"`{i}`" in added(prompt)}

    assert ids("can we deploy on Fridays?") == {deploy.id}
    assert ids("can we deploy on Fridays? x x x") == {deploy.id}
    assert ids("I want to ship the new billing page today, can we deploy on Fridays?") == {
        deploy.id
    }
    assert ids(
        "Run the integration suite for me please, I want to be sure nothing broke in the "
        "staging database code"
    ) == {suite.id}
    # Its whole text names it, and only it: the memory written just before is no context.
    assert ids(suite.content) == {suite.id}
    for unrelated in [
        "hi",
        "thanks, looks good",
        "Rename the variable x to count in utils.py",
        "Please tidy the wording of the introduction in the documentation",
        "Make the button on the settings screen green and a bit larger, the designers asked for it",
        "Refactor the sorting helper so that it uses a key function instead of a comparison "
        "function and add type hints while you are at it, then explain the change in a short "
        "paragraph",
        "I am not sure this approach is right. Let's step back and think about the overall "
        "design of the search component before we write more code; list the options with "
        "their trade-offs.",
    ]:
        assert added(unrelated) == "", unrelated


def test_engram_capture_takes_any_harness_and_skips_bad_lines(repo: Path) -> None:
    lines = [
        json.dumps({"event": "file", "path": "src/payments.py", "session": "codex-1"}),
        json.dumps({"event": "file", "path": "src/payments.py", "session": "codex-1"}),
        "not json at all",
        json.dumps(
            {
                "event": "command",
                "command": "make test",
                "exit_code": 2,
                "output": "make: *** [test] Error 2",
                "session": "codex-1",
            }
        ),
        json.dumps({"event": "command", "command": "make lint", "exit_code": "bad"}),
        json.dumps({"event": "file", "path": "../outside.txt", "session": "codex-1"}),
        json.dumps({"event": "file", "path": "docs/a.md"}),
        json.dumps(["a", "list"]),
    ]
    result = cli("capture", input="\n".join(lines) + "\n", cwd=repo)
    assert result.exit_code == 0, result.output
    assert "1 failure" in result.output and "1 folded" in result.output
    assert "line 3: not JSON" in result.stderr and "line 5: exit_code" in result.stderr
    stats = {
        s["session"]: s for s in json.loads(cli("capture", "--stats", "--json", cwd=repo).output)
    }
    assert stats["codex-1"]["files"] == ["src/payments.py"]
    assert stats["codex-1"]["outside"] == 1
    assert [f["command"] for f in stats["codex-1"]["failures"]] == ["make test"]
    assert stats["shell"]["files"] == ["docs/a.md"] and stats["shell"]["skipped"] == 3
    people = cli("capture", "--stats", cwd=repo).output
    assert "codex-1: 1 files, 1 failure candidates" in people
    assert "c1 exit 2: make test" in people

    with Engram(cwd=repo, use="project") as engram:
        engram.config_set("capture.commands", "false")
    off = cli(
        "capture",
        "--session",
        "codex-1",
        input=json.dumps({"event": "command", "command": "make docs", "exit_code": 1}) + "\n",
        cwd=repo,
    )
    assert "1 off" in off.output
    assert cli("capture", "--session", "bad id!", cwd=repo).exit_code == 2


def test_a_skipped_line_touches_no_journal_and_the_failure_still_links_its_candidate(
    repo: Path,
) -> None:
    """A line `engram capture` cannot read creates no journal of its own: the journal updated
    last stays the session that failed, so the failure the agent records names the candidate,
    and the text stats say it was recorded."""
    with Engram(cwd=repo) as engram:
        task = engram.task_create("Make the build pass")
    lines = [
        json.dumps(
            {
                "event": "command",
                "command": "make test",
                "exit_code": 2,
                "output": "Error 2",
                "session": "s1",
            }
        ),
        "oops",
    ]
    result = cli("capture", input="\n".join(lines) + "\n", cwd=repo)
    assert result.exit_code == 0, result.output
    assert "line 2: not JSON" in result.stderr
    journals = repo / ".git" / "engram" / "capture"
    assert sorted(p.name for p in journals.glob("*.json")) == ["s1.json"]
    recorded = cli("task", "failure", task.id, "make test failed: Error 2", cwd=repo)
    assert recorded.exit_code == 0, recorded.output
    with Engram(cwd=repo) as engram:
        [failure] = engram.task(task.id).failures
    assert failure.candidate == "s1/c1: make test (exit 2)"
    people = cli("capture", "--stats", cwd=repo).output
    assert f"c1 exit 2: make test (recorded as a failure of task {task.id})" in people
    # A batch of unreadable lines only, under a named session, creates nothing either.
    assert cli("capture", "--session", "s2", input="oops\n", cwd=repo).exit_code == 0
    assert sorted(p.name for p in journals.glob("*.json")) == ["s1.json"]


def test_a_damaged_journal_is_set_aside_and_never_stops_the_hook(repo: Path) -> None:
    hooks = installed_hooks()
    folder = repo / ".git" / "engram" / "capture"
    folder.mkdir(parents=True)
    (folder / "s9.json").write_text('{"version": 1, "files": "not a mapping"}')
    payload = {
        "session_id": "s9",
        "cwd": str(repo),
        "hook_event_name": "PostToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": str(repo / "new.txt"), "content": "x"},
        "tool_response": {},
    }
    assert run_hook(hooks["PostToolUse"][0], payload, repo)[0] == ""
    assert (folder / "s9.json.bad").exists()
    assert json.loads((folder / "s9.json").read_text())["files"].keys() == {"new.txt"}
    # Garbage on stdin, or no store at all: still exit 0 and silence on stdout.
    done = subprocess.run(
        hooks["PostToolUse"][0],
        shell=True,
        input="{not json",
        capture_output=True,
        text=True,
        cwd=repo,
        timeout=60,
    )
    assert done.returncode == 0 and done.stdout == ""
    # A session untouched for a month is removed when a new one starts its journal.
    old = time.time() - 31 * 86400
    os.utime(folder / "s9.json", (old, old))
    assert run_hook(hooks["PostToolUse"][0], {**payload, "session_id": "s10"}, repo)[0] == ""
    assert sorted(p.name for p in folder.glob("*.json")) == ["s10.json"]  # garbage: no journal
    elsewhere = repo.parent / "nowhere"
    elsewhere.mkdir()
    assert run_hook(hooks["PostToolUse"][0], {**payload, "cwd": str(elsewhere)}, elsewhere)[0] == ""


def test_a_recorded_failure_links_its_candidate_and_its_checkpoint_keeps_up(repo: Path) -> None:
    hooks = installed_hooks()
    with Engram(cwd=repo) as engram:
        task = engram.task_create("Take card payments")
    (repo / "src" / "refunds.py").write_text("def refund(charge):\n    return charge\n")
    for payload in recorded(repo)[:7]:  # the edits and the failed commands
        run_hook(hooks[payload["hook_event_name"]][0], payload, repo)
    with Engram(cwd=repo) as engram:
        engram.failure(
            task.id,
            "The payments tests fail: ConnectionRefusedError, the stripe mock is not running",
            component="payments",
        )
        engram.failure(task.id, "The deploy script is missing a flag")
        failures = engram.task(task.id).failures
        saved = engram.checkpoints(task.id)
    assert failures[0].candidate == (
        f"{SESSION}/c1: python -m pytest -q tests/test_payments.py (exit 1)"
    )
    assert failures[1].candidate is None  # shares nothing with what failed
    # The failure's automatic checkpoint carries the captured working set, though the agent
    # named no file.
    assert saved[0].reason == "failure"
    paths = {f["path"] for f in saved[0].record["working_set"]["files"]}
    assert paths == {"src/payments.py", "src/refunds.py"}
    assert any("exit 7" in c for c in saved[0].record["working_set"]["commands"])
    stats = json.loads(cli("capture", "--stats", "--json", cwd=repo).output)
    [linked] = [f for f in stats[0]["failures"] if f.get("task")]
    assert linked["id"] == "c1" and linked["task"] == task.id


def test_a_secret_where_a_command_or_its_output_is_cut_is_still_redacted(repo: Path) -> None:
    secret = "sk_live_51HqJ7vK2eZvKYlo2CxA9bF3d9s8TqWmN5pR"
    command = "echo " + "x" * 985 + f" STRIPE_API_KEY={secret}"
    output = "y" * 230 + f" {secret}\nsecond line"
    done = cli(
        "capture",
        "--session",
        "cut",
        input=json.dumps({"event": "command", "command": command, "exit_code": 3, "output": output})
        + "\n",
        cwd=repo,
    )
    assert done.exit_code == 0, done.output
    [stats] = json.loads(cli("capture", "--stats", "--session", "cut", "--json", cwd=repo).output)
    [failure] = stats["failures"]
    assert failure["redacted"] is True and len(failure["command"]) <= 1000
    kept = json.dumps(stats) + (repo / ".git" / "engram" / "capture" / "cut.json").read_text()
    assert "sk_live" not in kept and "HqJ7vK2" not in kept and "mN5pR" not in kept
    assert failure["output"].splitlines()[1] == "second line"
