"""Following Engram's own repair advice never removes a teammate's events.

Two (or three) clones of a bare repository served by a real `git daemon` on 127.0.0.1. A hostile
clone pushes, with plain git, either damaged lines in another writer's committed file or a commit
that cuts lines out of it. The victim runs the whole chain a user would (`sync`, `doctor --fix`,
`commit`, `sync`), and afterwards every event any writer ever committed is still in the tip of
every clone and of the server; cut lines are reported lost and come back with plain
`engram recover`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from engram.storage.store import Store
from tests.conftest import git
from tests.test_sync import Machine, Server


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    root = tmp_path / "server"
    root.mkdir()
    found = Server(root, "daemon")
    yield found
    found.stop()


def ids_in(repo: Path, rev: str) -> set[str]:
    """Every event id in the event files of `rev`'s tree, read with plain git."""
    out = set()
    names = git(repo, "ls-tree", "-r", "--name-only", rev).split()
    for name in names:
        if not name.endswith(".jsonl"):
            continue
        for raw in git(repo, "show", f"{rev}:{name}").splitlines():
            try:
                out.add(json.loads(raw)["id"])
            except (ValueError, KeyError, TypeError):
                continue  # a damaged line
    return out


def ever_committed(repo: Path) -> set[str]:
    """Every event id in any commit of any ref of `repo`."""
    out: set[str] = set()
    for rev in git(repo, "rev-list", "--all").split():
        out |= ids_in(repo, rev)
    return out


def no_event_removed(server: Server, *clones: Machine) -> None:
    every = ever_committed(server.bare)
    for clone in clones:
        every |= ever_committed(clone.home)
    for branch in git(server.bare, "for-each-ref", "--format=%(refname)", "refs/heads").split():
        assert every <= ids_in(server.bare, branch), f"the server's {branch} lost events"
    for clone in clones:
        assert every <= ids_in(clone.home, "HEAD"), f"{clone.name}'s tip lost events"


def no_git_command(output: str) -> None:
    """No advice to run git (a commit that would edit history) in doctor's output."""
    assert not re.search(r"`git [^`]*(commit|rm|add)", output), output


def alpha_file(alpha: Machine) -> Path:
    [path] = [
        p
        for p in Store(alpha.home, "personal").event_files()
        if b"alpha keeps the job queue" in p.read_bytes()
    ]
    return path


def team(tmp_path: Path, server: Server) -> tuple[Machine, Machine]:
    a, b = Machine(tmp_path, "alpha"), Machine(tmp_path, "beta")
    a.run("init")
    a.run("remote", "add", "origin", server.url)
    a.run("remember", "alpha keeps the job queue in Postgres")
    a.run("remember", "alpha deploys on Tuesdays only")
    a.run("sync")
    b.run("clone", server.url)
    b.run("remember", "beta uses ruff for linting")
    b.run("sync")
    a.run("sync")
    return a, b


def test_damaged_lines_pushed_into_a_teammates_file_are_set_aside_never_committed_away(
    tmp_path: Path, server: Server
) -> None:
    a, b = team(tmp_path, server)
    # Beta, with plain git, puts damaged lines into alpha's committed file and pushes.
    path = Store(b.home, "personal").root / Store(a.home, "personal").rel(alpha_file(a))
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([lines[0], b"<<<<<<< HEAD\n", *lines[1:], b"{not json\n"]))
    git(b.home, "commit", "-q", "-am", "merge")
    git(b.home, "push", "-q", "origin", "HEAD")
    pushed = path.read_bytes()

    a.run("sync")
    found = a.run("doctor", "--json", ok=False)
    assert found.returncode == 1
    no_git_command(found.stdout)
    fixed = a.run("doctor", "--fix")
    assert "set aside 2 damaged line(s) of its committed part in this clone" in fixed.stdout
    no_git_command(fixed.stdout + fixed.stderr)
    assert alpha_file(a).read_bytes() == pushed  # left as committed
    assert a.run("doctor").returncode == 0
    listed = a.run("list").stdout
    assert "alpha keeps the job queue" in listed and "alpha deploys" in listed
    assert "damaged" not in a.run("list").stderr  # read around, no warning left
    a.run("remember", "alpha writes after the repair")
    a.run("commit")
    a.run("sync")
    b.run("sync")
    no_event_removed(server, a, b)
    assert (
        Store(b.home, "personal").root / Store(a.home, "personal").rel(alpha_file(a))
    ).read_bytes() == pushed
    assert "alpha writes after the repair" in b.run("list").stdout


def test_lines_cut_by_a_teammates_commit_are_reported_lost_and_recovered_without_all(
    tmp_path: Path, server: Server
) -> None:
    a, b = team(tmp_path, server)
    rel = Store(a.home, "personal").rel(alpha_file(a))
    # Beta, with plain git, cuts alpha's first memory out of alpha's file and pushes.
    path = Store(b.home, "personal").root / rel
    kept = [
        raw
        for raw in path.read_bytes().splitlines(keepends=True)
        if b"alpha keeps the job queue" not in raw
    ]
    path.write_bytes(b"".join(kept))
    git(b.home, "commit", "-q", "-am", "tidy")
    git(b.home, "push", "-q", "origin", "HEAD")

    a.run("sync")
    [entry] = a.json("status")
    assert entry["lost"]["events"] >= 1 and rel in entry["lost"]["files"], entry
    doctor = a.run("doctor", "--json", ok=False)
    assert doctor.returncode == 1 and "lost-events" in doctor.stdout
    no_git_command(doctor.stdout)

    # A third clone that never saw the memory counts it lost too (from the cutting commit).
    c = Machine(tmp_path, "gamma")
    c.run("clone", server.url)
    assert "alpha keeps the job queue" not in c.run("list").stdout
    [entry] = c.json("status")
    assert entry["lost"]["events"] >= 1, entry

    done = a.run("recover")
    assert "alpha keeps the job queue" in a.run("list").stdout, done.stdout
    [entry] = a.json("status")
    assert entry["lost"]["events"] == 0
    a.run("sync")
    b.run("sync")
    c.run("sync")
    for clone in (a, b, c):
        assert "alpha keeps the job queue" in clone.run("list").stdout
        [entry] = clone.json("status")
        assert entry["lost"]["events"] == 0, (clone.name, entry)
    no_event_removed(server, a, b, c)
    assert a.run("doctor").returncode == 0


def test_a_compaction_is_not_a_cut(tmp_path: Path, server: Server) -> None:
    a, b = team(tmp_path, server)
    for n in range(4):
        a.run("remember", f"alpha note {n} about the build cache", "--kind", "fact")
        a.run("commit")
    a.run("config", "set", "compact.files", "0")
    a.run("commit")
    done = a.run("compact")
    assert "folded" in done.stdout, done.stdout + done.stderr
    a.run("sync")
    b.run("sync")
    for clone in (a, b):
        [entry] = clone.json("status")
        assert entry["lost"]["events"] == 0, (clone.name, entry)
    no_event_removed(server, a, b)
