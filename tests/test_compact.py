"""`engram compact`: a month's closed event files folded into one, with real git throughout.

What a user would notice: the file count drops to about one per month, every event is still read
(on this clone, on clones and branches made before the compaction, after merges either way), the
commit says what it is, and the pre-commit hook still refuses commits that would lose lines.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import git, make_repo, run_engram
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.api import Engram
from engram.git import compact as comp
from engram.readmodel.projection import Projection
from engram.storage.store import Store


def event_files(store: Store) -> list[str]:
    return store.event_rels()


def memory_ids(repo: Path) -> set[str]:
    engram = Engram(cwd=repo, use="project")
    ids = [m.id for m in engram.memories(limit=None)]
    assert len(ids) == len(set(ids))
    return set(ids)


def write(engram: Engram, count: int, label: str, *, commit_every: int = 0) -> list[str]:
    ids = []
    for i in range(count):
        ids.append(
            engram.remember(
                f"{label} memory {i}: the cache key includes {label}-{i}", check_duplicates=False
            ).id
        )
        if commit_every and i % commit_every == commit_every - 1:
            engram.commit()
    engram.commit()
    return ids


def project_clones(root: Path, names: tuple[str, ...]) -> dict[str, Path]:
    """A project store pushed to a bare repository, and a clone of it per name."""
    seed = make_repo(root / "seed")
    Engram(cwd=seed).init(project=True)
    # Compaction only when a test runs it.
    Engram(cwd=seed, use="project").config_set("compact.files", "0")
    git(root, "clone", "-q", "--bare", str(seed), str(root / "origin.git"))
    clones = {}
    for name in names:
        clones[name] = root / name
        git(root, "clone", "-q", str(root / "origin.git"), str(clones[name]))
    return clones


def stored_twice(repo: Path) -> set[str]:
    """Event ids held by more than one committed event file."""
    seen: dict[str, int] = {}
    store = project_store(repo)
    for rel in event_files(store):
        for raw in set((store.root / rel).read_bytes().splitlines()):
            event_id = json.loads(raw)["id"]
            seen[event_id] = seen.get(event_id, 0) + 1
    return {i for i, n in seen.items() if n > 1}


def pull(repo: Path) -> str:
    git(repo, "fetch", "-q", "origin")
    return git(repo, "merge", "--no-edit", "origin/main", check=False)


def push(repo: Path) -> None:
    Engram(cwd=repo).commit()
    done = subprocess.run(
        ["git", "push", "-q", "origin", "HEAD:main"], cwd=repo, capture_output=True, text=True
    )
    if done.returncode != 0:
        assert "rejected" in done.stderr, done.stderr
        out = pull(repo)
        assert "CONFLICT" not in out, out
        git(repo, "push", "-q", "origin", "HEAD:main")


def project_store(repo: Path) -> Store:
    return Store(repo / ".engram", "project")


# -- on one clone --------------------------------------------------------------------------------


def test_two_thousand_events_fold_into_one_file_and_verify_passes(
    home_store: Engram, figures: Any
) -> None:
    engram = home_store
    engram.config_set("compact.files", "0")
    store = engram.write_store()
    start = time.perf_counter()
    write(engram, 2000, "fact", commit_every=6)  # about 6 events a file, as found in use
    written = time.perf_counter() - start
    before = len(event_files(store))
    assert before >= 300
    proj = engram.projection(store)
    proj.refresh()
    events_before = proj.counts()["events"]

    start = time.perf_counter()
    done = run_engram("compact", "--json")
    took = time.perf_counter() - start
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)[0]
    after = event_files(store)
    months = {rel.rsplit("/", 1)[0] for rel in after}
    assert len(after) == len(months) == report["files_after"]
    assert report["files_before"] == before
    assert all(comp.is_compacted(rel) for rel in after)
    assert Engram().verify().ok
    assert git(store.root, "status", "--porcelain") == ""
    figures(
        f"{before} files, {events_before} events -> {len(after)} file(s) in {took:.2f}s "
        f"(writing took {written:.1f}s)"
    )

    # The read model sees the files go and the merged one come, and no event moved in or out.
    refresh = proj.refresh()
    assert (refresh.events_removed, refresh.events_added, refresh.entities) == (0, 0, set())
    assert proj.counts()["events"] == events_before
    fresh = Engram()
    assert len(fresh.memories(limit=None)) == 2000

    # The next write starts a new file; nothing compacted is ever appended to.
    compacted = {rel: (store.root / rel).read_bytes() for rel in after}
    fresh.remember("written after the compaction", check_duplicates=False)
    fresh.commit()
    assert all((store.root / rel).read_bytes() == data for rel, data in compacted.items())
    assert len(event_files(store)) == len(after) + 1
    # The merged file is not folded again with one small file (git would take that for a
    # rename of it, and two clones doing so for a conflict): nothing to do.
    again = run_engram("compact")
    assert again.returncode == 0 and "nothing to compact" in again.stdout


def test_the_commit_says_what_it_is_and_the_hook_refuses_other_removals(project: Path) -> None:
    engram = Engram(cwd=project, use="project")
    engram.config_set("compact.files", "0")
    write(engram, 12, "hooked", commit_every=3)
    assert run_engram("hooks", "install", cwd=project).returncode == 0
    store = project_store(project)
    files_before = event_files(store)
    done = run_engram("compact", cwd=project)
    assert done.returncode == 0, done.stderr
    assert f"folded {len(files_before)} event files into 1" in done.stdout
    message = git(project, "log", "-1", "--format=%B")
    assert message.startswith("engram compact: fold ")
    assert f"{comp.TRAILER}: {len(files_before)} files into 1" in message
    assert git(project, "log", "-1", "--format=%(trailers:key=Engram-Compaction)").strip()

    # The same change committed with plain git passes the pre-commit hook: nothing is lost.
    git(project, "reset", "-q", "--soft", "HEAD~1")
    git(project, "commit", "-q", "-m", "compaction, by hand")
    assert memory_ids(project) == {m.id for m in engram.memories(limit=None)}

    # Removing an event file, or rewriting one, is refused, naming the override.
    merged = event_files(store)[0]
    git(project, "rm", "-q", f".engram/{merged}")
    refused = subprocess.run(
        ["git", "commit", "-m", "drop events"], cwd=project, capture_output=True, text=True
    )
    assert refused.returncode != 0
    assert "removes a committed event file" in refused.stderr
    assert "--no-verify" in refused.stderr
    git(project, "reset", "-q", "--hard")
    path = store.root / merged
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[1:]))
    git(project, "add", "-A")
    refused = subprocess.run(
        ["git", "commit", "-m", "rewrite events"], cwd=project, capture_output=True, text=True
    )
    assert refused.returncode != 0
    assert "rewrites a committed event file and 1 of its event line(s)" in refused.stderr
    git(project, "reset", "-q", "--hard")
    # Extending one (what makes a modify/delete conflict with a compaction elsewhere) too.
    first_line = path.read_bytes().splitlines(keepends=True)[0]
    with open(path, "ab") as handle:
        handle.write(first_line.replace(b'"machine":"', b'"machine":"elsewhere-'))
    git(project, "add", "-A")
    refused = subprocess.run(
        ["git", "commit", "-m", "extend events"], cwd=project, capture_output=True, text=True
    )
    assert refused.returncode != 0
    assert "adds lines to a committed event file" in refused.stderr
    git(project, "reset", "-q", "--hard")
    assert len(memory_ids(project)) == 12


def test_a_file_with_a_damaged_line_stays_and_the_rest_of_its_month_compacts(project: Path) -> None:
    engram = Engram(cwd=project, use="project")
    engram.config_set("compact.files", "0")
    ids = set(write(engram, 10, "repaired", commit_every=2))
    assert run_engram("hooks", "install", cwd=project).returncode == 0
    store = project_store(project)
    damaged = store.root / event_files(store)[1]
    with open(damaged, "ab") as handle:
        handle.write(b"<<<<<<< HEAD\n")
    git(project, "commit", "-q", "--no-verify", "-am", "a conflict marker arrives")
    committed = damaged.read_bytes()
    fixed = run_engram("doctor", "--fix", cwd=project)
    assert "set aside 1 damaged line" in fixed.stdout + fixed.stderr
    assert git(project, "status", "--porcelain", "--", ".engram") == ""  # nothing to commit
    done = run_engram("compact", cwd=project)
    assert done.returncode == 0 and "folded" in done.stdout, done.stdout + done.stderr
    assert f"{store.rel(damaged)} not compacted" in done.stderr
    assert damaged.read_bytes() == committed  # its writer's line is left in place
    assert memory_ids(project) == ids
    assert Engram(cwd=project, use="project").verify().ok


def test_a_file_with_a_damaged_line_is_left_alone_naming_doctor(project: Path) -> None:
    engram = Engram(cwd=project, use="project")
    engram.config_set("compact.files", "0")
    write(engram, 10, "damaged", commit_every=2)
    store = project_store(project)
    first = store.root / event_files(store)[0]
    with open(first, "ab") as handle:
        handle.write(b'{"not an event"\n')
    git(project, "commit", "-q", "--no-verify", "-am", "a damaged line arrives")
    kept = first.read_bytes()
    done = run_engram("compact", cwd=project)
    assert done.returncode == 0 and "folded" in done.stdout
    assert f"{store.rel(first)} not compacted" in done.stderr
    assert "`engram doctor`" in done.stderr
    assert first.read_bytes() == kept and store.rel(first) in event_files(store)


def test_a_compaction_killed_before_its_commit_loses_nothing_and_the_next_finishes(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engram = Engram(cwd=project, use="project")
    engram.config_set("compact.files", "0")
    ids = set(write(engram, 10, "killed", commit_every=2))
    store = project_store(project)
    import pygit2

    def killed(*args: object, **kwargs: object) -> None:
        raise pygit2.GitError("killed")

    monkeypatch.setattr(pygit2.Repository, "create_commit", killed)
    with pytest.raises(Exception, match="run `engram compact` again"):
        Engram(cwd=project).compact()
    monkeypatch.undo()
    # The merged file is written and the folded files are gone, uncommitted: every event reads.
    assert len(event_files(store)) == 1
    assert memory_ids(project) == ids
    # Doctor says so, and names the command that converges (not a restore, not "not read").
    found = run_engram("doctor", "--json", cwd=project)
    report = [f for s in json.loads(found.stdout)["stores"] for f in s["findings"]]
    assert not [f for f in report if f["check"] == "missing-file"], report
    [unfinished] = [f for f in report if f["check"] == "compaction-unfinished"]
    assert "not read" not in unfinished["message"]
    assert unfinished["fix"] == "`engram compact --project` finishes it"
    done = run_engram("compact", cwd=project)
    assert done.returncode == 0, done.stderr
    assert run_engram("doctor", cwd=project).returncode == 0
    assert len(event_files(store)) == 1
    assert git(project, "status", "--porcelain") == ""
    assert git(project, "ls-files", ".engram/events").count(".jsonl") == 1
    assert memory_ids(project) == ids
    assert Engram(cwd=project).verify().ok


def test_the_threshold_compacts_by_itself_at_commit_time(project: Path) -> None:
    engram = Engram(cwd=project, use="project")
    engram.config_set("compact.files", "4")
    ids = set(write(engram, 10, "auto", commit_every=1))
    store = project_store(project)
    assert len(event_files(store)) < 4
    subjects = git(project, "log", "--format=%s")
    assert "engram compact: fold 4 event files into 1" in subjects
    assert memory_ids(project) == ids
    assert Engram(cwd=project).verify().ok
    assert git(project, "status", "--porcelain") == ""


def test_the_threshold_compacts_what_a_sync_brought_in(tmp_path: Path) -> None:
    clones = project_clones(tmp_path, ("a", "b"))
    a, b = clones["a"], clones["b"]
    written = set(write(Engram(cwd=a), 6, "pulled", commit_every=1))
    push(a)
    Engram(cwd=b, use="project").config_set("compact.files", "5")
    done = run_engram("sync", cwd=b)
    assert done.returncode == 0, done.stderr
    assert "engram compact: fold" in git(b, "log", "-1", "--format=%s")
    assert len(event_files(project_store(b))) == 1
    assert git(b, "status", "--porcelain") == ""
    # The compaction went out with the sync; the other clone takes it without a conflict.
    assert "CONFLICT" not in pull(a)
    assert len(event_files(project_store(a))) == 1
    assert memory_ids(a) == memory_ids(b) == written


# -- clones and branches made before the compaction ----------------------------------------------


def test_clones_and_branches_made_before_a_compaction_merge_cleanly_and_lose_nothing(
    tmp_path: Path,
) -> None:
    clones = project_clones(tmp_path, ("a", "b"))
    a, b = clones["a"], clones["b"]
    written = set(write(Engram(cwd=a), 8, "a", commit_every=2))
    push(a)
    assert "CONFLICT" not in pull(b)
    git(b, "checkout", "-q", "-b", "feature")
    written |= set(write(Engram(cwd=b), 4, "feature", commit_every=2))
    git(b, "checkout", "-q", "main")

    done = run_engram("compact", cwd=a)
    assert done.returncode == 0 and "folded" in done.stdout, done.stderr
    written |= set(write(Engram(cwd=a), 3, "a-after", commit_every=1))
    push(a)

    # b wrote on main meanwhile, merges the compaction, then its feature branch, which goes on
    # writing and is merged again.
    written |= set(write(Engram(cwd=b), 3, "b-main", commit_every=1))
    assert "CONFLICT" not in pull(b)
    assert "CONFLICT" not in git(b, "merge", "--no-edit", "feature", check=False)
    git(b, "checkout", "-q", "feature")
    written |= set(write(Engram(cwd=b), 2, "feature-more", commit_every=1))
    git(b, "checkout", "-q", "main")
    assert "CONFLICT" not in git(b, "merge", "--no-edit", "feature", check=False)
    push(b)
    assert "CONFLICT" not in pull(a)
    for repo in (a, b):
        assert memory_ids(repo) == written
        assert Engram(cwd=repo, use="project").verify().ok
        assert git(repo, "status", "--porcelain") == ""


def test_a_compaction_pulled_from_another_clone_moves_no_event_and_embeds_nothing(
    tmp_path: Path,
) -> None:
    clones = project_clones(tmp_path, ("a", "b"))
    a, b = clones["a"], clones["b"]
    written = set(write(Engram(cwd=a), 12, "indexed", commit_every=2))
    push(a)
    pull(b)
    first = Engram(cwd=b, use="project").refresh_indexes()
    assert first.embedded == 12
    assert run_engram("compact", cwd=a).returncode == 0
    push(a)
    assert "CONFLICT" not in pull(b)
    assert len(event_files(project_store(b))) == 1
    report = Projection(project_store(b)).refresh()
    assert (report.events_added, report.events_removed, report.entities) == (0, 0, set())
    again = Engram(cwd=b, use="project").refresh_indexes()
    assert (again.events_added, again.events_removed, again.embedded) == (0, 0, 0)
    assert memory_ids(b) == written


def test_two_clones_compacting_the_same_month_merge_without_conflict(tmp_path: Path) -> None:
    clones = project_clones(tmp_path, ("a", "b"))
    a, b = clones["a"], clones["b"]
    written = set(write(Engram(cwd=a), 6, "shared", commit_every=2))
    push(a)
    pull(b)
    # b has a file a has not: the two compactions fold different sets of files.
    written |= set(write(Engram(cwd=b), 2, "b-only", commit_every=1))
    for repo in (a, b):
        assert run_engram("compact", cwd=repo).returncode == 0
    push(a)
    out = pull(b)
    assert "CONFLICT" not in out, out
    push(b)
    pull(a)
    for repo in (a, b):
        assert memory_ids(repo) == written
        assert Engram(cwd=repo, use="project").verify().ok
    # The two merged files overlap (each holds the shared events); both clones fold their new
    # files and the overlap at once: the smaller merged file goes, the larger stays (folded
    # into two different files, git would take it for renamed twice: a rename/rename conflict).
    shared = set(event_files(project_store(a)))
    assert all(comp.is_compacted(rel) for rel in shared) and len(shared) == 2
    assert stored_twice(a)
    written |= set(write(Engram(cwd=a), 3, "a-next", commit_every=1))
    written |= set(write(Engram(cwd=b), 3, "b-next", commit_every=1))
    for repo in (a, b):
        done = run_engram("compact", cwd=repo)
        assert "folded" in done.stdout, done.stdout + done.stderr
        assert len(shared & set(event_files(project_store(repo)))) == 1
    push(a)
    out = pull(b)
    assert "CONFLICT" not in out, out
    push(b)
    pull(a)
    for repo in (a, b):
        assert memory_ids(repo) == written
        assert Engram(cwd=repo, use="project").verify().ok
    assert stored_twice(a) == set() and stored_twice(b) == set()  # no event stored twice
    # Identical compactions make the identical file: an add/add git merges without a word.
    c = tmp_path / "c"
    git(tmp_path, "clone", "-q", str(tmp_path / "origin.git"), str(c))
    for repo in (a, c):
        assert run_engram("compact", cwd=repo).returncode == 0
    assert event_files(project_store(a)) == event_files(project_store(c))
    push(a)
    assert "CONFLICT" not in pull(c)
    assert memory_ids(c) == written


def _append_to_a_committed_file(repo: Path, label: str, which: int) -> tuple[str, set[str]]:
    """What an older Engram (or a hand commit) did: extend a file an earlier commit created."""
    store = project_store(repo)
    committed = event_files(store)[which]
    engram = Engram(cwd=repo, use="project")
    engram.config_set("commit.auto", "false")
    ids = {engram.remember(f"{label} appended {i}", check_duplicates=False).id for i in range(2)}
    new = [
        rel
        for rel in event_files(store)
        if rel != committed and git(repo, "ls-files", f".engram/{rel}") == ""
    ]
    with open(store.root / committed, "ab") as handle:
        for rel in new:
            handle.write((store.root / rel).read_bytes())
            (store.root / rel).unlink()
    git(repo, "commit", "-q", "--no-verify", "-am", f"{label}: appended to {committed}")
    engram.config_set("commit.auto", "true")
    return committed, ids


def test_an_offline_clone_that_appended_to_a_compacted_file_syncs_without_loss(
    tmp_path: Path,
) -> None:
    clones = project_clones(tmp_path, ("a", "b", "c"))
    a, b, c = clones["a"], clones["b"], clones["c"]
    written = set(write(Engram(cwd=a), 6, "a", commit_every=2))
    push(a)
    pull(b)
    pull(c)
    assert run_engram("compact", cwd=a).returncode == 0
    push(a)

    # b, offline, appended to a file the compaction removed; `engram sync` keeps b's file.
    removed, ids = _append_to_a_committed_file(b, "b", 0)
    written |= ids
    done = run_engram("sync", cwd=b)
    assert done.returncode == 0, done.stderr
    assert (project_store(b).root / removed).exists()
    assert git(b, "status", "--porcelain") == ""
    assert memory_ids(b) == written
    assert Engram(cwd=b, use="project").verify().ok

    # c did the same and merges with plain git: the conflict is explained, with the fix.
    _, ids = _append_to_a_committed_file(c, "c", 1)
    written |= ids
    git(c, "fetch", "-q", "origin")
    out = git(c, "merge", "--no-edit", "origin/main", check=False)
    assert "CONFLICT (modify/delete)" in out
    findings = [
        f
        for s in Engram(cwd=c, use="project").doctor().stores
        for f in s.findings
        if f.check == "merge-removed-changed"
    ]
    assert len(findings) == 1
    fix = findings[0].fix
    assert " add -- " in fix and " commit --no-edit" in fix
    paths = fix.split("add -- ", 1)[1].split("`", 1)[0].split()
    git(c, "add", "--", *paths)
    git(c, "commit", "-q", "--no-edit")
    assert memory_ids(c) == written
    push(c)
    assert "CONFLICT" not in pull(b)
    assert memory_ids(b) == written
    assert Engram(cwd=b, use="project").verify().ok


# -- the property --------------------------------------------------------------------------------


NAMES = ("a", "b", "c", "d")
step = st.one_of(
    st.tuples(st.just("write"), st.integers(0, 3), st.integers(1, 3)),
    st.tuples(st.just("commit"), st.integers(0, 3), st.just(0)),
    st.tuples(st.just("compact"), st.integers(0, 3), st.just(0)),
    st.tuples(st.just("pull"), st.integers(0, 3), st.just(0)),
    st.tuples(st.just("push"), st.integers(0, 3), st.just(0)),
    st.tuples(st.just("branch"), st.integers(0, 3), st.integers(1, 2)),
)


def run_scenario(clone_count: int, steps: list[tuple[str, int, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        clones = project_clones(Path(tmp), NAMES[:clone_count])
        repos = [clones[n] for n in NAMES[:clone_count]]
        written: set[str] = set()
        counter = 0
        for action, which, count in steps:
            repo = repos[which % clone_count]
            if action == "write":
                engram = Engram(cwd=repo)
                for _ in range(count):
                    counter += 1
                    written.add(
                        engram.remember(
                            f"memory {counter} in {repo.name}", check_duplicates=False
                        ).id
                    )
            elif action == "commit":
                Engram(cwd=repo).commit()
            elif action == "compact":
                Engram(cwd=repo).compact()
            elif action == "pull":
                out = pull(repo)
                assert "CONFLICT" not in out, out
            elif action == "push":
                push(repo)
            else:  # a side branch written on, then merged back after what came meanwhile
                Engram(cwd=repo).commit()
                git(repo, "checkout", "-q", "-b", f"side{counter}")
                engram = Engram(cwd=repo)
                for _ in range(count):
                    counter += 1
                    written.add(
                        engram.remember(f"memory {counter} on a branch", check_duplicates=False).id
                    )
                engram.commit()
                git(repo, "checkout", "-q", "main")
                Engram(cwd=repo).compact()
                out = git(repo, "merge", "--no-edit", f"side{counter - count}", check=False)
                assert "CONFLICT" not in out, out
        for _ in range(2):
            for repo in repos:
                push(repo)
                assert "CONFLICT" not in pull(repo)
        for repo in repos:
            assert memory_ids(repo) == written
            assert Engram(cwd=repo, use="project").verify().ok
            assert git(repo, "status", "--porcelain") == ""
        store = project_store(repos[0])
        before = len(event_files(store))
        Engram(cwd=repos[0]).compact()
        assert len(event_files(store)) <= before
        assert memory_ids(repos[0]) == written
        assert git(repos[0], "status", "--porcelain") == ""


@pytest.mark.slow
@settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.integers(2, 4), st.lists(step, min_size=4, max_size=24))
def test_clones_compacting_between_writes_syncs_and_merges_keep_the_union(
    clone_count: int, steps: list[tuple[str, int, int]]
) -> None:
    run_scenario(clone_count, steps)
