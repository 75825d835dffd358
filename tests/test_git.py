from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ACTOR, cli, git, make_repo

from engram.api import Engram
from engram.base.errors import GitError
from engram.storage.store import WriterState


def porcelain_without_engram(repo: Path) -> list[str]:
    return [
        line
        for line in git(repo, "status", "--porcelain=v1", "-uall").splitlines()
        if ".engram/" not in line
    ]


def test_project_commit_leaves_staged_and_unstaged_changes_exactly_as_they_were(
    tmp_path: Path,
) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {
            "app.py": "line 1\nline 2\nline 3\n",
            "lib.py": "def f():\n    return 1\n",
            "notes.txt": "notes\n",
            "gone.txt": "to be deleted\n",
        },
    )
    Engram(cwd=repo).init(project=True)
    # The user's work in progress: a partly staged file, a staged new file, an unstaged edit,
    # a staged deletion and an untracked file.
    (repo / "app.py").write_text("line 1 staged\nline 2\nline 3\n")
    git(repo, "add", "app.py")
    (repo / "app.py").write_text("line 1 staged\nline 2\nline 3 unstaged\n")
    (repo / "new.py").write_text("print('new')\n")
    git(repo, "add", "new.py")
    (repo / "lib.py").write_text("def f():\n    return 2\n")
    git(repo, "rm", "-q", "gone.txt")
    (repo / "scratch.txt").write_text("untracked\n")

    staged_before = git(repo, "diff", "--cached", "--", ".", ":!.engram")
    unstaged_before = git(repo, "diff", "--", ".", ":!.engram")
    status_before = porcelain_without_engram(repo)
    files_before = {
        p: (repo / p).read_text() for p in ("app.py", "lib.py", "new.py", "scratch.txt")
    }
    head_before = git(repo, "rev-parse", "HEAD").strip()

    engram = Engram(cwd=repo)
    memory = engram.remember("Never commit generated files", kind="convention")
    [result] = engram.commit()
    assert result.commit and result.events == 1

    assert git(repo, "diff", "--cached", "--", ".", ":!.engram") == staged_before
    assert git(repo, "diff", "--", ".", ":!.engram") == unstaged_before
    assert porcelain_without_engram(repo) == status_before
    assert {p: (repo / p).read_text() for p in files_before} == files_before
    # Engram's own paths are committed and clean; the commit holds nothing else.
    assert not [
        line for line in git(repo, "status", "--porcelain").splitlines() if ".engram/" in line
    ]
    assert git(repo, "rev-parse", "HEAD~1").strip() == head_before
    changed = git(repo, "show", "--name-only", "--format=", "HEAD").split()
    assert changed and all(path.startswith(".engram/events/") for path in changed)
    assert memory.id.encode() in (repo / changed[0]).read_bytes()


def test_commit_is_authored_by_the_actor_with_a_readable_message(project: Path) -> None:
    engram = Engram(cwd=project)
    first = engram.remember("Use Postgres for the job queue", kind="decision")
    engram.update(first.id, "Use Postgres 16 for the job queue")
    engram.commit()
    author = git(project, "log", "-1", "--format=%an <%ae>").strip()
    assert author == ACTOR
    message = git(project, "log", "-1", "--format=%B")
    assert message.splitlines()[0] == "engram: 2 memories"
    assert f"- remember {first.id[:8]} [decision] Use Postgres for the job queue" in message
    assert f"- update {first.id[:8]} (content): Use Postgres 16 for the job queue" in message


def test_a_mixed_commit_counts_in_its_subject_what_its_body_lists(project: Path) -> None:
    engram = Engram(cwd=project)
    engram.session_start(agent="codex")
    engram.remember("The OAuth callback needs the state cookie")
    engram.remember("Tokens are refreshed by the middleware", kind="decision")
    task = engram.task_create("OAuth login", goal="Log in with GitHub")
    engram.progress(task.id, "callback handler")
    engram.commit()
    message = git(project, "log", "-1", "--format=%B").strip()
    subject, blank, *body = message.splitlines()
    assert subject == "engram: 2 memories, 2 task updates, 1 progress entry (OAuth login)"
    assert len(subject) <= 72 and blank == ""
    # One body line per counted event, in the subject's nouns; the session's start last.
    assert body[-1] == "- and 1 session event"
    listed = body[:-1]
    assert len(listed) == 2 + 2 + 1
    assert sum(line.startswith("- remember ") for line in listed) == 2
    assert sum(line.startswith(f"- task {task.id[:8]} ") for line in listed) == 2
    assert sum(line.startswith(f"- progress {task.id[:8]} ") for line in listed) == 1


def test_subjects_name_one_task_count_handoffs_and_stay_short() -> None:
    from engram.api import commit_message
    from engram.storage.events import Event

    def event(name: str, /, **data: object) -> Event:
        return Event(
            id="0" * 26,
            kind=name,
            clock=1,
            time="2026-12-02T00:00:00Z",
            actor=ACTOR,
            session=None,
            machine=None,
            data=dict(data),
        )

    task = "a" * 12
    batch = [
        event("memory.created", memory="m" * 12, content="one", kind="fact", tags=[]),
        event("memory.forgotten", memory="m" * 12, reason="wrong"),
        event("task.created", task=task, name="OAuth login", goal="", status="active"),
        event(
            "checkpoint.saved",
            task=task,
            checkpoint="c" * 12,
            seq=1,
            reason="handoff",
            summary="callback done",
        ),
        event("session.ended", session_id="s" * 12),
    ]
    message = commit_message(batch)
    assert message.splitlines()[0] == "engram: 2 memories, 1 task update, 1 handoff (OAuth login)"
    assert message.splitlines()[-1] == "- and 1 session event"
    assert len(message.splitlines()) == 2 + 4 + 1
    # Two tasks: no name. A long name is cut so the subject stays within 72 characters.
    other = event(
        "checkpoint.saved", task="b" * 12, checkpoint="d" * 12, seq=1, reason="plan_change"
    )
    assert (
        commit_message([*batch[:4], other]).splitlines()[0]
        == "engram: 2 memories, 1 task update, 1 checkpoint, 1 handoff"
    )
    long = [batch[0], event("task.created", task=task, name="x" * 200, goal="", status="active")]
    subject = commit_message(long).splitlines()[0]
    assert len(subject) == 72 and subject.endswith("x…)")
    # Many kinds: the last ones are told as other events, and the counts still add up.
    many = [
        *batch[:4] * 5,
        event("task.progress", task=task, feature="f"),
        other,
        event("task.failure", task=task, error="e"),
        event("store.created", store="project"),
    ]
    subject = commit_message(many).splitlines()[0]
    assert subject == "engram: 10 memories, 5 task updates, 1 progress entry, 8 other events"
    assert len(commit_message(many).splitlines()) == 2 + len(many)
    # Session events alone are counted as such.
    started = event("session.started", session_id="s" * 12)
    assert commit_message([started, started]).splitlines()[0] == "engram: 2 session events"
    # One event keeps a one-line message.
    assert commit_message(batch[:1]) == f"engram: remember {'m' * 8} [fact] one\n"


def test_commits_are_batched_by_event_count(project: Path) -> None:
    engram = Engram(cwd=project)
    Engram(cwd=project, use="project").config_set("commit.every_events", "3")
    head = git(project, "rev-parse", "HEAD").strip()
    engram.remember("one")
    engram.remember("two")
    assert git(project, "rev-parse", "HEAD").strip() == head
    assert Engram(cwd=project).status()[0].uncommitted == 2
    engram.remember("three")
    assert git(project, "rev-parse", "HEAD").strip() != head
    assert Engram(cwd=project).status()[0].uncommitted == 0


def test_commits_are_batched_by_age_on_the_next_write(project: Path) -> None:
    engram = Engram(cwd=project, use="project")
    engram.config_set("commit.every_seconds", "60")
    store = engram.write_store()
    engram.commit()
    head = git(project, "rev-parse", "HEAD").strip()
    engram.remember("pending for a while")
    state = WriterState.load(store)
    state.pending_since -= 120  # as if the first pending event were two minutes old
    state.save(store)
    engram.remember("the next write commits both")
    assert git(project, "rev-parse", "HEAD").strip() != head
    assert git(project, "log", "-1", "--format=%s").strip() == "engram: 2 memories"


def test_no_commit_while_git_is_mid_merge_and_events_stay_safe(project: Path) -> None:
    engram = Engram(cwd=project)
    engram.remember("written during a merge")
    (Path(project) / ".git" / "MERGE_HEAD").write_text(
        git(project, "rev-parse", "HEAD").strip() + "\n"
    )
    with pytest.raises(GitError, match="middle of a merge"):
        engram.commit()
    (Path(project) / ".git" / "MERGE_HEAD").unlink()
    [result] = Engram(cwd=project).commit()
    assert result.events == 1


def test_a_rewritten_committed_event_file_is_not_committed(project: Path) -> None:
    engram = Engram(cwd=project)
    engram.remember("original")
    engram.commit()
    [path] = [
        p
        for p in (project / ".engram" / "events").rglob("*.jsonl")
        if b"original" in p.read_bytes()
    ]
    head = git(project, "rev-parse", "HEAD").strip()
    path.write_bytes(path.read_bytes().replace(b"original", b"tampered"))
    [result] = Engram(cwd=project).commit()
    assert result.commit is None
    assert result.refused == [path.relative_to(project / ".engram").as_posix()]
    assert git(project, "rev-parse", "HEAD").strip() == head


def test_a_never_committed_file_with_a_skipped_line_is_named_for_that_not_as_changed(
    project: Path,
) -> None:
    """A line readers skip in the uncommitted part of a file (written by hand, or by an older
    Engram that took an invalid ENGRAM_SESSION) holds back the file's new events: commit and
    status say so and how to repair it, not that its committed part changed."""
    engram = Engram(cwd=project)
    engram.remember("good one")
    store = engram.write_store()
    path = store.root / WriterState.load(store).segment
    rel = store.rel(path)
    line = path.read_bytes().splitlines()[-1].replace(b'"session":null', b'"session":"bad id!"')
    with path.open("ab") as handle:
        handle.write(line + b"\n")
    [result] = Engram(cwd=project).commit()
    assert (result.commit, result.refused, result.unreadable) == (None, [], [rel])
    done = cli("commit", cwd=project)
    assert "changed in its committed part" not in done.output
    assert f"not committed: {rel} holds an uncommitted line readers skip" in done.output
    assert "`engram doctor` says how to repair it" in done.output
    [status] = Engram(cwd=project).status()
    assert (status.refused, status.unreadable) == ((), (rel,))
    assert f"not committable: {rel} holds an uncommitted line" in cli("status", cwd=project).output
    cli("doctor", "--fix", cwd=project)
    [result] = Engram(cwd=project).commit()
    assert result.events == 1 and not result.unreadable
    assert porcelain_without_engram(project) == [] and git(project, "status", "--porcelain") == ""


def test_index_lock_held_by_git_defers_the_commit(project: Path) -> None:
    engram = Engram(cwd=project)
    engram.remember("waiting for git")
    lock = project / ".git" / "index.lock"
    lock.write_text("")
    with pytest.raises(GitError, match="another git process"):
        engram.commit()
    lock.unlink()
    assert Engram(cwd=project).commit()[0].events == 1


def test_personal_store_is_its_own_repository(home_store: Engram) -> None:
    home = home_store.personal.root
    assert (home / ".git").is_dir()
    home_store.remember("a preference", kind="preference")
    home_store.commit()
    assert git(home, "status", "--porcelain") == ""
    assert "remember" in git(home, "log", "-1", "--format=%s")


@pytest.mark.parametrize("version", ["2", "4"])
def test_a_users_git_add_never_makes_engram_change_a_committed_file(
    project: Path,
    version: str,
) -> None:
    """`git add -A` stages Engram's live file between two writes, then the user commits it:
    Engram's later writes go to a new file, so no commit ever modifies an event file."""
    git(project, "config", "index.version", version)
    with Engram(cwd=project) as engram:
        engram.remember("first, before the user's git add", check_duplicates=False)
        engram.remember("second, before the user's git add", check_duplicates=False)
    git(project, "add", "-A")
    with Engram(cwd=project) as engram:
        engram.remember("third, after the user's git add", check_duplicates=False)
    git(project, "commit", "-q", "-m", "the user's own commit")
    with Engram(cwd=project) as engram:
        engram.remember("fourth, after the user's commit", check_duplicates=False)
        engram.commit()
        assert len(engram.memories()) == 4
    changes = git(project, "log", "--format=", "--name-status", "--", ".engram/events")
    assert changes and all(line.startswith("A\t") for line in changes.splitlines() if line)
    assert git(project, "status", "--porcelain", "--", ".engram") == ""
