"""Every test runs with its own HOME, ENGRAM_HOME and an empty git configuration.

Nothing a test does can touch the real home directory or be steered by the developer's own git
config (pygit2's own test suite blanks its config search path the same way).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pygit2
import pytest
from click.testing import CliRunner, Result
from pygit2.enums import ConfigLevel

# Before Engram is imported: what the test process itself caches (the compiled code of Engram's
# dataclasses, `engram.base.classcode`) goes to a directory of its own, not the real ~/.cache.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="engram-tests-cache-")

from engram.api import Engram  # noqa: E402

ACTOR = "Test Agent <agent@example.com>"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test User",
    "GIT_AUTHOR_EMAIL": "user@example.com",
    "GIT_COMMITTER_NAME": "Test User",
    "GIT_COMMITTER_EMAIL": "user@example.com",
}


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path / "home"
    home.mkdir()
    empty = tmp_path / "empty-gitconfig"
    empty.write_text("")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ENGRAM_HOME", str(home / ".engram"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("GIT_CONFIG_SYSTEM", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("ENGRAM_ACTOR", ACTOR)
    monkeypatch.setenv("ENGRAM_MACHINE", "testbox")
    monkeypatch.delenv("ENGRAM_SESSION", raising=False)
    for name, value in GIT_ENV.items():
        monkeypatch.setenv(name, value)
    saved = {}
    for level in (ConfigLevel.GLOBAL, ConfigLevel.XDG, ConfigLevel.SYSTEM):
        saved[level] = pygit2.settings.search_path[level]
        pygit2.settings.search_path[level] = str(tmp_path / "no-git-config")
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    for level, value in saved.items():
        pygit2.settings.search_path[level] = value


def git(cwd: Path, *args: str, check: bool = True) -> str:
    """Plain git, as a user would run it."""
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for name, text in (files or {"README.md": "a project\n"}).items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


@pytest.fixture
def home_store() -> Engram:
    """An initialised personal store."""
    engram = Engram()
    engram.init()
    return engram


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git repository with an initialised project store."""
    repo = make_repo(tmp_path / "project")
    Engram(cwd=repo).init(project=True)
    return repo


def cli(*args: str, input: str | None = None, cwd: Path | None = None) -> Result:
    from engram.cli.main import main

    argv = (["-C", str(cwd)] if cwd else []) + list(args)
    return CliRunner().invoke(main, argv, input=input, catch_exceptions=False)


def run_engram(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """The real `engram` command in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "engram", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


def foreign_events(root: Path, *events: dict[str, Any]) -> list[str]:
    """Lines another clone wrote, as a pull brings them: appended to a writer file of its own
    in the store at `root`. Each dict has `kind` and `data`, and may set `time`, `actor`,
    `machine` and `session`. Returns the event ids."""
    from engram.storage import events as ev

    path = root / "events" / "2026" / "01" / "foreign-writer.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    ids = []
    with path.open("ab") as handle:
        for number, spec in enumerate(events):
            event = ev.Event(
                id=ev.new_event_id(),
                kind=spec["kind"],
                clock=ev.next_clock(0) + number,
                time=spec.get("time", ev.format_time(ev.utc_now())),
                actor=spec.get("actor", "Other <other@example.com>"),
                session=spec.get("session"),
                machine=spec.get("machine", "elsewhere"),
                data=spec["data"],
            )
            handle.write(event.to_line())
            ids.append(event.id)
    return ids


def markdown_sections(
    text: str,
    *,
    nested: bool = False,
) -> tuple[list[str], dict[str, list[str]]]:
    """The headings of `text` parsed as Markdown, and the plain text of each list item under
    each heading. Fails on any raw HTML, quote, fence, code block or rule in it, and on a list
    inside a list item unless `nested`."""
    import html
    import re

    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark").enable("table")
    tokens = parser.parse(text)
    assert not [
        t.type
        for t in tokens
        if t.type in ("html_block", "blockquote_open", "fence", "code_block", "hr", "table_open")
    ]
    assert not [c.type for t in tokens for c in t.children or () if c.type == "html_inline"]

    def shown(source: str) -> str:
        return " ".join(html.unescape(re.sub(r"<[^>]+>", "", parser.renderInline(source))).split())

    headings: list[str] = []
    items: dict[str, list[str]] = {}
    depth = 0
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            assert token.level == 0, "a heading inside a list item"
            headings.append(shown(tokens[index + 1].content))
            items[headings[-1]] = []
        elif token.type == "list_item_open":
            depth += 1
            assert depth == 1 or nested, "a list inside a list item"
            items[headings[-1]].append(
                shown(next(t for t in tokens[index:] if t.type == "inline").content)
            )
        elif token.type == "list_item_close":
            depth -= 1
    return headings, items


_FIGURES = pytest.StashKey[list[str]]()


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Record a measured figure (kills survived, events found, ...): printed at the end of the
    run, so that CI's log shows it whatever the capture settings."""
    found = request.config.stash.setdefault(_FIGURES, [])

    def record(text: str) -> None:
        found.append(f"{request.node.name}: {text.strip()}")

    return record


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    found = config.stash.get(_FIGURES, [])
    if found:
        terminalreporter.section("figures")
        for line in found:
            terminalreporter.write_line(line)
