"""Git deletes event files: `clean`, `stash -u` + `drop`, `worktree remove --force`, `reset
--hard`, `revert`, `pull --rebase` after a force-push. Each case is done with plain git, as a
user would; `status` and `doctor` must count what was lost, `engram recover` must bring back
every acknowledged event exactly once, and a second recovery must do nothing."""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import cli, git, make_repo

from engram.api import Engram
from engram.storage import events as ev
from engram.storage import ledger as noting
from engram.storage import lines
from engram.storage.store import Store


def _project(path: Path) -> Path:
    repo = make_repo(path)
    with Engram(cwd=repo) as engram:
        engram.init(project=True)
        engram.use = "project"
        engram.config_set("search.model", "off")
        engram.config_set("commit.auto", "false")
    return repo


def _write(repo: Path, count: int, *, commit: bool = False, label: str = "note") -> set[str]:
    """`count` memories written to the project store (committed if asked); their event ids."""
    with Engram(cwd=repo, use="project") as engram:
        before = _ids(repo)
        for n in range(count):
            engram.remember(f"{label} {n}: the queue retries {n} times", check_duplicates=False)
        if commit:
            engram.commit()
    return _ids(repo) - before


def _store(repo: Path) -> Store:
    return Store(repo / ".engram", "project")


def _ids(repo: Path) -> set[str]:
    events, problems = _store(repo).read_all()
    assert [p for p in problems if p.severity == "error"] == []
    return {e.id for e in events}


def _copies(repo: Path) -> Counter[str]:
    """How many lines hold each event id, across every event file."""
    found: Counter[str] = Counter()
    for path in _store(repo).event_files():
        for line in lines.read(path.read_bytes())[0]:
            if line.event is not None:
                found[line.event.id] += 1
    return found


def _status(repo: Path) -> dict[str, Any]:
    result = cli("status", "--project", "--json", cwd=repo)
    assert result.exit_code == 0, result.output
    [entry] = json.loads(result.stdout)
    return entry


def _lost_finding(repo: Path) -> dict[str, Any] | None:
    result = cli("doctor", "--project", "--json", cwd=repo)
    report = json.loads(result.stdout)
    found = [
        f for entry in report["stores"] for f in entry["findings"] if f["check"] == "lost-events"
    ]
    assert len(found) <= 1
    if found:
        assert result.exit_code == 1
    return found[0] if found else None


def _recover(repo: Path, *args: str) -> dict[str, Any]:
    result = cli("recover", "--project", "--json", *args, cwd=repo)
    assert result.exit_code == 0, result.output
    [entry] = json.loads(result.stdout)
    return entry


def _assert_lost(repo: Path, count: int) -> None:
    """`status` (text and JSON) and `doctor` both say that `count` events are lost."""
    entry = _status(repo)
    assert entry["lost"]["events"] == count
    assert sum(entry["lost"]["files"].values()) == count
    text = cli("status", "--project", cwd=repo).output
    events = f"{count} event" + ("s" if count != 1 else "")
    assert f"lost: {events} git took away" in text and "engram recover --project" in text
    finding = _lost_finding(repo)
    assert finding is not None and finding["message"].startswith(f"{events} seen in this store")
    assert "engram recover --project" in finding["fix"]


def _assert_recovered(
    repo: Path, expected: set[str], count: int, *, from_git: int | None = None
) -> None:
    """Recovery writes back exactly the lost events, once; a second run does nothing."""
    done = _recover(repo)
    assert done["events"] == count
    if from_git is not None:
        assert done["from_git"] == from_git
    assert done["commit"] is not None
    assert _ids(repo) == expected
    assert max(_copies(repo).values()) == 1  # nothing duplicated
    assert _status(repo)["lost"]["events"] == 0
    assert _lost_finding(repo) is None
    assert cli("verify", "--project", cwd=repo).exit_code == 0
    assert _recover(repo)["events"] == 0  # twice: nothing the second time
    assert max(_copies(repo).values()) == 1
    # Committed by Engram, with nothing left for `git status` to show in the store.
    assert "recover" in git(repo, "log", "-1", "--format=%s")
    assert git(repo, "status", "--porcelain", "--", ".engram") == ""


# -- uncommitted events: untracked files ----------------------------------------------------------


def test_git_clean_fd_loses_uncommitted_events_and_recover_brings_them_back(tmp_path: Path) -> None:
    repo = _project(tmp_path / "project")
    _write(repo, 3, commit=True, label="kept")
    # Written and acknowledged, not read back and not committed before git deletes them.
    pending = _write(repo, 5)
    expected = _ids(repo)
    git(repo, "clean", "-fdq")
    assert not pending & _ids(repo)
    _assert_lost(repo, 5)
    _assert_recovered(repo, expected, 5, from_git=0)  # git never had them: the ledger did


def test_git_clean_fdx_after_status_loses_events_and_recover_brings_them_back(
    tmp_path: Path,
) -> None:
    repo = _project(tmp_path / "project")
    _write(repo, 2, commit=True)
    _write(repo, 4)
    expected = _ids(repo)
    assert _status(repo)["uncommitted"] == 4  # seen by the read model this time
    git(repo, "clean", "-fdxq")
    _assert_lost(repo, 4)
    _assert_recovered(repo, expected, 4)


def test_stash_u_then_drop_loses_events_and_recover_finds_them_in_unreachable_objects(
    tmp_path: Path,
) -> None:
    repo = _project(tmp_path / "project")
    _write(repo, 2, commit=True)
    _write(repo, 5)
    expected = _ids(repo)
    git(repo, "stash", "-u", "-q")
    _assert_lost(repo, 5)  # a stash is not a branch: `status` says so at once
    git(repo, "stash", "drop", "-q")
    _assert_lost(repo, 5)
    _assert_recovered(repo, expected, 5, from_git=5)


def test_events_in_a_stash_are_found_in_the_stash_list(tmp_path: Path) -> None:
    repo = _project(tmp_path / "project")
    _write(repo, 1, commit=True)
    _write(repo, 3)
    expected = _ids(repo)
    git(repo, "stash", "-u", "-q")
    _assert_recovered(repo, expected, 3, from_git=3)
    # Popping the stash afterwards brings the same lines back: readers dedupe them.
    git(repo, "stash", "pop", "-q")
    assert _ids(repo) == expected
    assert cli("verify", "--project", cwd=repo).exit_code == 0


def test_worktree_remove_force_loses_a_linked_worktrees_events_and_recover_restores_them(
    tmp_path: Path,
) -> None:
    repo = _project(tmp_path / "project")
    _write(repo, 2, commit=True)
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(linked))
    committed = _write(linked, 3, commit=True, label="on feature")
    pending = _write(linked, 4, label="never committed")
    before_main = _ids(repo)
    git(repo, "worktree", "remove", "--force", str(linked))
    assert not linked.exists()
    # From the main work tree: the committed events are on `feature`, the others are gone.
    _assert_lost(repo, 4)
    assert _status(repo)["lost"]["elsewhere"] == 3
    _assert_recovered(repo, before_main | pending, 4)
    on_feature = git(repo, "show", "feature:.engram/events", check=False)
    assert on_feature  # the branch still holds the committed ones
    assert committed <= _ids_on(repo, "feature")


def _ids_on(repo: Path, ref: str) -> set[str]:
    names = git(repo, "ls-tree", "-r", "--name-only", ref, "--", ".engram/events").split()
    found = set()
    for name in names:
        data = subprocess.run(
            ["git", "show", f"{ref}:{name}"], cwd=repo, capture_output=True, check=True
        ).stdout
        found.update(line.event.id for line in lines.read(data)[0] if line.event is not None)
    return found


# -- committed events: history moved ------------------------------------------------------------


def test_reset_hard_loses_committed_events_and_recover_brings_them_back(tmp_path: Path) -> None:
    repo = _project(tmp_path / "project")
    for n in range(6):
        _write(repo, 2, commit=True, label=f"batch {n}")
    expected = _ids(repo)
    entry = _status(repo)
    assert entry["uncommitted"] == 0 and entry["lost"]["events"] == 0
    git(repo, "reset", "-q", "--hard", "HEAD~3")
    assert len(_ids(repo)) == len(expected) - 6
    _assert_lost(repo, 6)
    _assert_recovered(repo, expected, 6, from_git=6)


def test_reset_hard_before_any_read_is_still_noticed(tmp_path: Path) -> None:
    repo = _project(tmp_path / "project")
    for n in range(4):
        _write(repo, 1, commit=True, label=f"batch {n}")
    expected = _ids(repo)
    git(repo, "reset", "-q", "--hard", "HEAD~2")
    _assert_lost(repo, 2)
    _assert_recovered(repo, expected, 2, from_git=2)


def test_revert_of_a_commit_that_added_events_loses_them_and_recover_brings_them_back(
    tmp_path: Path,
) -> None:
    repo = _project(tmp_path / "project")
    _write(repo, 2, commit=True)
    _write(repo, 3, commit=True, label="to be reverted")
    added = git(repo, "rev-parse", "HEAD").strip()
    _write(repo, 1, commit=True, label="after")
    expected = _ids(repo)
    _status(repo)
    git(repo, "revert", "--no-edit", added)
    _assert_lost(repo, 3)
    _assert_recovered(repo, expected, 3, from_git=3)


def test_pull_rebase_after_a_force_push_loses_events_and_recover_brings_them_back(
    tmp_path: Path,
) -> None:
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    first = _project(tmp_path / "first")
    git(first, "remote", "add", "origin", str(origin))
    git(first, "push", "-q", "-u", "origin", "main")
    _write(first, 3, commit=True, label="pushed, then force-pushed away")
    git(first, "push", "-q")
    second = tmp_path / "second"
    git(tmp_path, "clone", "-q", str(origin), str(second))
    with Engram(cwd=second, use="project") as engram:
        engram.config_set("commit.auto", "false")
    mine = _write(second, 2, commit=True, label="local work")
    assert _status(second)["lost"]["events"] == 0
    expected = _ids(second)
    # Someone rewrites the shared branch without those events and force-pushes it.
    git(first, "reset", "-q", "--hard", "HEAD~1")
    git(first, "push", "-q", "--force")
    git(second, "pull", "-q", "--rebase")
    assert mine <= _ids(second)
    _assert_lost(second, 3)
    _assert_recovered(second, expected, 3, from_git=3)


def test_commits_made_on_a_detached_head_are_lost_when_left_and_recover_brings_them_back(
    tmp_path: Path,
) -> None:
    repo = _project(tmp_path / "project")
    _write(repo, 1, commit=True)
    git(repo, "checkout", "-q", "--detach")
    _write(repo, 2, label="detached")  # Engram does not commit on a detached HEAD; the user does
    git(repo, "add", ".engram")
    git(repo, "commit", "-q", "-m", "work on a detached HEAD")
    expected = _ids(repo)
    git(repo, "switch", "-q", "main")
    _assert_lost(repo, 2)
    _assert_recovered(repo, expected, 2, from_git=2)


def test_recover_all_brings_back_events_this_clone_never_read(tmp_path: Path) -> None:
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    first = _project(tmp_path / "first")
    git(first, "remote", "add", "origin", str(origin))
    _write(first, 3, commit=True, label="pushed, then force-pushed away")
    git(first, "push", "-q", "-u", "origin", "main")
    expected = _ids(first)
    second = tmp_path / "second"
    git(tmp_path, "clone", "-q", str(origin), str(second))  # no Engram command reads them
    git(first, "reset", "-q", "--hard", "HEAD~1")
    git(first, "push", "-q", "--force")
    git(second, "fetch", "-q")
    git(second, "reset", "-q", "--hard", "origin/main")
    assert len(_ids(second)) == len(expected) - 3
    # Never seen here, so not counted as lost; `--all` finds them in the reflog all the same.
    assert _status(second)["lost"]["events"] == 0
    assert _recover(second)["events"] == 0
    done = _recover(second, "--all")
    assert done["events"] == 3 and done["from_git"] == 3
    assert _ids(second) == expected
    assert max(_copies(second).values()) == 1
    assert cli("verify", "--project", cwd=second).exit_code == 0
    assert _recover(second, "--all")["events"] == 0


# -- what is not lost ---------------------------------------------------------------------------


def test_events_on_another_branch_are_not_lost(tmp_path: Path) -> None:
    repo = _project(tmp_path / "project")
    git(repo, "switch", "-q", "-c", "feature")
    _write(repo, 3, commit=True)
    _status(repo)
    git(repo, "switch", "-q", "main")
    entry = _status(repo)
    assert entry["lost"] == {"events": 0, "files": {}, "elsewhere": 3}
    assert _lost_finding(repo) is None
    assert _recover(repo)["events"] == 0
    # Deleting the branch is what loses them.
    git(repo, "branch", "-q", "-D", "feature")
    _assert_lost(repo, 3)


def test_a_deleted_uncommitted_file_is_reported_even_without_the_ledger(tmp_path: Path) -> None:
    repo = _project(tmp_path / "project")
    _write(repo, 3)
    store = _store(repo)
    ledger = store.common_dir / "engram" / "ledger"
    for path in ledger.iterdir():
        path.unlink()
    git(repo, "clean", "-fdq")
    # The writer's bookkeeping says 3 events were pending in a file that is gone.
    _assert_lost(repo, 3)


def test_the_ledger_is_settled_by_reads_once_it_grows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _project(tmp_path / "project")
    written = _write(repo, 3)
    [ledger] = (_store(repo).common_dir / "engram" / "ledger").iterdir()
    noted = {
        json.loads(entry.split(b"\t", 1)[1])["id"] for entry in ledger.read_bytes().splitlines()
    }
    assert written <= noted  # written, not read yet
    monkeypatch.setattr(noting, "SETTLE_BYTES", 1)
    with Engram(cwd=repo, use="project") as engram:
        assert len(engram.memories()) == 3  # a read: the read model holds them now
    assert ledger.read_bytes() == b""
    git(repo, "clean", "-fdq")
    _assert_lost(repo, 3)  # noted again as the read model dropped them


def test_a_damaged_ledger_is_read_as_untrusted_input(tmp_path: Path) -> None:
    repo = _project(tmp_path / "project")
    _write(repo, 1, commit=True)
    _write(repo, 2)
    expected = _ids(repo)
    store = _store(repo)
    [ledger] = (store.common_dir / "engram" / "ledger").iterdir()
    rel, line = ledger.read_bytes().splitlines()[-1].split(b"\t", 1)
    other = {**json.loads(line), "id": ev.new_event_id()}
    ahead = {**other, "id": ev.new_event_id(), "clock": 2**62}
    with open(ledger, "ab") as handle:
        handle.write(b"<<<<<<< HEAD\n" + b"\xff\xfe\tnot utf-8\n" + b"no tab at all\n")
        handle.write(b"../../outside.jsonl\t" + ev.canonical_json(other) + b"\n")
        handle.write(b"events/a\0b.jsonl\t" + ev.canonical_json(other) + b"\n")
        handle.write(rel + b"\t" + ev.canonical_json(ahead) + b"\n")
        handle.write(rel + b'\t{"id": \n')
    git(repo, "clean", "-fdq")
    _assert_lost(repo, 2)
    _assert_recovered(repo, expected, 2)


# -- printed git commands work from wherever the user stands --------------------------------------


def _printed(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


def test_printed_restore_commands_work_from_another_directory(tmp_path: Path) -> None:
    repo = _project(tmp_path / "project")
    kept = _write(repo, 2, commit=True)
    [path] = [
        p
        for p in _store(repo).event_files()
        if kept & {e.id for _, e in _store(repo).read_file(p).events}
    ]
    rel = path.relative_to(repo).as_posix()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # Gone from the work tree and from git's index: `git checkout -- file` cannot restore it.
    git(repo, "rm", "-q", "--cached", "--", rel)
    path.unlink()
    text = cli("status", "--project", cwd=repo).output
    [command] = [c for c in _printed(text) if " checkout " in c]
    subprocess.run(command, shell=True, check=True, cwd=elsewhere, capture_output=True)
    assert kept <= _ids(repo)
    git(repo, "rm", "-q", "--cached", "--", rel)
    path.unlink()
    report = json.loads(cli("doctor", "--project", "--json", cwd=repo).stdout)
    [missing] = [
        f for entry in report["stores"] for f in entry["findings"] if f["check"] == "missing-file"
    ]
    [command] = _printed(missing["fix"])
    subprocess.run(command, shell=True, check=True, cwd=elsewhere, capture_output=True)
    assert kept <= _ids(repo)
    assert cli("doctor", "--project", cwd=repo).exit_code == 0


def test_doctor_fix_recovers_lost_events(tmp_path: Path) -> None:
    repo = _project(tmp_path / "project")
    _write(repo, 2, commit=True)
    _write(repo, 3, commit=True)
    expected = _ids(repo)
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    _assert_lost(repo, 3)
    result = cli("doctor", "--fix", "--project", cwd=repo)
    assert "recovered 3 lost events" in result.output
    assert result.exit_code == 0, result.output
    assert _ids(repo) == expected
    assert max(_copies(repo).values()) == 1


def test_events_folded_by_compaction_are_not_lost_when_the_compacted_file_is_deleted(
    tmp_path: Path,
) -> None:
    """Compaction replaces the files the ledger noted; deleting the compacted file is a missing
    file (restored with git), never lost events that `recover` would write a second time."""
    repo = _project(tmp_path / "project")
    with Engram(cwd=repo, use="project") as engram:
        engram.config_set("compact.files", "0")
    ids: set[str] = set()
    for round in range(6):  # a file per commit; none half of the merged file
        ids |= _write(repo, 2, commit=True, label=f"round {round}")
        _status(repo)  # read: the lines are noted
    with Engram(cwd=repo, use="project") as engram:
        engram.compact()
    [compacted] = [p for p in _store(repo).event_files() if p.name.startswith("compacted-")]
    assert len(_copies(repo)) >= len(ids)
    compacted.unlink()
    entry = _status(repo)
    assert entry["lost"]["events"] == 0
    text = cli("status", "--project", cwd=repo).output
    assert "missing:" in text and "lost:" not in text
    assert _lost_finding(repo) is None
    assert _recover(repo)["events"] == 0
    git(repo, "checkout", "--", ".engram")
    assert ids <= _ids(repo) and max(_copies(repo).values()) == 1
