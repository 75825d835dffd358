"""Attributes that change bytes are named and neutralised.

A hostile clone pushes a top-level `.gitattributes` that asks git to re-encode event files
(`working-tree-encoding=UTF-16LE`) and to expand `$Id$` in them (`ident`), through a real `git
daemon` on 127.0.0.1. A store with Engram's pinned `.gitattributes` is untouched by it: a fresh
clone reads every event byte for byte, commits, pushes, and nothing is lost on any clone. A store
from an older version (only `*.jsonl text eol=lf merge=union`) is hit: the doctor names each
attribute for each file, and `doctor --fix` pins the file and checks the event files out again
as committed, losing nothing; `engram init` again brings the old file up to date too.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engram.api import Engram
from engram.base.layout import GITATTRIBUTES_LINES
from tests.conftest import cli, git, make_repo
from tests.test_sync import Server

OLD_ATTRIBUTES = (
    "# Event files are LF-only JSON Lines on every platform; never convert line "
    "endings. They are sets\n# of lines (readers dedupe events by id), so should "
    "two sides ever change one, keep both sides.\n*.jsonl text eol=lf "
    "merge=union\n"
)
HOSTILE = "*.jsonl working-tree-encoding=UTF-16LE\n*.jsonl ident\n"
MEMORIES = (
    "the release tag is $Id$ in every header",
    "deploys go out on Tuesdays",
    "the queue lives in Postgres",
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    root = tmp_path / "server"
    root.mkdir()
    served = Server(root, "daemon")
    yield served
    served.stop()


def share(tmp_path: Path, server: Server, *, old: bool) -> Path:
    """Alice's repository with a project store and three memories (one holds `$Id$`), pushed;
    with `old`, its .gitattributes as an older version wrote it. Then a hostile clone pushes
    the top-level .gitattributes."""
    alice = make_repo(tmp_path / "alice")
    with Engram(cwd=alice) as engram:
        engram.init(project=True)
        for text in MEMORIES:
            engram.remember(text, kind="fact", check_duplicates=False)
        engram.commit()
    if old:
        (alice / ".engram" / ".gitattributes").write_text(OLD_ATTRIBUTES)
        git(alice, "commit", "-q", "-am", "the store as an older version set it up")
    git(alice, "remote", "add", "origin", server.url)
    git(alice, "push", "-q", "-u", "origin", "main")
    mallory = tmp_path / "mallory"
    git(tmp_path, "clone", "-q", "-b", "main", server.url, str(mallory))
    (mallory / ".gitattributes").write_text(HOSTILE)
    git(mallory, "add", ".gitattributes")
    git(mallory, "commit", "-q", "-m", "normalise files")
    git(mallory, "push", "-q", "origin", "main")
    git(alice, "pull", "-q", "--no-rebase", "origin", "main")
    return alice


def committed_events(repo: Path) -> dict[str, bytes]:
    """Every event file at HEAD, as its blob holds it."""
    names = git(repo, "ls-tree", "-r", "--name-only", "HEAD", "--", ".engram/events").split()
    return {
        name: subprocess.run(
            ["git", "show", f"HEAD:{name}"], cwd=repo, check=True, capture_output=True
        ).stdout
        for name in names
    }


def event_ids(repo: Path) -> set[str]:
    return {
        json.loads(line)["id"]
        for data in committed_events(repo).values()
        for line in data.splitlines()
    }


def memories(repo: Path) -> set[str]:
    with Engram(cwd=repo) as engram:
        return {m.content for m in engram.memories()}


def findings(repo: Path, *args: str) -> list[dict[str, Any]]:
    done = cli("doctor", "--json", *args, cwd=repo)
    return [f for store in json.loads(done.stdout)["stores"] for f in store["findings"]]


def test_a_pinned_store_is_read_byte_for_byte_whatever_a_pushed_gitattributes_says(
    tmp_path: Path, server: Server
) -> None:
    alice = share(tmp_path, server, old=False)
    pinned = (alice / ".engram" / ".gitattributes").read_text().splitlines()
    assert [line for line in pinned if not line.startswith("#")] == list(GITATTRIBUTES_LINES)
    bob = tmp_path / "bob"
    git(tmp_path, "clone", "-q", "-b", "main", server.url, str(bob))
    attrs = git(bob, "check-attr", "-a", "--", next(iter(committed_events(bob))))
    assert "working-tree-encoding: unset" in attrs and "ident: unset" in attrs
    assert "linguist-generated: true" in attrs and "gitlab-generated: set" in attrs
    for name, data in committed_events(bob).items():
        assert (bob / name).read_bytes() == data, name
    assert memories(bob) == set(MEMORIES)
    assert not [f for f in findings(bob) if f["check"] == "attributes"]
    # Bob writes, commits and pushes; Alice pulls: every event is on every clone.
    with Engram(cwd=bob) as engram:
        engram.remember("bob was here after the attributes", kind="fact")
        [result] = engram.commit()
        assert result.commit
    git(bob, "push", "-q", "origin", "main")
    git(alice, "pull", "-q", "--no-rebase", "origin", "main")
    assert memories(alice) == memories(bob) == {*MEMORIES, "bob was here after the attributes"}
    assert event_ids(alice) == event_ids(bob)
    assert git(bob, "status", "--porcelain") == ""
    handoffs = git(bob, "check-attr", "linguist-generated", "--", ".engram/README.md")
    assert handoffs.strip().endswith("unspecified")  # what people read is not folded


def test_an_old_store_hit_by_a_pushed_gitattributes_is_named_and_fixed_losing_nothing(
    tmp_path: Path, server: Server
) -> None:
    alice = share(tmp_path, server, old=True)
    before = event_ids(alice)
    bob = tmp_path / "bob"
    git(tmp_path, "clone", "-q", "-b", "main", server.url, str(bob))
    files = committed_events(bob)
    # The attack is real: git re-encoded the files, and Engram cannot read them as written.
    assert all((bob / name).read_bytes() != data for name, data in files.items())
    assert memories(bob) != set(MEMORIES)

    found = findings(bob)
    by_file = {f["path"]: f for f in found if f["check"] == "attributes" and f["level"] == "error"}
    assert {f"events/{name.split('/events/', 1)[1]}" for name in files} == set(by_file)
    for finding in by_file.values():
        assert "`working-tree-encoding=UTF-16LE` (re-encodes it)" in finding["message"]
        assert "`ident` (rewrites the $Id$ in it)" in finding["message"]
        assert "doctor --fix --project` pins the store's .gitattributes" in finding["fix"]
    assert [f["path"] for f in found if f["check"] == "attributes" and f["level"] == "warning"] == [
        ".gitattributes"
    ]
    assert not [f for f in found if f["check"] in ("damaged-line", "torn-line")]  # said once

    fixed = cli("doctor", "--fix", cwd=bob)
    assert f"checked {len(files)} event file(s) out again as they were committed" in fixed.output, (
        fixed.output
    )
    for name, data in files.items():
        assert (bob / name).read_bytes() == data, name
    assert memories(bob) == set(MEMORIES)
    assert git(bob, "status", "--porcelain") == " M .engram/.gitattributes\n"
    assert cli("commit", "--project", cwd=bob).exit_code == 0
    assert [f for f in findings(bob) if f["level"] != "note"] == []
    with Engram(cwd=bob) as engram:
        engram.remember("bob can commit again", kind="fact")
        assert engram.commit()[0].commit
    git(bob, "push", "-q", "origin", "main")
    git(alice, "pull", "-q", "--no-rebase", "origin", "main")
    assert before <= event_ids(bob) == event_ids(alice)
    assert memories(alice) == {*MEMORIES, "bob can commit again"}


def test_init_again_brings_an_old_gitattributes_up_to_date(project: Path) -> None:
    path = project / ".engram" / ".gitattributes"
    path.write_text("*.md linguist-documentation\n" + OLD_ATTRIBUTES + "*.jsonl ident\n")
    git(project, "commit", "-q", "-am", "old and edited")
    found = [f for f in findings(project) if f["check"] == "attributes"]
    assert found[0]["path"] == ".gitattributes" and "engram init" in found[0]["fix"]
    assert found[1:] and all("`ident`" in f["message"] for f in found[1:])
    done = cli("init", "--project", cwd=project)
    assert done.exit_code == 0 and "brought up to date and committed" in done.output
    lines = path.read_text().splitlines()
    assert lines[0] == "*.md linguist-documentation"  # the user's own line is kept
    assert [line for line in lines if line and not line.startswith("#")] == [
        "*.md linguist-documentation",
        *GITATTRIBUTES_LINES,
    ]
    assert "*.jsonl ident" not in lines and "*.jsonl text eol=lf merge=union" not in lines
    assert git(project, "status", "--porcelain") == ""
    assert "brought up to date" in git(project, "log", "-1", "--format=%s")
    assert not [f for f in findings(project) if f["check"] == "attributes"]
    again = cli("init", "--project", cwd=project)
    assert again.output.strip().endswith("already initialized in " + str(project / ".engram"))


def test_a_gitattributes_inside_the_store_over_its_own_is_named_where_it_is(project: Path) -> None:
    inner = project / ".engram" / "events" / ".gitattributes"
    with Engram(cwd=project) as engram:
        engram.remember("a memory to convert", kind="fact")
        engram.commit()
    inner.write_text("*.jsonl ident\n")
    found = [f for f in findings(project) if f["check"] == "attributes"]
    assert found and all(f["level"] == "error" and "`ident`" in f["message"] for f in found)
    assert all(str(inner) in f["fix"] and "remove them there" in f["fix"] for f in found)
