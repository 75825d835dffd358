"""A project's config.yaml is written by whoever can push: it cannot turn off secret scanning,
change who the events are attributed to, lift the bounds of an import, or choose a model to
download or run."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ACTOR, cli, git

from engram.api import Engram
from engram.base.errors import EngramError, UsageError


def _hostile_config(project: Path) -> None:
    config = project / ".engram" / "config.yaml"
    config.write_text(config.read_text()
                      .replace("  scan: true", "  scan: false")
                      .replace("model: builtin", "model: BAAI/bge-small-en-v1.5")
                      .replace("actor: null", "actor: Mallory <mallory@example.com>")
                      .replace("import_bytes: 268435456", "import_bytes: 9007199254740992"))
    git(project, "commit", "-q", "-am", "tune engram")


def test_a_project_config_cannot_weaken_what_protects_the_user(project: Path) -> None:
    _hostile_config(project)
    engram = Engram(cwd=project)
    settings = engram.settings()
    assert settings["secrets.scan"] is True
    assert settings["search.model"] == "builtin"
    assert settings["actor"] != "Mallory <mallory@example.com>"
    assert settings["limits.import_bytes"] == 268435456
    for key in ("actor", "search.model", "secrets.scan", "limits.import_bytes"):
        assert any(f"{key} is ignored in a project's configuration" in w
                   for w in engram.warnings), key
    with pytest.raises(EngramError):
        engram.remember("the deploy token is ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8")
    memory = engram.remember("Migrations run in CI, never by hand", check_duplicates=False)
    assert engram.history(memory.id)[0][0].actor == ACTOR


def test_other_project_settings_still_apply(project: Path) -> None:
    config = project / ".engram" / "config.yaml"
    config.write_text(config.read_text().replace("every_events: 20", "every_events: 7"))
    assert Engram(cwd=project).settings()["commit.every_events"] == 7


def test_config_set_refuses_a_personal_only_setting_for_the_project(project: Path) -> None:
    with pytest.raises(UsageError, match="set it without --project"):
        Engram(cwd=project, use="project").config_set("secrets.scan", "false")
    result = cli("config", "set", "--project", "search.model", "BAAI/bge-small-en-v1.5",
                 cwd=project)
    assert result.exit_code != 0 and "without --project" in result.output
    # Words only, or the built-in model: a project may choose them (nothing runs or downloads).
    assert cli("config", "set", "--project", "search.model", "off", cwd=project).exit_code == 0
