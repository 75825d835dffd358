"""Generate docs/cli.md from the `engram` command's own `--help`.

    .venv/bin/python scripts/gen_cli_docs.py           # rewrite docs/cli.md
    .venv/bin/python scripts/gen_cli_docs.py --check   # exit 1 if it is stale (tests run this)

Every command and subcommand's help text is what `engram ... --help` prints at a fixed width, so
the page cannot drift from the code.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import click
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "cli.md"
sys.path.insert(0, str(ROOT))

HEADER = """\
# Command reference

Generated from `engram --help` by `scripts/gen_cli_docs.py`; a test fails when this page differs
from what the code prints. Every command also answers `-h`/`--help`.

Exit status: 0 on success, 1 when a command ran and found a problem (damage, a failed sync,
caches not current with `--check`), 2 for bad input or a missing store, 3 when `engram resume`
has several active tasks to choose from.

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
    result = CliRunner().invoke(main, [*path, "--help"], prog_name="engram",
                                terminal_width=100, catch_exceptions=False)
    if result.exit_code != 0:
        raise SystemExit(f"engram {' '.join(path)} --help failed: {result.output}")
    return result.output.rstrip() + "\n"


def render() -> str:
    from engram.cli import main

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/cli.md is stale")
    args = parser.parse_args()
    text = render()
    if args.check:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != text:
            print(f"{TARGET.relative_to(ROOT)} is stale; run `python scripts/gen_cli_docs.py`",
                  file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
