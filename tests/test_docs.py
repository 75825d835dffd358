"""The README's commands are the ones CI runs and the ones that work."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()


def readme_commands() -> list[str]:
    section = README.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section)


def test_readme_has_exactly_two_set_up_commands() -> None:
    assert len(readme_commands()) == 2


def test_ci_runs_the_readme_test_command() -> None:
    test_command = readme_commands()[1]
    assert "pytest" in test_command
    assert test_command in (ROOT / ".ci" / "run").read_text()


def test_the_readme_demo_command_works(tmp_path: Path) -> None:
    """Run the demo part of the first command against the engram installed here."""
    demo = readme_commands()[0]
    body = demo[demo.index("(") + 1 : demo.rindex(")")]
    body = body.replace(
        'PATH="$PWD/.venv/bin:$PATH"', f'PATH="{Path(sys.executable).parent}:$PATH"'
    )
    done = subprocess.run(
        ["bash", "-c", body],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=os.environ.copy(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Use Postgres for the job queue" in done.stdout
    assert "initialize personal store" in done.stdout


def test_the_command_reference_is_what_the_commands_print() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_cli_docs.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_the_architecture_page_lists_the_layers_and_modules_of_the_code() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_arch_docs.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_the_guides_show_what_the_commands_print() -> None:
    """Rerun the guides' console examples (two machines, a remote, project repositories)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_guides.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr


def test_every_doc_link_in_the_readme_and_docs_points_at_a_file() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_the_http_token_recipe_runs_as_written_on_a_fresh_home(tmp_path: Path) -> None:
    """docs/mcp.md's line that makes a token file, run by bash in a HOME with no ~/.config."""
    block = (ROOT / "docs" / "mcp.md").read_text().split("## Over HTTP", 1)[1]
    [line] = [x for x in block.splitlines() if "token_urlsafe" in x and "> ~/" in x]
    home = tmp_path / "fresh"
    home.mkdir()
    done = subprocess.run(
        ["bash", "-c", line],
        env={"HOME": str(home), "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    token = home / ".config" / "engram" / "token"
    assert len(token.read_text().strip()) == 43 and token.stat().st_mode & 0o077 == 0
