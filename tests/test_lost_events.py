"""Git deletes event files. Every git command that Engram prints to restore one must work from
wherever the user stands."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from conftest import cli, git, make_repo
from engram.api import Engram
from engram.store import Store


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


# -- printed git commands work from wherever the user stands --------------------------------------


def _printed(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


def test_printed_restore_commands_work_from_another_directory(tmp_path: Path) -> None:
    repo = _project(tmp_path / "project")
    kept = _write(repo, 2, commit=True)
    [path] = [p for p in _store(repo).event_files()
              if kept & {e.id for _, e in _store(repo).read_file(p).events}]
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
    [missing] = [f for entry in report["stores"] for f in entry["findings"]
                 if f["check"] == "missing-file"]
    [command] = _printed(missing["fix"])
    subprocess.run(command, shell=True, check=True, cwd=elsewhere, capture_output=True)
    assert kept <= _ids(repo)
    assert cli("doctor", "--project", cwd=repo).exit_code == 0
