"""What a resume tells the next agent is true now: work done since the handoff, the decisions and
facts of the task, the working set as the code is, and text as it was written."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import anyio
from conftest import git, make_repo, markdown_sections, run_engram
from test_mcp import call, connect
from test_sync import Server

from engram.api import Engram


def test_a_handoff_pins_each_file_to_the_newest_commit_that_changed_it(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "app", {"src/ratelimit.py": "LIMIT = 1\n", "src/other.py": "x = 1\n"}
    )
    engram = Engram(cwd=repo)
    engram.init(project=True)
    first = git(repo, "log", "-1", "--format=%H", "--", "src/ratelimit.py").strip()
    task = engram.task_create("Rate limiting")
    engram.handoff(task.id, summary="started", files=["src/ratelimit.py"])
    (repo / "src/ratelimit.py").write_text("LIMIT = 2\n")
    git(repo, "commit", "-qam", "raise the limit")
    edited = git(repo, "log", "-1", "--format=%H").strip()
    carried = engram.handoff(task.id, summary="limit raised")
    [pin] = carried.checkpoint.record["working_set"]["files"]
    assert first != edited and pin["commit"] == edited and "uncommitted" not in pin
    (repo / "src/ratelimit.py").write_text("LIMIT = 3\n")
    [pin] = engram.handoff(task.id, summary="trying 3").checkpoint.record["working_set"]["files"]
    assert pin["commit"] == edited and pin["uncommitted"] is True
    typo = engram.handoff(task.id, summary="parser next", files=["src/parser.py"])
    [pin] = typo.checkpoint.record["working_set"]["files"]
    assert pin == {"path": "src/parser.py", "commit": None, "missing": True}
    assert any("'src/parser.py' does not exist in the work tree" in w for w in engram.warnings)


ENTITY = re.compile(r"&(#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")
LAPTOP = {"ENGRAM_ACTOR": "Claude Code <claude@laptop>", "ENGRAM_MACHINE": "laptop"}
DESKTOP = {"ENGRAM_ACTOR": "Codex <codex@desktop>", "ENGRAM_MACHINE": "desktop"}


def test_two_machines_over_mcp_the_resume_tells_what_happened_since_the_handoff(
    tmp_path: Path,
) -> None:
    """A records a task, progress, a failure, a decision and a fact (neither tied to the task)
    and hands off, over the MCP stdio client; pushes. B clones, does the first next step,
    commits it, reports progress after the handoff, and resumes."""
    (tmp_path / "server").mkdir()
    server = Server(tmp_path / "server", "daemon")
    try:
        laptop = make_repo(
            tmp_path / "laptop", {"README.md": "an API\n", "src/ratelimit.py": "LIMIT = 10\n"}
        )
        Engram(cwd=laptop).init(project=True)
        git(server.bare, "symbolic-ref", "HEAD", "refs/heads/main")

        async def machine_a() -> str:
            async with connect(laptop, env=LAPTOP) as client:
                task = (
                    await call(
                        client,
                        "task_create",
                        name="Rate limit the API",
                        goal="Clients past their limit get 429",
                    )
                )["task"]["id"]
                await call(
                    client,
                    "task_progress",
                    task=task,
                    feature="Token bucket",
                    files=["src/ratelimit.py"],
                )
                await call(
                    client,
                    "task_failure",
                    task=task,
                    error="test_burst is flaky",
                    component="api",
                    root_cause="the clock is real time",
                )
                await call(
                    client,
                    "memory_remember",
                    kind="decision",
                    content="Limit per API key, not per IP",
                )
                await call(
                    client,
                    "memory_remember",
                    kind="fact",
                    content="Staging keys are already rotated",
                )
                await call(
                    client,
                    "session_handoff",
                    task=task,
                    summary="Bucket works",
                    next=["Add the Retry-After header", "Document the limit"],
                    files=["src/ratelimit.py"],
                )
                return task

        task = anyio.run(machine_a)
        assert run_engram("commit", cwd=laptop, env=LAPTOP).returncode == 0
        git(laptop, "push", "-q", server.url, "main")

        desktop = tmp_path / "desktop"
        git(tmp_path, "clone", "-q", server.url, str(desktop))
        (desktop / "src/ratelimit.py").write_text("LIMIT = 10\nRETRY_AFTER = 1\n")
        git(desktop, "commit", "-qam", "Send Retry-After with every 429")
        edited = git(desktop, "rev-parse", "HEAD").strip()

        async def machine_b() -> str:
            async with connect(desktop, env=DESKTOP) as client:
                await call(
                    client,
                    "task_progress",
                    task=task,
                    feature="Retry-After header",
                    files=["src/ratelimit.py"],
                )
                return (await call(client, "session_resume", task=task))["markdown"]

        markdown = anyio.run(machine_b)
    finally:
        server.stop()
    headings, items = markdown_sections(markdown)
    since = next(h for h in headings if h.startswith("Since handoff"))
    assert f"## {since.split(' (')[0]} (Claude Code <claude@laptop>, " in markdown
    assert "- done: Add the Retry-After header — by Codex <codex@desktop>, " in markdown
    assert any(i.startswith("done: Add the Retry-After header — by Codex") for i in items[since])
    assert any(i.startswith(f"commit {edited[:12]} Send Retry-After") for i in items[since])
    assert items["Next steps (in order)"] == ["Document the limit"]
    assert items["Decisions"][0].startswith("Limit per API key, not per IP")
    assert any(
        i.startswith("Staging keys are already rotated")
        for i in items["Facts and preferences of this task"]
    )
    [pinned] = items["Working set"]
    assert pinned.startswith("src/ratelimit.py @ ") and f"now @ {edited[:12]}" in pinned
    assert any("test_burst is flaky" in i for i in items["Failures to avoid repeating"])
    assert not ENTITY.search(markdown), ENTITY.search(markdown)


def test_terminal_agent_and_forge_text_carry_no_html_entities(project: Path) -> None:
    """The same address, read where each text goes: the terminal (`engram resume`), an agent's
    context (the SessionStart hook) and the handoff file a forge renders."""
    engram = Engram(cwd=project)
    task = engram.task_create("Fix the login & <b>signup</b>")
    engram.handoff(task.id, summary="Ask Ada <ada@example.com> & Bob", next=["a < b"])
    terminal = run_engram("resume", cwd=project)
    assert terminal.returncode == 0, terminal.stderr
    started = subprocess.run(
        [sys.executable, "-m", "engram.hooks", "session-start"],
        input=json.dumps({"cwd": str(project), "source": "startup"}),
        capture_output=True,
        text=True,
        cwd=project,
        timeout=60,
    )
    context = json.loads(started.stdout)["hookSpecificOutput"]["additionalContext"]
    [page] = (project / ".engram" / "handoffs").rglob("*.md")
    for text in (terminal.stdout, context, page.read_text()):
        assert (
            "Ask Ada <ada@example.com> \\& Bob" in text or "Ask Ada <ada@example.com> & Bob" in text
        ), text
        assert "Test Agent <agent@example.com>" in text
        assert not ENTITY.search(text), ENTITY.search(text)
        headings, _ = markdown_sections(text)  # and still no HTML
        assert any("<b>signup</b>" in h for h in headings)


def test_the_depths_differ_brief_is_short_and_full_carries_the_whole_history(project: Path) -> None:
    engram = Engram(cwd=project)
    task = engram.task_create("Port the billing jobs", goal="every job on the new queue")
    for n in range(40):
        engram.progress(
            task.id,
            f"Ported billing job number {n} to the new queue",
            note="checked against last month's invoices",
        )
        if n % 10 == 9:
            engram.handoff(
                task.id, summary=f"{n + 1} jobs ported", next=[f"Port billing job number {n + 1}"]
            )
    engram.remember("Jobs keep their cron schedule as it was", kind="decision", task=task.id)
    shown = {
        depth: engram.resume(task=task.id, depth=depth).markdown
        for depth in ("brief", "standard", "full")
    }
    assert len(shown["brief"]) < 0.5 * len(shown["standard"]) < len(shown["full"])
    for text in shown.values():  # every depth carries the plan and the task's decisions
        assert "Port billing job number 40" in text
        assert "Jobs keep their cron schedule as it was" in text
    # full: every event of the task, the first one too, and every earlier checkpoint
    assert "created: Port the billing jobs" in shown["full"]
    assert "created: Port the billing jobs" not in shown["standard"]
    assert "- 1 (" in shown["full"].split("## Earlier checkpoints")[1]
    assert "## Earlier checkpoints" not in shown["brief"]
    for n in range(8):  # brief brings five of the task's memories and says how many it left
        engram.remember(
            f"Job {n} runs in the billing pool", kind="fact", task=task.id, check_duplicates=False
        )
    brief = engram.resume(task=task.id, depth="brief").markdown
    assert "… and 4 more of this task's memories" in brief
    assert "Jobs keep their cron schedule as it was" in brief  # decisions rank first
    assert "more of this task's memories" not in engram.resume(task=task.id, depth="full").markdown


def test_counts_read_as_words_and_recall_takes_limit(home_store: Engram) -> None:
    from conftest import cli

    home_store.remember("The queue retries three times", kind="fact")
    status = cli("status").output
    assert "1 memory (0 forgotten), " in status and "1 memories" not in status
    assert "uncommitted: 1 event;" in status or "uncommitted: none" in status
    verified = cli("verify").output
    assert "(s)" not in verified and "1 events" not in verified
    home_store.remember("The queue lives in Redis", kind="fact")
    limited = cli("recall", "queue", "--limit", "1", "--json")
    assert limited.exit_code == 0, limited.output
    assert len(json.loads(limited.stdout)) == 1
    assert len(json.loads(cli("recall", "queue", "--json").stdout)) == 2
    assert cli("recall", "queue", "-k", "1").exit_code == 0


def test_recent_events_cut_a_long_summary_with_an_ellipsis(home_store: Engram) -> None:
    task = home_store.task_create("Long summaries")
    home_store.handoff(
        task.id,
        summary="The migration of every billing job to the new queue "
        "is halfway done and the rest waits for the cut-over",
    )
    [line] = [
        x
        for x in home_store.resume(task=task.id).markdown.splitlines()
        if x.startswith("- ") and "handoff " in x
    ]
    assert "The migration of every billing job to the new queue is half…" in line


def test_since_takes_today_and_yesterday(home_store: Engram) -> None:
    from conftest import cli

    home_store.remember("Written today", kind="fact")
    for word in ("today", "yesterday"):
        shown = cli("log", "--since", word)
        assert shown.exit_code == 0, shown.output
        assert "Written today" in shown.output
    wrong = cli("log", "--since", "someday")
    assert wrong.exit_code == 2 and "today or yesterday" in wrong.output + wrong.stderr


def test_resume_without_a_store_says_so_once_and_get_points_a_task_id_to_show(
    tmp_path: Path, home_store: Engram
) -> None:
    from conftest import cli

    task = home_store.task_create("Write the importer")
    wrong = cli("get", task.id)
    assert wrong.exit_code == 2
    assert f"is a task, not a memory: see it with `engram show {task.id}`" in wrong.stderr
    assert cli("show", task.id).exit_code == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    nowhere = run_engram("resume", cwd=empty, env={"ENGRAM_HOME": str(empty / "none")})
    assert nowhere.returncode != 0
    assert nowhere.stderr.count("no Engram store yet") == 1, nowhere.stderr
