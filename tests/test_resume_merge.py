"""Two machines work on one task at once and merge: the resume on either still tells the whole
truth. A step one marked done before the other's newer handoff, which did not know of it, is
done; what either handoff said must not be redone, or must be preserved, is kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import git, make_repo, markdown_sections

from engram.api import Engram

MUST_NOT_REDO = "Must not redo (done or side-effecting: never repeat)"
PLAN = ["Run migration 0042", "Flip the flag"]


def _two_machines(tmp_path: Path) -> tuple[Path, Path, str]:
    """A project with a task handed off on A, pushed to a bare repository and cloned as B."""
    bare = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    a = make_repo(tmp_path / "a")
    engram = Engram(cwd=a)
    engram.init(project=True)
    task = engram.task_create("Billing migration").id
    engram.handoff(task, summary="Schema ready", next=PLAN)
    engram.commit()
    git(a, "remote", "add", "origin", str(bare))
    git(a, "push", "-q", "-u", "origin", "main")
    b = tmp_path / "b"
    git(tmp_path, "clone", "-q", str(bare), str(b))
    return a, b, task


def _exchange(a: Path, b: Path) -> None:
    """Both machines commit, push and pull until each has the other's events."""
    for here in (a, b, a):
        Engram(cwd=here).commit()
        git(here, "pull", "-q", "--no-rebase", "--no-edit")
        git(here, "push", "-q", "origin", "main")


def test_a_step_done_on_one_machine_is_done_after_the_others_newer_handoff(
    tmp_path: Path,
) -> None:
    a, b, task = _two_machines(tmp_path)
    Engram(cwd=a).progress(task, "Run migration 0042", status="done")
    Engram(cwd=a).handoff(task, summary="Migrated", must_not_redo=["Ran migration 0042 on prod"])
    # B has not pulled: its handoff, newer, plans the step A has done.
    Engram(cwd=b).handoff(
        task, summary="Bucket made", next=PLAN, must_not_redo=["Created the S3 bucket"]
    )
    _exchange(a, b)
    resumes = [Engram(cwd=here).resume(task=task).markdown for here in (a, b)]
    assert resumes[0] == resumes[1]
    headings, items = markdown_sections(resumes[0])
    since = next(h for h in headings if h.startswith("Since handoff"))
    assert any(
        i.startswith("done: Run migration 0042 — by ")
        and i.endswith("(the handoff did not know of it); do not redo")
        for i in items[since]
    ), items[since]
    assert items["Next steps (in order)"] == ["Flip the flag"]
    assert {"Ran migration 0042 on prod", "Created the S3 bucket"} <= set(items[MUST_NOT_REDO])

    # The next handoff, on either machine, carries both machines' items on.
    later = Engram(cwd=b).handoff(task, summary="Flag next")
    record = later.checkpoint.record
    assert {"Ran migration 0042 on prod", "Created the S3 bucket"} <= set(record["must_not_redo"])
    assert "Run migration 0042" in record["completed"]
    assert "Run migration 0042" not in record["next"]


def test_a_step_the_handoff_knew_was_done_and_planned_again_stays_planned(
    tmp_path: Path,
) -> None:
    """Not every done step before a handoff is news: one its writer knew of (it is among the
    handoff's completed items) and planned again is the plan."""
    repo = make_repo(tmp_path / "app")
    engram = Engram(cwd=repo)
    engram.init(project=True)
    task = engram.task_create("Billing migration").id
    engram.handoff(task, summary="Schema ready", next=PLAN)
    engram.progress(task, "Run migration 0042", status="done")
    engram.handoff(task, summary="Rolled back, migrate again", next=PLAN)
    markdown = engram.resume(task=task).markdown
    _, items = markdown_sections(markdown)
    assert items["Next steps (in order)"] == PLAN
    assert "done: Run migration 0042" not in markdown


@pytest.mark.parametrize("auto", [True, False])
def test_a_planned_step_done_since_the_handoff_is_named_so_with_or_without_a_checkpoint(
    project: Path, auto: bool
) -> None:
    Engram(cwd=project, use="project").config_set("checkpoint.auto", str(auto).lower())
    engram = Engram(cwd=project)
    task = engram.task_create("Parser").id
    engram.handoff(task, summary="Design done", next=["Write the parser", "Write the lexer"])
    change = engram.progress(task, "Write the parser", status="done")
    assert (change.checkpoint is not None) is auto  # the automatic one drops it from its plan
    markdown = engram.resume(task=task).markdown
    headings, items = markdown_sections(markdown)
    since = next(h for h in headings if h.startswith("Since handoff"))
    assert any(
        i.startswith("done: Write the parser — by ") and i.endswith("; do not redo")
        for i in items[since]
    ), items[since]
    assert "1 planned step done" in markdown
    assert items["Next steps (in order)"] == ["Write the lexer"]
