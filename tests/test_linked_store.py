"""A project's `.engram` that is a symbolic link is refused everywhere, reads included.

A cloned repository can commit `.engram` as a link to another directory: a sibling repository's
store, whose memories would be listed as this project's, written into and committed into the
repository the link's author controls. Every command refuses such a store with one line naming
the fix, and the directory it points to is left byte for byte as it was.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engram.api import Engram
from engram.base.errors import LinkedStoreError
from tests.conftest import cli, git, make_repo, run_engram

FIX = "`git rm .engram`"


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every file under `root` with its bytes (a link with its target), and its mtime."""
    found: dict[str, bytes | str] = {}
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            stat = path.lstat()
            if path.is_symlink():
                found[rel] = "link:" + os.readlink(path)
            elif path.is_file():
                found[rel] = path.read_bytes() + f"|{stat.st_mtime_ns}".encode()
            else:
                found[rel] = f"dir|{stat.st_mtime_ns}"
    return found


@pytest.fixture
def sibling(tmp_path: Path) -> Path:
    """Another project, with a committed memory in its store."""
    repo = make_repo(tmp_path / "p2")
    assert cli("init", "--project", cwd=repo).exit_code == 0
    assert cli("remember", "p2 private note about its deploy keys", cwd=repo).exit_code == 0
    assert cli("commit", cwd=repo).exit_code == 0
    return repo


def linked_repo(tmp_path: Path, target: Path) -> Path:
    """A cloned repository whose committed `.engram` is a link to `target`."""
    repo = make_repo(tmp_path / "r7")
    (repo / ".engram").symlink_to(target, target_is_directory=True)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "x")
    return repo


def refused(output: str) -> bool:
    return "is a symbolic link" in output and FIX in output and "engram init --project" in output


@pytest.mark.parametrize(
    "args",
    [
        ("list",),
        ("list", "--personal"),
        ("recall", "deploy keys"),
        ("remember", "r7 note"),
        ("commit",),
        ("init", "--project"),
        ("status",),
    ],
)
def test_every_command_refuses_a_linked_store_and_leaves_its_target_alone(
    tmp_path: Path, sibling: Path, args: tuple[str, ...]
) -> None:
    target = sibling / ".engram"
    repo = linked_repo(tmp_path, target)
    head = git(repo, "rev-parse", "HEAD")
    before = snapshot(target)
    done = run_engram(*args, cwd=repo)
    assert done.returncode == 2, done.stdout + done.stderr
    assert refused(done.stderr), done.stderr
    assert "p2 private note" not in done.stdout
    assert snapshot(target) == before
    assert git(repo, "rev-parse", "HEAD") == head
    assert git(repo, "ls-tree", "HEAD", ".engram").startswith("120000")
    assert git(sibling, "status", "--porcelain") == ""


def test_init_through_a_link_to_an_outside_folder_fills_nothing(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    repo = make_repo(tmp_path / "r8")
    (repo / ".engram").symlink_to(Path("..") / "victim", target_is_directory=True)
    result = cli("init", "--project", cwd=repo)
    assert result.exit_code == 2
    assert refused(result.output)
    assert list(victim.iterdir()) == []
    dangling = make_repo(tmp_path / "r9")
    (dangling / ".engram").symlink_to(tmp_path / "nowhere", target_is_directory=True)
    assert refused(cli("init", "--project", cwd=dangling).output)
    assert not (tmp_path / "nowhere").exists()


def test_the_api_refuses_it_from_a_folder_below_the_top(tmp_path: Path, sibling: Path) -> None:
    repo = linked_repo(tmp_path, sibling / ".engram")
    (repo / "sub").mkdir()
    with pytest.raises(LinkedStoreError) as caught:
        Engram(cwd=repo / "sub")  # found from a folder below the top, as git finds .git
    assert FIX in caught.value.message("cli")
    assert caught.value.message("mcp").startswith(str(repo / ".engram"))


def test_doctor_reports_the_link_with_its_fix(tmp_path: Path, sibling: Path) -> None:
    repo = linked_repo(tmp_path, sibling / ".engram")
    before = snapshot(sibling / ".engram")
    result = cli("doctor", cwd=repo)
    assert result.exit_code == 1
    assert "1 problem" in result.output
    assert "error: " in result.output and ".engram is a symbolic link" in result.output
    assert f"fix: remove it ({FIX}" in result.output
    assert snapshot(sibling / ".engram") == before


def test_git_hooks_do_nothing_in_a_repository_whose_store_is_a_link(
    tmp_path: Path, sibling: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engram.cli.githooks import store_here

    repo = linked_repo(tmp_path, sibling / ".engram")
    monkeypatch.chdir(repo)
    monkeypatch.delenv("GIT_WORK_TREE", raising=False)
    assert store_here() is None
