"""Two clones write, commit, pull and push in random orders; plain `git merge` joins them.

The property: merging never conflicts, and in the end every clone reads exactly the union of
what was written, each event once.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import git, make_repo
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.api import Engram

CLONES = ("a", "b")
step = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(CLONES), st.integers(1, 3)),
    st.tuples(st.just("commit"), st.sampled_from(CLONES), st.just(0)),
    st.tuples(st.just("pull"), st.sampled_from(CLONES), st.just(0)),
    st.tuples(st.just("push"), st.sampled_from(CLONES), st.just(0)),
)


def merge(repo: Path) -> None:
    git(repo, "fetch", "-q", "origin")
    out = git(repo, "merge", "--no-edit", "origin/main", check=False)
    assert "CONFLICT" not in out, out


def push(repo: Path) -> None:
    Engram(cwd=repo).commit()
    done = subprocess.run(
        ["git", "push", "-q", "origin", "main"], cwd=repo, capture_output=True, text=True
    )
    if done.returncode != 0:
        assert "rejected" in done.stderr, done.stderr
        merge(repo)  # the other clone pushed first: merge, then push again
        git(repo, "push", "-q", "origin", "main")


def run_scenario(steps: list[tuple[str, str, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        seed = make_repo(root / "seed")
        Engram(cwd=seed).init(project=True)
        git(root, "clone", "-q", "--bare", str(seed), str(root / "origin.git"))
        clones = {}
        for name in CLONES:
            clones[name] = root / name
            git(root, "clone", "-q", str(root / "origin.git"), str(clones[name]))
        written: set[str] = set()
        counter = 0
        for action, name, count in steps:
            repo = clones[name]
            if action == "write":
                engram = Engram(cwd=repo)
                for _ in range(count):
                    counter += 1
                    written.add(
                        engram.remember(f"memory {counter} from {name}", check_duplicates=False).id
                    )
            elif action == "commit":
                Engram(cwd=repo).commit()
            elif action == "pull":
                merge(repo)  # uncommitted events of this clone may be in the work tree
            else:
                push(repo)
        for _ in range(2):  # everyone commits and syncs, twice so both see everything
            for name in CLONES:
                push(clones[name])
                merge(clones[name])
        for name in CLONES:
            engram = Engram(cwd=clones[name], use="project")
            ids = [m.id for m in engram.memories(limit=None)]
            assert len(ids) == len(set(ids))
            assert set(ids) == written
            events = [e for _, e in engram.log(kinds=["memory"], limit=None)]
            assert len(events) == len(written)
            assert engram.verify().ok
            assert git(clones[name], "status", "--porcelain") == ""


@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.lists(step, min_size=1, max_size=12))
def test_two_clones_merge_without_conflict_or_loss(steps: list[tuple[str, str, int]]) -> None:
    run_scenario(steps)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.lists(step, min_size=1, max_size=25))
def test_two_clones_merge_without_conflict_or_loss_many(
    steps: list[tuple[str, str, int]],
) -> None:
    run_scenario(steps)
