"""Project stores on branches: pull requests, squash and rebase merges, cherry-picks, branch
switches, and the git hooks. Everything through plain git, as a user or a forge would run it."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from engram.api import Engram
from engram.domain.syncing import sync
from engram.storage.store import Store
from tests.conftest import git, make_repo, run_engram


def _seed(root: Path, *, vectors: bool = True) -> tuple[Path, Path]:
    """A bare `origin` and a first clone with a project store pushed to it."""
    origin = root / "origin.git"
    git(root, "init", "-q", "--bare", "-b", "main", str(origin))
    first = make_repo(root / "c0", {"README.md": "a project\n", "src/app.py": "print(1)\n"})
    with Engram(cwd=first) as engram:
        engram.init(project=True)
        if not vectors:
            engram.use = "project"
            engram.config_set("search.model", "off")
        engram.commit()
    git(first, "remote", "add", "origin", str(origin))
    git(first, "push", "-q", "-u", "origin", "main")
    return origin, first


def _clone(origin: Path, path: Path) -> Path:
    git(path.parent, "clone", "-q", str(origin), str(path))
    return path


def _event_ids(repo: Path) -> set[str]:
    events, problems = Store(repo / ".engram", "project").read_all()
    assert [p for p in problems if p.severity == "error"] == []
    return {e.id for e in events}


# -- pull requests -------------------------------------------------------------------------------


def _handoff_on_a_branch(repo: Path, branch: str) -> str:
    git(repo, "switch", "-q", "-c", branch)
    with Engram(cwd=repo) as engram:
        task = engram.task_create("Add rate limiting", goal="429s instead of overload")
        engram.progress(task.id, "token bucket", status="done", component="api")
        engram.failure(
            task.id,
            "burst test flaky under load",
            component="api",
            root_cause="the clock is read twice per request",
        )
        engram.handoff(
            task.id,
            summary="Bucket works; the burst test is flaky",
            completed=["token bucket"],
            next=["Read the clock once per request"],
            must_not_redo=["Rotate the staging API keys (done once, breaks clients)"],
            must_preserve=["Keep the /health endpoint unthrottled"],
            files=["src/app.py"],
        )
    return task.id


def test_a_handoff_on_a_branch_is_a_readable_diff_in_its_pull_request(tmp_path: Path) -> None:
    origin, repo = _seed(tmp_path)
    _handoff_on_a_branch(repo, "rate-limit")
    diff = git(repo, "diff", "main...rate-limit")
    added = [line[1:] for line in diff.splitlines() if line.startswith("+")]
    for expected in (
        "Bucket works; the burst test is flaky",
        "Read the clock once per request",
        "Rotate the staging API keys (done once, breaks clients)",
        "Keep the /health endpoint unthrottled",
        "burst test flaky under load",
    ):
        assert any(expected in line for line in added), expected
    handoff_files = [
        f
        for f in git(repo, "diff", "--name-only", "main...rate-limit").split()
        if f.startswith(".engram/handoffs/")
    ]
    assert handoff_files and all(f.endswith(".md") for f in handoff_files)
    readable = [line for line in added if line.startswith(("#", "- ", "**"))]
    assert len(readable) >= 5  # Markdown a reviewer reads, not JSON


@pytest.mark.parametrize("strategy", ["merge", "squash", "rebase"])
def test_pull_request_merges_bring_the_events_into_main_without_conflict(
    tmp_path: Path, strategy: str
) -> None:
    """As a forge merges a pull request: a merge commit, a squash, or a rebase, while main has
    moved on with other agents' events; then the branch goes on and is merged again."""
    origin, repo = _seed(tmp_path)
    task = _handoff_on_a_branch(repo, "rate-limit")
    git(repo, "push", "-q", "-u", "origin", "rate-limit")

    other = _clone(origin, tmp_path / "other")
    with Engram(cwd=other) as engram:
        engram.remember("Release notes go in CHANGES.md", kind="convention")
        engram.commit()
    git(other, "push", "-q", "origin", "main")

    def merge_into_main() -> None:
        forge = _clone(origin, tmp_path / f"forge-{time.monotonic_ns()}")
        git(forge, "fetch", "-q", "origin", "rate-limit")
        if strategy == "merge":
            git(forge, "merge", "-q", "--no-ff", "-m", "Merge pull request", "FETCH_HEAD")
        elif strategy == "squash":
            git(forge, "merge", "-q", "--squash", "FETCH_HEAD")
            git(forge, "commit", "-q", "-m", "Add rate limiting (#1)")
        else:
            git(forge, "switch", "-q", "-c", "pr", "FETCH_HEAD")
            git(forge, "rebase", "-q", "main")
            git(forge, "switch", "-q", "main")
            git(forge, "merge", "-q", "--ff-only", "pr")
        git(forge, "push", "-q", "origin", "main")

    merge_into_main()
    # The branch goes on after its first merge, and is merged again.
    with Engram(cwd=repo) as engram:
        engram.progress(task, "read the clock once", status="done", component="api")
        engram.handoff(task, summary="Flaky test fixed", completed=["read the clock once"])
    git(repo, "push", "-q", "origin", "rate-limit")
    merge_into_main()

    git(repo, "switch", "-q", "main")
    git(repo, "pull", "-q", "--no-rebase", "origin", "main")
    assert "<<<<<<<" not in git(repo, "grep", "-h", "-e", "<<<<<<<", "--", ".engram", check=False)
    with Engram(cwd=repo) as engram:
        resumed = engram.resume(task=task).markdown
        assert "Flaky test fixed" in resumed
        assert "Keep the /health endpoint unthrottled" in resumed
        found = engram.recall("where do release notes go")
        assert any("CHANGES.md" in r.memory.content for r in found)
        assert engram.verify().ok


# -- many clones, random histories ---------------------------------------------------------------

OPS = st.sampled_from(
    ["write", "write", "write", "commit", "sync", "branch", "main", "squash", "cherry-pick"]
)


class Clones:
    def __init__(self, root: Path, count: int) -> None:
        self.origin, first = _seed(root, vectors=False)
        self.repos = [first] + [_clone(self.origin, root / f"c{i}") for i in range(1, count)]
        self.written: set[str] = _event_ids(first)
        self.counter = 0

    def engram(self, i: int) -> Engram:
        return Engram(cwd=self.repos[i], use="project")

    def note_written(self, i: int) -> None:
        self.written |= _event_ids(self.repos[i])

    def write(self, i: int) -> None:
        self.counter += 1
        with self.engram(i) as engram:
            engram.remember(f"fact {self.counter} written on clone {i}")
        self.note_written(i)

    def commit(self, i: int) -> None:
        with self.engram(i) as engram:
            engram.commit()

    def sync(self, i: int) -> None:
        with self.engram(i) as engram:
            sync(engram)

    def branch(self, i: int) -> None:
        repo = self.repos[i]
        self.commit(i)
        exists = git(repo, "branch", "--list", f"f{i}").strip()
        git(repo, "switch", "-q", *([] if exists else ["-c"]), f"f{i}")

    def main(self, i: int) -> None:
        self.commit(i)
        git(self.repos[i], "switch", "-q", "main")

    def _feature_ahead(self, i: int) -> list[str]:
        repo = self.repos[i]
        if not git(repo, "branch", "--list", f"f{i}").strip():
            return []
        return git(repo, "rev-list", "--reverse", "--no-merges", f"main..f{i}").split()

    def squash(self, i: int) -> None:
        self.main(i)
        if self._feature_ahead(i):
            git(self.repos[i], "merge", "-q", "--squash", f"f{i}")
            git(self.repos[i], "commit", "-q", "--allow-empty", "-m", f"squash f{i}")

    def cherry_pick(self, i: int) -> None:
        picks = self._feature_ahead(i)
        self.main(i)
        if picks:
            git(
                self.repos[i],
                "cherry-pick",
                "--keep-redundant-commits",
                "--allow-empty",
                picks[len(picks) // 2],
            )

    def converge(self) -> None:
        for i, repo in enumerate(self.repos):
            self.main(i)
            if git(repo, "branch", "--list", f"f{i}").strip():
                git(repo, "merge", "-q", "--no-edit", f"f{i}")
        for _ in range(2):
            for i in range(len(self.repos)):
                self.sync(i)


def _run_history(count: int, steps: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        clones = Clones(Path(tmp), count)
        for op, who in steps:
            i = who % count
            getattr(clones, op.replace("-", "_"))(i)
        clones.converge()
        for repo in clones.repos:
            assert _event_ids(repo) == clones.written
            with Engram(cwd=repo, use="project") as engram:
                assert engram.verify().ok
                contents = {m.content for m in engram.memories(limit=10_000)}
            assert contents == {
                f"fact {n} written on clone {c}" for n, c in _facts(clones, steps, count)
            }
            assert git(repo, "status", "--porcelain", "--", ".engram") == ""


def _facts(clones: Clones, steps: list[tuple[str, int]], count: int) -> list[tuple[int, int]]:
    writes = [who % count for op, who in steps if op == "write"]
    return [(n + 1, c) for n, c in enumerate(writes)]


HISTORY = st.tuples(
    st.integers(2, 4), st.lists(st.tuples(OPS, st.integers(0, 3)), min_size=4, max_size=18)
)


@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(HISTORY)
def test_clones_with_squashes_and_cherry_picks_end_with_the_union(history: tuple) -> None:
    _run_history(*history)


@pytest.mark.slow
@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(HISTORY)
def test_clones_with_squashes_and_cherry_picks_end_with_the_union_many(history: tuple) -> None:
    _run_history(*history)


# -- branch switches -----------------------------------------------------------------------------


def test_switching_branches_changes_what_engram_sees_without_a_rebuild(project: Path) -> None:
    with Engram(cwd=project) as engram:
        engram.remember("The cache layer uses Redis", kind="decision")
        engram.commit()
    git(project, "switch", "-q", "-c", "memcached")
    with Engram(cwd=project) as engram:
        engram.remember("Switched the cache layer to memcached", kind="decision")
        engram.commit()
        assert engram.refresh_indexes().embedded == 0  # embedded when remembered
    for branch, present, absent in (
        ("main", "Redis", "memcached"),
        ("memcached", "memcached", None),
        ("main", "Redis", "memcached"),
    ):
        git(project, "switch", "-q", branch)
        with Engram(cwd=project) as engram:
            refreshed = engram.refresh_indexes()
            assert refreshed.embedded == 0  # vectors come from the embedding cache
            assert refreshed.events_added + refreshed.events_removed <= 2
            texts = [r.memory.content for r in engram.recall("which cache layer")]
            assert any(present in t for t in texts)
            if absent:
                assert not any(absent in t for t in texts)
            assert all(state.current for state in engram.index_state())


# -- hooks ---------------------------------------------------------------------------------------


def test_hooks_install_keeps_existing_hooks_and_uninstall_restores_them(project: Path) -> None:
    hooks = project / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    own = hooks / "pre-commit"
    own.write_text("#!/bin/sh\necho mine\nexit 0\n")
    own.chmod(0o755)
    done = run_engram("hooks", "install", cwd=project)
    assert done.returncode == 0, done.stderr
    text = own.read_text()
    assert text.startswith("#!/bin/sh\n# >>> engram >>>") and "echo mine\nexit 0\n" in text
    for name in ("post-merge", "post-checkout", "post-rewrite"):
        assert os.access(hooks / name, os.X_OK)
    assert run_engram("hooks", "install", cwd=project).returncode == 0
    assert own.read_text().count("# >>> engram >>>") == 1  # idempotent
    assert run_engram("hooks", "uninstall", cwd=project).returncode == 0
    assert own.read_text() == "#!/bin/sh\necho mine\nexit 0\n"
    assert not (hooks / "post-merge").exists()


def test_hooks_in_a_committed_hooks_directory_let_a_clone_without_engram_commit(
    project: Path, tmp_path: Path
) -> None:
    """husky and the like commit the hooks directory (`core.hooksPath`): a teammate whose
    Engram is elsewhere, or missing, still commits, and no hook changes git's exit status."""
    git(project, "config", "core.hooksPath", ".husky")
    assert run_engram("hooks", "install", cwd=project).returncode == 0
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "hooks for everyone")
    (project / "README.md").write_text("edited\n")
    git(project, "checkout", "--", "README.md")  # post-checkout of a file: status 0
    teammate = tmp_path / "teammate"
    git(tmp_path, "clone", "-q", str(project), str(teammate))
    git(teammate, "config", "core.hooksPath", ".husky")
    python = os.path.realpath(sys.executable)
    for hook in (teammate / ".husky").iterdir():  # their Engram is installed elsewhere
        text = hook.read_text().replace(sys.executable, "/nowhere/bin/python3")
        hook.write_text(text.replace(python, "/nowhere/bin/python3"))
    (teammate / "notes.txt").write_text("a teammate's change\n")
    git(teammate, "add", "notes.txt")
    assert git_commit(teammate).returncode == 0
    git(teammate, "switch", "-q", "-c", "feature")
    git(teammate, "checkout", "--", "notes.txt")


def test_pre_commit_hook_refuses_damaged_or_secret_event_lines(project: Path) -> None:
    assert run_engram("hooks", "install", cwd=project).returncode == 0
    with Engram(cwd=project) as engram:
        engram.remember("a good memory")
    path = next(
        p
        for p in (project / ".engram" / "events").rglob("*.jsonl")
        if b"a good memory" in p.read_bytes()
    )
    git(project, "add", ".engram")
    git(project, "commit", "-q", "-m", "good events commit fine")

    good = path.read_bytes()
    for bad, message in (
        (b"<<<<<<< HEAD\n", "git conflict marker"),
        (b'{"not": "an event"}\n', "zz-hand-edited.jsonl:1:"),
        (
            good.splitlines(keepends=True)[0].replace(
                b"a good memory", b"key AKIAIOSFODNN7EXAMPLE"
            ),
            "looks like a secret",
        ),
    ):
        fresh = path.with_name("zz-hand-edited.jsonl")
        fresh.write_bytes(bad)
        git(project, "add", str(fresh))
        done = git_commit(project)
        assert done.returncode == 1, bad
        assert message in done.stderr and "commit refused" in done.stderr
        git(project, "rm", "-q", "--cached", str(fresh))
        fresh.unlink()
    (project / "src.txt").write_text("code\n")
    git(project, "add", "src.txt")
    assert git_commit(project).returncode == 0  # commits without event files pass


def git_commit(repo: Path) -> object:
    import subprocess

    return subprocess.run(
        ["git", "commit", "-q", "-m", "x"], cwd=repo, capture_output=True, text=True
    )


def test_post_merge_hook_brings_the_caches_up_to_date(tmp_path: Path) -> None:
    origin, first = _seed(tmp_path)
    second = _clone(origin, tmp_path / "second")
    assert run_engram("hooks", "install", cwd=second).returncode == 0
    with Engram(cwd=second) as engram:
        engram.recall("anything")  # caches exist and are current
    with Engram(cwd=first) as engram:
        for n in range(5):
            engram.remember(f"pulled memory number {n} about the deploy script")
        engram.commit()
    git(first, "push", "-q", "origin", "main")
    git(second, "pull", "-q", "--no-rebase", "origin", "main")
    deadline = time.monotonic() + 60
    with Engram(cwd=second, use="project") as engram:
        while not all(s.current for s in engram.index_state()):
            assert time.monotonic() < deadline, engram.index_state()
            time.sleep(0.2)
    log = second / ".git" / "engram" / "hooks.log"
    assert log.exists()
