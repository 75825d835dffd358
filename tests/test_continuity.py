"""Tasks, checkpoints, sessions and resume; interruptions played out with real processes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli, foreign_events, git, markdown_sections, run_engram
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.api import Engram
from engram.domain.continuity.service import AmbiguousResumeError

AGENT = Path(__file__).with_name("agent.py")


def start_agent(repo: Path, scenario: str) -> tuple[subprocess.Popen[str], str, str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    proc = subprocess.Popen(
        [sys.executable, str(AGENT), str(repo), scenario],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY"):
        proc.kill()
        raise AssertionError(f"agent did not start: {line}{proc.communicate()[1]}")
    _, task_id, session_id = line.split()
    return proc, task_id, session_id


def resume_text(repo: Path, *args: str) -> str:
    done = run_engram("resume", *args, cwd=repo)
    assert done.returncode == 0, done.stderr
    return done.stdout


def assert_recovered(text: str) -> None:
    assert "Users can sign in with GitHub" in text  # the goal
    assert "Callback returns 500: state mismatch" in text  # the failure
    assert "the session cookie is not set before the redirect" in text  # its cause
    assert "Create the production OAuth app in GitHub" in text  # must not redo
    assert "Do not touch the main branch" in text  # must preserve
    assert "Write callback tests" in text  # next steps


def session_of(repo: Path, session_id: str) -> dict:
    done = run_engram("sessions", "--json", cwd=repo)
    assert done.returncode == 0, done.stderr
    return next(s for s in json.loads(done.stdout) if s["id"] == session_id)


@pytest.fixture
def repo(project: Path) -> Path:
    return project


def test_agent_killed_with_kill_9_is_resumed_by_another_process(repo: Path) -> None:
    """The scenario of record: A works, records progress and a failure, is killed -9; B in a
    new process resumes with the goal, the failure, must-not-redo and next steps, and the
    interruption is classified: a tool failure, the last thing A recorded being the failure
    (a kill after other work is a crash: test_an_agent_killed_after_a_failure_...)."""
    agent, task_id, session_id = start_agent(repo, "kill")
    agent.send_signal(signal.SIGKILL)
    agent.wait(timeout=30)
    text = resume_text(repo)
    assert_recovered(text)
    assert f"task `{task_id}`" in text
    assert "**tool_failure**" in text
    session = session_of(repo, session_id)
    assert session["state"] == "interrupted" and session["reason"] == "tool_failure"
    assert session["agent"] == "claude-code"


def test_sigterm_closes_the_session_and_nothing_is_lost(repo: Path) -> None:
    agent, task_id, session_id = start_agent(repo, "sigterm")
    agent.send_signal(signal.SIGTERM)
    assert agent.wait(timeout=30) == 128 + signal.SIGTERM
    session = session_of(repo, session_id)
    assert session["state"] == "ended" and session["how"] == "sigterm"
    assert_recovered(resume_text(repo, "--task", task_id))
    # Closing a session commits: everything acknowledged is in git.
    assert Engram(cwd=repo).status()[0].uncommitted == 0


def test_normal_handoff_then_resume(repo: Path) -> None:
    agent, task_id, session_id = start_agent(repo, "handoff")
    assert agent.wait(timeout=60) == 0
    text = resume_text(repo, "--task", task_id[:6])
    assert_recovered(text)
    assert "Callback handler fixed; tests next" in text
    assert session_of(repo, session_id)["state"] == "ended"
    assert "Interruption" not in text
    log = git(repo, "log", "--format=%s")
    assert "handoff: Add OAuth login — Callback handler fixed; tests next" in log


def test_failure_mid_session_is_recalled_and_lowers_importance(repo: Path) -> None:
    engram = Engram(cwd=repo)
    engram.session_start(agent="codex")
    memory = engram.remember("The OAuth callback needs the state cookie", importance=0.5)
    engram.session_end(outcome="failure")
    assert Engram(cwd=repo).get(memory.id).importance == 0.45
    # A later successful session that relied on it (recalled it) raises it again.
    engram = Engram(cwd=repo)
    engram.session_start(agent="codex")
    assert engram.recall("state cookie for the OAuth callback")[0].memory.id == memory.id
    engram.session_end(outcome="success")
    assert Engram(cwd=repo).get(memory.id).importance == 0.5
    agent, task_id, session_id = start_agent(repo, "failure")
    assert agent.wait(timeout=60) == 0
    assert session_of(repo, session_id)["outcome"] == "failure"
    text = resume_text(repo, "--task", task_id)
    assert "Failures to avoid repeating" in text
    assert "[auth] Callback returns 500" in text


def test_working_set_drift_lowers_confidence(repo: Path) -> None:
    (repo / "src").mkdir()
    (repo / "src" / "auth.py").write_text("def login(): ...\n")
    git(repo, "add", "src/auth.py")
    git(repo, "commit", "-q", "-m", "auth")
    engram = Engram(cwd=repo)
    task = engram.task_create("Add OAuth login", goal="Users can sign in with GitHub")
    saved = engram.handoff(
        task.id,
        summary="Started",
        next=["Write the callback"],
        files=["src/auth.py"],
        completed=["Skeleton"],
        must_not_redo=["Created the app"],
    )
    steady = Engram(cwd=repo).resume(task=task.id).confidence
    (repo / "src" / "auth.py").write_text("def login(): return 1\n")
    git(repo, "commit", "-q", "-am", "someone else changed it")
    drifted = Engram(cwd=repo).resume(task=task.id).confidence
    assert saved.checkpoint.confidence >= steady > drifted


def test_resume_does_not_guess_between_active_tasks(repo: Path) -> None:
    engram = Engram(cwd=repo)
    a = engram.task_create("Task A", goal="a")
    engram.task_create("Task B", goal="b")
    with pytest.raises(AmbiguousResumeError) as info:
        Engram(cwd=repo).resume()
    assert len(info.value.candidates) == 2
    done = run_engram("resume", cwd=repo)
    assert done.returncode == 3
    assert a.id[:8] in done.stderr and "--task" in done.stderr
    assert "Task A" in Engram(cwd=repo).resume(task="task a").markdown  # by name


def test_resume_json_between_active_tasks_prints_the_candidates_on_stdout(repo: Path) -> None:
    engram = Engram(cwd=repo)
    a = engram.task_create("Task A", goal="a")
    b = engram.task_create("Task B", goal="b")
    done = run_engram("resume", "--json", cwd=repo)
    assert done.returncode == 3
    answer = json.loads(done.stdout)
    assert answer["ambiguous"] is True and answer["task"] is None
    assert answer["hint"] == "choose one with --task ID"
    assert [(c["id"], c["name"]) for c in answer["candidates"]] == [
        (b.id, "Task B"),
        (a.id, "Task A"),
    ]
    assert all(c["updated"] for c in answer["candidates"])
    assert done.stderr.startswith("error: 2 active tasks could be resumed")
    plain = run_engram("resume", cwd=repo)
    assert plain.returncode == 3 and plain.stdout == "" and "--task" in plain.stderr
    chosen = run_engram("resume", "--task", a.id, "--json", cwd=repo)
    assert chosen.returncode == 0
    assert json.loads(chosen.stdout)["ambiguous"] is False


def test_resume_output_is_bounded_and_says_so(repo: Path) -> None:
    engram = Engram(cwd=repo)
    task = engram.task_create("Big", goal="x")
    engram.handoff(task.id, summary="s", next=[f"step {i} " + "word " * 30 for i in range(150)])
    result = Engram(cwd=repo).resume(task=task.id, max_chars=2000)
    assert result.truncated and len(result.markdown) <= 2000
    assert "cut at 2000 characters" in result.markdown
    # Each depth but full has a token budget, filled by priority, naming what it left out.
    brief = Engram(cwd=repo).resume(task=task.id, depth="brief")
    assert brief.truncated and len(brief.markdown) <= 1000 * 4
    assert "Left out to keep within 1000 tokens: next steps: " in brief.markdown
    assert "1. step 0 word" in brief.markdown
    full = Engram(cwd=repo).resume(task=task.id, depth="full")
    assert not full.truncated and "150. step 149 word" in full.markdown


def test_handoff_is_a_readable_file_that_shows_what_changed(repo: Path) -> None:
    engram = Engram(cwd=repo)
    task = engram.task_create("Add OAuth login", goal="Users can sign in with GitHub")
    engram.handoff(task.id, summary="Plan", next=["Register the app", "Write callback"])
    first_head = git(repo, "rev-parse", "HEAD").strip()
    engram.handoff(
        task.id,
        summary="App registered",
        completed=["Register the app"],
        next=["Write callback", "Write tests"],
        must_preserve=["Keep main green"],
    )
    diff = git(repo, "diff", first_head, "HEAD", "--", ".engram/handoffs")
    added = [
        line[1:]
        for line in diff.splitlines()
        if line.startswith("+") and not line.startswith("+++")
    ]
    assert "## Changes since checkpoint 1" in added
    assert "- completed: + Register the app" in added
    assert "- next steps: + Write tests" in added
    assert "- next steps: − Register the app" in added
    assert "- must preserve: + Keep main green" in added
    assert "1. Write callback" in added and "2. Write tests" in added


def test_handoff_from_a_yaml_file(repo: Path, tmp_path: Path) -> None:
    task = Engram(cwd=repo).task_create("Migrate the DB", goal="Postgres 16")
    package = tmp_path / "handoff.yaml"
    package.write_text(
        "summary: Dump taken, restore next\n"
        "completed: [Take the dump]\n"
        "next:\n  - Restore into the new cluster\n  - Switch the DSN\n"
        "must_not_redo: [Take the dump (it locks the primary)]\n"
        "working_set:\n  files: [db/migrate.sql]\n  commands: [make restore]\n"
    )
    result = cli("handoff", "--task", task.id, "--from", str(package), cwd=repo)
    assert result.exit_code == 0, result.output
    latest = Engram(cwd=repo).task(task.id).latest_checkpoint
    assert latest["next"] == ["Restore into the new cluster", "Switch the DSN"]
    assert latest["working_set"]["commands"] == ["make restore"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("summary: x\nnonsense_field: 1\n")
    result = cli("handoff", "--task", task.id, "--from", str(bad), cwd=repo)
    assert result.exit_code == 2 and "unknown checkpoint field" in result.stderr


def test_automatic_checkpoints_on_failure_plan_change_and_working_set(repo: Path) -> None:
    engram = Engram(cwd=repo)
    task = engram.task_create("Fix flaky tests", goal="CI green")
    first = engram.progress(
        task.id, "Find the flaky test", status="in_progress", files=["tests/test_api.py"]
    )
    assert first.checkpoint.reason in ("plan_change", "working_set")
    again = engram.progress(task.id, "Find the flaky test", status="in_progress")
    assert again.checkpoint is None  # nothing changed enough
    failed = engram.failure(task.id, "Timeout in test_upload", component="api")
    assert failed.checkpoint.reason == "failure"
    failed = engram.failure(task.id, "Timeout again", component="api")
    assert failed.checkpoint.reason == "failure"  # failures always save one
    assert failed.earlier_failures[0].error == "Timeout in test_upload"
    reasons = [c.reason for c in engram.checkpoints(task.id)]
    assert reasons.count("failure") == 2


def test_a_component_failure_is_surfaced_when_later_work_touches_it(repo: Path) -> None:
    engram = Engram(cwd=repo)
    old = engram.task_create("Old work", goal="x")
    engram.failure(old.id, "Upload fails over 10 MB", component="uploads", fix="stream the body")
    new = engram.task_create("New feature", goal="y")
    result = engram.progress(new.id, "Add resumable uploads", component="uploads")
    assert [f.error for f in result.earlier_failures] == ["Upload fails over 10 MB"]
    by_path = engram.progress(new.id, "Touch the handler", files=["src/uploads/handler.py"])
    assert by_path.earlier_failures[0].fix == "stream the body"


def test_continuity_scores_a_restore(repo: Path) -> None:
    engram = Engram(cwd=repo)
    task = engram.task_create("Add OAuth login", goal="Users can sign in with GitHub")
    engram.handoff(
        task.id,
        summary="Plan",
        next=["Write the callback handler", "Write callback tests"],
        must_not_redo=["Create the OAuth app"],
        files=["src/auth.py"],
    )
    engram.handoff(
        task.id,
        summary="Callback done",
        completed=["Write the callback handler"],
        next=["Write callback tests"],
        files=["src/auth.py"],
    )
    good = engram.continuity(task.id)
    assert good.goal_retention == 1.0 and good.action_consistency == 1.0
    assert good.redundant_exploration == 0.0 and good.composite > 0.9
    engram.handoff(
        task.id,
        summary="Started over",
        completed=["Create the OAuth app again"],
        next=["Rewrite everything in Go"],
        goal="Rewrite the service",
        files=["main.go"],
    )
    bad = engram.continuity(task.id)
    assert bad.composite < good.composite
    assert bad.redundant_exploration > 0 and bad.replanning_rate == 1.0
    result = cli("continuity", "--task", task.id, "--json", cwd=repo)
    assert json.loads(result.stdout)["composite"] == bad.composite


def test_continuity_between_checkpoints_in_the_wrong_order_names_the_ones_to_give(
    repo: Path,
) -> None:
    engram = Engram(cwd=repo)
    task = engram.task_create("Add OAuth login")
    for summary in ("Plan", "Callback done", "Tests written"):
        engram.handoff(task.id, summary=summary, next=["Ship it"])
    first = cli("continuity", task.id, "--after", "1", cwd=repo)
    assert first.exit_code == 2
    assert first.output.strip() == (
        "error: checkpoint 1 is the task's first: none before it to compare with; "
        "give --after a later one (2 to 3)"
    )
    swapped = cli("continuity", task.id, "--before", "3", "--after", "2", cwd=repo)
    assert swapped.exit_code == 2
    assert swapped.output.strip() == (
        "error: checkpoint 3 is not older than checkpoint 2; give --before an earlier one "
        "(1), or --after a later one"
    )


def test_task_commands_and_json(repo: Path) -> None:
    created = json.loads(
        cli("task", "create", "Ship v2", "--goal", "Release 2.0", "--json", cwd=repo).stdout
    )
    child = json.loads(
        cli("task", "create", "Write notes", "--parent", created["id"], "--json", cwd=repo).stdout
    )
    assert child["parent"] == created["id"]
    cli("task", "update", created["id"][:6], "--status", "blocked", cwd=repo)
    listed = json.loads(cli("task", "list", "--json", cwd=repo).stdout)
    assert {t["id"]: t["status"] for t in listed}[created["id"]] == "blocked"
    shown = json.loads(cli("task", "show", created["id"], "--json", cwd=repo).stdout)
    assert shown["children"] == [child["id"]]
    cli("task", "update", created["id"], "--status", "done", cwd=repo)
    assert created["id"] not in [
        t["id"] for t in json.loads(cli("task", "list", "--json", cwd=repo).stdout)
    ]
    assert cli("task", "update", created["id"], "--status", "nope", cwd=repo).exit_code == 2
    assert cli("task", "show", "zzzzzz", cwd=repo).exit_code == 2


def test_a_closed_session_is_history(repo: Path) -> None:
    engram = Engram(cwd=repo)
    opened = engram.session_start(agent="cursor")
    engram.session_end(outcome="success")
    with pytest.raises(Exception, match="is ended: it is history"):
        Engram(cwd=repo).session_end(session_id=opened.id)


def test_a_closed_session_names_how_to_go_on(repo: Path) -> None:
    opened = Engram(cwd=repo).session_start(agent="cursor")
    Engram(cwd=repo).session_end(session_id=opened.id)
    done = run_engram("session", "heartbeat", cwd=repo, env={"ENGRAM_SESSION": opened.id})
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"error: session {opened.id[:8]} is ended: it is history; open another with "
        "`engram session start` (and set ENGRAM_SESSION to it)"
    )


def test_a_session_opened_outside_the_project_is_kept_and_closed_where_it_lives(
    repo: Path, home_store: Engram
) -> None:
    """An agent opens its session outside any repository (the personal store holds it), then
    works in the project: its heartbeat and its end go to the store that holds the session,
    its outcome counts for what it wrote in the project, and that is committed."""
    opened = home_store.session_start(agent="codex")
    engram = Engram(cwd=repo)
    engram.session = opened.id
    engram.heartbeat(context=0.4)
    assert not (repo / ".git" / "engram" / "sessions" / f"{opened.id}.json").exists()
    memory = engram.remember("The job queue lives in Postgres", importance=0.5)
    closed = engram.session_end(outcome="success")
    assert (closed.state, closed.outcome) == ("ended", "success")
    assert session_of(repo, opened.id)["state"] == "ended"
    assert Engram(cwd=repo).get(memory.id).importance == 0.55
    assert git(repo, "status", "--porcelain") == ""


@pytest.mark.parametrize(("last", "reason"), [("failure", "tool_failure"), ("progress", "crash")])
def test_an_agent_killed_after_a_failure_stopped_on_a_tool_failure(
    repo: Path, last: str, reason: str
) -> None:
    """A failure saves an automatic checkpoint at once: Engram's, not an act of the agent's,
    so the failure is still the last thing the session did when its process is killed."""
    agent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        engram = Engram(cwd=repo)
        opened = engram.session_start(agent="codex", pid=agent.pid)
        task = engram.task_create("Add OAuth login")
        engram.progress(task.id, "Register the OAuth app", component="auth")
        if last == "failure":
            engram.failure(task.id, "Callback returns 500: state mismatch", component="auth")
    finally:
        agent.kill()
        agent.wait(timeout=30)
    session = session_of(repo, opened.id)
    assert (session["state"], session["reason"]) == ("interrupted", reason)


def test_an_empty_engram_session_is_no_session_and_its_write_is_committed(repo: Path) -> None:
    """What `export ENGRAM_SESSION=$(engram session start)` leaves when the start fails."""
    assert run_engram("remember", "good one", "--kind", "fact", cwd=repo).returncode == 0
    for empty, content in (("", "Use Postgres"), ("  ", "Deploy on Fridays never")):
        done = run_engram(
            "remember",
            content,
            "--kind",
            "decision",
            cwd=repo,
            env={"ENGRAM_SESSION": empty},
        )
        assert done.returncode == 0, done.stderr
    listed = run_engram("list", cwd=repo)
    assert listed.stderr == "" and len(listed.stdout.splitlines()) == 3
    done = run_engram("commit", cwd=repo)
    assert done.returncode == 0 and "committed 3 events" in done.stdout, done.stderr
    assert done.stderr == ""
    assert git(repo, "status", "--porcelain") == ""
    assert run_engram("verify", cwd=repo).returncode == 0
    events = [
        json.loads(line)
        for path in (repo / ".engram" / "events").rglob("*.jsonl")
        for line in path.read_text().splitlines()
    ]
    assert [e["session"] for e in events if e["kind"] == "memory.created"] == [None] * 3


@pytest.mark.parametrize("value", ["bad id!", "../../etc", "x" * 65])
def test_an_invalid_engram_session_is_refused_and_nothing_is_written(
    repo: Path, value: str
) -> None:
    assert run_engram("remember", "good one", "--kind", "fact", cwd=repo).returncode == 0
    files = {p: p.read_bytes() for p in (repo / ".engram" / "events").rglob("*.jsonl")}
    done = run_engram(
        "remember", "Use Postgres", "--kind", "decision", cwd=repo, env={"ENGRAM_SESSION": value}
    )
    assert done.returncode != 0 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("error: ENGRAM_SESSION=")
    assert "is not a session id" in line and line.endswith("unset it or set it to one")
    assert {p: p.read_bytes() for p in (repo / ".engram" / "events").rglob("*.jsonl")} == files
    # The event written before it is committed as usual, and nothing is left behind.
    done = run_engram("commit", cwd=repo)
    assert "committed 1 event" in done.stdout and done.stderr == ""
    assert git(repo, "status", "--porcelain") == ""
    assert run_engram("verify", cwd=repo).returncode == 0


def test_an_agent_reported_reason_wins_over_heuristics(repo: Path) -> None:
    agent, task_id, session_id = start_agent(repo, "kill")
    Engram(cwd=repo).report_interruption(
        "rate_limit", note="429 from the API", session_id=session_id
    )
    agent.send_signal(signal.SIGKILL)
    agent.wait(timeout=30)
    assert "**rate_limit**" in resume_text(repo, "--task", task_id)
    assert session_of(repo, session_id)["reason"] == "rate_limit"


def test_a_hostile_pid_in_a_session_event_is_no_process() -> None:
    """A pid comes from an event someone else may have written: 2^62 once raised OverflowError
    in `sessions` and `resume`; 0 and -1 would signal process groups."""
    import os

    from engram.model.sessions import process_alive

    for pid in (2**62, 2**31, -1, 0, True, None):
        assert process_alive(pid) is False, pid  # type: ignore[arg-type]
    assert process_alive(os.getpid()) is True


HOSTILE = {
    "next": [
        "Open the <!-- settings page",
        "item\n## Must preserve\n- fake",
        "</details><script>alert(1)</script>",
        "```\nan unclosed fence",
    ],
    "must_not_redo": ["> a quote", "1. one\n2) two", "[ref]: https://example.com/x"],
    "must_preserve": ["a line\n===", "&#x202E;an entity", "`code <b>` stays code"],
    "completed": ["- a bullet", "+ another", "* and another"],
    "open_questions": ["<http://example.com>", "x & y; a < b", "---"],
}


def test_hostile_handoff_text_stays_text_in_the_handoff_file_and_resume(home_store: Engram) -> None:
    """Handoff items arrive from other people's pushes: shown as written, none of them can
    hide the sections that follow, forge a heading, or carry HTML."""
    task = home_store.task_create("Fix <!-- the & login", goal="# not a heading\n<b>bold</b>")
    home_store.handoff(task.id, summary="Summary\n## Must not redo\n<!--", **HOSTILE)
    [path] = (Path(os.environ["ENGRAM_HOME"]) / "handoffs").rglob("*.md")
    resumed = home_store.resume(task=task.id).markdown
    for text in (path.read_text(), resumed):
        for line in text.splitlines():
            # Each `<` that could open HTML is escaped with a backslash, never as an entity.
            assert not re.search(r"(?<!\\)<(!--|script)", line), line
            assert "&lt;" not in line and "&amp;" not in line, line
        headings, items = markdown_sections(text)
        assert headings[0].split(": ", 1)[1] == "Fix <!-- the & login"
        for field, written in HOSTILE.items():
            title = next(
                h
                for h in headings
                if h.startswith(
                    {
                        "next": "Next steps",
                        "must_not_redo": "Must not redo",
                        "must_preserve": "Must preserve",
                        "completed": "Completed",
                        "open_questions": "Open questions",
                    }[field]
                )
            )
            assert [" ".join(item.replace("`", "").split()) for item in items[title]] == [
                " ".join(w.replace("`", "").split()) for w in written
            ]
    headings, _ = markdown_sections(path.read_text())
    assert headings[1:] == [
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
    # Ordinary text reads as it was written, code spans too.
    assert "3. `code <b>` stays code" not in resumed and "- `code <b>` stays code" in resumed
    assert "2. item\n   \\## Must preserve\n   \\- fake" in resumed


MARKDOWN_TEXT = st.text(st.sampled_from(list("#>-+*=_~`|[]():!<>/&;\\ \n\tab1.)")), max_size=30)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(MARKDOWN_TEXT.filter(str.strip), min_size=1, max_size=3), MARKDOWN_TEXT, MARKDOWN_TEXT
)
def test_no_text_changes_the_shape_of_a_handoff(
    items: list[str],
    text: str,
    other: str,
) -> None:
    """Whatever a checkpoint's texts hold, its Markdown has the same sections and, in each,
    one list item per item: no heading, list, quote, fence or HTML comes from the texts."""
    from engram.domain.continuity import checkpoints as cp

    checkpoint: dict = {name: items for name in cp.LIST_FIELDS}
    checkpoint.update(
        seq=2,
        checkpoint="abcdefgh1234",
        reason=text or "x",
        actor=other or "x",
        session=text or None,
        machine=other or None,
        time=text or "t",
        confidence=0.5,
        summary=text,
        goal=other,
        working_set={
            "files": [{"path": text or "x", "commit": other or None}],
            "commands": items,
            "artifacts": items,
        },
    )
    previous = {
        **checkpoint,
        "seq": 1,
        **{name: [other] for name in cp.LIST_FIELDS},
        "summary": other,
        "goal": text,
    }
    page = cp.render({"id": "abcdefgh1234", "name": text or "x"}, checkpoint, previous)
    headings, found = markdown_sections(page)
    titles = [cp.TITLES[name] for name in (*cp.LIST_FIELDS, "working_set")]
    assert [h for h in headings[1:] if h not in ("Summary", "Goal")] == [
        *titles,
        "Changes since checkpoint 1",
    ]
    for name in cp.LIST_FIELDS:
        assert len(found[cp.TITLES[name]]) == len(items)
    assert len(found[cp.TITLES["working_set"]]) == 1 + 2 * len(items)


CAFE_NFC, CAFE_NFD = "Caf\u00e9 menu", "Cafe\u0301 menu"  # one name, typed two ways


def test_a_name_typed_in_either_unicode_form_is_one_name(home_store: Engram) -> None:
    """`café` as one character (NFC, most keyboards) or as `e` and a combining accent (NFD,
    macOS file names): stored in NFC, and found whichever way it is typed."""
    created = cli("task", "create", CAFE_NFD, "--tag", "caf\u0065\u0301", "--json")
    task = json.loads(created.stdout)
    assert (task["name"], task["tags"]) == (CAFE_NFC, ["caf\u00e9"])
    for typed in (CAFE_NFC, CAFE_NFD, CAFE_NFD.upper()):
        shown = cli("task", "show", typed, "--json")
        assert shown.exit_code == 0, shown.output
        assert json.loads(shown.stdout)["task"]["id"] == task["id"]
    home_store.remember("The menu is printed weekly", tags=["caf\u0065\u0301"], task=task["id"])
    for typed in ("caf\u00e9", "caf\u0065\u0301"):
        assert "printed weekly" in cli("list", "--tag", typed).stdout


def test_a_name_another_writer_stored_decomposed_is_found(home_store: Engram) -> None:
    """An older or foreign writer stored the name and the actor in NFD: lookups by the NFC
    form find them. Tasks are keyed by id, not name: the same name made on two clones is two
    tasks, and a lookup by the name in either form lists both."""
    from engram.storage import events as ev

    theirs = ev.new_entity_id()
    foreign_events(
        home_store.write_store().root,
        {
            "kind": "task.created",
            "actor": "Jose\u0301 <jose@example.com>",
            "data": {"task": theirs, "name": CAFE_NFD, "goal": "", "status": "open", "tags": []},
        },
    )
    for typed in (CAFE_NFC, CAFE_NFD):
        assert json.loads(cli("task", "show", typed, "--json").stdout)["task"]["id"] == theirs
        assert "# Resume: Cafe\u0301 menu" in cli("resume", "--task", typed).stdout
    assert "created: Cafe\u0301 menu" in cli("log", "--actor", "jos\u00e9").stdout
    ours = home_store.task_create(CAFE_NFC)
    for typed in (CAFE_NFC, CAFE_NFD):
        result = cli("task", "show", typed)
        assert result.exit_code == 2 and "matches 2 records" in result.stderr
        assert ours.id in result.stderr and theirs in result.stderr


def test_continuation_confidence_is_the_same_in_full_shallow_and_partial_clones(
    project: Path,
    tmp_path: Path,
) -> None:
    """The working set's files are compared with what the checkpoint saw, which needs no
    history: a shallow or blobless clone that lacks the checkpoint's commit scores the same as
    a full one, for an unchanged file and for a changed one."""
    (project / "src").mkdir()
    (project / "src" / "auth.py").write_text("def login():\n    pass\n")
    (project / "src" / "db.py").write_text("POOL = 5\n")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "code")
    with Engram(cwd=project) as engram:
        task = engram.task_create("Add OAuth login")
        engram.handoff(
            task.id, summary="callback next", next=["callback"], files=["src/auth.py", "src/db.py"]
        )
    for n in range(3):  # the checkpoint's commit falls out of a depth-1 clone
        (project / "notes.txt").write_text(f"note {n}\n")
        git(project, "add", "notes.txt")
        git(project, "commit", "-q", "-m", f"note {n}")
    (project / "src" / "db.py").write_text("POOL = 20\n")
    git(project, "commit", "-q", "-am", "bigger pool")

    def confidence(repo: Path) -> float:
        return json.loads(cli("resume", "--task", task.id, "--json", cwd=repo).stdout)["confidence"]

    url = f"file://{project}"
    shallow, partial = tmp_path / "shallow", tmp_path / "partial"
    git(tmp_path, "clone", "-q", "--depth", "1", url, str(shallow))
    git(tmp_path, "clone", "-q", "--filter=blob:none", url, str(partial))
    full = confidence(project)
    assert confidence(shallow) == confidence(partial) == full
    (project / "src" / "db.py").write_text("POOL = 5\n")  # as the checkpoint saw it
    assert confidence(project) > full


def test_resume_fills_a_token_budget_by_priority_and_names_what_it_left_out(
    home_store: Engram,
) -> None:
    task = home_store.task_create("Move the job queue to Postgres", goal="one database")
    home_store.handoff(
        task.id,
        summary="the migration ran; the worker still reads Redis",
        must_not_redo=["ran migration 0042 on production", "created the jobs table"],
        must_preserve=["never drop the redis_jobs table before the cut-over"],
        next=[
            f"step {n}: switch worker {n} to Postgres and watch its error rate" for n in range(1, 9)
        ],
        completed=[f"finished part {n} of the schema work" for n in range(30)],
    )
    for n in range(20):
        home_store.remember(
            f"Decision {n}: the queue worker {n} polls every {n + 1} seconds "
            "because the hosted Postgres limits connections",
            kind="decision",
            task=task.id,
            check_duplicates=False,
        )
    full = cli("resume", "--task", task.id)
    assert "Left out" not in full.stdout
    for budget in (250, 600):
        shown = cli("resume", "--task", task.id, "--max-tokens", str(budget)).stdout
        assert len(shown) / 4 <= budget
        assert "ran migration 0042 on production" in shown
        assert "never drop the redis_jobs table" in shown
        assert f"Left out to keep within {budget} tokens:" in shown
        assert "completed" in shown.rsplit("Left out", 1)[1]
    small = cli("resume", "--task", task.id, "--max-tokens", "250").stdout
    bigger = cli("resume", "--task", task.id, "--max-tokens", "600").stdout
    assert small.count("step ") < bigger.count("step ") or "step 8" in small
    assert "decisions" in small.rsplit("Left out", 1)[1]


def test_continuity_takes_a_number_as_a_seq_before_an_id_prefix(home_store: Engram) -> None:
    """A checkpoint's id is random and may start with a digit: `--after 3` means the third
    checkpoint even when the first one's id starts with "3"."""
    task = "movequeue001"
    foreign_events(
        home_store.write_store().root,
        {
            "kind": "task.created",
            "data": {
                "task": task,
                "name": "Move the queue",
                "goal": "",
                "status": "open",
                "tags": [],
            },
        },
        *[
            {
                "kind": "checkpoint.saved",
                "data": {
                    "task": task,
                    "checkpoint": checkpoint,
                    "seq": 1,
                    "reason": "handoff",
                    "summary": f"step {n}",
                    "next": [f"step {n + 1}"],
                    "confidence": 0.5,
                },
            }
            for n, checkpoint in enumerate(
                ("3aaaaaaaaaaa", "1bbbbbbbbbbb", "2ccccccccccc"), start=1
            )
        ],
    )
    scored = Engram().continuity(task, before="2", after="3")
    assert (scored.before, scored.after) == (2, 3)
