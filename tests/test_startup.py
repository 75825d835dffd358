"""Commands that start like small tools: what the quick commands load, and that a command's
output and its events are complete when the process ends without the interpreter's teardown.

The import budget is checked without timing: the real command runs in a child process with
`-X importtime`, and the modules it loaded are read from that list.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from conftest import git, make_repo, run_engram

from engram.api import Engram

# What a quick command must not load: git, the search indexes, the embedding stack, MCP.
HEAVY = ("pygit2", "tantivy", "usearch", "onnxruntime", "fastembed", "numpy", "mcp")


def loaded(*args: str, cwd: Path) -> set[str]:
    """The top-level packages that `engram ARGS` imported, from `-X importtime`."""
    names = {name.split(".")[0] for name in loaded_modules(*args, cwd=cwd)}
    assert "engram" in names  # the list was read
    return names


def loaded_modules(*args: str, cwd: Path) -> set[str]:
    """Every module that `engram ARGS` imported, from `-X importtime`."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "engram", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    names = set()
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                names.add(name)
    return names


def heavy(names: set[str]) -> set[str]:
    return {name for name in HEAVY if name in names}


def test_help_list_and_config_load_nothing_heavy(tmp_path: Path) -> None:
    engram = Engram()
    engram.init()
    engram.remember("the staging database is rebuilt every night")
    engram.close()
    assert run_engram("list", cwd=tmp_path).returncode == 0  # the read model exists now
    assert heavy(loaded("--help", cwd=tmp_path)) == set()
    assert heavy(loaded("list", cwd=tmp_path)) == set()
    assert heavy(loaded("config", "get", "commit.every_events", cwd=tmp_path)) == set()


def test_each_command_is_found_where_the_group_says_and_loads_only_its_family(
    tmp_path: Path,
) -> None:
    from engram.cli import families
    from engram.cli.main import main

    for name, command in main.commands.items():
        assert command.callback is not None
        assert command.callback.__module__ == "engram.cli" + families.WHERE[name], name
    assert set(families.WHERE) == set(main.commands)
    engram = Engram()
    engram.init()
    engram.close()
    modules = loaded_modules("list", cwd=tmp_path)
    family_modules = {"engram.cli" + module for module in families.FAMILIES}
    assert modules & family_modules == {"engram.cli.memories"}
    assert {"engram.mcp", "engram.search.neardup"}.isdisjoint(modules)
    assert family_modules <= loaded_modules("--help", cwd=tmp_path)


def test_a_recall_by_words_loads_no_lock_package_embedding_or_mcp(tmp_path: Path) -> None:
    engram = Engram()
    engram.init()
    engram.config_set("search.model", "off")
    engram.remember("pytest fixtures are scoped per module here")
    engram.close()
    assert run_engram("recall", "pytest", cwd=tmp_path).returncode == 0  # caches built
    names = loaded("recall", "pytest", cwd=tmp_path)
    assert heavy(names) == {"tantivy"}
    assert "filelock" not in names  # the index lock is flock(2), not the 30 ms package


def test_status_loads_git_but_no_search_embedding_or_mcp(project: Path) -> None:
    Engram(cwd=project).remember("the build needs node 22")
    assert heavy(loaded("status", cwd=project)) == {"pygit2"}


def test_list_in_a_repository_loads_no_search_embedding_or_mcp(project: Path) -> None:
    Engram(cwd=project).remember("releases are tagged from main")
    assert heavy(loaded("list", cwd=project)) <= {"pygit2"}


def test_output_and_events_are_complete_when_the_command_ends(tmp_path: Path) -> None:
    engram = Engram()
    engram.init()
    engram.config_set("commit.every_events", "1")
    many = 400
    for number in range(many):
        engram.remember(
            f"memory number {number} of a long listing, padded " + "x" * 200, check_duplicates=False
        )
    engram.close()
    # A listing far larger than a pipe's buffer arrives whole.
    done = run_engram("list", "--limit", str(many + 10), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(orjson.loads(done.stdout)) == many
    # A write made by the command is on disk and committed, and what it said was printed.
    done = run_engram("remember", "the last words before the process ends", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("remembered ")
    home = Path(os.environ["ENGRAM_HOME"])
    assert git(home, "status", "--porcelain", "--", "events").strip() == ""
    assert "the last words before the process ends" in git(home, "show", "HEAD")
    # An error still says what is wrong, with its exit status.
    done = run_engram("show", "nosuchid", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("error: ")


@pytest.mark.parametrize("args", [("--version",), ("list", "--limit", "1")])
def test_output_to_a_closed_pipe_is_not_an_error_trace(
    tmp_path: Path,
    args: tuple[str, ...],
) -> None:
    Engram().init()
    reader = subprocess.Popen(
        [sys.executable, "-m", "engram", *args],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ),
    )
    out, err = reader.communicate(timeout=120)
    assert reader.returncode == 0, err
    assert b"Traceback" not in err


def test_personal_memories_of_a_project_stay_in_that_project(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "elsewhere")
    Engram().init()
    Engram(cwd=repo).remember("only in this project")
    Engram().remember("everywhere", everywhere=True)
    done = run_engram("list", cwd=repo)
    assert "only in this project" in done.stdout and "everywhere" in done.stdout
    other = make_repo(tmp_path / "other", {"a.txt": "another history"})
    done = run_engram("list", cwd=other)
    assert "only in this project" not in done.stdout and "everywhere" in done.stdout
    done = run_engram("list", cwd=tmp_path)  # outside any repository: every memory
    assert "only in this project" in done.stdout and "everywhere" in done.stdout


def test_a_reindex_with_nothing_to_embed_loads_no_model(tmp_path: Path) -> None:
    from conftest import foreign_events

    engram = Engram()
    engram.init()
    engram.remember("the cache directory is wiped on every deploy")  # embedded here
    engram.close()
    # The ONNX session comes with its tokenizer: without it, no model was loaded.
    assert "tokenizers" not in loaded("reindex", cwd=tmp_path)
    foreign_events(
        Path(os.environ["ENGRAM_HOME"]),
        {
            "kind": "memory.created",
            "data": {
                "memory": "eeee00000001",
                "content": "a text no process has embedded",
                "kind": "fact",
                "tags": [],
                "scope": None,
                "source": "agent-inferred",
                "importance": 0.5,
                "valid_from": None,
                "valid_until": None,
            },
        },
    )
    assert "tokenizers" in loaded("reindex", cwd=tmp_path)
    assert "tokenizers" not in loaded("reindex", cwd=tmp_path)
