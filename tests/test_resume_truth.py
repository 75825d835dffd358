"""What a resume tells the next agent is true now: work done since the handoff, the decisions and
facts of the task, the working set as the code is, and text as it was written."""

from __future__ import annotations

from pathlib import Path

from conftest import git, make_repo

from engram.api import Engram


def test_a_handoff_pins_each_file_to_the_newest_commit_that_changed_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "app", {"src/ratelimit.py": "LIMIT = 1\n",
                                        "src/other.py": "x = 1\n"})
    engram = Engram(cwd=repo)
    engram.init(project=True)
    first = git(repo, "log", "-1", "--format=%H", "--", "src/ratelimit.py").strip()
    task = engram.task_create("Rate limiting")
    engram.handoff(task.id, summary="started", files=["src/ratelimit.py"])
    (repo / "src/ratelimit.py").write_text("LIMIT = 2\n")
    git(repo, "commit", "-qam", "raise the limit")
    edited = git(repo, "log", "-1", "--format=%H").strip()
    carried = engram.handoff(task.id, summary="limit raised")
    [pin] = carried.checkpoint.record["working_set"]["files"]
    assert first != edited and pin["commit"] == edited and "uncommitted" not in pin
    (repo / "src/ratelimit.py").write_text("LIMIT = 3\n")
    [pin] = engram.handoff(task.id, summary="trying 3").checkpoint.record["working_set"]["files"]
    assert pin["commit"] == edited and pin["uncommitted"] is True
    typo = engram.handoff(task.id, summary="parser next", files=["src/parser.py"])
    [pin] = typo.checkpoint.record["working_set"]["files"]
    assert pin == {"path": "src/parser.py", "commit": None, "missing": True}
    assert any("'src/parser.py' does not exist in the work tree" in w for w in engram.warnings)
