"""The newest commit that changed each file of a working set, asked of git once for all of them:
the same answers as asking for each file alone, through merges, deletions, new files and names
git prints quoted; and a resume of a long working set does not start one git per file."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from conftest import git, make_repo

from engram.git.tracked import TrackedFiles


def commit(repo: Path, files: dict[str, str | None], message: str) -> None:
    for name, text in files.items():
        target = repo / name
        if text is None:
            target.unlink()
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    time.sleep(0.01)


def history(repo: Path) -> list[str]:
    """A history with the shapes that make 'the newest commit that changed it' subtle."""
    commit(repo, {"src/a.py": "a1\n", "src/b.py": "b1\n", 'odd "name".txt': "o1\n"}, "start")
    commit(repo, {"src/c.py": "c1\n", "gone.txt": "g\n"}, "more")
    git(repo, "checkout", "-q", "-b", "side")
    commit(repo, {"src/a.py": "a-side\n", "src/d.py": "d-side\n"}, "side work")
    git(repo, "checkout", "-q", "main")
    commit(repo, {"src/b.py": "b2\n", "src/c.py": "c-main\n", "gone.txt": None}, "main work")
    git(repo, "checkout", "-q", "side")
    commit(repo, {"src/c.py": "c-side\n"}, "side changes c too")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge side", "side", check=False)
    # c.py conflicts: the merge resolves it with text of neither side (changed in the merge).
    (repo / "src/c.py").write_text("c-resolved\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-edit")
    commit(repo, {'odd "name".txt': "o2\n"}, "odd name again")
    (repo / "new.txt").write_text("never committed\n")
    return [
        "src/a.py",  # changed on the side branch only
        "src/b.py",  # changed on main after the branch
        "src/c.py",  # changed in the merge itself
        "src/d.py",  # added on the side branch
        "gone.txt",  # deleted on main
        'odd "name".txt',  # a name git prints quoted
        "new.txt",  # never committed
        "no/such/file.py",  # not there at all
    ]


def test_one_walk_gives_each_file_the_commit_a_walk_for_it_alone_gives(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    paths = history(repo)
    tracked = TrackedFiles(repo)
    alone = {path: tracked.last_commit(path) for path in paths}
    assert alone["src/c.py"] == git(repo, "rev-parse", "HEAD~1").strip()  # the merge
    assert alone["new.txt"] is None and alone["no/such/file.py"] is None
    assert tracked.last_commits(paths) == alone
    assert tracked.last_commits([]) == {}


@pytest.mark.parametrize("count", [300])
def test_pinning_a_long_working_set_asks_git_a_few_times_not_once_a_file(
    tmp_path: Path, count: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engram.domain.continuity import workingset

    repo = make_repo(tmp_path / "repo")
    names = [f"src/module_{i}.py" for i in range(count)]
    commit(repo, {name: f"x = {i}\n" for i, name in enumerate(names)}, "many files")
    (repo / names[0]).write_text("x = 'edited'\n")
    started: list[list[str]] = []
    real = subprocess.run

    def counted(args: list[str], *rest: object, **kw: object) -> object:
        if args and args[0] == "git":
            started.append(args)
        return real(args, *rest, **kw)  # type: ignore[call-overload]

    monkeypatch.setattr(subprocess, "run", counted)
    pinned = workingset.pin(repo, [{"path": name} for name in names])
    states = workingset.current(repo, pinned)
    assert len(started) <= 4
    head = git(repo, "rev-parse", "HEAD").strip()
    assert all(item["commit"] == head for item in pinned)
    assert pinned[0].get("uncommitted") is True and "uncommitted" not in pinned[1]
    assert [s.state for s in states[:2]] == ["unchanged", "unchanged"]
