from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import git, make_repo

from engram.api import Engram
from engram.storage.store import WriterState


def writer_file(engram: Engram) -> Path:
    store = engram.write_store()
    return store.root / WriterState.load(store).segment


def test_a_write_is_on_disk_as_one_canonical_line(home_store: Engram) -> None:
    memory = home_store.remember("Use Postgres for the job queue", kind="decision")
    lines = writer_file(home_store).read_bytes().splitlines()
    assert memory.id.encode() in lines[-1]
    assert lines[-1].startswith(b'{"actor":')


def test_each_clone_writes_files_named_for_its_own_writer(tmp_path: Path, project: Path) -> None:
    git(project, "add", "-A")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(project), str(clone))
    a = Engram(cwd=project)
    b = Engram(cwd=clone)
    a.remember("from a")
    b.remember("from b")
    assert writer_file(a).name != writer_file(b).name
    assert writer_file(a).parent.relative_to(project / ".engram").parts[0] == "events"


def test_torn_last_line_is_reported_then_set_aside_by_the_next_write(home_store: Engram) -> None:
    kept = home_store.remember("acknowledged before the crash")
    path = writer_file(home_store)
    with open(path, "ab") as handle:  # what a crash mid-write leaves
        handle.write(b'{"actor":"x","clock":1,"da')

    reader = Engram()
    assert [m.id for m in reader.memories()] == [kept.id]
    assert any("torn last line" in w for w in reader.warnings)

    writer = Engram()
    after = writer.remember("written after the crash")
    assert any("set aside a torn last line" in w for w in writer.warnings)
    assert path.read_bytes().endswith(b"\n")
    aside = list((home_store.personal.local_dir / "torn").iterdir())
    assert len(aside) == 1 and aside[0].read_bytes() == b'{"actor":"x","clock":1,"da'
    fresh = Engram()
    assert {m.id for m in fresh.memories()} == {kept.id, after.id}
    assert fresh.warnings == []
    assert fresh.verify().ok


def test_conflict_markers_are_reported_with_file_and_line_and_skipped(
    home_store: Engram,
) -> None:
    one = home_store.remember("one")
    two = home_store.remember("two")
    path = writer_file(home_store)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(
        "".join([lines[0], "<<<<<<< HEAD\n", *lines[1:], "=======\n", ">>>>>>> other\n"])
    )
    reader = Engram()
    assert {m.id for m in reader.memories()} == {one.id, two.id}
    assert reader.warnings[0].startswith(f"{path}:2: git conflict marker")
    assert [w.split(":")[1] for w in reader.warnings] == ["2", "4", "5"]
    report = Engram().verify()
    assert not report.ok
    lines_flagged = [p.line for p in report.stores[0].problems]
    assert lines_flagged == [2, 4, 5]


def test_invalid_json_in_the_middle_is_reported_with_file_and_line(home_store: Engram) -> None:
    one = home_store.remember("one")
    two = home_store.remember("two")
    path = writer_file(home_store)
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(1, b"{this is not json}\n")
    path.write_bytes(b"".join(lines))
    reader = Engram()
    assert {m.id for m in reader.memories()} == {one.id, two.id}
    assert len(reader.warnings) == 1
    assert reader.warnings[0].startswith(f"{path}:2: invalid JSON")
    assert reader.warnings[0].endswith("`engram doctor` says how to repair it")
    assert not Engram().verify().ok


def test_duplicate_lines_are_read_once(home_store: Engram) -> None:
    memory = home_store.remember("cherry-picked twice")
    path = writer_file(home_store)
    line = path.read_bytes().splitlines(keepends=True)[-1]
    (path.parent / "other-writer.jsonl").write_bytes(line)  # same event, another file
    fresh = Engram()
    assert [m.id for m in fresh.memories()] == [memory.id]
    assert len([e for _, e in fresh.log(kinds=["memory"])]) == 1
    assert fresh.verify().stores[0].duplicates == 1


def test_events_order_by_clock_then_id_not_by_file(home_store: Engram) -> None:
    first = home_store.remember("first")
    second = home_store.remember("second")
    # Move the older event into a file that sorts after the newer one's.
    path = writer_file(home_store)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(line for line in lines if first.id.encode() not in line))
    (path.parent / "zzz-writer.jsonl").write_bytes(
        b"".join(line for line in lines if first.id.encode() in line)
    )
    order = [e.data["memory"] for _, e in Engram().log(kinds=["memory"])]
    assert order == [second.id, first.id]


def test_a_branch_switch_starts_a_new_writer_file_so_branches_merge(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    engram = Engram(cwd=repo)
    engram.init(project=True)
    engram.remember("on main before branching")
    engram.commit()
    git(repo, "checkout", "-q", "-b", "feature")
    Engram(cwd=repo).remember("on feature")
    Engram(cwd=repo).commit()
    git(repo, "checkout", "-q", "main")
    Engram(cwd=repo).remember("on main after the branch")
    Engram(cwd=repo).commit()
    merged = git(repo, "merge", "--no-edit", "feature")
    assert "CONFLICT" not in merged
    texts = {m.content for m in Engram(cwd=repo).memories()}
    assert texts == {"on main before branching", "on feature", "on main after the branch"}
    assert Engram(cwd=repo).verify().ok


def test_caches_follow_a_checkout_made_with_plain_git(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    Engram(cwd=repo).init(project=True)
    Engram(cwd=repo).remember("kept on main")
    Engram(cwd=repo).commit()
    git(repo, "checkout", "-q", "-b", "feature")
    Engram(cwd=repo).remember("only on feature")
    Engram(cwd=repo).commit()
    assert len(Engram(cwd=repo).memories()) == 2
    git(repo, "checkout", "-q", "main")
    assert [m.content for m in Engram(cwd=repo).memories()] == ["kept on main"]


def test_deleting_the_cache_loses_nothing(home_store: Engram) -> None:
    ids = {home_store.remember(f"memory {i}").id for i in range(5)}
    assert {m.id for m in home_store.memories()} == ids  # builds the cache
    home_store.close()
    cache = home_store.personal.local_dir / "cache"
    assert any(cache.iterdir())
    for path in cache.iterdir():
        path.unlink()
    assert {m.id for m in Engram().memories()} == ids


def test_a_corrupt_cache_is_rebuilt(home_store: Engram) -> None:
    ids = {home_store.remember(f"memory {i}").id for i in range(3)}
    assert {m.id for m in home_store.memories()} == ids  # builds the cache
    home_store.close()
    cache = home_store.personal.local_dir / "cache" / "projection.sqlite3"
    cache.write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        Path(str(cache) + suffix).unlink(missing_ok=True)
    assert {m.id for m in Engram().memories()} == ids


def test_a_full_writer_file_is_left_for_a_new_one(
    home_store: Engram, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engram.storage import store as store_module

    monkeypatch.setattr(store_module, "MAX_FILE_BYTES", 2000)
    ids = {
        home_store.remember(f"memory number {i} " + "x" * 300, check_duplicates=False).id
        for i in range(12)
    }
    files = home_store.personal.event_files()
    assert len(files) >= 3
    assert all(p.stat().st_size < 2000 + 700 for p in files)
    fresh = Engram()
    assert {m.id for m in fresh.memories(limit=None)} == ids
    assert fresh.verify().ok


def test_reads_stat_only_what_can_have_changed_and_still_see_every_change(
    home_store: Engram, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files in a directory unchanged since it was read are not stat'ed again (git replaces
    files, it never rewrites them in place); what git or the writer changes is seen at once."""
    import os as os_module

    from engram.readmodel import projection

    for n in range(3):
        home_store.remember(f"memory {n}", check_duplicates=False)
        home_store.commit()  # one file per commit
    files = home_store.personal.event_files()
    assert len(files) >= 4
    old = time.time() - 10
    for path in files:
        os_module.utime(path, (old, old))
    os_module.utime(files[0].parent, (old, old))
    reader = Engram()
    assert len(reader.memories()) == 3  # reads everything, records the directory

    stats: list[str] = []
    counted = Engram()
    proj = counted.projection(counted.personal)
    original = projection.Projection._scan

    def scan(self: projection.Projection, known: Any) -> Any:
        disk, found, scanned = original(self, known)
        stats.extend(found)
        return disk, found, scanned

    monkeypatch.setattr(projection.Projection, "_scan", scan)
    proj.refresh()
    assert len(stats) <= 1  # at most the writer's own file

    # A file replaced the way git replaces files (a new inode) is seen at once.
    victim = next(p for p in files if b"memory 1" in p.read_bytes())
    data = victim.read_bytes().replace(b"memory 1", b"memory one")
    victim.unlink()
    victim.write_bytes(data)
    assert {m.content for m in Engram().memories()} == {"memory 0", "memory one", "memory 2"}

    # The writer's own file is always looked at.
    home_store.remember("memory 3", check_duplicates=False)
    assert len(Engram().memories()) == 4


@pytest.mark.parametrize(
    ("label", "value", "fix"),
    [
        ("session", "bad id!", "ENGRAM_SESSION"),
        ("session", "", "ENGRAM_SESSION"),
        ("actor", "ann\nbob", "ENGRAM_ACTOR"),
        ("actor", "a" * 257, "ENGRAM_ACTOR"),
        ("machine", "box\t1", "ENGRAM_MACHINE"),
    ],
)
def test_the_write_path_refuses_an_event_its_readers_would_skip(
    home_store: Engram, label: str, value: str, fix: str
) -> None:
    """Whatever set the label (the environment, a caller), an event whose line every reader
    skips is refused before a byte is written, not reported as saved and then lost."""
    from engram.base.errors import UsageError
    from engram.storage import events as ev
    from engram.storage import lines

    store = home_store.write_store()
    kept = home_store.remember("written before")
    before = {p: p.read_bytes() for p in store.event_files()}
    good = ev.Event(
        id=ev.new_event_id(),
        kind="memory.forgotten",
        clock=ev.now_us(),
        time=ev.format_time(ev.utc_now()),
        actor="ann",
        session=None,
        machine="box",
        data={"memory": kept.id, "reason": "test"},
    )
    bad = dataclasses.replace(good, **{label: value})
    assert lines.classify(bad.to_line()[:-1]).problem is not None  # what every reader does
    with store.lock(), pytest.raises(UsageError) as refused:
        store.append([good, bad])
    assert str(refused.value).startswith("nothing written: ") and fix in str(refused.value)
    assert "\n" not in str(refused.value)
    assert {p: p.read_bytes() for p in store.event_files()} == before
    assert Engram().get(kept.id).status == "active"  # the good event went neither


def test_a_session_set_on_an_open_store_is_checked_before_the_write(home_store: Engram) -> None:
    from engram.base.errors import UsageError

    path = writer_file(home_store)
    home_store.remember("written before")
    before = path.read_bytes()
    home_store.session = "typo'd id"
    with pytest.raises(UsageError, match="unset ENGRAM_SESSION or set it to an id"):
        home_store.remember("Use Postgres", kind="decision")
    assert path.read_bytes() == before
    assert [m.content for m in Engram().memories()] == ["written before"]
