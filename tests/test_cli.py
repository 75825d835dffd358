from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli, foreign_events, git, make_repo, run_engram

from engram.api import Engram

HEAVY = ("fastembed", "usearch", "onnxruntime", "mcp", "tantivy", "torch", "numpy")


def imported_modules(*args: str, cwd: Path | None = None) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "engram", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=os.environ.copy(),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    names = set()
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


@pytest.mark.parametrize("args", [("--help",), ("status",)])
def test_help_and_status_do_not_import_heavy_modules(home_store: Engram, args: tuple) -> None:
    modules = imported_modules(*args)
    assert "engram.cli" in modules  # the measurement works
    loaded = {m for m in modules if m.split(".")[0] in HEAVY}
    assert loaded == set()


def test_settings_are_parsed_again_only_when_config_yaml_changes(home_store: Engram) -> None:
    imported_modules("status")  # the first run after init parses config.yaml and keeps it
    assert "ruamel.yaml" not in imported_modules("status")  # later runs skip the YAML parser
    kept = home_store.personal.local_dir / "config-parsed.json"
    assert kept.exists()
    config = home_store.personal.root / "config.yaml"
    config.write_text(config.read_text().replace("every_events: 20", "every_events: 7"))
    assert run_engram("config", "get", "commit.every_events").stdout == "7\n"
    kept.write_text("{not json")
    assert run_engram("config", "get", "commit.every_events").stdout == "7\n"
    config.write_text(config.read_text().replace("every_events: 7", "every_events: lots"))
    line = config.read_text().splitlines().index("  every_events: lots") + 1
    for _ in range(2):  # a bad edit is still caught, parsed or kept: said, and left out
        done = run_engram("config", "get", "commit.every_events")
        assert done.returncode == 0 and done.stdout == "20\n"
        assert (
            f"config.yaml: line {line}: commit.every_events must be a whole number, not 'lots'"
            in done.stderr
        )


def test_python_dash_m_engram_works() -> None:
    done = run_engram("--version")
    assert done.returncode == 0 and done.stdout.startswith("engram, version")


def test_the_main_job_end_to_end_in_real_processes(tmp_path: Path) -> None:
    """What the README's first command does: init, remember, recall, log."""
    env = {"ENGRAM_HOME": str(tmp_path / "store")}
    assert run_engram("init", env=env).returncode == 0
    done = run_engram("remember", "--kind", "decision", "Use Postgres for the job queue", env=env)
    assert done.returncode == 0 and done.stdout.startswith("remembered ")
    found = run_engram("recall", "postgres", env=env)
    assert "Use Postgres for the job queue" in found.stdout
    log = run_engram("log", env=env)
    assert "remember" in log.stdout and "initialize personal store" in log.stdout


def test_errors_are_one_line_with_exit_status_2(home_store: Engram) -> None:
    result = cli("get", "zzzzzzzz")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("error: no memory with id 'zzzzzzzz'")
    result = cli("remember", "x", "--importance", "2")
    assert result.exit_code == 2
    result = cli("config", "set", "no.such.key", "1")
    assert result.exit_code == 2 and "engram config list" in result.stderr


@pytest.mark.parametrize("group", [(), ("task",), ("config",), ("session",), ("remote",)])
def test_a_group_without_a_command_shows_its_help_as_click_does(group: tuple[str, ...]) -> None:
    done = run_engram(*group)
    assert done.returncode == 2
    assert done.stderr.startswith(f"Usage: {' '.join(('engram', *group))} [OPTIONS] COMMAND")
    assert "\nCommands:\n" in done.stderr and "error:" not in done.stderr
    assert done.stderr.count("\n") > 8


def test_commands_before_init_say_how_to_start() -> None:
    result = cli("list")
    assert result.exit_code == 2
    assert "run `engram init`" in result.stderr


def test_every_read_command_has_json(home_store: Engram) -> None:
    memory = home_store.remember("Use Postgres", kind="decision", tags=["db"])
    outputs = {
        "list": cli("list", "--json"),
        "recall": cli("recall", "postgres", "--json"),
        "get": cli("get", memory.id, "--json"),
        "history": cli("get", "--history", memory.id, "--json"),
        "log": cli("log", "--json"),
        "show": cli("show", memory.id, "--json"),
        "status": cli("status", "--json"),
        "verify": cli("verify", "--json"),
        "config": cli("config", "list", "--json"),
    }
    parsed = {name: json.loads(result.stdout) for name, result in outputs.items()}
    assert parsed["list"][0]["id"] == memory.id
    assert parsed["recall"][0]["tags"] == ["db"]
    assert parsed["get"]["kind"] == "decision"
    assert parsed["history"][0]["event"]["kind"] == "memory.created"
    assert parsed["log"][0]["kind"] == "memory.created"
    assert parsed["show"]["memory"]["id"] == memory.id
    assert parsed["status"][0]["memories"] == 1
    assert parsed["verify"]["ok"] is True
    assert {row["key"] for row in parsed["config"]} >= {"commit.every_events", "actor"}


def test_remember_reads_stdin_with_a_dash(home_store: Engram) -> None:
    result = cli("remember", "-", input="multi\nline memory\n")
    assert result.exit_code == 0
    assert Engram().memories()[0].content == "multi\nline memory"


def test_log_filters_by_kind_actor_and_since(home_store: Engram) -> None:
    memory = home_store.remember("one")
    home_store.forget(memory.id, reason="gone")
    assert "forget" in cli("log", "--kind", "memory.forgotten").stdout
    assert "remember" not in cli("log", "--kind", "memory.forgotten").stdout
    assert cli("log", "--actor", "nobody-like-this").stdout == "no events\n"
    assert "remember" in cli("log", "--since", "1h").stdout
    assert cli("log", "--since", "2999-01-01").stdout == "no events\n"
    assert cli("log", "--since", "yesterday-ish").exit_code == 2


def test_status_reports_uncommitted_events_and_upstream(tmp_path: Path) -> None:
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    repo = make_repo(tmp_path / "repo")
    git(repo, "remote", "add", "origin", str(origin))
    git(repo, "push", "-q", "-u", "origin", "main")
    Engram(cwd=repo).init(project=True)
    Engram(cwd=repo).remember("pending")
    out = cli("status", "--project", cwd=repo).stdout
    assert "uncommitted: 1 event;" in out
    assert "remote: origin/main ahead 1, behind 0" in out


def test_config_set_keeps_comments_and_commits(home_store: Engram) -> None:
    path = home_store.personal.root / "config.yaml"
    path.write_text(path.read_text().replace("commit:\n", "commit:\n  # my own note\n"))
    result = cli("config", "set", "commit.every_events", "5")
    assert result.exit_code == 0, result.output
    text = path.read_text()
    assert "# my own note" in text and "every_events: 5" in text
    assert "# Commit once this many events are pending." in text
    assert cli("config", "get", "commit.every_events").stdout == "5\n"
    assert "config commit.every_events" in git(home_store.personal.root, "log", "-1", "--format=%s")
    assert cli("config", "set", "commit.every_events", "many").exit_code == 2
    assert cli("config", "set", "commit.every_events", "0").exit_code == 2


def test_config_set_prints_the_value_as_get_does(home_store: Engram) -> None:
    for given, shown in (("yes", "true"), ("off", "false"), ("7", "7")):
        key = "commit.every_events" if given == "7" else "commit.auto"
        assert cli("config", "set", key, given).stdout == f"{key} = {shown}\n"
        assert cli("config", "get", key).stdout == f"{shown}\n"
        assert f"{key} = {shown}    # " in cli("config", "list").stdout


def test_project_settings_override_personal_ones(tmp_path: Path, home_store: Engram) -> None:
    repo = make_repo(tmp_path / "repo")
    Engram(cwd=repo).init(project=True)
    cli("config", "set", "limits.tags", "3")
    cli("config", "set", "--project", "limits.tags", "5", cwd=repo)
    assert cli("config", "get", "limits.tags", cwd=repo).stdout == "5\n"
    assert cli("config", "get", "--personal", "limits.tags", cwd=repo).stdout == "3\n"
    assert cli("config", "get", "limits.tags", cwd=tmp_path).stdout == "3\n"
    listed = cli("config", "list", cwd=repo).stdout
    assert "limits.tags = 5    # project store" in listed
    Engram(cwd=repo).remember("ok", tags=["a", "b", "c", "d"])  # 4 tags: allowed in the project


def test_verify_exits_1_on_damage(home_store: Engram) -> None:
    home_store.remember("fine")
    path = next(home_store.personal.events_dir.rglob("*.jsonl"))
    path.write_bytes(path.read_bytes().replace(b'{"actor"', b'{ "actor"', 1))
    result = cli("verify")
    assert result.exit_code == 1
    assert "not in canonical form" in result.stdout


def test_init_is_idempotent_and_project_init_needs_git(tmp_path: Path) -> None:
    assert "initialized personal store" in cli("init").stdout
    assert "already initialized" in cli("init").stdout
    plain = tmp_path / "plain"
    plain.mkdir()
    result = cli("init", "--project", cwd=plain)
    assert result.exit_code == 2 and "run `git init` first" in result.stderr
    assert not (plain / ".engram").exists()


def test_show_finds_tasks_and_sessions_by_id(home_store: Engram) -> None:
    task = home_store.task_create("Add OAuth login")
    shown = cli("show", task.id)
    assert shown.exit_code == 0
    assert shown.stdout.startswith(f"task {task.id} (personal store; `engram task show")
    assert '"kind":"task.created"' in shown.stdout
    session = home_store.session_start(agent="cli")
    shown = cli("show", session.id, "--json")
    assert json.loads(shown.stdout)["type"] == "session"


# What a terminal would obey: an OSC title, a CSI clear, the one-byte C1 CSI, bidi overrides.
HOSTILE = "evil \x1b]0;pwned\x07 \x1b[2J \x9b31m \u202egnp.exe\u202c \u2066x\u2069 end"
OBEYED = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def test_text_from_a_store_reaches_the_terminal_as_data(home_store: Engram) -> None:
    """Another clone's lines carry escape sequences and bidi overrides in every field a command
    prints: every command shows them as escapes, and --json keeps the text as it is."""
    from engram.storage import events as ev

    task, memory, checkpoint = ev.new_entity_id(), ev.new_entity_id(), ev.new_entity_id()
    # Control characters in an actor or machine make the whole line unreadable (readers skip
    # it); bidi overrides are allowed there, so they must be shown as data too.
    who = {
        "actor": "Mallory \u202egnp.exe\u202c",
        "machine": "box \u2066x\u2069",
        "session": "s-hostile",
    }
    ids = foreign_events(
        home_store.write_store().root,
        {"kind": "session.started", "data": {"session_id": "s-hostile", "agent": HOSTILE}, **who},
        {
            "kind": "task.created",
            "data": {
                "task": task,
                "name": f"task {HOSTILE}",
                "goal": HOSTILE,
                "status": "in_progress",
                "tags": [],
            },
            **who,
        },
        {
            "kind": "task.progress",
            "data": {
                "task": task,
                "feature": HOSTILE,
                "status": "done",
                "note": HOSTILE,
                "component": HOSTILE,
            },
            **who,
        },
        {
            "kind": "task.failure",
            "data": {
                "task": task,
                "error": HOSTILE,
                "component": "auth",
                "root_cause": HOSTILE,
                "fix": HOSTILE,
            },
            **who,
        },
        {
            "kind": "checkpoint.saved",
            "data": {
                "task": task,
                "checkpoint": checkpoint,
                "seq": 1,
                "reason": "handoff",
                "summary": HOSTILE,
                "goal": HOSTILE,
                "next": [HOSTILE],
                "must_not_redo": [HOSTILE],
                "working_set": {
                    "files": [{"path": "a.py", "commit": None}],
                    "commands": [HOSTILE],
                    "artifacts": [HOSTILE],
                },
                "confidence": 0.5,
            },
            **who,
        },
        {
            "kind": "memory.created",
            "data": {
                "memory": memory,
                "content": HOSTILE,
                "kind": "note",
                "tags": [],
                "task": task,
            },
            **who,
        },
        {
            "kind": "session.interrupted",
            "data": {"session_id": "s-hostile", "reason": HOSTILE, "evidence": HOSTILE},
            **who,
        },
    )
    shows = [
        ("list",),
        ("get", memory),
        ("get", "--history", memory),
        ("show", memory),
        ("show", ids[1]),
        ("recall", "evil pwned"),
        ("log",),
        ("resume", "--task", task),
        ("timeline", task),
        ("task", "list"),
        ("task", "show", task),
        ("checkpoints", "--task", task),
        ("sessions",),
        ("consolidate",),
    ]
    for command in shows:
        result = cli(*command)
        assert result.exit_code == 0, (command, result.output)
        assert not OBEYED.findall(result.stdout + result.stderr), command
    for command in (c for c in shows if c not in (("show", ids[1]), ("consolidate",))):
        assert "\\x1b]0;pwned\\x07" in cli(*command).stdout, command
    assert "\\u202egnp.exe\\u202c" in cli("list").stdout
    assert json.loads(cli("list", "--json").stdout)[0]["content"] == HOSTILE
    shown = json.loads(cli("show", ids[1]).stdout.splitlines()[-1])
    assert shown["data"]["goal"] == HOSTILE  # the event line, still valid JSON


def test_timeline_checkpoints_and_continuity_take_the_task_either_way(home_store: Engram) -> None:
    task = home_store.task_create("Add OAuth login")
    for summary in ("callback first", "refresh next"):
        home_store.handoff(task.id, summary=summary, next=["callback"])
    for command in ("timeline", "checkpoints", "continuity"):
        as_argument, as_option = cli(command, task.id), cli(command, "--task", task.id)
        assert as_argument.exit_code == 0 and as_argument.stdout == as_option.stdout, command
        missing = cli(command)
        assert missing.exit_code == 2 and f"`engram {command} TASK`" in missing.output
        both = cli(command, task.id, "--task", "other")
        assert both.exit_code == 2 and "give one" in both.output


def test_the_ids_log_prints_are_found_by_show(home_store: Engram) -> None:
    home_store.remember("Use Postgres for the job queue", check_duplicates=False)
    home_store.remember("Staging is rebuilt every night", check_duplicates=False)
    for line in cli("log").stdout.splitlines():
        short = line.split()[0]
        shown = cli("show", short, "--json")
        assert shown.exit_code == 0, (short, shown.output)
        assert json.loads(shown.stdout)["event"]["id"].lower().endswith(short)
