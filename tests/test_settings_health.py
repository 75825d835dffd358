"""Settings that every command leaves out, and a model that cannot run, are reported where a
person looks: `engram doctor` names them with the line to edit or the command that fixes them,
`engram config set` refuses them, and `stats` names the model that answers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import cli

from engram.api import Engram


def _doctor() -> tuple[int, dict[str, Any]]:
    done = cli("doctor", "--json")
    return done.exit_code, json.loads(done.stdout)


def _findings(report: dict[str, Any], check: str) -> list[dict[str, Any]]:
    return [f for s in report["stores"] for f in s["findings"] if f["check"] == check]


def _config(home_store: Engram) -> Path:
    return home_store.personal.root / "config.yaml"


def _line_of(path: Path, start: str) -> int:
    lines = path.read_text().splitlines()
    [line] = [n for n, text in enumerate(lines, 1) if text.startswith(start)]
    return line


def test_a_config_yaml_that_is_not_yaml_is_a_doctor_warning(home_store: Engram) -> None:
    config = _config(home_store)
    with config.open("a") as handle:
        handle.write(":\n  - [unclosed\n")
    assert "is not valid YAML" in cli("list").stderr  # every command says its settings go
    code, report = _doctor()
    [finding] = _findings(report, "config")
    assert code == 1 and not report["ok"] and finding["level"] == "warning"
    assert finding["path"] == str(config) and "not valid YAML" in finding["message"]
    assert finding["line"] == len(config.read_text().splitlines())
    assert f"edit line {finding['line']} of {config}" in finding["fix"]


@pytest.mark.parametrize(
    ("edit", "key", "said", "command"),
    [
        (
            ("  weight_vector:", "  weight_vector: 7"),
            "recall.weight_vector",
            "recall.weight_vector must be from 0 to 1, not 7",
            "engram config set recall.weight_vector VALUE",
        ),
        (
            ("  every_events:", "  evry_events: 50"),
            "commit.evry_events",
            "unknown setting 'commit.evry_events' is ignored",
            None,
        ),
    ],
)
def test_a_setting_left_out_is_a_doctor_warning_with_its_line_and_fix(
    home_store: Engram, edit: tuple[str, str], key: str, said: str, command: str | None
) -> None:
    config = _config(home_store)
    start, replacement = edit
    line = _line_of(config, start)
    lines = config.read_text().splitlines()
    lines[line - 1] = replacement
    config.write_text("\n".join(lines) + "\n")
    assert said in cli("list").stderr
    code, report = _doctor()
    [finding] = _findings(report, "config")
    assert code == 1 and finding["line"] == line and said in finding["message"]
    assert f"edit line {line} of {config}" in finding["fix"]
    if command:
        assert finding["fix"].startswith(f"`{command}`")
        name = key.rsplit(".", 1)[1]
        assert cli("config", "set", key, "0.5").exit_code == 0  # the fix it names
        assert f"  {name}: 0.5" in config.read_text()
        assert _doctor()[0] == 0


def test_a_healthy_config_has_no_finding(home_store: Engram) -> None:
    code, report = _doctor()
    assert code == 0 and _findings(report, "config") == []


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("", "it is empty"),
        ("nobody/no-such-model", "no model is named 'nobody/no-such-model'"),
        ("mpnet", "mpnet is not installed; run `engram model install mpnet` first"),
        ("~/no-such-folder", "is not a folder"),
    ],
)
def test_config_set_refuses_a_model_this_engram_cannot_run(
    home_store: Engram, value: str, said: str
) -> None:
    before = _config(home_store).read_bytes()
    done = cli("config", "set", "search.model", value)
    assert done.exit_code == 2 and said in done.stderr, done.output
    assert "engram model" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert _config(home_store).read_bytes() == before
    assert cli("config", "get", "search.model").stdout == "builtin\n"


def test_config_set_takes_the_models_it_knows(home_store: Engram) -> None:
    for value in ("off", "builtin", "BAAI/bge-small-en-v1.5"):  # the last: a fastembed name
        done = cli("config", "set", "search.model", value)
        assert done.exit_code == 0 and done.stdout == f"search.model = {value}\n", done.output


def test_a_model_set_by_hand_that_cannot_run_is_reported_by_doctor_and_stats(
    home_store: Engram,
) -> None:
    home_store.remember("Use Postgres for the job queue", check_duplicates=False)
    assert cli("recall", "postgres").exit_code == 0  # vectors built with the built-in model
    config = _config(home_store)
    # A name no other test uses: a process warns once per model (the tests share one).
    config.write_text(
        config.read_text().replace("model: builtin", "model: nobody/not-a-model-here")
    )

    recall = cli("recall", "postgres")
    assert "Postgres" in recall.stdout and "could not be loaded" in recall.stderr
    code, report = _doctor()
    [finding] = _findings(report, "search-model")
    assert code == 1 and finding["level"] == "warning" and finding["path"] == str(config)
    assert (
        "'nobody/not-a-model-here' cannot be used, so recall goes by words only"
        in (finding["message"])
    )
    assert finding["fix"].startswith("`engram config set search.model builtin`")
    stats = cli("stats").stdout
    assert "vectors unused, model none: recall by words only" in stats, stats
    assert "all-MiniLM" not in stats
    check = cli("reindex", "--check")
    assert "cannot be used, so recall goes by words only" in check.stdout

    assert cli("config", "set", "search.model", "builtin").exit_code == 0  # the fix it names
    assert _findings(_doctor()[1], "search-model") == []
    assert "model all-MiniLM" in cli("stats").stdout


def test_an_empty_model_set_by_hand_is_left_out_and_reported(home_store: Engram) -> None:
    config = _config(home_store)
    config.write_text(config.read_text().replace("model: builtin", "model: ''"))
    assert "search.model: it is empty" in cli("list").stderr
    assert cli("config", "get", "search.model").stdout == "builtin\n"  # the default applies
    code, report = _doctor()
    [finding] = _findings(report, "config")
    assert code == 1 and "search.model: it is empty" in finding["message"]
    assert finding["fix"].startswith("`engram config set search.model VALUE`")
