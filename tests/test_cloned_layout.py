"""What a clone or a pull brings is input: a config.yaml made to expand without end, a store path
of the wrong kind, two lines with one id, a record id shorter than a prefix. No command hangs or
dies on them, and every problem gets one line that names it and its fix.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import cli, foreign_events, git, run_engram

from engram.base.errors import quote
from engram.storage import events as ev


def _alias_bomb() -> str:
    lines = ['x: &a ["x","x","x","x","x","x","x","x","x"]']
    previous = "a"
    for name in "bcdefghij":
        lines.append(f"x{name}: &{name} [{','.join(['*' + previous] * 9)}]")
        previous = name
    return "\n".join([*lines, "recall:", "  candidates: *j", ""])


def test_a_yaml_alias_bomb_in_a_committed_config_is_refused_with_its_line(project: Path) -> None:
    config = project / ".engram" / "config.yaml"
    config.write_text(_alias_bomb())
    git(project, "commit", "-qam", "settings")
    for args in (["list"], ["doctor"], ["verify"], ["status"], ["config", "list"]):
        done = run_engram(*args, cwd=project, timeout=60)  # hung for ever before
        assert "Traceback" not in done.stderr, done.stderr
        assert f"{config}:2: YAML alias '*a' is not allowed in a config file" in done.stderr
    done = run_engram("config", "set", "--project", "recall.candidates", "50", cwd=project)
    assert done.returncode != 0
    assert f"{config}:2: YAML alias '*a' is not allowed" in done.stderr
    assert "write the value out in full" in done.stderr


def test_a_quoted_value_never_turns_a_huge_list_into_text_whole() -> None:
    value: list[object] = ["x"] * 9
    for _ in range(9):
        value = [value] * 9  # 9**10 strings if it were printed
    assert quote(value) == repr("[[[[[[[[[['x', 'x', 'x', 'x', 'x', 'x',…")
    assert quote({"a": [1, 2]}) == repr("{'a': [1, 2]}")
    assert quote(10**5000) == repr("a very long number")


def test_a_config_yaml_folder_is_ignored_with_its_fix_and_reported(project: Path) -> None:
    store = project / ".engram"
    cli("remember", "kept", cwd=project)
    (store / "config.yaml").unlink()
    (store / "config.yaml").mkdir()
    (store / "config.yaml" / ".keep").write_text("")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "a folder")
    fix = f"git -C {project} rm -r -- .engram/config.yaml && engram config set --project KEY VALUE"

    listed = cli("list", cwd=project)
    assert listed.exit_code == 0 and "kept" in listed.stdout
    assert f"{store / 'config.yaml'} is a folder where Engram keeps a file" in listed.stderr
    assert fix in listed.stderr

    verified = cli("verify", cwd=project)
    assert verified.exit_code == 1
    assert "config.yaml is a folder where Engram keeps a file" in verified.stdout

    doctor = cli("doctor", "--json", cwd=project)
    assert doctor.exit_code == 1
    findings = json.loads(doctor.stdout)["stores"][0]["findings"]
    shape = [f for f in findings if f["check"] == "shape"]
    assert [f["path"] for f in shape] == ["config.yaml"]
    assert fix in shape[0]["fix"]

    refused = cli("config", "set", "--project", "recall.candidates", "50", cwd=project)
    assert refused.exit_code != 0
    assert "nothing was written" in refused.stderr and fix in refused.stderr
    assert not (store / "config.yaml" / "config.yaml.tmp").exists()


def test_a_handoffs_file_keeps_the_handoff_event_and_says_why_no_markdown(project: Path) -> None:
    store = project / ".engram"
    task = json.loads(cli("task", "create", "Ship it", "--json", cwd=project).stdout)["id"]
    (store / "handoffs").write_text("not a folder\n")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "a file")

    done = cli("handoff", "--task", task, "--summary", "s", "--next", "n", cwd=project)
    assert done.exit_code == 0, done.stderr
    assert f"{store / 'handoffs'} is a file where Engram keeps a folder" in done.stderr
    assert "the handoff is saved as an event, but its Markdown was not written" in done.stderr
    assert "Traceback" not in done.stderr
    shown = json.loads(cli("task", "show", task, "--json", cwd=project).stdout)
    assert len(shown["task"]["checkpoints"]) == 1
    assert not list(project.rglob("*.md.tmp*"))

    doctor = json.loads(cli("doctor", "--json", cwd=project).stdout)
    shape = [f for f in doctor["stores"][0]["findings"] if f["check"] == "shape"]
    assert [f["path"] for f in shape] == ["handoffs"]
    assert f"git -C {project} rm -r -- .engram/handoffs" in shape[0]["fix"]


def test_an_events_file_refuses_writes_before_writing_and_verify_fails(project: Path) -> None:
    store = project / ".engram"
    cli("remember", "one", cwd=project)
    git(project, "add", "-A")
    git(project, "commit", "-qm", "one")
    git(project, "rm", "-rq", ".engram/events")
    (store / "events").write_text("not a folder\n")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "a file")
    before = git(project, "status", "--porcelain")

    refused = cli("remember", "hi", cwd=project)
    assert refused.exit_code != 0
    assert f"{store / 'events'} is a file where Engram keeps a folder" in refused.stderr
    assert "nothing was written" in refused.stderr
    assert f"git -C {project} rm -r -- .engram/events" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert git(project, "status", "--porcelain") == before
    assert (store / "events").read_text() == "not a folder\n"

    verified = cli("verify", cwd=project)
    assert verified.exit_code == 1
    assert "events is a file where Engram keeps a folder" in verified.stdout


def test_two_lines_with_one_id_name_the_line_that_is_skipped(project: Path) -> None:
    store = project / ".engram"
    cli("remember", "my own words", cwd=project)
    mine_path, number, mine = next(
        (path, n, ev.parse_line(line))
        for path in (store / "events").rglob("*.jsonl")
        for n, line in enumerate(path.read_bytes().splitlines(), 1)
        if b'"memory.created"' in line
    )
    theirs = ev.Event(
        id=mine.id,
        kind=mine.kind,
        clock=mine.clock,
        time=mine.time,
        actor="Mallory <mallory@evil.example>",  # sorts before "Test Agent": theirs is read
        session=None,
        machine="elsewhere",
        data={**mine.data, "content": "words put in my mouth"},
    )
    teammate = mine_path.parent / "zzz-aaaaaaaa.jsonl"
    teammate.write_bytes(theirs.to_line())

    listed = cli("list", cwd=project)
    assert "words put in my mouth" in listed.stdout
    assert f"{mine_path}:{number}: event id {mine.id} is also at " in listed.stderr
    assert f"{teammate}:1:" not in listed.stderr
    assert "this line is skipped" in listed.stderr


def test_a_short_record_id_from_another_writer_can_be_looked_up(project: Path) -> None:
    store = project / ".engram"
    foreign_events(
        store,
        {"kind": "task.created", "data": {"task": "t1", "name": "Short", "status": "open"}},
        {"kind": "task.created", "data": {"task": "t2xx", "name": "Odd", "status": "paused"}},
    )
    assert cli("show", "t1", cwd=project).exit_code == 0
    shown = cli("task", "show", "t1", "--json", cwd=project)
    assert shown.exit_code == 0 and json.loads(shown.stdout)["task"]["name"] == "Short"
    short = cli("show", "t2", cwd=project)  # a prefix keeps its minimum
    assert short.exit_code != 0 and "too short" in short.stderr
    listed = cli("task", "list", cwd=project).stdout
    assert "Short" in listed and "Odd" in listed  # a status not known is not hidden
