"""A project's config.yaml is written by whoever can push: it cannot turn off secret scanning,
change who the events are attributed to, lift the bounds of an import, or choose a model to
download or run; and no value in it stops a command. Every number setting has a range; a value
out of it (or of the wrong type, or an unknown key) in a committed file is left out with a
one-line warning, while `engram config set` refuses it."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from conftest import ACTOR, cli, git, make_repo, run_engram
from test_mcp import call, connect
from test_sync import Server

from engram.api import Engram
from engram.base.config import SETTINGS, check_value, default_config_text, read_config
from engram.base.errors import EngramError, UsageError


def _hostile_config(project: Path) -> None:
    config = project / ".engram" / "config.yaml"
    config.write_text(
        config.read_text()
        .replace("  scan: true", "  scan: false")
        .replace("model: builtin", "model: BAAI/bge-small-en-v1.5")
        .replace("actor: null", "actor: Mallory <mallory@example.com>")
        .replace("import_bytes: 268435456", "import_bytes: 9007199254740992")
    )
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
        assert any(
            f"{key} is ignored in a project's configuration" in w for w in engram.warnings
        ), key
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
    result = cli(
        "config", "set", "--project", "search.model", "BAAI/bge-small-en-v1.5", cwd=project
    )
    assert result.exit_code != 0 and "without --project" in result.output
    # Words only, or the built-in model: a project may choose them (nothing runs or downloads).
    assert cli("config", "set", "--project", "search.model", "off", cwd=project).exit_code == 0


def test_every_number_setting_has_a_range_that_holds_its_default() -> None:
    numbers = [s for s in SETTINGS.values() if s.type in (int, float)]
    assert len(numbers) > 30
    template = default_config_text()
    for setting in numbers:
        assert setting.minimum is not None and setting.maximum is not None, setting.key
        assert setting.minimum <= setting.default <= setting.maximum, setting.key
        assert check_value(setting.key, setting.maximum) == setting.maximum
        for outside in (setting.maximum * 2 + 1, setting.minimum - 1):
            with pytest.raises(
                UsageError, match=f"^{setting.key} must be from {setting.bounds}, not "
            ):
                check_value(setting.key, setting.type(outside))
        assert f"({setting.bounds})\n" in template  # config.yaml says each range
    assert SETTINGS["recall.candidates"].bounds == "1 to 10000"


def test_config_set_refuses_a_value_out_of_range_and_leaves_the_file(project: Path) -> None:
    config = project / ".engram" / "config.yaml"
    before = config.read_bytes()
    for args in (
        ("--project", "recall.candidates", "10000000000"),
        ("--project", "recall.candidates", "0"),
        ("--project", "session.stale_minutes", "1e300"),
    ):
        done = run_engram("config", "set", *args, cwd=project)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert "must be from" in done.stderr and "not " in done.stderr
    assert config.read_bytes() == before
    assert (
        cli("config", "set", "--project", "recall.candidates", "10000", cwd=project).exit_code == 0
    )


def test_recall_k_listing_limits_and_a_pid_are_bounded(project: Path) -> None:
    Engram(cwd=project).remember("Deploys run from CI only", check_duplicates=False)
    for args, said in (
        (
            ("recall", "-k", "10000000000", "deploys"),
            "k must be a whole number from 1 to 1000, not 10000000000",
        ),
        (("log", "-n", "100000000000000000000"), "limit must be a whole number from 1 to 1000000"),
        (("list", "-n", "100000000000000000000"), "limit must be"),
        (
            ("session", "start", "--pid", "100000000000000000000000"),
            "pid must be a whole number from 1 to 2147483647",
        ),
    ):
        done = run_engram(*args, cwd=project)
        assert done.returncode == 2 and said in done.stderr, done.stderr
    assert (
        "Deploys run from CI" in run_engram("recall", "-k", "1000", "deploys", cwd=project).stdout
    )


HOSTILE = {  # setting: (the committed line, what the warning must say)
    "recall.candidates": (
        "  candidates: 10000000000",
        "recall.candidates must be from 1 to 10000, not 10000000000",
    ),
    "search.model": (
        "  model: https://models.example.com/evil.onnx",
        "search.model is ignored in a project's configuration",
    ),
    "commit.every_seconds": ("  every_seconds: 1e400", "commit.every_seconds must be"),
    "limits.tags": ("  tags: lots", "limits.tags must be a whole number, not 'lots'"),
}


def _push_hostile_config(server: Server, tmp_path: Path) -> None:
    """A teammate's clone commits a config.yaml with values out of range and pushes it."""
    mallory = tmp_path / "mallory"
    git(tmp_path, "clone", "-q", server.url, str(mallory))
    config = mallory / ".engram" / "config.yaml"
    lines = config.read_text().splitlines()
    for key, (line, _) in HOSTILE.items():
        name = key.rsplit(".", 1)[1]
        [at] = [i for i, text in enumerate(lines) if text.startswith(f"  {name}: ")]
        lines[at] = line
    lines.append("someday:\n  new_setting: 3")
    config.write_text("\n".join(lines) + "\n")
    git(mallory, "commit", "-q", "-am", "tune engram")
    git(mallory, "push", "-q", "origin", "main")


def test_a_pulled_config_out_of_range_is_ignored_with_a_warning_never_fatal(tmp_path: Path) -> None:
    root = tmp_path / "server"
    root.mkdir()
    server = Server(root, "daemon")
    try:
        origin = make_repo(tmp_path / "origin")
        Engram(cwd=origin).init(project=True)
        git(server.bare, "symbolic-ref", "HEAD", "refs/heads/main")
        git(origin, "push", "-q", server.url, "main")
        alice = tmp_path / "alice"
        git(tmp_path, "clone", "-q", server.url, str(alice))
        Engram(cwd=alice).remember(
            "Deploys run from CI, never from a laptop", check_duplicates=False
        )
        _push_hostile_config(server, tmp_path)
        git(alice, "pull", "-q", "--no-rebase", "origin", "main")
        assert "10000000000" in (alice / ".engram" / "config.yaml").read_text()

        for args in (
            ("recall", "deploys laptop"),
            ("status",),
            ("list",),
            ("config", "get", "recall.candidates"),
        ):
            done = run_engram(*args, cwd=alice)
            assert done.returncode == 0, (args, done.stderr)
            warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
            for _, said in HOSTILE.values():
                [line] = [w for w in warnings if said in w]
                assert str(alice / ".engram" / "config.yaml") in line
            assert any("unknown setting 'someday' is ignored" in w for w in warnings)
        assert "Deploys run from CI" in run_engram("recall", "deploys laptop", cwd=alice).stdout
        assert run_engram("config", "get", "recall.candidates", cwd=alice).stdout.startswith(
            "100\n"
        )
        settings = Engram(cwd=alice).settings()
        assert (settings["search.model"], settings["limits.tags"]) == ("builtin", 32)

        async def scenario() -> None:  # the MCP server over stdio lives on, and says why
            async with connect(alice) as client:
                for _ in range(2):
                    found = await call(client, "memory_recall", query="deploys laptop")
                    assert "Deploys run from CI" in found["hits"][0]["memory"]["content"]
                said = " ".join(found["warnings"] or [])
                stats = await call(client, "memory_stats")
                said += " ".join(stats["warnings"])
                assert "recall.candidates must be from 1 to 10000" in said, found

        anyio.run(scenario)
    finally:
        server.stop()


def test_a_committed_config_that_is_not_yaml_is_ignored_whole(project: Path) -> None:
    config = project / ".engram" / "config.yaml"
    config.write_text("<<<<<<< HEAD\nrecall:\n  candidates: 50\n=======\n")
    git(project, "commit", "-q", "-am", "a bad merge")
    done = run_engram("status", cwd=project)
    assert done.returncode == 0, done.stderr
    assert f"warning: {config} is not valid YAML" in done.stderr
    refused = run_engram("config", "set", "--project", "recall.candidates", "50", cwd=project)
    assert refused.returncode == 2 and "fix it by hand or restore it with git" in refused.stderr
    assert config.read_text().startswith("<<<<<<<")


def test_read_config_says_each_problem_once_in_one_line() -> None:
    data = (
        b"recall:\n  candidates: 0\n  weight_vector: .nan\nsearch:\n  model: ../m\n"
        b'actor: "two\\nlines"\nbogus: 1\n'
    )
    personal = read_config(data, where="config.yaml")
    assert personal.values == {}
    assert len(personal.warnings) == 5
    assert all("\n" not in w and w.startswith("config.yaml: ") for w in personal.warnings)
    project = read_config(data, where="config.yaml", project=True)
    assert sum("ignored in a project's configuration" in w for w in project.warnings) == 2
    assert read_config(b"\xff", where="c").warnings[0].startswith("c is not valid UTF-8")


def test_the_limits_page_gives_each_limit_its_declared_range() -> None:
    page = (Path(__file__).parent.parent / "docs" / "limits.md").read_text()
    for key, setting in SETTINGS.items():
        if key.startswith("limits."):
            assert f"| `{key}` | {setting.default} | {setting.bounds} |" in page, key
