"""Memories checked against the code they cite: citations pinned at write time, freshness at
read time (recall, list, get, resume, `engram stale`, the MCP tools), in real repositories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import cli, foreign_events, git, make_repo

from engram.api import Engram
from engram.storage import events as ev
from tests.test_mcp import call, connect, fail, run

RETRY = "def retry(call):\n    for attempt in range(3):\n        call()\n"
MIGRATE = "#!/bin/sh\necho migrate\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = make_repo(
        tmp_path / "repo",
        {
            "README.md": "a project\n",
            "payments/retry.py": RETRY,
            "scripts/migrate.sh": MIGRATE,
            "docs/setup.md": "set up\n",
            ".gitignore": "secret.env\n",
        },
    )
    Engram(cwd=path).init(project=True)
    return path


def commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def stale_json(repo: Path, *args: str) -> dict[str, dict]:
    result = cli("stale", "--json", *args, cwd=repo)
    assert result.exit_code == 0, result.output
    return {row["id"]: row for row in json.loads(result.output)}


def test_paths_a_memory_names_are_pinned_and_untracked_ones_are_not(repo: Path) -> None:
    (repo / "secret.env").write_text("TOKEN=1\n")
    (repo / "draft.py").write_text("x = 1\n")
    engram = Engram(cwd=repo)
    memory = engram.remember(
        "payments/retry.py::retry retries three times; secret.env and "
        "draft.py hold nothing; see https://example.com/a/b.py"
    )
    head = git(repo, "rev-parse", "HEAD").strip()
    blob = git(repo, "rev-parse", "HEAD:payments/retry.py").strip()
    assert list(memory.citations) == [
        {"path": "payments/retry.py", "commit": head, "blob": blob, "symbol": "retry"}
    ]
    # The event on disk holds the citation (what a clone reads), not a copy of the file.
    events = "".join(p.read_text() for p in (repo / ".engram").rglob("*.jsonl"))
    assert blob in events and "for attempt" not in events

    refused = cli("remember", "the env file", "--cite", "secret.env", cwd=repo)
    assert refused.exit_code == 2 and "not a file git tracks" in refused.output
    for wrong, words in (
        ("../outside.py", "is outside the repository"),
        ("/etc/passwd", "is outside the repository"),
        ("payments/retry.py::nowhere", "is not in payments/retry.py"),
        ("payments/retry.py:99", "has 3 lines"),
        (".git/config", "not in .git"),
    ):
        refused = cli("remember", "a fact", "--cite", wrong, cwd=repo)
        assert refused.exit_code == 2 and words in refused.output, (wrong, refused.output)
    assert len(engram.memories()) == 1  # nothing half-written

    done = cli("remember", "migrations first", "--cite", "scripts/migrate.sh:2", cwd=repo)
    assert done.exit_code == 0 and "cites scripts/migrate.sh" in done.output


def test_cite_on_the_command_line_is_relative_to_the_current_directory(repo: Path) -> None:
    here = repo / "payments"
    done = cli("remember", "retries back off", "--cite", "retry.py::retry", cwd=here)
    assert done.exit_code == 0, done.output
    assert "cites payments/retry.py" in done.output
    absolute = cli(
        "remember", "migrations run first", "--cite", str(repo / "scripts/migrate.sh"), cwd=here
    )
    assert absolute.exit_code == 0 and "cites scripts/migrate.sh" in absolute.output
    outside = cli("remember", "a fact", "--cite", "../../x.py", cwd=here)
    assert outside.exit_code == 2
    assert outside.output.strip() == (
        f"error: --cite '../../x.py' is outside the repository ({repo}); cite a file inside it"
    )
    cited = {
        m.content: [c["path"] for c in m.citations] for m in Engram(cwd=repo).memories()
    }  # stored relative to the repository's top, whatever directory named them
    assert cited == {
        "retries back off": ["payments/retry.py"],
        "migrations run first": ["scripts/migrate.sh"],
    }
    # The MCP tool and the library keep paths relative to the top (test_the_mcp_tools_...).
    refused = cli("remember", "a fact", "--cite", "retry.py", cwd=repo)
    assert refused.exit_code == 2 and "not a file git tracks" in refused.output


def test_a_file_is_cited_once_in_its_most_precise_form(repo: Path) -> None:
    done = cli(
        "remember",
        "payments/retry.py retries; see payments/retry.py:2",
        "--cite",
        "payments/retry.py::retry",
        "--json",
        cwd=repo,
    )
    citations = json.loads(done.output)["citations"]
    assert [(c["path"], c.get("line"), c.get("symbol")) for c in citations] == [
        ("payments/retry.py", None, "retry"),
        ("payments/retry.py", 2, None),
    ]  # the whole file the text names adds nothing to these
    shown = cli(
        "remember", "scripts/migrate.sh runs them", "--cite", "scripts/migrate.sh:2", cwd=repo
    )
    assert "  cites scripts/migrate.sh (as at HEAD)" in shown.output.splitlines()
    twice = cli(
        "remember",
        "the loop runs three times",
        "--cite",
        "payments/retry.py::retry",
        "--cite",
        "payments/retry.py:2",
        cwd=repo,
    )
    assert "  cites payments/retry.py (as at HEAD)" in twice.output.splitlines()


def test_edits_renames_and_deletions_mark_memories_and_lower_them(repo: Path) -> None:
    engram = Engram(cwd=repo)
    retry = engram.remember("payments/retry.py retries three times with jitter").memory
    migrate = engram.remember("run scripts/migrate.sh before the web server starts").memory
    setup = engram.remember("docs/setup.md explains how the web server is set up").memory
    plain = engram.remember("the web server retries nothing by itself").memory
    assert all(m.citations for m in (retry, migrate, setup)) and not plain.citations
    first = git(repo, "rev-parse", "HEAD").strip()
    assert stale_json(repo) == {}

    (repo / "payments/retry.py").write_text(RETRY.replace("3", "5"))
    commit(repo, "Retry five times")
    (repo / "payments/retry.py").write_text(RETRY.replace("3", "5") + "# jitter removed\n")
    commit(repo, "Drop the jitter")
    git(repo, "mv", "scripts/migrate.sh", "scripts/db-migrate.sh")
    commit(repo, "Rename the migration script")
    git(repo, "rm", "-q", "docs/setup.md")
    commit(repo, "Remove the setup page")

    found = stale_json(repo)
    assert set(found) == {retry.id, migrate.id, setup.id}
    states = {i: row["freshness"]["state"] for i, row in found.items()}
    assert states == {retry.id: "changed", migrate.id: "moved", setup.id: "missing"}
    change = found[retry.id]["freshness"]["files"][0]["change"]
    assert change["commits"] == 2 and change["subject"] == "Drop the jitter"
    assert change["author"] == "Test User"
    moved = found[migrate.id]["freshness"]["files"][0]
    assert moved["now_path"] == "scripts/db-migrate.sh"
    assert list(found)[0] == setup.id  # the newest change first
    assert found[retry.id]["confirm"].startswith(f"engram update {retry.id[:8]}")
    assert found[retry.id]["retire"].startswith(f"engram forget {retry.id[:8]} --reason")

    doctor = cli("doctor", "--json", cwd=repo)
    findings = [f for s in json.loads(doctor.stdout)["stores"] for f in s["findings"]]
    assert [f["message"] for f in findings if f["check"] == "stale-memories"] == [
        "3 memories cite code that changed since written"
    ]
    text = cli("stale", cwd=repo).output
    assert "[moved]" in text and "scripts/db-migrate.sh" in text and "engram forget" in text

    # Recall: every memory still comes back, the stale ones marked and a little lower.
    hits = engram.recall("web server retries", k=10)
    by_id = {h.memory.id: h for h in hits}
    assert {retry.id, migrate.id, setup.id, plain.id} <= set(by_id)
    assert by_id[setup.id].freshness.state == "missing"
    assert by_id[plain.id].freshness is None
    assert by_id[setup.id].score == pytest.approx(by_id[setup.id].evidence.score * 0.85)
    shown = cli("recall", "web server", "--explain", cwd=repo).output
    assert "[stale: moved]" in shown and "Rename the migration script" in shown
    listed = json.loads(cli("list", "--json", cwd=repo).output)
    assert {m["id"]: m.get("freshness", {}).get("state") for m in listed}[setup.id] == "missing"
    got = cli("get", retry.id[:8], cwd=repo).output
    assert "payments/retry.py changed in 2 commits, last 'Drop the jitter'" in got

    resumed = engram.resume(restore="full").markdown
    line = next(x for x in resumed.splitlines() if "scripts/migrate.sh" in x)
    assert "stale: the code it cites moved" in line
    assert "stale" not in next(x for x in resumed.splitlines() if plain.id[:8] in x)

    # As of the first commit nothing had changed; `--at` judges there.
    assert stale_json(repo, "--at", first) == {}
    assert set(stale_json(repo, "--at", "HEAD~2")) == {retry.id}
    refused = cli("stale", "--at", "no-such-rev", cwd=repo)
    assert refused.exit_code == 2 and "is not a commit" in refused.output

    # Confirming re-pins the citations to HEAD; retiring takes it off the list.
    engram.update(retry.id, "payments/retry.py retries five times, no jitter")
    engram.forget(setup.id, reason="the page is gone")
    assert set(stale_json(repo)) == {migrate.id}


def test_confirming_keeps_the_files_cited_with_cite_and_follows_their_moves(repo: Path) -> None:
    engram = Engram(cwd=repo)
    cited = ["payments/retry.py::retry", "scripts/migrate.sh", "docs/setup.md"]
    memory = engram.remember("deploys retry, then migrate", cite=cited).memory
    git(repo, "mv", "scripts/migrate.sh", "scripts/db-migrate.sh")
    (repo / "payments/retry.py").write_text(RETRY.replace("3", "5"))
    git(repo, "rm", "-q", "docs/setup.md")
    commit(repo, "Move, edit and remove what the memory cites")
    assert stale_json(repo)[memory.id]["freshness"]["state"] == "missing"

    # The confirmation `engram stale` offers: the same text, pinned again at HEAD.
    result = cli("update", memory.id[:8], memory.content, cwd=repo)
    assert result.exit_code == 0, result.output
    head = git(repo, "rev-parse", "HEAD").strip()
    pinned = engram.get(memory.id).citations
    assert [(c["path"], c.get("symbol"), c["commit"]) for c in pinned] == [
        ("payments/retry.py", "retry", head),
        ("scripts/db-migrate.sh", None, head),
    ]
    assert stale_json(repo) == {}

    # A corrected text keeps them too, and adds what it names.
    engram.update(memory.id, "deploys retry (see README.md), then migrate")
    paths = [c["path"] for c in engram.get(memory.id).citations]
    assert paths == ["payments/retry.py", "scripts/db-migrate.sh", "README.md"]


def test_a_shallow_clone_answers_unknown(repo: Path, tmp_path: Path) -> None:
    engram = Engram(cwd=repo)
    memory = engram.remember("payments/retry.py retries three times").memory
    engram.commit()
    (repo / "payments/retry.py").write_text(RETRY.replace("3", "4"))
    commit(repo, "Retry four times")
    assert set(stale_json(repo)) == {memory.id}

    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", repo.as_uri(), str(shallow))
    clone = Engram(cwd=shallow)
    verdict = clone.freshness([clone.get(memory.id)])[memory.id]
    assert verdict.state == "unknown" and "shallow" in verdict.files[0].why
    assert stale_json(shallow) == {}  # not claimed stale, nor fresh
    hit = next(h for h in clone.recall("retries") if h.memory.id == memory.id)
    assert hit.freshness.state == "unknown" and hit.factor == 1.0


def test_bad_citations_in_a_store_are_dropped_not_fatal(repo: Path) -> None:
    engram = Engram(cwd=repo)
    good = engram.remember("payments/retry.py retries three times").memory
    cited = good.citations[0]
    foreign_events(
        repo / ".engram",
        {
            "kind": "memory.created",
            "data": {
                "memory": ev.new_entity_id(),
                "content": "another fact about payments",
                "kind": "fact",
                "citations": [
                    {"path": "../../etc/passwd", "commit": "0" * 40, "blob": "0" * 40},
                    {"path": "x.py", "commit": "nothex", "blob": "0" * 40},
                    "not a mapping",
                    {"path": ".git/config", "commit": "0" * 40, "blob": "0" * 40},
                    {
                        "path": "payments/retry.py",
                        "commit": cited["commit"],
                        "blob": cited["blob"],
                        "line": True,
                    },
                    dict(cited),
                ],
            },
        },
    )
    result = cli("list", "--json", cwd=repo)
    assert result.exit_code == 0, result.output
    other = next(m for m in json.loads(result.stdout) if m["content"].startswith("another"))
    # Only its well-formed citation is kept; the others never reach a lookup.
    assert [c["path"] for c in other["citations"]] == ["payments/retry.py"]
    assert cli("stale", cwd=repo).exit_code == 0


def test_the_mcp_tools_cite_and_mark(repo: Path) -> None:
    async def scenario() -> None:
        async with connect(repo) as client:
            made = await call(
                client,
                "memory_remember",
                content="retries live in payments/retry.py",
                cite=["scripts/migrate.sh"],
            )
            memory = made["memory"]
            assert memory["cites"] == ["scripts/migrate.sh", "payments/retry.py"]
            error = await fail(client, "memory_remember", content="x", cite=["secret.env"])
            assert "not a file git tracks" in error
            (repo / "payments/retry.py").write_text(RETRY.replace("3", "9"))
            commit(repo, "Retry nine times")
            hits = (await call(client, "memory_recall", query="retries"))["hits"]
            assert hits[0]["memory"]["freshness"] == "changed"
            assert "payments/retry.py changed" in hits[0]["memory"]["stale_because"]
            got = (await call(client, "memory_get", id=memory["id"]))["memory"]
            assert "Retry nine times" in got["stale_because"]
            listed = (await call(client, "memory_list"))["memories"]
            assert listed[0]["freshness"] == "changed"

    run(scenario)
