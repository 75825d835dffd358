"""`--at REV`: what the stores knew at a commit, a tag or a date, from git history alone."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import cli, git

from engram.api import Engram
from engram.storage.store import Store


def _events(repo: Path) -> int:
    return sum(
        p.read_bytes().count(b"\n") for p in Store(repo / ".engram", "project").event_files()
    )


def test_recall_and_resume_at_a_tag_a_commit_and_a_date(project: Path) -> None:
    with Engram(cwd=project) as engram:
        old = engram.remember("The job queue lives in Redis", check_duplicates=False)
        task = engram.task_create("Move the job queue")
        engram.handoff(task.id, summary="Redis is fine for now", next=["measure Redis"])
    git(project, "tag", "v1")
    then = git(project, "rev-parse", "HEAD").strip()
    with Engram(cwd=project) as engram:
        engram.remember(
            "The job queue lives in Postgres now", supersedes=[old.id], check_duplicates=False
        )
        engram.handoff(task.id, summary="moved to Postgres", next=["drop Redis"])

    now = cli("-C", str(project), "recall", "where does the job queue live")
    assert "Postgres" in now.stdout and "Redis" not in now.stdout
    before = len(git(project, "log", "--oneline").splitlines()), _events(project)
    for rev in ("v1", then[:10]):
        past = cli("-C", str(project), "recall", "where does the job queue live", "--at", rev)
        assert past.exit_code == 0, past.output
        assert "Redis" in past.stdout and "Postgres" not in past.stdout
        assert f"as of: project store at {then[:8]}" in past.stderr
        resumed = cli("-C", str(project), "resume", "--task", task.id, "--at", rev)
        assert "Redis is fine for now" in resumed.stdout and "drop Redis" not in resumed.stdout
    dated = cli("-C", str(project), "resume", "--task", task.id, "--at", "2999-01-01", "--json")
    assert "moved to Postgres" in json.loads(dated.stdout)["markdown"]
    assert (len(git(project, "log", "--oneline").splitlines()), _events(project)) == before
    assert git(project, "status", "--porcelain") == ""


def test_an_unknown_revision_is_one_line_with_the_fix(project: Path) -> None:
    done = cli("-C", str(project), "recall", "anything", "--at", "no-such-tag")
    assert done.exit_code == 2
    assert done.stderr.strip().splitlines()[-1].startswith("error: --at 'no-such-tag' names no")
    assert "git log" in done.stderr
    early = cli("-C", str(project), "recall", "anything", "--at", "1990-01-01")
    assert early.exit_code == 2 and "names no commit" in early.stderr
