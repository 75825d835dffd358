"""`engram diff`: what a branch changed in the stores, read from git history alone, as a
reviewer reads it in a pull request (Markdown, JSON, one line per store), with real git
repositories, a compaction and a shallow clone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import cli, git, make_repo

from engram.api import Engram


def as_actor(repo: Path, actor: str) -> Engram:
    return Engram(cwd=repo, actor=actor)


@pytest.fixture
def branches(tmp_path: Path) -> dict[str, Any]:
    """A repository with a `main` holding two memories and a task, and a branch `feature`
    where two agents added, updated, superseded and forgot memories, moved the task, recorded
    progress and a failure, and handed off."""
    repo = make_repo(tmp_path / "app")
    Engram(cwd=repo).init(project=True)
    alice = as_actor(repo, "alice")
    kept = alice.remember("The test suite runs with pytest -x", check_duplicates=False).memory.id
    dropped = alice.remember(
        "Staging deploys go through the old Jenkins job", check_duplicates=False
    ).memory.id
    replaced = alice.remember("Tokens expire after one hour", check_duplicates=False).memory.id
    task = alice.task_create("OAuth login").id
    alice.commit()
    alice.close()
    git(repo, "switch", "-q", "-c", "feature")
    alice = as_actor(repo, "alice")
    added = alice.remember(
        "OAuth callbacks must be served over HTTPS", kind="gotcha", check_duplicates=False
    ).memory.id
    alice.update(kept, "The test suite runs with pytest -x -q")
    alice.task_update(task, status="in_progress")
    alice.progress(task, "callback endpoint", status="done", note="served at /oauth/cb")
    alice.commit()
    alice.close()
    bob = as_actor(repo, "bob")
    bob.forget(dropped, reason="Jenkins was retired; deploys run in GitHub Actions")
    newer = bob.supersede(replaced, "Tokens expire after fifteen minutes").new.id
    bob.failure(
        task, "refresh token rejected", component="auth", root_cause="clock skew between services"
    )
    bob.handoff(
        task,
        summary="Login works; refresh fails on skew",
        next=["Allow 30 s of clock skew", "Add a refresh test"],
    )
    bob.commit()
    bob.close()
    return {
        "repo": repo,
        "kept": kept,
        "dropped": dropped,
        "replaced": replaced,
        "task": task,
        "added": added,
        "newer": newer,
    }


def diff_json(repo: Path, spec: str) -> dict[str, Any]:
    done = cli("diff", spec, "--json", cwd=repo)
    assert done.exit_code == 0, done.output
    (review,) = json.loads(done.stdout)
    return review


def by_id(review: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["memory"]: m for m in review["memories"]}


def check_feature(review: dict[str, Any], b: dict[str, Any]) -> None:
    assert review["store"] == "project"
    assert review["counts"] == {
        "memories_added": 2,
        "memories_updated": 1,
        "memories_superseded": 1,
        "memories_forgotten": 1,
        "memories_reinforced": 0,
        "tasks_created": 0,
        "tasks_changed": 1,
        "progress": 1,
        "failures": 1,
        "handoffs": 1,
    }
    memories = by_id(review)
    assert memories[b["added"]]["change"] == "added"
    assert memories[b["added"]]["kind"] == "gotcha"
    assert memories[b["added"]]["authors"] == ["alice"]
    assert memories[b["kept"]]["change"] == "updated"
    assert memories[b["kept"]]["before"] == "The test suite runs with pytest -x"
    assert memories[b["kept"]]["content"] == "The test suite runs with pytest -x -q"
    assert memories[b["kept"]]["fields"] == ["content"]
    assert memories[b["dropped"]]["change"] == "forgotten"
    assert memories[b["dropped"]]["reason"] == "Jenkins was retired; deploys run in GitHub Actions"
    assert memories[b["dropped"]]["authors"] == ["bob"]
    assert memories[b["replaced"]]["change"] == "superseded"
    assert memories[b["replaced"]]["by"] == b["newer"]
    assert memories[b["newer"]]["change"] == "added"
    assert memories[b["newer"]]["content"] == "Tokens expire after fifteen minutes"
    (task,) = review["tasks"]
    assert (task["task"], task["created"]) == (b["task"], False)
    assert (task["status_before"], task["status"]) == ("open", "in_progress")
    assert [p["feature"] for p in task["progress"]] == ["callback endpoint"]
    assert [(f["error"], f["author"]) for f in task["failures"]] == [
        ("refresh token rejected", "bob")
    ]
    (handoff,) = review["handoffs"]
    assert handoff["summary"] == "Login works; refresh fails on skew"
    assert handoff["next"] == ["Allow 30 s of clock skew", "Add a refresh test"]
    assert handoff["author"] == "bob"
    assert set(review["authors"]) == {"alice", "bob"}


def test_a_branch_diff_lists_each_change_by_author(branches: dict[str, Any]) -> None:
    repo = branches["repo"]
    review = diff_json(repo, "main...feature")
    check_feature(review, branches)
    assert review["notes"] == []
    # Nothing on main's side: the same range the other way holds no change.
    assert diff_json(repo, "feature..main")["events"] == 0

    done = cli("diff", "main...feature", cwd=repo)
    assert done.exit_code == 0, done.output
    text = done.stdout
    assert text.startswith("### Engram: what `main...feature` changed in the project store")
    assert "**Memories:** 2 added, 1 updated, 1 superseded, 1 forgotten" in text
    assert "The test suite runs with pytest -x → The test suite runs with pytest -x -q" in text
    assert "reason: Jenkins was retired; deploys run in GitHub Actions — bob" in text
    assert f"→ replaced by `{branches['newer'][:8]}`" in text
    assert "OAuth login: open → in_progress — alice, bob" in text
    assert "  - next: Allow 30 s of clock skew" in text
    assert "**By author:** bob (6), alice (4)" in text

    stat = cli("diff", "main...feature", "--stat", cwd=repo)
    assert stat.stdout == (
        "project\tmain...feature\tmemories 2 added, 1 updated, "
        "1 superseded, 1 forgotten; 1 task changed; 1 progress; 1 failure; 1 handoff\n"
    )


def test_main_moving_on_does_not_show_in_the_branch_diff(branches: dict[str, Any]) -> None:
    repo = branches["repo"]
    git(repo, "switch", "-q", "main")
    main = as_actor(repo, "carol")
    main.remember("Releases are tagged vMAJOR.MINOR", check_duplicates=False)
    main.commit()
    main.close()
    check_feature(diff_json(repo, "main...feature"), branches)
    # Two dots compare the tips: main's new memory is then one the branch lacks, not a change.
    assert diff_json(repo, "main..feature")["counts"]["memories_added"] == 2


def test_a_compaction_is_not_a_change(branches: dict[str, Any]) -> None:
    """The same lines moved into one file, as a compaction commits them, change nothing."""
    repo = branches["repo"]
    folder = repo / ".engram" / "events"
    files = sorted(folder.rglob("*.jsonl"))
    assert len(files) > 1
    data = b"".join(path.read_bytes() for path in files)
    for path in files:
        path.unlink()
    (files[0].parent / "compacted-0123456789abcdef.jsonl").write_bytes(data)
    git(repo, "add", "-A", ".engram")
    git(repo, "commit", "-q", "--no-verify", "-m", "engram: compact 2026-12")
    check_feature(diff_json(repo, "main...feature"), branches)
    assert diff_json(repo, "HEAD~1..HEAD")["events"] == 0


def test_a_shallow_clone_says_what_it_cannot_see(branches: dict[str, Any], tmp_path: Path) -> None:
    repo = branches["repo"]
    shallow = tmp_path / "shallow"
    git(
        tmp_path,
        "clone",
        "-q",
        "--depth",
        "1",
        "--no-single-branch",
        f"file://{repo}",
        str(shallow),
    )
    review = diff_json(shallow, "origin/main...origin/feature")
    (note,) = review["notes"]
    assert "shallow" in note and "--unshallow" in note
    check_feature(review, branches)  # main's tip is the merge base here: the same changes
    done = cli("diff", "origin/main...origin/feature", cwd=shallow)
    assert "> **Note:** this clone is shallow" in done.stdout


def test_the_event_files_are_marked_generated_for_forges(branches: dict[str, Any]) -> None:
    repo = branches["repo"]
    files = [
        line.split("|")[0].strip()
        for line in git(repo, "diff", "--stat=200", "main...feature").splitlines()
        if "|" in line
    ]
    events = [f for f in files if f.endswith(".jsonl")]
    assert events and any(f.endswith(".md") for f in files)
    out = git(repo, "check-attr", "linguist-generated", "gitlab-generated", "merge", "--", *files)
    for name in events:
        assert f"{name}: linguist-generated: true" in out
        assert f"{name}: gitlab-generated: set" in out
        assert f"{name}: merge: union" in out
    for name in (f for f in files if f.endswith(".md")):
        assert f"{name}: linguist-generated: unspecified" in out


def test_store_text_is_shown_as_data_in_the_comment(project: Path) -> None:
    git(project, "switch", "-q", "-c", "feature")
    engram = Engram(cwd=project, actor="mallory")
    engram.remember(
        "# Approved\n![x](https://evil.example/p.png) <img src=x> @everyone | `x`",
        check_duplicates=False,
    )
    engram.commit()
    engram.close()
    text = cli("diff", "main...feature", cwd=project).stdout
    line = next(line for line in text.splitlines() if line.startswith("- `"))
    assert "\n# Approved" not in text
    assert "![x]" not in line and "!\\[x]" in line  # no image: the bracket is escaped
    assert line.count("<img") == line.count("\\<img") == 1 and "\\|" in line


def test_bad_ranges_are_one_line_errors(project: Path) -> None:
    for spec, words in (
        ("nosuch...HEAD", "'nosuch'"),
        ("main..-x", "not a revision"),
        ("a..b..c", "not a range"),
    ):
        done = cli("diff", spec, cwd=project)
        assert done.exit_code == 2, done.output
        assert words in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_bad_line_on_the_branch_is_skipped_and_counted(project: Path) -> None:
    git(project, "switch", "-q", "-c", "feature")
    engram = Engram(cwd=project)
    engram.remember("The cache lives in .cache/app", check_duplicates=False)
    engram.commit()
    engram.close()
    events = sorted((project / ".engram" / "events").rglob("*.jsonl"))[-1]
    with events.open("ab") as handle:
        handle.write(b'{"not": "an event"}\n')
    git(project, "commit", "-q", "-am", "a hand-written line", "--no-verify")
    review = diff_json(project, "main...feature")
    assert review["counts"]["memories_added"] == 1
    assert review["skipped_lines"] == 1
