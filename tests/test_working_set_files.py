"""How a working-set file is named: on the command line as git takes a path (relative to the
current directory or -C's, or absolute inside the work tree), stored relative to the repository's
top, which is how the MCP tools and a handoff package name files; `@` is part of a file name
(`web/@types/index.d.ts`, `logo@2x.png`) unless a commit id follows the last one, and a commit
given with a file (`path@commit`) is the pin, kept as given or refused, never replaced. Real git
repositories, the real CLI in a child process and the MCP server over stdio."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pygit2
import pytest
from conftest import git, make_repo, run_engram
from test_mcp import connect

from engram.api import Engram
from engram.base.errors import UsageError
from engram.base.validation import split_pin
from engram.domain.continuity import workingset


@pytest.mark.parametrize(
    ("entry", "path", "commit"),
    [
        ("src/app.py", "src/app.py", None),
        ("src/app.py@1120df0", "src/app.py", "1120df0"),
        ("src/app.py@1120DF0", "src/app.py", "1120df0"),
        ("web/@types/index.d.ts", "web/@types/index.d.ts", None),
        ("logo@2x.png", "logo@2x.png", None),
        ("logo@2x.png@1120df0", "logo@2x.png", "1120df0"),
        ("a@b@cafe", "a@b", "cafe"),
        ("notes@abc", "notes@abc", None),  # three digits: not a commit id
        ("v@" + "a" * 65, "v@" + "a" * 65, None),  # longer than any commit id
        ("@cafe", "@cafe", None),  # nothing before it
        ("node_modules/@cafe", "node_modules/@cafe", None),  # a folder before it
        ("app.py@", "app.py@", None),
    ],
)
def test_an_entry_is_split_at_its_last_at_only_before_a_commit_id(
    entry: str, path: str, commit: str | None
) -> None:
    assert split_pin(entry) == (path, commit)


def test_an_entry_that_names_a_file_is_a_path_even_before_hex_digits(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"notes@cafe": "tracked\n", "gone@beef": "tracked\n"})
    (repo / "gone@beef").unlink()  # deleted from the work tree, still tracked
    names = workingset.names_file(repo)
    assert split_pin("notes@cafe", names) == ("notes@cafe", None)
    assert split_pin("gone@beef", names) == ("gone@beef", None)
    assert split_pin("app.py@cafe", names) == ("app.py", "cafe")


def test_a_command_line_path_is_relative_to_the_directory_or_absolute_inside(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo", {"src/mod.py": "a\n"})
    src = repo / "src"
    link = tmp_path / "link"
    link.symlink_to(repo)  # a link to the repository, above its top
    assert workingset.from_directory(repo, src, "mod.py") == "src/mod.py"
    assert workingset.from_directory(repo, src, "./mod.py@cafe") == "src/mod.py@cafe"
    assert workingset.from_directory(repo, src, "../README.md") == "README.md"
    assert workingset.from_directory(repo, repo, "src/../src/mod.py") == "src/mod.py"
    assert workingset.from_directory(repo, tmp_path, str(src / "mod.py")) == "src/mod.py"
    assert workingset.from_directory(repo, link / "src", "mod.py") == "src/mod.py"
    assert workingset.from_directory(repo, tmp_path, str(link / "src" / "mod.py")) == "src/mod.py"
    # from outside the work tree (a personal store's task), relative to its top as before
    assert workingset.from_directory(repo, tmp_path, "src/mod.py") == "src/mod.py"
    for outside in ("../../x.py", str(tmp_path / "x.py"), "/etc/passwd"):
        with pytest.raises(UsageError) as refused:
            workingset.from_directory(repo, src, outside)
        assert str(refused.value) == (
            f"working-set file {outside!r} is outside the repository ({repo}); "
            "name a file inside it"
        )


def _project(tmp_path: Path) -> tuple[Path, str, str]:
    """A project with two commits of app.py; its task, and the first commit's short id."""
    repo = make_repo(tmp_path / "repo", {"app.py": "one\n", "src/mod.py": "mod\n"})
    old = git(repo, "rev-parse", "HEAD").strip()
    (repo / "app.py").write_text("two\n")
    git(repo, "commit", "-q", "-am", "two")
    Engram(cwd=repo).init(project=True)
    task = json.loads(run_engram("task", "create", "Ship it", "--json", cwd=repo).stdout)["id"]
    return repo, task, old


def _files(repo: Path, task: str) -> dict[str, dict[str, object]]:
    with Engram(cwd=repo) as engram:
        latest = engram.checkpoints(task)[-1]
    return {f["path"]: f for f in latest.record["working_set"]["files"]}


def _blob(repo: Path, commit: str, path: str) -> str:
    return str(pygit2.Repository(repo).revparse_single(f"{commit}:{path}").id)


def test_the_cli_takes_paths_relative_to_the_current_directory_like_git(tmp_path: Path) -> None:
    repo, task, _ = _project(tmp_path)
    src = repo / "src"
    handoff = ("handoff", "--task", task, "--summary", "s")
    for args, cwd in (
        ((*handoff, "--file", "mod.py", "--file", "../app.py"), src),
        (("-C", "src", *handoff, "--file", "mod.py", "--file", "../app.py"), repo),
        ((*handoff, "--file", str(src / "mod.py"), "--file", str(repo / "app.py")), src),
        (("-C", str(repo), *handoff, "--file", str(src / "mod.py"), "--file=app.py"), tmp_path),
    ):
        done = run_engram(*args, cwd=cwd)
        assert done.returncode == 0, (args, done.stderr)
        assert "does not exist" not in done.stderr, done.stderr
        files = _files(repo, task)
        assert sorted(files) == ["app.py", "src/mod.py"], args
        assert files["src/mod.py"]["blob"] == str(pygit2.hash(b"mod\n"))

    done = run_engram("task", "progress", task, "wiring", "--file", "mod.py", cwd=src)
    assert done.returncode == 0, done.stderr
    with Engram(cwd=repo) as engram:
        assert engram.task_view(task).task.progress[-1].files == ("src/mod.py",)

    before = _files(repo, task)
    for outside in (str(tmp_path / "elsewhere.py"), "../../elsewhere.py"):
        for args in (
            ("handoff", "--task", task, "--summary", "later", "--file", outside),
            ("task", "progress", task, "later", "--file", outside),
        ):
            done = run_engram(*args, cwd=src)
            assert done.returncode == 2, (args, done.stdout)
            assert done.stderr == (
                f"error: working-set file {outside!r} is outside the repository "
                f"({repo}); name a file inside it\n"
            )
    assert _files(repo, task) == before


def test_at_in_a_file_name_is_part_of_the_name(tmp_path: Path) -> None:
    repo, task, _ = _project(tmp_path)
    (repo / "web" / "@types").mkdir(parents=True)
    (repo / "web" / "@types" / "index.d.ts").write_text("export {}\n")
    (repo / "logo@2x.png").write_bytes(b"png")
    names = ["web/@types/index.d.ts", "logo@2x.png"]
    done = run_engram("task", "progress", task, "icons", *(f"--file={n}" for n in names), cwd=repo)
    assert done.returncode == 0, done.stderr
    done = run_engram(
        "handoff", "--task", task, "--summary", "s", *(f"--file={n}" for n in names), cwd=repo
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    files = _files(repo, task)
    assert sorted(files) == sorted(names)
    assert files["logo@2x.png"]["blob"] == str(pygit2.hash(b"png"))
    with Engram(cwd=repo) as engram:
        assert engram.task_view(task).task.progress[-1].files == tuple(names)


def test_a_commit_given_with_a_file_is_kept_and_carried_on(tmp_path: Path) -> None:
    repo, task, old = _project(tmp_path)
    done = run_engram(
        "handoff", "--task", task, "--summary", "s", "--file", f"app.py@{old[:7]}", cwd=repo
    )
    assert done.returncode == 0, done.stderr
    pinned = _files(repo, task)["app.py"]
    assert pinned["commit"] == old  # the full id of the commit given, not the newest
    assert pinned["blob"] == _blob(repo, old, "app.py")  # the file as it is in that commit
    shown = run_engram("resume", "--task", task, cwd=repo).stdout
    head = git(repo, "log", "-1", "--format=%H", "--", "app.py").strip()
    assert f"`app.py` @ {old[:12]} — changed since: now @ {head[:12]}" in shown

    # An automatic checkpoint carries the file over with the commit given, not a new pin.
    done = run_engram("task", "progress", task, "more", "--file", "src/mod.py", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "checkpoint" in done.stdout
    assert _files(repo, task)["app.py"]["commit"] == old
    # Named again without a commit, it is pinned to the newest commit that changed it.
    run_engram("handoff", "--task", task, "--summary", "s", "--file", "app.py", cwd=repo)
    assert _files(repo, task)["app.py"]["commit"] == head

    # A file gone from the work tree keeps the commit given, marked missing.
    (repo / "src" / "mod.py").unlink()
    done = run_engram(
        "handoff", "--task", task, "--summary", "s", "--file", f"src/mod.py@{old}", cwd=repo
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        "warning: working-set file 'src/mod.py' does not exist in the work tree: kept as "
        "missing, pinned to the commit given; check the path\n"
    )
    gone = _files(repo, task)["src/mod.py"]
    assert (gone["commit"], gone["missing"]) == (old, True)
    assert gone["blob"] == _blob(repo, old, "src/mod.py")


def test_a_commit_this_clone_lacks_or_that_lacks_the_file_is_refused(tmp_path: Path) -> None:
    repo, task, old = _project(tmp_path)
    (repo / "new.py").write_text("new\n")
    git(repo, "add", "new.py")
    git(repo, "commit", "-q", "-m", "new")
    handoff = ("handoff", "--task", task, "--summary", "s", "--file")
    store = sorted(p.read_bytes() for p in (repo / ".engram").rglob("*.jsonl"))
    for args, said in (
        (
            (*handoff, "app.py@deadbeef"),
            "working-set file 'app.py': this repository has no commit 'deadbeef'; give one that "
            "`git log -- app.py` lists (fetch it first if only another clone has it), "
            "or the path alone",
        ),
        (
            (*handoff, f"new.py@{old[:8]}"),
            f"working-set file 'new.py' is not in commit {old[:8]}; give a commit that holds "
            "it (`git log -- new.py`), or the path alone",
        ),
        (
            ("task", "progress", task, "f", "--file", f"app.py@{old[:8]}"),
            "working-set file 'app.py': task progress names the files it touches, not commits; "
            f"give it without @{old[:8]} (a handoff pins a commit)",
        ),
    ):
        done = run_engram(*args, cwd=repo)
        assert done.returncode == 2, (args, done.stdout)
        assert done.stderr == f"error: {said}\n"
    assert sorted(p.read_bytes() for p in (repo / ".engram").rglob("*.jsonl")) == store


def test_the_mcp_tools_take_paths_relative_to_the_repository_top(tmp_path: Path) -> None:
    """The server has no directory of the agent's to start from: paths are the repository's,
    even when the server runs in a subdirectory."""
    repo, task, old = _project(tmp_path)
    (repo / "logo@2x.png").write_bytes(b"png")

    async def scenario() -> None:
        async with connect(repo / "src") as client:
            result = await client.call_tool(
                "session_handoff",
                {
                    "task": task,
                    "summary": "s",
                    "files": ["src/mod.py", f"app.py@{old[:7]}", "logo@2x.png"],
                },
            )
            assert not result.is_error, result.content

    anyio.run(scenario)
    files = _files(repo, task)
    assert sorted(files) == ["app.py", "logo@2x.png", "src/mod.py"]
    assert files["app.py"]["commit"] == old
    assert "missing" not in files["src/mod.py"]
