"""Every command Engram installs runs Engram, never code from the repository it is started in.

A cloned repository holds a hostile top-level `engram/` package and `engram.py` that write a
marker file when imported. Each entry is installed for real (MCP configs of every client and
scope in a temporary HOME, Claude Code hooks, git hooks) and run as its client or git runs it,
from inside that repository: the MCP server through the SDK's stdio client, the hook commands
through a shell, the git hooks through `git commit`, `git checkout`, `git merge` and `git commit
--amend`. The marker never appears, and every entry does its work. Entries as older versions
wrote them do run the hostile code (the control), `engram doctor` names each, and installing
again rewrites them.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import cli, git, make_repo
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import Implementation

from engram.api import Engram

HOSTILE = """import pathlib
with open({marker!r}, "a") as marker:
    marker.write({name!r} + "\\n")
"""
CLIENTS = {"claude": "claude-code", "cursor": "cursor", "codex": "codex"}


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path]:
    """A repository with a project store whose top holds a hostile `engram/` package (with the
    modules the entries name) and an `engram.py`; and the marker file they would write."""
    marker = tmp_path / "marker"
    files = {"README.md": "a project\n"}
    for name in (
        "engram/__init__.py",
        "engram/__main__.py",
        "engram/hooks.py",
        "engram/githooks.py",
        "engram/cli/__init__.py",
        "engram.py",
    ):
        files[name] = HOSTILE.format(marker=str(marker), name=name)
    repo = make_repo(tmp_path / "cloned", files)
    with Engram(cwd=repo) as engram:
        engram.init(project=True)
        task = engram.task_create("Ship the parser", goal="parse every input")
        engram.handoff(task.id, summary="lexer done", next=["write the grammar"])
    assert git(repo, "status", "--porcelain") == ""  # the handoff committed the store
    return repo, marker


def env() -> dict[str, str]:
    """The environment a client or git gives its commands, with this installation's `engram`
    on the PATH (for the project-scope entries)."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}


def ran(marker: Path) -> list[str]:
    return marker.read_text().split() if marker.exists() else []


def server_entries(root: Path, *, project: bool) -> dict[str, tuple[str, list[str]]]:
    """Each client's entry for Engram's server, as the file the installer wrote holds it."""
    found = {}
    for client in CLIENTS:
        if client == "claude":
            path = root / (".mcp.json" if project else ".claude.json")
            entry = json.loads(path.read_text())["mcpServers"]["engram"]
        elif client == "cursor":
            entry = json.loads((root / ".cursor" / "mcp.json").read_text())["mcpServers"]["engram"]
        else:
            entry = tomllib.loads((root / ".codex" / "config.toml").read_text())["mcp_servers"][
                "engram"
            ]
        found[client] = (entry["command"], entry["args"])
    return found


def start_server(
    command: str,
    args: list[str],
    cwd: Path,
    client: str,
    label: str,
    *,
    environment: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Start the entry as the client does (its command and args, in the project, with the
    client's environment) through the SDK's stdio client; remember something and read the
    stats back."""

    async def scenario() -> dict[str, Any]:
        params = StdioServerParameters(
            command=command, args=args, env=environment or env(), cwd=cwd
        )
        async with Client(
            params, client_info=Implementation(name=client, version="1.0"), read_timeout_seconds=120
        ) as session:
            tools = {tool.name for tool in (await session.list_tools()).tools}
            assert {"memory_remember", "session_resume"} <= tools
            done = await session.call_tool(
                "memory_remember", {"content": f"entry {label} started the server", "kind": "fact"}
            )
            assert not done.is_error, done.content
            stats = await session.call_tool("memory_stats", {})
            assert stats.structured_content is not None
            return stats.structured_content

    return anyio.run(scenario)


def claude_hooks(path: Path) -> dict[str, str]:
    """Engram's hook command per Claude Code event in a settings file."""
    data = json.loads(path.read_text())
    return {
        event: hook["command"]
        for event, groups in data["hooks"].items()
        for group in groups
        for hook in group["hooks"]
        if "engram" in hook["command"]
    }


def run_hook(command: str, event: str, repo: Path) -> subprocess.CompletedProcess[str]:
    """A hook command as Claude Code runs it: through a shell, in the project, with the event
    as JSON on stdin."""
    payload = {
        "session_id": "s1",
        "cwd": str(repo),
        "hook_event_name": event,
        "source": "startup",
        "trigger": "auto",
        "reason": "exit",
    }
    done = subprocess.run(
        command,
        shell=True,
        cwd=repo,
        env=env(),
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done


# -- MCP servers ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_every_installed_mcp_server_runs_engram_from_a_hostile_repository(
    hostile: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, marker = hostile
    home = Path(os.environ["HOME"])
    for client in CLIENTS:
        assert cli("mcp", "install", client, cwd=repo).exit_code == 0
        assert cli("mcp", "install", client, "--project", cwd=repo).exit_code == 0
    user = server_entries(home, project=False)
    project = server_entries(repo, project=True)
    # The user entries name this installation's console script by its path.
    assert all(
        command == str(Path(sys.executable).parent / "engram") and args[0] == "serve"
        for command, args in user.values()
    ), user
    assert all(command == "engram" for command, _ in project.values()), project
    started = 0
    for scope, found in (("user", user), ("project", project)):
        for client, (command, args) in found.items():
            stats = start_server(command, args, repo, CLIENTS[client], f"{scope}-{client}")
            assert stats["runtime"]["cwd"] == str(repo), (scope, client)
            started += 1
            assert ran(marker) == [], (scope, client, ran(marker))
    # Where no console script sits beside this Python, the entry is Python with -I.
    monkeypatch.setattr("engram.base.entries.console_script", lambda: None)
    assert cli("mcp", "install", "claude", cwd=repo).exit_code == 0
    command, args = server_entries(home, project=False)["claude"]
    assert command == sys.executable and args[:3] == ["-I", "-m", "engram"], args
    start_server(command, args, repo, "claude-code", "python-isolated")
    assert ran(marker) == []
    with Engram(cwd=repo) as engram:
        texts = [m.content for m in engram.memories()]
    assert sum(text.startswith("entry ") for text in texts) == started + 1


# -- Claude Code hooks ----------------------------------------------------------------------------


def test_installed_claude_code_hooks_run_engram_from_a_hostile_repository(
    hostile: tuple[Path, Path],
) -> None:
    repo, marker = hostile
    home = Path(os.environ["HOME"])
    assert cli("mcp", "install", "claude", "--hooks", cwd=repo).exit_code == 0
    assert cli("mcp", "install", "claude", "--hooks", "--project", cwd=repo).exit_code == 0
    # The server entry written with them names the console script beside this Python.
    entry = json.loads((home / ".claude.json").read_text())["mcpServers"]["engram"]
    assert (entry["command"], entry["args"]) == (
        str(Path(sys.executable).parent / "engram"),
        ["serve", "--agent", "claude-code"],
    )
    for settings in (home / ".claude" / "settings.json", repo / ".claude" / "settings.json"):
        hooks = claude_hooks(settings)
        assert set(hooks) == {
            "SessionStart",
            "PreCompact",
            "SessionEnd",
            "PostToolUse",
            "PostToolUseFailure",
            "UserPromptSubmit",
        }
        for event in ("PostToolUse", "PostToolUseFailure", "UserPromptSubmit"):
            assert run_hook(hooks[event], event, repo).stdout == ""
        started = run_hook(hooks["SessionStart"], "SessionStart", repo)
        context = json.loads(started.stdout)["hookSpecificOutput"]["additionalContext"]
        assert "write the grammar" in context
        assert run_hook(hooks["PreCompact"], "PreCompact", repo).stdout == ""
        run_hook(hooks["SessionEnd"], "SessionEnd", repo)
        assert ran(marker) == [], (settings, ran(marker))
    with Engram(cwd=repo) as engram:
        [task] = engram.tasks()
        reasons = [c.reason for c in engram.checkpoints(task.id)]
    assert reasons.count("overflow") == 2  # one PreCompact per settings file


# -- git hooks ------------------------------------------------------------------------------------


def refreshes(repo: Path) -> int:
    log = repo / ".git" / "engram" / "hooks.log"
    return log.read_text().count("caches refreshed") if log.exists() else 0


def wait_for_refresh(repo: Path, before: int) -> None:
    """The background refresh a hook started has finished (bounded wait)."""
    deadline = time.monotonic() + 90
    while refreshes(repo) <= before:
        assert time.monotonic() < deadline, (
            (repo / ".git" / "engram" / "hooks.log").read_text()
            if (repo / ".git" / "engram" / "hooks.log").exists()
            else "no hooks.log"
        )
        time.sleep(0.1)


def test_installed_git_hooks_run_engram_from_a_hostile_repository(
    hostile: tuple[Path, Path],
) -> None:
    repo, marker = hostile
    done = cli("hooks", "install", cwd=repo)
    assert done.exit_code == 0, done.output
    for hook in ("pre-commit", "post-checkout", "post-merge", "post-rewrite"):
        text = (repo / ".git" / "hooks" / hook).read_text()
        assert f"{shlex.quote(sys.executable)} -I -m engram.githooks" in text, text
    # pre-commit: a damaged event file is refused (the real check ran), a clean commit passes.
    bad = repo / ".engram" / "events" / "2026" / "01" / "hand-edited.jsonl"
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_text('{"not": "an event"}\n')
    git(repo, "add", str(bad))
    refused = subprocess.run(
        ["git", "commit", "-q", "-m", "bad"], cwd=repo, env=env(), capture_output=True, text=True
    )
    assert refused.returncode == 1 and "commit refused" in refused.stderr, refused.stderr
    git(repo, "rm", "-q", "--cached", str(bad))
    bad.unlink()
    (repo / "src.txt").write_text("code\n")
    git(repo, "add", "src.txt")
    git(repo, "commit", "-q", "-m", "code")
    assert ran(marker) == []
    # post-checkout, post-merge, post-rewrite: each starts a refresh that finishes.
    before = refreshes(repo)
    git(repo, "checkout", "-q", "-b", "feature")
    wait_for_refresh(repo, before)
    with Engram(cwd=repo) as engram:
        engram.remember("the grammar is LL(1)")
        engram.commit()
    git(repo, "checkout", "-q", "main")
    before = refreshes(repo)
    git(repo, "merge", "-q", "--no-ff", "-m", "merge feature", "feature")
    wait_for_refresh(repo, before)
    before = refreshes(repo)
    git(repo, "commit", "-q", "--amend", "-m", "merged feature")
    wait_for_refresh(repo, before)
    assert ran(marker) == []
    with Engram(cwd=repo) as engram:
        found = [hit.memory.content for hit in engram.recall("grammar LL(1)")]
    assert found[:1] == ["the grammar is LL(1)"]


# -- entries older versions wrote -----------------------------------------------------------------


OLD_BLOCK = (
    "# >>> engram >>> (added by `engram hooks install`; `engram hooks uninstall` "
    "removes it)\n{body}\n# <<< engram <<<\n"
)


def write_old_entries(repo: Path, home: Path) -> None:
    """The entries as the installer wrote them before: this Python with a plain `-m`."""
    python = sys.executable
    (home / ".claude.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "engram": {
                        "type": "stdio",
                        "command": python,
                        "args": ["-m", "engram", "serve", "--agent", "claude-code"],
                    }
                }
            }
        )
    )
    (home / ".cursor").mkdir()
    (home / ".cursor" / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "engram": {
                        "command": python,
                        "args": ["-m", "engram", "serve", "--agent", "cursor"],
                    }
                }
            }
        )
    )
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text(
        f"[mcp_servers.engram]\ncommand = {json.dumps(python)}\n"
        'args = ["-m", "engram", "serve", "--agent", "codex"]\n'
    )
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text(
        json.dumps(
            {
                "hooks": {
                    event: [
                        {
                            "hooks": [
                                {
                                    "type": "command",
                                    "command": f"{python} -m engram.hooks {name}",
                                    "timeout": 30,
                                }
                            ]
                        }
                    ]
                    for event, name in (
                        ("SessionStart", "session-start"),
                        ("PreCompact", "precompact"),
                        ("SessionEnd", "session-end"),
                    )
                }
            }
        )
    )
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for hook, body in (
        ("pre-commit", f"{python} -m engram.githooks pre-commit || exit 1"),
        ("post-merge", f"{python} -m engram.githooks refresh --background >/dev/null 2>&1"),
        (
            "post-checkout",
            f'[ "$3" = "1" ] && {python} -m engram.githooks refresh --background >/dev/null 2>&1',
        ),
        ("post-rewrite", f"{python} -m engram.githooks refresh --background >/dev/null 2>&1"),
    ):
        (hooks / hook).write_text("#!/bin/sh\n" + OLD_BLOCK.format(body=body))
        (hooks / hook).chmod(0o755)


def entry_findings(repo: Path) -> list[dict[str, Any]]:
    done = cli("doctor", "--json", cwd=repo)
    report = json.loads(done.stdout)
    return [f for store in report["stores"] for f in store["findings"] if f["check"] == "entries"]


def test_doctor_names_old_entries_and_installing_again_rewrites_them(
    hostile: tuple[Path, Path],
) -> None:
    repo, marker = hostile
    home = Path(os.environ["HOME"])
    write_old_entries(repo, home)
    # The control: an old entry does run the repository's code.
    old = claude_hooks(home / ".claude" / "settings.json")["SessionStart"]
    subprocess.run(
        old,
        shell=True,
        cwd=repo,
        env=env(),
        input="{}",
        text=True,
        capture_output=True,
        timeout=120,
    )
    assert ran(marker) == ["engram/__init__.py", "engram/hooks.py"]
    marker.unlink()

    found = entry_findings(repo)
    fixes = {(Path(f["path"]).name, f["fix"]) for f in found}
    assert fixes == {
        (".claude.json", "`engram mcp install claude` rewrites it"),
        ("mcp.json", "`engram mcp install cursor` rewrites it"),
        ("config.toml", "`engram mcp install codex` rewrites it"),
        ("settings.json", "`engram mcp install claude --hooks` rewrites Engram's hooks"),
        *(
            (hook, "`engram hooks install --project` rewrites it")
            for hook in ("pre-commit", "post-merge", "post-checkout", "post-rewrite")
        ),
    }, found
    assert all(
        f["level"] == "error" and "from the directory it is started in" in f["message"]
        for f in found
    )
    shown = cli("doctor", cwd=repo)
    assert shown.exit_code == 1 and "runs `python -m engram` without -I" in shown.stdout

    # `mcp install` rewrites the server and (without --hooks) Engram's stale hooks with it.
    for client in CLIENTS:
        assert cli("mcp", "install", client, cwd=repo).exit_code == 0
    assert cli("hooks", "install", cwd=repo).exit_code == 0
    assert entry_findings(repo) == []
    hooks = claude_hooks(home / ".claude" / "settings.json")
    assert (
        hooks["SessionStart"] == f"{shlex.quote(sys.executable)} -I -m engram.hooks session-start"
    )
    assert "write the grammar" in run_hook(hooks["SessionStart"], "SessionStart", repo).stdout
    (repo / "more.txt").write_text("more\n")
    git(repo, "add", "more.txt")
    git(repo, "commit", "-q", "-m", "more")  # the rewritten pre-commit hook
    assert ran(marker) == []


def test_installing_the_server_rewrites_old_hooks_and_adds_none(tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(
        json.dumps(
            {
                "hooks": {
                    "SessionStart": [
                        {
                            "hooks": [
                                {
                                    "type": "command",
                                    "command": f"{sys.executable} -m engram.hooks session-start",
                                },
                                {"type": "command", "command": "echo mine"},
                            ]
                        }
                    ]
                }
            }
        )
    )
    done = cli("mcp", "install", "claude")
    assert done.exit_code == 0 and "hooks rewritten" in done.output, done.output
    hooks = json.loads(settings.read_text())["hooks"]
    assert list(hooks) == ["SessionStart"]  # none added without --hooks
    assert [h["command"] for h in hooks["SessionStart"][0]["hooks"]] == [
        f"{shlex.quote(sys.executable)} -I -m engram.hooks session-start",
        "echo mine",
    ]
    before = settings.read_text()
    assert cli("mcp", "install", "claude").exit_code == 0
    assert settings.read_text() == before  # nothing stale left: the file is not touched


def test_an_installation_isolated_mode_cannot_import_gets_p_and_still_skips_the_cwd(
    hostile: tuple[Path, Path],
) -> None:
    """Engram reachable only outside isolated mode's path (here through PYTHONPATH, as for an
    installation in the user's site-packages): the entries use -P, which also keeps the working
    directory off the path."""
    repo, marker = hostile
    root = Path(__file__).resolve().parent.parent
    base = Path(sys.executable).resolve()  # the interpreter under the virtual environment
    env = {**os.environ, "PYTHONPATH": str(root)}
    probe = "from engram.base import entries; print(entries.python_command('engram.hooks'))"
    done = subprocess.run(
        [str(base), "-c", probe],
        cwd=repo.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("'")[3] == "-P", done.stdout
    found = subprocess.run(
        [str(base), "-P", "-c", "import engram; print(engram.__file__)"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert found.stdout.strip() == str(root / "engram" / "__init__.py")
    assert ran(marker) == []
    mine = subprocess.run(
        [sys.executable, "-c", "from engram.base import entries; print(entries.isolation_flag())"],
        cwd=repo.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert mine.stdout.strip() == "-I" and ran(marker) == [], mine.stderr


def test_a_project_entry_whose_engram_is_not_on_path_is_named_at_install_and_by_doctor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A project's config runs `engram` by name: installed from a virtual environment that is
    not activated, the client could not start it. The installer and the doctor both say so,
    with the fix; and a user's entry whose installation is gone is named too."""
    repo = make_repo(tmp_path / "repo")
    Engram(cwd=repo).init(project=True)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    done = cli("mcp", "install", "claude", "--project", "--hooks", "--approve", cwd=repo)
    assert done.exit_code == 0, done.output
    warned = [line for line in done.stderr.splitlines() if "not on PATH" in line]
    assert len(warned) == 1, done.stderr
    assert "activate the virtual environment" in warned[0]
    assert "pipx install engram" in warned[0]
    found = {(Path(f["path"]).name, f["level"], f["fix"]) for f in entry_findings(repo)}
    fix = next(iter(found))[2]
    assert found == {(".mcp.json", "warning", fix), ("settings.json", "warning", fix)}
    assert fix.startswith("activate the virtual environment Engram is installed in")
    shown = cli("doctor", cwd=repo)
    assert "`engram` by name, which is not on PATH here" in shown.stdout
    assert shown.exit_code != 0

    # With `engram` on the PATH (as it is once the fix is made), nothing is said.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "engram").write_text("#!/bin/sh\n")
    (bin_dir / "engram").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    again = cli("mcp", "install", "claude", "--project", "--hooks", cwd=repo)
    assert again.exit_code == 0 and "not on PATH" not in again.output
    assert entry_findings(repo) == []

    # A user's entry runs an installation by its path: once it is gone, the doctor says so.
    assert cli("mcp", "install", "claude", cwd=repo).exit_code == 0
    user = Path(os.environ["HOME"]) / ".claude.json"
    data = json.loads(user.read_text())
    data["mcpServers"]["engram"]["command"] = str(tmp_path / "gone" / "bin" / "engram")
    user.write_text(json.dumps(data))
    gone = [f for f in entry_findings(repo) if Path(f["path"]).name == ".claude.json"]
    assert [(f["level"], f["fix"]) for f in gone] == [
        ("warning", "`engram mcp install claude` from the installation to use rewrites it")
    ]
    assert "which is not there any more" in gone[0]["message"]
