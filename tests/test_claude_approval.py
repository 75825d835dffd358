"""Claude Code's approval of a project's server is per person: the installer keeps it out of
git, so committing what the installer wrote, the way people do, leaves it approved."""

from __future__ import annotations

from pathlib import Path

from conftest import cli, git


def test_committing_the_installers_files_with_add_all_keeps_the_approval(project: Path) -> None:
    from engram.cli.main import main
    from engram.cli.mcp import register
    from engram.mcp.install import approved

    if "serve" not in main.commands:
        register(main)
    result = cli("mcp", "install", "claude", "--project", "--hooks", "--approve", cwd=project)
    assert result.exit_code == 0, result.output
    last = result.output.strip().splitlines()[-1]
    assert "Commit .mcp.json and .claude/settings.json so teammates get it" in last
    assert "never commit .claude/settings.local.json" in last
    assert ".claude/settings.local.json kept out of git" in result.output
    exclude = project / ".git" / "info" / "exclude"
    assert "/.claude/settings.local.json" in exclude.read_text().splitlines()
    git(project, "add", "-A")
    git(project, "commit", "-qm", "Connect Engram")
    committed = git(project, "ls-files").splitlines()
    assert ".mcp.json" in committed and ".claude/settings.json" in committed
    assert ".claude/settings.local.json" not in committed
    assert git(project, "status", "--porcelain") == ""
    assert approved(project, "engram")
    again = cli("mcp", "install", "claude", "--project", "--approve", cwd=project)
    assert "kept out of git" not in again.output  # once is enough
    assert exclude.read_text().count("settings.local.json") == 1
