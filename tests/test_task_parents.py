"""A task's parent: an update that would make a cycle is refused, at any depth; a cycle that
arrives from other clones (each put one task under the other, then a merge) stops no reader."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import git, make_repo, run_engram


def _task(repo: Path, *args: str) -> str:
    done = run_engram("task", "create", *args, "--json", cwd=repo)
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["id"])


def _parent(repo: Path, task: str) -> str | None:
    done = run_engram("task", "show", task, "--json", cwd=repo)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["task"]["parent"]


def test_putting_a_task_under_its_own_subtask_is_refused_at_any_depth(project: Path) -> None:
    a = _task(project, "Auth")
    b = _task(project, "Login form", "--parent", a)
    c = _task(project, "Form tests", "--parent", b)

    done = run_engram("task", "update", a, "--parent", b, cwd=project)
    assert done.returncode == 2
    assert done.stderr == (
        "error: 'Login form' is under 'Auth' already: a task cannot be under its own subtask "
        "(an empty parent takes a task out from under its own)\n"
    )
    done = run_engram("task", "update", "Auth", "--parent", "Form tests", cwd=project)
    assert done.returncode == 2
    assert done.stderr == (
        "error: 'Form tests' is under 'Auth' already (through 'Login form'): a task cannot be "
        "under its own subtask (an empty parent takes a task out from under its own)\n"
    )
    done = run_engram("task", "update", a, "--parent", a, cwd=project)
    assert done.returncode == 2 and "cannot be its own parent" in done.stderr
    assert _parent(project, a) is None
    # Moving a task sideways or down the tree is still allowed.
    d = _task(project, "Docs")
    assert run_engram("task", "update", c, "--parent", d, cwd=project).returncode == 0
    assert run_engram("task", "update", d, "--parent", b, cwd=project).returncode == 0
    assert _parent(project, d) == b
    # An empty parent takes a task out from under its own; then it may go anywhere.
    assert run_engram("task", "update", b, "--parent", "", cwd=project).returncode == 0
    assert _parent(project, b) is None
    assert run_engram("task", "update", a, "--parent", b, cwd=project).returncode == 0
    assert _parent(project, a) == b


def test_a_cycle_merged_from_two_clones_stops_no_reader(tmp_path: Path) -> None:
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    first = make_repo(tmp_path / "first")
    assert run_engram("init", "--project", cwd=first).returncode == 0
    git(first, "remote", "add", "origin", str(origin))
    a = _task(first, "Auth", "--goal", "Users sign in")
    b = _task(first, "Login form")
    assert run_engram("sync", cwd=first).returncode == 0
    second = tmp_path / "second"
    git(tmp_path, "clone", "-q", str(origin), str(second))

    # Each clone puts one task under the other before it has seen the other's change.
    assert run_engram("task", "update", a, "--parent", b, cwd=first).returncode == 0
    assert run_engram("task", "update", b, "--parent", a, cwd=second).returncode == 0
    assert run_engram("sync", cwd=first).returncode == 0
    done = run_engram("sync", cwd=second)
    assert done.returncode == 0 and "merged origin/main" in done.stdout, done.stderr
    assert (_parent(second, a), _parent(second, b)) == (b, a)

    for args in (
        ("task", "list"),
        ("task", "list", "--json"),
        ("task", "show", a),
        ("task", "show", b, "--json"),
        ("resume", "--task", a),
        ("resume", "--task", b, "--json"),
        ("timeline", a),
        ("export", str(tmp_path / "out.jsonl")),
        ("browse", "--html", str(tmp_path / "browse.html")),
        ("status",),
    ):
        done = run_engram(*args, cwd=second, timeout=60)
        assert done.returncode == 0, (args, done.stderr)
    assert "Users sign in" in run_engram("resume", "--task", a, cwd=second, timeout=60).stdout
    # Either side can then be moved out of the cycle; the other update is refused.
    refused = run_engram("task", "update", b, "--parent", a, cwd=second)
    assert refused.returncode == 2 and "cannot be under its own subtask" in refused.stderr
    c = _task(second, "Sign-in epic")
    assert run_engram("task", "update", a, "--parent", c, cwd=second).returncode == 0
    assert (_parent(second, a), _parent(second, b)) == (c, a)
