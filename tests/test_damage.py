"""Damage Engram did not make, and disks that stop taking writes.

Truth: a line with conflict markers, invalid JSON or UTF-8, or cut short in the middle is reported
with its file and line and skipped; everything else stays readable, writes go on to this clone's
own file, and `engram verify` stays strict.

Derived state: every cache file deleted, truncated or overwritten with random bytes gives the same
recall, list and resume results after the automatic rebuild.

Disks: on a read-only store reads keep working and writes fail with one line that says why and
what to do; on a full disk (a small tmpfs) or past a file size limit (RLIMIT_FSIZE) a write that
stops part-way leaves no partial line.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fsjail
import pytest
from conftest import git

from engram.api import Engram
from engram.storage import events as ev
from engram.storage.store import WriterState

ROOT = Path(__file__).parent.parent

TEXTS = [
    "Use Postgres for the job queue: we need SKIP LOCKED",
    "Deploys happen on every merge to main, never on Fridays by hand",
    "The API listens on port 9090 behind the load balancer",
    "Run the tests with pytest -x before pushing",
    "Secrets live in the vault; never commit .env files",
    "The billing service retries webhooks three times with backoff",
]


def writer_file(store: Any) -> Path:
    return store.root / WriterState.load(store).segment


# -- damaged truth ------------------------------------------------------------------------------


def _conflict(lines: list[bytes]) -> list[bytes]:
    return [lines[0], b"<<<<<<< HEAD\n", lines[1], b"=======\n", b">>>>>>> other\n", *lines[2:]]


def _invalid_json(lines: list[bytes]) -> list[bytes]:
    return [lines[0], b'{"actor": oops}\n', *lines[1:]]


def _invalid_utf8(lines: list[bytes]) -> list[bytes]:
    return [lines[0], lines[1].replace(b'"content":"', b'"content":"\xc3\x28', 1), *lines[2:]]


def _cut_in_the_middle(lines: list[bytes]) -> list[bytes]:
    return [lines[0], lines[1][: len(lines[1]) // 2] + lines[2], *lines[3:]]


DAMAGE: dict[str, tuple[Callable[[list[bytes]], list[bytes]], list[int], str]] = {
    # name: (damage, lines reported, text in the first report)
    "conflict-markers": (_conflict, [2, 4, 5], "git conflict marker"),
    "invalid-json": (_invalid_json, [2], "invalid JSON"),
    "invalid-utf8": (_invalid_utf8, [2], "invalid UTF-8 at byte"),
    "truncated-middle": (_cut_in_the_middle, [2], "invalid JSON"),
}


@pytest.mark.parametrize("name", sorted(DAMAGE))
def test_a_damaged_line_is_reported_skipped_and_the_rest_reads(project: Path, name: str) -> None:
    damage, reported, text = DAMAGE[name]
    engram = Engram(cwd=project)
    memories = [engram.remember(t, check_duplicates=False) for t in TEXTS[:4]]
    engram.commit()
    path = writer_file(engram.project)
    lost = {
        "invalid-utf8": {memories[1].id},
        "truncated-middle": {memories[1].id, memories[2].id},
    }.get(name, set())
    path.write_bytes(b"".join(damage(path.read_bytes().splitlines(keepends=True))))

    reader = Engram(cwd=project)
    assert {m.id for m in reader.memories()} == {m.id for m in memories} - lost
    assert [w.split(":")[1] for w in reader.warnings] == [str(n) for n in reported]
    assert reader.warnings[0].startswith(f"{path}:{reported[0]}: {text}")
    assert all(w.endswith("`engram doctor` says how to repair it") for w in reader.warnings)
    hits = reader.recall("which database for the job queue")
    assert hits and hits[0].memory.id == memories[0].id

    # Writes go on, to this clone's own file: a new one, since the damaged file changed.
    added = Engram(cwd=project).remember("written after the damage", check_duplicates=False)
    assert writer_file(engram.project) != path
    assert added.id in {m.id for m in Engram(cwd=project).memories()}

    report = Engram(cwd=project).verify()  # strict
    assert not report.ok
    assert [p.line for p in report.stores[0].problems if p.severity == "error"][
        : len(reported)
    ] == reported


def test_damage_in_another_clones_file_stops_nothing_here(tmp_path: Path, project: Path) -> None:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(project), str(clone))
    theirs = Engram(cwd=project)
    kept = theirs.remember(TEXTS[0], check_duplicates=False)
    theirs.remember(TEXTS[1], check_duplicates=False)
    theirs.commit()
    their_file = writer_file(theirs.project)
    lines = their_file.read_bytes().splitlines(keepends=True)
    their_file.write_bytes(b"".join(_invalid_json(lines)))
    git(project, "commit", "-q", "-am", "hand edit")
    git(clone, "pull", "-q", "--no-rebase", "origin", "main")

    ours = Engram(cwd=clone)
    mine = ours.remember(TEXTS[2], check_duplicates=False)
    [result] = ours.commit()
    assert result.commit and result.refused == []
    reader = Engram(cwd=clone)
    assert {kept.id, mine.id} <= {m.id for m in reader.memories()}
    assert reader.warnings and reader.warnings[0].startswith(
        f"{clone / '.engram' / theirs.project.rel(their_file)}:2: invalid JSON"
    )


# -- damaged derived state ----------------------------------------------------------------------


def _snapshot(task: str) -> tuple[Any, ...]:
    engram = Engram()
    try:
        recalls = [
            [(h.memory.id, h.score) for h in engram.recall(q, k=5)]
            for q in ("which database for the job queue", "port of the API")
        ]
        listed = [m.id for m in engram.memories(limit=None)]
        resumed = engram.resume(task=task).markdown
        return recalls, listed, resumed, list(engram.warnings)
    finally:
        engram.close()


def _same(got: tuple[Any, ...], want: tuple[Any, ...]) -> bool:
    """Identical ids, order, list and resume; scores equal to 1e-5 (a memory's cosine comes from
    the saved vector index or from the embedding cache, both float32, summed in another order)."""
    for got_hits, want_hits in zip(got[0], want[0], strict=True):
        if [i for i, _ in got_hits] != [i for i, _ in want_hits]:
            return False
        if any(abs(a - b) > 1e-5 for (_, a), (_, b) in zip(got_hits, want_hits, strict=True)):
            return False
    return got[1:3] == want[1:3] and got[3] == []


def _damage(path: Path, how: str) -> None:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    if how == "delete":
        shutil.rmtree(path) if path.is_dir() else path.unlink()
        return
    for target in files:
        data = target.read_bytes()
        if how == "truncate":
            target.write_bytes(data[: len(data) // 2])
        elif how == "random":
            target.write_bytes(os.urandom(max(len(data), 64)))


def _cached_store(count: int) -> str:
    engram = Engram()
    engram.init()
    for n in range(count):
        engram.remember(
            f"{TEXTS[n % len(TEXTS)]} (note {n})", check_duplicates=False, tags=[f"t{n % 3}"]
        )
    task = engram.task_create("Add OAuth login", goal="Users sign in with GitHub")
    engram.handoff(task.id, summary="plan agreed", next=["register the app", "write tests"])
    engram.reindex()
    engram.close()
    return task.id


def test_an_unreadable_row_in_the_read_model_is_rebuilt_from_the_events(home_store: Engram) -> None:
    import sqlite3

    memories = [home_store.remember(t, check_duplicates=False) for t in TEXTS[:3]]
    want = [(m.id, m.content) for m in home_store.memories()]
    home_store.close()
    cache = home_store.personal.local_dir / "cache" / "projection.sqlite3"
    with sqlite3.connect(cache) as db:  # damage inside a row, which SQLite cannot see
        db.execute("UPDATE memories SET body = ? WHERE id = ?", (b'{"con', memories[1].id))
        db.execute("UPDATE events SET body = ? WHERE entity = ?", (b"\xff", memories[2].id))
    reader = Engram()
    assert [(m.id, m.content) for m in reader.memories()] == want
    assert reader.get(memories[2].id).content == TEXTS[2]
    assert [v.content for _, v in reader.history(memories[2].id)] == [TEXTS[2]]


CACHES = [
    "cache/projection.sqlite3",
    "cache/text",
    "cache/vectors.usearch",
    "cache/vectors.json",
    "cache/embeddings.sqlite3",
    "committed-stat.json",
    "config-parsed.json",
    "writer.json",
    "observed-clock",
]


def test_damaged_caches_give_the_same_answers_after_the_rebuild() -> None:
    task = _cached_store(12)
    want = _snapshot(task)
    local = Engram().personal.local_dir
    for name, how in [
        ("cache/projection.sqlite3", "random"),
        ("cache/text", "truncate"),
        ("cache/vectors.usearch", "random"),
        ("cache/embeddings.sqlite3", "random"),
        ("writer.json", "random"),
        ("config-parsed.json", "random"),
    ]:
        assert (local / name).exists(), name
        _damage(local / name, how)
        assert _same(_snapshot(task), want), (name, how)


@pytest.mark.slow
def test_every_cache_deleted_truncated_or_overwritten_gives_the_same_answers(
    figures: Callable[[str], None],
) -> None:
    task = _cached_store(60)
    want = _snapshot(task)
    local = Engram().personal.local_dir
    tried = 0
    damaged: set[str] = set()
    store = Engram().personal
    for name in CACHES:
        for how in ("delete", "truncate", "random"):
            # Every cache back in place; the answers of the store as it is now (each round's
            # probe below is one more forgotten memory, which moves word statistics a little).
            healthy = _snapshot(task)
            assert _same(healthy, want) or healthy[1:3] == want[1:3], (name, how)
            if name == "observed-clock":
                # Written once events of another writer run ahead of this one's clock.
                store.observe_clock(ev.next_clock(WriterState.load(store).clock) + 10**6)
            if (local / name).exists():
                _damage(local / name, how)
                tried += 1
                damaged.add(name)
            assert _same(_snapshot(task), healthy), (name, how)
            # and the store still takes writes and rebuilds on them
            engram = Engram()
            extra = engram.remember(f"written after damaging {name} ({how})")
            engram.forget(extra.id, reason="only a probe")
            engram.close()
    assert damaged == set(CACHES)
    figures(f"\ncache files damaged and rebuilt: {tried}")


@pytest.mark.slow
def test_caches_damaged_under_a_running_process_are_rebuilt_in_place(
    figures: Callable[[str], None],
) -> None:
    """A long-lived process (an MCP server) keeps answering the same while its cache files
    are overwritten in place under it."""
    import random

    task = _cached_store(60)
    cache = Engram().personal.local_dir / "cache"
    engram = Engram()

    def answers() -> tuple[Any, ...]:
        return (
            [h.memory.id for h in engram.recall("which database for the job queue", k=5)],
            [h.memory.id for h in engram.recall("port of the API", k=5)],
            [m.id for m in engram.memories(limit=None)],
            engram.resume(task=task).markdown,
        )

    want = answers()
    chance = random.Random(7)
    for _ in range(60):
        files = [
            p
            for p in (cache / "text").iterdir()
            if p.is_file() and p.stat().st_size and not p.name.startswith(".")
        ]
        files += [cache / "vectors.usearch", cache / "projection.sqlite3"]
        target = chance.choice([p for p in files if p.exists()])
        data = bytearray(target.read_bytes())
        at = chance.randrange(max(1, len(data) - 16))
        size = chance.choice([1, 8, 64, 4096])
        data[at : at + size] = os.urandom(len(data[at : at + size]))
        with open(target, "r+b") as handle:
            handle.write(bytes(data))
        assert answers() == want, target.name
    engram.close()
    figures(
        "\ncache files overwritten in place under a running process: 60; answers the same "
        "after each: all"
    )


# -- read-only and full disks -------------------------------------------------------------------


def _snapshot_tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.mark.skipif(
    not fsjail.can_mount() and os.geteuid() == 0,
    reason="needs a mount namespace (CAP_SYS_ADMIN) when running as root",
)
def test_a_read_only_store_reads_and_refuses_writes_in_one_line(home_store: Engram) -> None:
    memory = home_store.remember(TEXTS[0], check_duplicates=False)
    task = home_store.task_create("Add OAuth login")
    home_store.handoff(task.id, summary="plan agreed", next=["register the app"])
    home_store.recall("job queue")
    home_store.close()
    root = home_store.personal.root
    before = _snapshot_tree(root)
    reads = {
        ("list",): memory.id[:8],
        ("recall", "job queue database"): memory.id[:8],
        ("resume", "--task", task.id): "plan agreed",
        ("log", "-n", "3"): "handoff",
        ("status",): "personal store",
        ("verify",): "ok",
        ("get", memory.id): TEXTS[0],
    }
    writes = [
        ("remember", "a new fact"),
        ("forget", memory.id, "--reason", "old"),
        ("task", "create", "another"),
        ("commit",),
        ("reindex",),
    ]
    with fsjail.read_only(root) as jail:
        results = jail.engram_many(*reads, *writes)
        why = (
            "its file system is read-only; remount it read-write"
            if jail.holder
            else "permission denied; give yourself write access"
        )
    for args, expected, done in zip(reads, reads.values(), results, strict=False):
        assert done["code"] == 0 and expected in done["stdout"], (args, done)
    for args, done in zip(writes, results[len(reads) :], strict=True):
        assert done["code"] == 1 and done["crash"] is None, (args, done)
        assert done["stderr"].count("\n") == 1, (args, done["stderr"])
        assert done["stderr"].startswith(f"error: cannot write to the store at {root}: {why}")
        assert done["stderr"].endswith("then retry (nothing was written; reads still work)\n")
    assert _snapshot_tree(root) == before


def _engram(*args: str, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    def cap() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    return subprocess.run(
        [sys.executable, "-m", "engram", *args],
        capture_output=True,
        text=True,
        preexec_fn=cap,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_a_write_stopped_part_way_by_a_file_size_limit_leaves_no_partial_line(
    home_store: Engram,
) -> None:
    kept = home_store.remember(TEXTS[0], check_duplicates=False)
    path = writer_file(home_store.personal)
    before = path.read_bytes()
    # The kernel takes the first 1000 bytes of the line, then refuses the rest (EFBIG).
    done = _engram("remember", "x" * 6000, limit=len(before) + 1000)
    assert done.returncode == 1, done.stdout
    assert done.stderr.count("\n") == 1, done.stderr
    assert "a file size limit was reached; raise it (ulimit -f), then retry" in done.stderr
    assert path.read_bytes() == before
    reader = Engram()
    assert [m.id for m in reader.memories()] == [kept.id] and reader.warnings == []
    reader.remember("x" * 6000, check_duplicates=False)
    assert len(Engram().memories()) == 2 and Engram().verify().ok


@pytest.mark.skipif(not fsjail.can_mount(), reason="needs a mount namespace (CAP_SYS_ADMIN)")
def test_a_write_stopped_part_way_by_a_full_disk_leaves_no_partial_line(home_store: Engram) -> None:
    kept = home_store.remember(TEXTS[0], check_duplicates=False)
    path = writer_file(home_store.personal)
    before = path.read_bytes()
    month = path.parent
    copy = month.parent / "copy"
    # The month's event directory on a 16 KiB tmpfs, filled up but for the last page of the
    # event file: an append fits part of a long line, then gets ENOSPC.
    setup = (
        f"cp -a {month} {copy} && mount -t tmpfs -o size=16k tmpfs {month} && "
        f"cp -a {copy}/. {month}/ && (dd if=/dev/zero of={month}/.filler bs=1k "
        "count=64 2>/dev/null || true)"
    )
    with fsjail._namespace(month, setup) as jail:
        inside = jail.inside(path)
        full, listed = jail.engram_many(("remember", "y" * 9000), ("list", "--json"))
        assert full["code"] == 1 and full["crash"] is None, full
        assert full["stderr"].count("\n") == 1, full["stderr"]
        assert "the disk is full; free some space, then retry" in full["stderr"]
        assert inside.read_bytes() == before
        assert [m["id"] for m in json.loads(listed["stdout"])] == [kept.id]
        [freed] = jail.engram_many(("!rm", str(month / ".filler")), ("remember", "y" * 9000))
        assert freed["code"] == 0, freed
        assert inside.read_bytes().startswith(before) and inside.read_bytes().endswith(b"\n")


@pytest.mark.slow
@pytest.mark.skipif(not fsjail.can_mount(), reason="needs a mount namespace (CAP_SYS_ADMIN)")
def test_a_store_on_a_full_disk_keeps_reading_and_fails_writes_cleanly(tmp_path: Path) -> None:
    disk = tmp_path / "home"
    with fsjail.small_disk(disk, 3072) as jail:
        assert jail.engram("init").returncode == 0
        acknowledged = []
        for n in range(3):
            done = jail.engram("remember", TEXTS[n], "--json")
            assert done.returncode == 0, done.stderr
            acknowledged.append(json.loads(done.stdout)["id"])
        jail.shell(f"dd if=/dev/zero of={disk}/filler bs=4k count=4096 2>/dev/null")
        for n in range(3, 6):
            done = jail.engram("remember", TEXTS[n] + " " + "z" * 9000, "--json")
            if done.returncode == 0:  # a cache gave its space back first
                acknowledged.append(json.loads(done.stdout)["id"])
            else:
                assert done.stderr.count("\n") == 1, done.stderr
                assert "the disk is full" in done.stderr or "could not commit" in done.stderr
        listed = jail.engram("list", "--json", "-n", "100")
        assert listed.returncode == 0, listed.stderr
        assert sorted(m["id"] for m in json.loads(listed.stdout)) == sorted(acknowledged)
        recalled = jail.engram("recall", "job queue database")
        assert recalled.returncode == 0 and acknowledged[0][:8] in recalled.stdout
        for path in jail.inside(disk / ".engram" / "events").rglob("*.jsonl"):
            assert path.read_bytes().endswith(b"\n")


def test_the_reliability_page_names_only_tests_that_exist() -> None:
    page = (ROOT / "docs" / "reliability.md").read_text()
    named = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", page)
    named += [("tests/test_doctor.py", name) for name in re.findall(r"\| `(test_\w+)` \|", page)]
    assert len(named) > 30
    missing = [
        f"{path}::{name}" for path, name in named if f"def {name}(" not in (ROOT / path).read_text()
    ]
    assert missing == []
