"""Working-set paths are checked like citations: a checkpoint, a handoff or task progress never
names a file outside the repository, behind a symbolic link or in `.git/`, because a checkpoint
commits and pushes the blob id of each file it names (for a small file, a hash anyone can test
guesses against). Real symbolic links, a real second clone pushing through a `git daemon`, the
real CLI and the MCP server over stdio."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pygit2
import pytest
from conftest import foreign_events, git, make_repo, run_engram
from test_mcp import connect
from test_sync import Server

from engram.api import Engram
from engram.base.errors import UsageError
from engram.domain import discovery

SECRET = "AWS region eu-west-1, account 4242\n"  # what a link outside points at: a small file


def _links(repo: Path, outside: Path) -> dict[str, str]:
    """Real symbolic links in `repo`; each path named through them and what it must say."""
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    (repo / "src").mkdir()
    (repo / "src" / "app.py").write_text("print('app')\n")
    (repo / "out.txt").symlink_to(outside / "secret.txt")
    (repo / "outdir").symlink_to(outside)
    (repo / "cfg").symlink_to(".git/config")
    (repo / "app-link.py").symlink_to("src/app.py")
    (repo / "srclink").symlink_to("src")
    (repo / "loop").symlink_to("loop")
    outside_said = (
        "leads outside the repository (through '..' or a symbolic link); name a file inside it"
    )
    in_git = "is inside .git/, git's own files; name a file of the work tree"
    return {
        "out.txt": outside_said,
        "outdir/secret.txt": outside_said,
        "loop": outside_said,
        "cfg": f"(a link to .git/config) {in_git}",
        ".git/config": in_git,
        "sub/.GIT/HEAD": in_git,
        "app-link.py": "is a symbolic link; name the file it links to: src/app.py",
        "srclink/app.py": "goes through a symbolic link (srclink); name the file it links to: "
        "src/app.py",
    }


def _blob(data: str) -> str:
    return str(pygit2.hash(data.encode()))


def _store_text(repo: Path) -> str:
    return "".join(p.read_text() for p in sorted((repo / ".engram").rglob("*.jsonl")))


def test_handoffs_and_progress_refuse_paths_outside_through_links_or_into_git(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo")
    Engram(cwd=repo).init(project=True)
    refused = _links(repo, tmp_path / "outside")
    task = json.loads(run_engram("task", "create", "Ship it", "--json", cwd=repo).stdout)["id"]
    before = _store_text(repo)
    for path, said in refused.items():
        for args in (
            ("task", "progress", task, "wiring", "--file", path),
            ("handoff", "--task", task, "--summary", "half way", "--file", path),
        ):
            done = run_engram(*args, cwd=repo)
            assert done.returncode == 2, (args, done.stdout, done.stderr)
            assert done.stderr == f"error: working-set file {path!r} {said}\n", done.stderr
    assert _store_text(repo) == before  # nothing was written
    assert _blob(SECRET) not in before

    # The file itself, named without the link, is fine, and so is one that does not exist yet.
    done = run_engram(
        "handoff",
        "--task",
        task,
        "--summary",
        "half way",
        "--file",
        "src/app.py",
        "--file",
        "src/new.py",
        cwd=repo,
    )
    assert done.returncode == 0, done.stderr
    [saved] = Engram(cwd=repo).checkpoints(task)
    files = {f["path"]: f for f in saved.record["working_set"]["files"]}
    assert files["src/app.py"]["blob"] == _blob("print('app')\n")
    assert "blob" not in files["src/new.py"]


def test_the_mcp_tools_refuse_them_in_the_same_words(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    Engram(cwd=repo).init(project=True)
    refused = _links(repo, tmp_path / "outside")
    task = Engram(cwd=repo).task_create("Ship it").id

    async def scenario() -> None:
        async with connect(repo) as client:
            for path in ("out.txt", "cfg", "srclink/app.py"):
                for tool, arguments in (
                    ("task_progress", {"task": task, "feature": "wiring", "files": [path]}),
                    ("session_handoff", {"task": task, "summary": "half way", "files": [path]}),
                ):
                    result = await client.call_tool(tool, arguments)
                    assert result.is_error, (tool, path)
                    assert f"working-set file {path!r} {refused[path]}" in result.content[0].text

    anyio.run(scenario)
    assert _blob(SECRET) not in _store_text(repo)


def test_a_citation_is_refused_in_the_same_words(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    Engram(cwd=repo).init(project=True)
    _links(repo, tmp_path / "outside")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "links")
    with Engram(cwd=repo) as engram, pytest.raises(UsageError) as refused:
        discovery.record(engram, "the region", [{"path": "out.txt", "start_line": 1}])
    assert str(refused.value) == (
        "citation path 'out.txt' leads outside the repository "
        "(through '..' or a symbolic link); cite a file inside it"
    )


def test_links_pushed_by_a_teammate_never_put_a_blob_id_of_what_they_reach_in_history(
    tmp_path: Path,
) -> None:
    """Mallory commits links (to .git/config, and to a path outside every clone) and a task
    progress event naming them, and pushes. Alice pulls; her automatic checkpoints and her
    handoff carry the paths on, but read nothing through them: no blob id of her .git/config or
    of the file outside is committed and pushed."""
    root = tmp_path / "server"
    root.mkdir()
    server = Server(root, "daemon")
    try:
        origin = make_repo(
            tmp_path / "origin", {"README.md": "a project\n", "src/app.py": "print('app')\n"}
        )
        Engram(cwd=origin).init(project=True)
        task = Engram(cwd=origin).task_create("Ship it").id
        Engram(cwd=origin).commit()
        git(server.bare, "symbolic-ref", "HEAD", "refs/heads/main")
        git(origin, "push", "-q", server.url, "main")
        alice, mallory = tmp_path / "alice", tmp_path / "mallory"
        for clone in (alice, mallory):
            git(tmp_path, "clone", "-q", server.url, str(clone))
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / "secret.txt").write_text(SECRET)

        (mallory / "cfg").symlink_to(".git/config")
        (mallory / "notes.txt").symlink_to(outside / "secret.txt")
        foreign_events(
            mallory / ".engram",
            {
                "kind": "task.progress",
                "data": {
                    "task": task,
                    "feature": "wiring",
                    "status": "done",
                    "files": ["cfg", "notes.txt", "src/app.py"],
                },
            },
        )
        git(mallory, "add", "-A")
        git(mallory, "commit", "-q", "-m", "wiring")
        git(mallory, "push", "-q", "origin", "main")

        git(alice, "pull", "-q", "--no-rebase", "origin", "main")
        assert os.path.islink(alice / "cfg") and os.path.islink(alice / "notes.txt")
        done = run_engram("task", "progress", task, "tests", "--file", "src/app.py", cwd=alice)
        assert done.returncode == 0, done.stderr
        done = run_engram("handoff", "--task", task, "--summary", "tests pass", cwd=alice)
        assert done.returncode == 0, done.stderr
        checkpoints = Engram(cwd=alice).checkpoints(task)
        assert checkpoints
        for saved in checkpoints:
            files = {f["path"]: f for f in saved.record["working_set"]["files"]}
            assert "blob" not in files.get("cfg", {}) and "blob" not in files.get("notes.txt", {})
        assert files["src/app.py"]["blob"] == _blob("print('app')\n")
        git(alice, "push", "-q", "origin", "main")

        pushed = git(alice, "log", "-p", "origin/main", "--", ".engram")
        for reached in (_blob(SECRET), _blob((alice / ".git" / "config").read_text())):
            assert reached not in pushed
            assert reached not in _store_text(alice)
    finally:
        server.stop()
