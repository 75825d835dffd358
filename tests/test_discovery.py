"""Discovery citations copy cited lines into a memory, which is pushed: only lines of files git
tracks are copied, and those are scanned for secrets like the rest of a write. Real git
repositories; what is checked is what lands in the store's event files."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import git, make_repo

from engram.api import Engram
from engram.base.errors import SecretError, UsageError
from engram.domain import discovery

API_KEY = "Zq7vR2mXk9Lp4Wd8"  # a value the secret scanner recognises after API_KEY=
SALT = "pepper-moon-42"  # a value it does not: only the tracking rule keeps it out
PASSWORD = "Hx4tW9qLm2Zr7Kd3"
CONFIG = "DEBUG = True\nTIMEOUT = 30\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A project whose `.env` is ignored by git and holds credentials."""
    path = make_repo(tmp_path / "repo", {".gitignore": ".env\n", "config.py": CONFIG})
    Engram(cwd=path).init(project=True)
    (path / ".env").write_text(f"API_KEY={API_KEY}\nSESSION_SALT={SALT}\n")
    return path


def stored(repo: Path) -> str:
    """Everything in the project store's event files, as it would be pushed."""
    return "\n".join(p.read_text() for p in sorted((repo / ".engram").rglob("*.jsonl")))


def record(
    repo: Path, path: str, start: int, end: int | None = None, *, redact: bool = False
) -> tuple[str, list[discovery.Citation]]:
    with Engram(cwd=repo) as engram:
        remembered, pinned = discovery.record(
            engram,
            f"A fact about {path}",
            [{"path": path, "start_line": start, "end_line": end}],
            redact=redact,
        )
        return remembered.memory.content, pinned


def check(repo: Path, content: str) -> list[discovery.CitationCheck]:
    with Engram(cwd=repo) as engram:
        found = [d for d in discovery.recent(engram) if d.memory.content == content]
        return discovery.check(engram, found[0])


def test_an_ignored_file_is_cited_without_its_lines(repo: Path) -> None:
    content, pinned = record(repo, ".env", 1, 2)
    head = git(repo, "rev-parse", "HEAD").strip()
    assert content == f"A fact about .env\n\ncite: .env:1-2@{head}"
    assert pinned[0].excerpt is None
    assert pinned[0].note == "no excerpt: .env is ignored by git"
    events = stored(repo)
    assert f"cite: .env:1-2@{head}" in events
    assert API_KEY not in events and SALT not in events and "SESSION_SALT" not in events
    # A later check finds the citation and says why it cannot judge it.
    [result] = check(repo, content)
    assert result.status == "unknown"
    assert result.reason.startswith(".env was not tracked by git at commit")


def test_an_untracked_file_is_cited_without_its_lines_until_git_add(repo: Path) -> None:
    (repo / "notes.py").write_text(f"SALT = {SALT!r}\n")
    content, pinned = record(repo, "notes.py", 1)
    assert "  |" not in content and SALT not in stored(repo)
    assert pinned[0].note == (
        "no excerpt: notes.py is not tracked by git (git add it to have its lines kept)"
    )
    # Added to the index, it is tracked: its uncommitted lines are kept, since HEAD lacks them.
    git(repo, "add", "notes.py")
    content, pinned = record(repo, "notes.py", 1)
    assert pinned[0].note is None
    assert content.endswith(f"\n  | SALT = {SALT!r}")
    assert [c.status for c in check(repo, content)] == ["valid"]


def test_files_inside_dot_git_are_never_copied(repo: Path) -> None:
    git(repo, "remote", "add", "origin", "https://example.com/team/private-repo.git")
    lines = (repo / ".git" / "config").read_text().splitlines()
    _, pinned = record(repo, ".git/config", 1, len(lines))
    events = stored(repo)
    assert "private-repo" not in events and "repositoryformatversion" not in events
    assert "cite: .git/config:1-" in events
    assert pinned[0].note == "no excerpt: .git/config is inside .git/, git's own files"


def test_a_link_to_an_ignored_file_is_judged_by_the_file_it_leads_to(repo: Path) -> None:
    (repo / "settings.env").symlink_to(".env")
    git(repo, "add", "settings.env")  # git tracks the link, not what it points at
    git(repo, "commit", "-q", "-m", "link the settings")
    _, pinned = record(repo, "settings.env", 1, 2)
    events = stored(repo)
    assert "cite: settings.env:1-2@" in events
    assert API_KEY not in events and SALT not in events
    assert pinned[0].note == "no excerpt: settings.env (a link to .env) is ignored by git"


@pytest.mark.parametrize(
    "path, message",
    [
        ("../outside.txt", "must be a path inside the repository"),
        ("{outside}", "must be a path inside the repository"),
        ("link.txt", "citation path 'link.txt' leads outside the repository"),
        ("linked/outside.txt", "citation path 'linked/outside.txt' leads outside the repository"),
    ],
)
def test_a_path_leading_outside_the_work_tree_is_refused(
    repo: Path, path: str, message: str
) -> None:
    outside = repo.parent / "outside.txt"
    outside.write_text(f"SESSION_SALT={SALT}\n")
    (repo / "link.txt").symlink_to(outside)
    (repo / "linked").symlink_to(repo.parent, target_is_directory=True)
    git(repo, "add", "link.txt")
    git(repo, "commit", "-q", "-m", "a link out of the repository")
    before = stored(repo)
    with pytest.raises(UsageError) as error:
        record(repo, path.format(outside=outside), 1)
    assert message in str(error.value) and "\n" not in str(error.value)
    assert stored(repo) == before  # nothing written
    assert SALT not in stored(repo)


def test_uncommitted_lines_of_a_tracked_file_are_scanned_for_secrets(repo: Path) -> None:
    (repo / "config.py").write_text(CONFIG + f'PASSWORD = "{PASSWORD}"\n')
    before = stored(repo)
    with pytest.raises(SecretError) as error:
        record(repo, "config.py", 2, 3)
    # The usual one-line message, counting lines as the file does, never quoting the secret.
    assert str(error.value) == (
        "citation config.py:2-3 contains what looks like a secret "
        "(password) at line 3, column 13; remove it, or pass --redact "
        "to store it as [REDACTED:password]"
    )
    assert stored(repo) == before

    content, pinned = record(repo, "config.py", 2, 3, redact=True)
    assert pinned[0].excerpt == ("TIMEOUT = 30", 'PASSWORD = "[REDACTED:password]"')
    assert content.endswith('\n  | TIMEOUT = 30\n  | PASSWORD = "[REDACTED:password]"')
    events = stored(repo)
    assert PASSWORD not in events and "[REDACTED:password]" in events
    # The redacted excerpt still matches the unchanged file, and follows it when it moves.
    assert [c.status for c in check(repo, content)] == ["valid"]
    (repo / "config.py").write_text("import os\n" + CONFIG + f'PASSWORD = "{PASSWORD}"\n')
    [moved] = check(repo, content)
    assert (moved.status, moved.moved_to) == ("moved", ((3, 4),))


def test_committed_lines_are_not_copied_into_the_memory(repo: Path) -> None:
    (repo / "config.py").write_text(CONFIG + f'PASSWORD = "{PASSWORD}"\n')
    git(repo, "commit", "-q", "-am", "a password in the code")
    content, pinned = record(repo, "config.py", 3)
    assert PASSWORD not in stored(repo)
    assert pinned[0].excerpt is None and pinned[0].note is None
    assert [c.status for c in check(repo, content)] == ["valid"]


def test_a_wrong_excerpt_is_refused_without_showing_lines_it_must_not(repo: Path) -> None:
    with Engram(cwd=repo) as engram:
        with pytest.raises(UsageError) as error:
            discovery.record(
                engram,
                "The salt",
                [{"path": ".env", "start_line": 2, "excerpt": "SESSION_SALT=guess"}],
            )
        assert str(error.value) == "the excerpt is not in .env as it is now; quote the file exactly"
        (repo / "config.py").write_text(CONFIG + f'PASSWORD = "{PASSWORD}"\n')
        with pytest.raises(UsageError) as error:
            discovery.record(
                engram,
                "The password",
                [{"path": "config.py", "start_line": 3, "excerpt": "PASSWORD = None"}],
            )
        message = str(error.value)
        assert "[REDACTED:password]" in message and PASSWORD not in message
