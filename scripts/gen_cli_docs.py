"""Generate docs/cli.md from the `engram` command's own `--help`, and the configuration
snippets in docs/clients/ from what `engram mcp install` writes.

    .venv/bin/python scripts/gen_cli_docs.py           # rewrite docs/cli.md and the snippets
    .venv/bin/python scripts/gen_cli_docs.py --check   # exit 1 if any is stale (tests run this)

Every command and subcommand's help text is what `engram ... --help` prints at a fixed width, so
the page cannot drift from the code. A snippet sits between `<!-- install: ARGS -->` and
`<!-- /install -->` in a client's page: the text `engram mcp install ARGS --dry-run` computes in
a scratch home and repository, with this installation's Python shown as
`/home/you/.local/engram/bin/python` (what the documented install gives).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import mock

import click
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "cli.md"
sys.path.insert(0, str(ROOT))

HEADER = """\
# Command reference

Generated from `engram --help` by `scripts/gen_cli_docs.py`; a test fails when this page differs
from what the code prints. Every command also answers `-h`/`--help`; `engram`, or a group such
as `engram task`, run without a command prints its help on stderr (exit status 2).

Exit status: 0 on success, 1 when a command ran and found a problem (damage, a failed sync,
caches not current with `--check`), 2 for bad input or a missing store, 3 when `engram resume`
has several active tasks to choose from (with `--json` it prints them as JSON on stdout).

"""


def commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name in sorted(group.commands):
        command = group.commands[name]
        if getattr(command, "hidden", False):
            continue
        found.append((*path, name))
        if isinstance(command, click.Group):
            found += commands(command, (*path, name))
    return found


def help_text(main: click.Group, path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(
        main, [*path, "--help"], prog_name="engram", terminal_width=100, catch_exceptions=False
    )
    if result.exit_code != 0:
        raise SystemExit(f"engram {' '.join(path)} --help failed: {result.output}")
    return result.output.rstrip() + "\n"


def render() -> str:
    from engram.cli.main import main

    paths = commands(main)
    parts = [HEADER]
    parts.append("| command | what it does |\n|---|---|\n")
    for path in paths:
        command: click.Command = main
        for name in path:
            command = command.commands[name]  # type: ignore[attr-defined]
        short = command.get_short_help_str(limit=90).replace("|", "\\|")
        anchor = "engram-" + "-".join(path)
        parts.append(f"| [`engram {' '.join(path)}`](#{anchor}) | {short} |\n")
    parts.append("\n## engram\n\n```text\n" + help_text(main, ()) + "```\n")
    for path in paths:
        parts.append(f"\n## engram {' '.join(path)}\n\n```text\n{help_text(main, path)}```\n")
    return "".join(parts)


CLIENT_PAGES = ROOT / "docs" / "clients"
SNIPPET = re.compile(
    r"(<!-- install: (?P<args>[^>]*?) -->\n)(?P<body>.*?)(<!-- /install -->)", re.DOTALL
)
SHOWN_PYTHON = "/home/you/.local/engram/bin/python"


def install_snippet(args: str) -> str:
    """What `engram mcp install ARGS` writes to a client's empty configuration, as a fenced
    block. The user-level entry names this installation's console script, shown where the
    documented install puts it."""
    from engram.mcp.install import install

    words = args.split()
    client = words[0]
    shown = Path(SHOWN_PYTHON).parent / "engram"
    with (
        tempfile.TemporaryDirectory() as scratch,
        mock.patch("engram.base.entries.console_script", return_value=shown),
    ):
        repo = Path(scratch) / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        changes = install(
            client,
            project="--project" in words,
            cwd=repo,
            home=Path(scratch) / "home",
            dry_run=True,
        )
    text = changes[0].text.replace(sys.executable, SHOWN_PYTHON)
    language = "toml" if changes[0].path.suffix == ".toml" else "json"
    return f"```{language}\n{text.rstrip()}\n```\n"


def client_pages() -> dict[Path, str]:
    """Each client page with its install snippets as the installer writes them now."""
    pages = {}
    for page in sorted(CLIENT_PAGES.glob("*.md")):
        text = page.read_text(encoding="utf-8")
        pages[page] = SNIPPET.sub(
            lambda m: m.group(1) + install_snippet(m.group("args")) + m.group(4), text
        )
    return pages


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/cli.md is stale")
    args = parser.parse_args()
    text = render()
    pages = {TARGET: text, **client_pages()}
    if args.check:
        stale = [
            path
            for path, new in pages.items()
            if (path.read_text(encoding="utf-8") if path.exists() else "") != new
        ]
        for path in stale:
            print(
                f"{path.relative_to(ROOT)} is stale; run `python scripts/gen_cli_docs.py`",
                file=sys.stderr,
            )
        return 1 if stale else 0
    for path, new in pages.items():
        if not path.exists() or path.read_text(encoding="utf-8") != new:
            path.write_text(new, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)} ({len(new.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
