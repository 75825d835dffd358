"""`reindex --check`, `stats` and `doctor` agree about a cache that is missing or damaged: each
check reads it the same way (`damaged_caches`), so none calls current what another calls
damaged, and none says a cache rebuilds itself when it does not.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from conftest import cli

from engram.api import Engram


def _store_with_caches() -> Path:
    """A personal store of two memories whose caches were all built by a recall; its cache
    folder."""
    engram = Engram()
    engram.init()
    engram.remember("Use Postgres for the job queue", check_duplicates=False)
    engram.remember("Tests need ENGRAM_HOME set", kind="gotcha", check_duplicates=False)
    cache = engram.personal.local_dir / "cache"
    engram.close()
    assert cli("recall", "postgres").exit_code == 0
    assert (cache / "vectors.usearch").exists() and (cache / "text" / "meta.json").exists()
    return cache


def _doctor_cache_findings() -> tuple[int, list[dict[str, str]]]:
    done = cli("doctor", "--json")
    report = json.loads(done.stdout)
    return done.exit_code, [
        f for s in report["stores"] for f in s["findings"] if f["check"] == "cache"
    ]


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        ("delete vectors", "vector index missing beside its record vectors.json"),
        ("truncate vectors", "vector index damaged: it does not match what its last save"),
        ("truncate words", "word index damaged: its files are not those its last save wrote"),
    ],
)
def test_a_damaged_search_index_is_not_current_for_check_stats_or_doctor(
    damage: str, said: str
) -> None:
    cache = _store_with_caches()
    if damage == "delete vectors":
        (cache / "vectors.usearch").unlink()
    elif damage == "truncate vectors":
        os.truncate(cache / "vectors.usearch", 1000)
    else:
        for store_file in (cache / "text").glob("*.store"):
            os.truncate(store_file, 10)

    check = cli("reindex", "--check")
    assert check.exit_code == 1, check.output
    assert "not current: `engram reindex` rebuilds them" in check.stdout and said in check.stdout
    stats = cli("stats")
    assert "indexes: must be rebuilt (`engram reindex`)" in stats.stdout, stats.stdout
    assert "vectors current" not in stats.stdout or damage == "truncate words"
    code, findings = _doctor_cache_findings()
    assert code == 1 and any(f["level"] == "warning" for f in findings), findings

    # The next search rebuilds it, as doctor says; then all three call it healthy again.
    assert "Postgres" in cli("recall", "postgres").stdout
    check = cli("reindex", "--check")
    assert check.exit_code == 0 and "caches current" in check.stdout, check.output
    assert "indexes: current" in cli("stats").stdout
    assert _doctor_cache_findings() == (0, [])


def _damage_a_page_of(table: str, database: Path) -> None:
    """Random bytes over the page where SQLite keeps `table`'s rows, as a failing disk leaves."""
    db = sqlite3.connect(database)
    [(page,)] = db.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,))
    [(size,)] = db.execute("PRAGMA page_size")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    with open(database, "r+b") as handle:
        handle.seek((page - 1) * size)
        handle.write(os.urandom(size))


def test_a_damaged_page_of_the_read_model_is_reported_until_it_is_rebuilt() -> None:
    """Damage inside a page shows only to a read of that page: the commands that never read it
    leave it as it is, so doctor does not promise that they rebuild it, `reindex --check`
    reads the database through and says it must be rebuilt, and `doctor --fix` rebuilds it."""
    cache = _store_with_caches()
    _damage_a_page_of("sources", cache / "projection.sqlite3")

    for args in (("recall", "postgres"), ("list",), ("stats",)):
        done = cli(*args)
        assert done.exit_code == 0, (args, done.output)
    code, [finding] = _doctor_cache_findings()
    assert code == 1 and finding["path"] == str(cache / "projection.sqlite3")
    assert "malformed" in finding["message"] and "next use" not in finding["message"]
    assert "only a read that meets the damaged part rebuilds it" in finding["message"]
    check = cli("reindex", "--check")
    assert check.exit_code == 1, check.output
    assert "read model damaged (database disk image is malformed)" in check.stdout
    assert cli("reindex", "--check", "--json").stdout.count('"projection": "damaged"') == 1

    fixed = cli("doctor", "--fix")
    assert fixed.exit_code == 0 and "rebuilt the damaged projection.sqlite3" in fixed.stdout
    assert cli("reindex", "--check").exit_code == 0
    assert len(cli("list").stdout.splitlines()) == 2


def test_stats_of_a_store_nothing_has_read_yet_says_the_caches_are_not_built() -> None:
    assert cli("init").exit_code == 0
    stats = cli("stats")
    assert "indexes: not built yet (the first read builds them; or `engram reindex`)" in (
        stats.stdout
    ), stats.stdout
    assert "None" not in stats.stdout
