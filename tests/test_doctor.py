"""`engram doctor`: one test per diagnosis. Each damages a real store the way it happens (a
process killed with SIGKILL, a hand edit, a merge, a full or read-only disk), checks that the
problem is reported where it is with a fix, and where the fix is automatic, applies it with
`engram doctor --fix` (or runs the printed command) and checks the store is healthy again."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import fsjail
import pytest
from conftest import cli, git

from engram.api import Engram
from engram.storage.store import WriterState

ROOT = Path(__file__).parent.parent


def doctor(*args: str, cwd: Path | None = None) -> tuple[int, dict[str, Any]]:
    result = cli("doctor", "--json", *args, cwd=cwd)
    return result.exit_code, json.loads(result.stdout)


def findings(report: dict[str, Any], check: str | None = None) -> list[dict[str, Any]]:
    return [
        f
        for entry in report["stores"]
        for f in entry["findings"]
        if check is None or f["check"] == check
    ]


def problems(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in findings(report) if f["level"] != "note"]


def commands(fix: str) -> list[str]:
    """The commands a fix names, in order."""
    return re.findall(r"`([^`]+)`", fix)


def writer_file(store: Any) -> Path:
    return store.root / WriterState.load(store).segment


def child(code: str, *args: str) -> subprocess.Popen[str]:
    """A real Python process running `code` against the test's stores."""
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_a_healthy_store_exits_0(home_store: Engram) -> None:
    home_store.remember("Use Postgres for the job queue", check_duplicates=False)
    result = cli("doctor")
    assert result.exit_code == 0, result.output
    assert "personal store" in result.stdout and ": healthy" in result.stdout
    code, report = doctor()
    assert code == 0 and report["ok"] and problems(report) == []


def test_a_torn_last_line_is_reported_and_set_aside_by_fix(home_store: Engram) -> None:
    kept = home_store.remember("acknowledged before the crash")
    path = writer_file(home_store.personal)
    with open(path, "ab") as handle:  # what a crash mid-write leaves
        handle.write(b'{"actor":"x","clock":1,"da')
    lines = path.read_bytes().count(b"\n")

    code, report = doctor()
    [torn] = problems(report)
    assert code == 1 and torn["check"] == "torn-line" and torn["level"] == "warning"
    assert torn["path"] == home_store.personal.rel(path) and torn["line"] == lines + 1
    assert "engram doctor --fix --personal" in torn["fix"]
    assert "next write from this clone" in torn["fix"]

    result = cli("doctor", "--fix")
    assert result.exit_code == 0, result.output
    assert "fixed: " in result.stdout and "a torn last line" in result.stdout
    assert path.read_bytes().endswith(b"\n")
    [folder] = (home_store.personal.local_dir / "quarantine").iterdir()
    bad = folder / f"{home_store.personal.rel(path)}.bad"
    assert bad.read_bytes() == b'{"actor":"x","clock":1,"da'
    assert (folder / home_store.personal.rel(path)).read_bytes().endswith(b'"da')  # the original
    fresh = Engram()
    assert [m.id for m in fresh.memories()] == [kept.id] and fresh.warnings == []
    assert fresh.verify().ok


def test_committed_conflict_markers_are_set_aside_in_this_clone_never_taken_out_of_history(
    project: Path,
) -> None:
    engram = Engram(cwd=project)
    one = engram.remember("one", check_duplicates=False)
    two = engram.remember("two", check_duplicates=False)
    engram.commit()
    path = writer_file(engram.project)
    rel = engram.project.rel(path)
    lines = path.read_text().splitlines(keepends=True)
    # A conflict resolved carelessly and committed with plain git, markers and all.
    path.write_text(
        "".join([lines[0], "<<<<<<< HEAD\n", *lines[1:], "=======\n", ">>>>>>> other\n"])
    )
    git(project, "commit", "-q", "-am", "merge other")
    committed = path.read_bytes()
    head = git(project, "rev-parse", "HEAD")
    (project / "app.py").write_text("print('staged by the user')\n")
    git(project, "add", "app.py")

    code, report = doctor(cwd=project)
    damaged = problems(report)
    assert code == 1 and [(f["path"], f["line"]) for f in damaged] == [(rel, 2), (rel, 4), (rel, 5)]
    assert all(f["check"] == "damaged-line" and f["level"] == "error" for f in damaged)
    assert "git conflict marker" in damaged[0]["message"]
    assert "engram doctor --fix --project" in damaged[0]["fix"]
    assert "sets it aside in this clone" in damaged[0]["fix"]
    assert "git " not in damaged[0]["fix"]  # no commit to run

    code, report = doctor("--fix", cwd=project)
    assert code == 0 and problems(report) == [], report
    noted = findings(report, "set-aside")
    assert [(f["path"], f["line"]) for f in noted] == [(rel, 2), (rel, 4), (rel, 5)]
    assert all(not commands(f["fix"]) for f in noted)  # nothing to run, nothing to commit
    assert path.read_bytes() == committed  # the file is left as committed
    assert git(project, "rev-parse", "HEAD") == head
    assert git(project, "status", "--porcelain", "--", ".engram") == ""
    assert git(project, "diff", "--cached", "--name-only") == "app.py\n"  # still staged
    aside = json.loads((engram.project.local_dir / "set-aside.json").read_text())
    assert sorted(e["line"] for e in aside) == [2, 4, 5]

    three = Engram(cwd=project).remember("three", check_duplicates=False)
    [result] = Engram(cwd=project).commit()
    assert result.commit and result.refused == []
    assert git(project, "show", f"HEAD:.engram/{rel}").encode() == committed
    fresh = Engram(cwd=project)
    assert {m.id for m in fresh.memories()} == {one.id, two.id, three.id}
    assert fresh.verify().ok and fresh.warnings == []
    code, report = doctor("--fix", cwd=project)  # a second repair changes nothing
    assert code == 0 and path.read_bytes() == committed


def _cut_in_the_middle(lines: list[bytes]) -> list[bytes]:
    return [lines[0], lines[1][: len(lines[1]) // 2] + lines[2], *lines[3:]]  # 2 and 3 lost


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda lines: [lines[0], b"{this is not json}\n", *lines[1:]], "invalid JSON"),
        (lambda lines: [lines[0], b'{"actor":"\xff\xfe"}\n', *lines[1:]], "invalid UTF-8"),
        (_cut_in_the_middle, "two lines run together"),
        (lambda lines: [lines[0], b"\n", *lines[1:]], "blank line"),
    ],
    ids=["invalid-json", "invalid-utf8", "truncated-middle", "blank-line"],
)
def test_a_damaged_line_is_reported_with_file_and_line_and_set_aside(
    home_store: Engram, damage: Any, message: str
) -> None:
    memories = [home_store.remember(f"memory {n}", check_duplicates=False) for n in range(3)]
    path = writer_file(home_store.personal)
    path.write_bytes(b"".join(damage(path.read_bytes().splitlines(keepends=True))))

    code, report = doctor()
    [bad, *lost] = problems(report)
    assert code == 1 and bad["check"] == "damaged-line" and bad["line"] == 2
    assert message in bad["message"] and bad["path"] == home_store.personal.rel(path)
    assert "engram commit --personal` then commits it" in bad["fix"]  # never committed
    if message == "two lines run together":  # the two events cut short are lost, and said so
        [gone] = lost
        assert gone["check"] == "lost-events" and gone["message"].startswith("2 events ")
    else:
        assert lost == []

    code, report = doctor("--fix")
    assert code == 0, report
    expected = {m.id for m in memories}  # the events cut short come back from the ledger
    fresh = Engram()
    assert {m.id for m in fresh.memories()} == expected
    assert fresh.verify().ok


def test_a_write_lock_held_by_a_hung_process_names_it(home_store: Engram) -> None:
    holder = child(
        "import sys, time\nfrom engram.api import Engram\n"
        "with Engram().write_store().lock():\n"
        "    print('LOCKED', flush=True)\n    time.sleep(120)\n"
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "LOCKED\n"
        code, report = doctor()
        [lock] = problems(report)
        assert code == 1 and lock["check"] == "lock" and str(holder.pid) in lock["message"]
        assert commands(lock["fix"]) == [f"kill {holder.pid}"]
    finally:
        holder.kill()
        holder.wait()
    started = time.monotonic()
    home_store.remember("the system freed the lock when its holder died")
    assert time.monotonic() - started < 5
    assert doctor()[0] == 0


def test_temporary_files_of_a_killed_process_are_found_and_removed(home_store: Engram) -> None:
    crashed = child(
        "import os\nfrom engram.api import Engram\n"
        "local = Engram().personal.local_dir\n"
        "(local / f'writer.json.{os.getpid()}.tmp').write_bytes(b'{\"writer\": \"ha')\n"
        "os.kill(os.getpid(), 9)\n"
    )
    crashed.wait()
    leftover = home_store.personal.local_dir / f"writer.json.{crashed.pid}.tmp"
    assert leftover.exists()

    code, report = doctor()
    [temp] = problems(report)
    assert code == 1 and temp["check"] == "temp-file" and temp["path"] == str(leftover)
    assert doctor("--fix")[0] == 0
    assert not leftover.exists()


def test_a_merged_file_left_by_a_compaction_killed_mid_write_is_removed(home_store: Engram) -> None:
    home_store.remember("Use Postgres for the job queue", check_duplicates=False)
    month = home_store.personal.event_files()[0].parent
    crashed = child(
        "import os, sys\nfrom pathlib import Path\n"
        "(Path(sys.argv[1]) / f'.compacted-0123456789abcdef.jsonl.{os.getpid()}.tmp')"
        ".write_bytes(b'{\"actor\"')\nos.kill(os.getpid(), 9)\n",
        str(month),
    )
    crashed.wait()
    leftover = month / f".compacted-0123456789abcdef.jsonl.{crashed.pid}.tmp"
    assert leftover.exists()
    code, report = doctor()
    [temp] = problems(report)
    assert code == 1 and temp["check"] == "temp-file" and temp["path"] == str(leftover)
    assert doctor("--fix")[0] == 0
    assert not leftover.exists()


def test_a_stale_git_index_lock_blocks_commits_until_fix_removes_it(project: Path) -> None:
    engram = Engram(cwd=project)
    engram.remember("waiting to be committed", check_duplicates=False)
    index_lock = project / ".git" / "index.lock"
    killed = child(
        "import os, sys\nfd = os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | "
        "os.O_WRONLY)\nos.write(fd, b'DIRC')\nos.kill(os.getpid(), 9)\n",
        str(index_lock),
    )
    killed.wait()
    refused = cli("commit", cwd=project)
    assert refused.exit_code == 1 and "index.lock exists" in refused.stderr

    code, report = doctor(cwd=project)
    [stale] = problems(report)
    assert code == 1 and stale["check"] == "git-lock" and stale["auto"]
    assert f"rm {index_lock}" in stale["fix"]
    assert doctor("--fix", cwd=project)[0] == 0
    assert not index_lock.exists()
    assert cli("commit", cwd=project).exit_code == 0
    assert git(project, "status", "--porcelain", "--", ".engram") == ""


def test_a_stale_branch_ref_lock_is_reported_and_cleared_by_the_next_commit(project: Path) -> None:
    """A commit killed while git updated the branch leaves `refs/heads/<branch>.lock`."""
    Engram(cwd=project).remember("waiting behind a ref lock", check_duplicates=False)
    ref_lock = project / ".git" / "refs" / "heads" / "main.lock"
    killed = child(
        "import os, sys\nfd = os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | "
        "os.O_WRONLY)\nos.kill(os.getpid(), 9)\n",
        str(ref_lock),
    )
    killed.wait()
    past = time.time() - 30
    os.utime(ref_lock, (past, past))
    code, report = doctor(cwd=project)
    [stale] = problems(report)
    assert code == 1 and stale["check"] == "git-lock" and f"rm {ref_lock}" in stale["fix"]
    done = cli("commit", cwd=project)
    assert done.exit_code == 0, done.stderr
    assert "left by a killed commit" in done.stderr and not ref_lock.exists()
    assert git(project, "status", "--porcelain", "--", ".engram") == ""


def test_a_commit_killed_half_way_is_cleaned_up_by_the_next_commit(project: Path) -> None:
    Engram(cwd=project).remember("committed by a process killed mid-commit", check_duplicates=False)
    killed = child(
        "import os, sys, pygit2\nfrom engram.api import Engram\n"
        "create = pygit2.Repository.create_commit\n"
        "def create_then_die(self, *args, **kwargs):\n"
        "    create(self, *args, **kwargs)\n    os.kill(os.getpid(), 9)\n"
        "pygit2.Repository.create_commit = create_then_die\n"
        "Engram(cwd=sys.argv[1]).commit()\n",
        str(project),
    )
    killed.wait()
    index_lock = project / ".git" / "index.lock"
    assert index_lock.exists()
    assert git(project, "status", "--porcelain", "--", ".engram").startswith("D ")

    code, report = doctor(cwd=project)
    assert code == 1
    assert {f["check"] for f in problems(report)} == {"git-lock", "git-index", "temp-file"}
    [behind] = findings(report, "git-index")
    assert " reset -q -- .engram/events/" in behind["fix"]

    # Later (the lock is no longer fresh), the next commit clears up by itself.
    os.utime(index_lock, (time.time() - 60, time.time() - 60))
    Engram(cwd=project).remember("written after the crash", check_duplicates=False)
    engram = Engram(cwd=project)
    [result] = engram.commit()
    assert result.commit and any("stale" in w and "index.lock" in w for w in engram.warnings)
    assert git(project, "status", "--porcelain", "--", ".engram") == ""
    assert doctor(cwd=project)[0] == 0


def test_a_compaction_killed_before_it_updated_the_index_is_repaired(project: Path) -> None:
    """Killed between its commit and git's index: the index still holds the folded files."""
    Engram(cwd=project, use="project").config_set("compact.files", "0")
    for n in range(3):  # one writer each, so three event files
        writer = Engram(cwd=project, use="project")
        writer.remember(f"folded by a compaction killed half-way {n}", check_duplicates=False)
        writer.commit()
        writer.close()
    killed = child(
        "import os, sys, pygit2\nfrom engram.api import Engram\n"
        "create = pygit2.Repository.create_commit\n"
        "def create_then_die(self, *args, **kwargs):\n"
        "    create(self, *args, **kwargs)\n    os.kill(os.getpid(), 9)\n"
        "pygit2.Repository.create_commit = create_then_die\n"
        "Engram(cwd=sys.argv[1]).compact()\n",
        str(project),
    )
    killed.wait()
    status = git(project, "status", "--porcelain", "--", ".engram").splitlines()
    folded = [line[3:] for line in status if line.startswith("AD ")]
    assert len(folded) >= 3, status  # staged, yet gone from HEAD and from disk

    code, report = doctor(cwd=project)
    [behind] = findings(report, "git-index")
    assert code == 1 and all(path in behind["fix"] for path in folded), behind
    assert cli("doctor", "--fix", cwd=project).exit_code == 0
    assert git(project, "status", "--porcelain", "--", ".engram") == ""
    assert doctor(cwd=project)[0] == 0
    texts = {m.content for m in Engram(cwd=project, use="project").memories(limit=None)}
    assert {f"folded by a compaction killed half-way {n}" for n in range(3)} <= texts


def test_uncommitted_events_are_a_note_until_the_batch_is_overdue(home_store: Engram) -> None:
    home_store.remember("fresh: the next batch takes it")
    code, report = doctor()
    [note] = findings(report, "uncommitted")
    assert code == 0 and note["level"] == "note" and note["fix"] == "`engram commit --personal`"

    assert cli("config", "set", "commit.auto", "false").exit_code == 0
    assert cli("config", "set", "commit.every_seconds", "0").exit_code == 0
    Engram().remember("overdue: nothing commits it", check_duplicates=False)
    code, report = doctor()
    [late] = problems(report)
    assert code == 1 and late["check"] == "uncommitted" and late["level"] == "warning"
    assert cli(*commands(late["fix"])[0].split()[1:]).exit_code == 0
    assert doctor()[0] == 0


def test_a_merge_in_progress_is_reported_with_how_to_finish_it(project: Path) -> None:
    (project / "app.py").write_text("base\n")
    git(project, "add", "app.py")
    git(project, "commit", "-q", "-m", "base")
    git(project, "checkout", "-q", "-b", "other")
    (project / "app.py").write_text("theirs\n")
    git(project, "commit", "-q", "-am", "theirs")
    git(project, "checkout", "-q", "main")
    (project / "app.py").write_text("ours\n")
    git(project, "commit", "-q", "-am", "ours")
    assert "CONFLICT" in git(project, "merge", "other", check=False)

    Engram(cwd=project).remember("writes go on during a merge", check_duplicates=False)
    code, report = doctor(cwd=project)
    [busy] = problems(report)
    assert code == 1 and busy["check"] == "git-busy" and "merge" in busy["message"]
    assert [c.split()[-2:] for c in commands(busy["fix"])] == [
        ["merge", "--continue"],
        ["merge", "--abort"],
    ]
    subprocess.run(commands(busy["fix"])[1], shell=True, check=True, capture_output=True)
    assert doctor(cwd=project)[0] == 0


def test_a_damaged_cache_is_reported_and_rebuilt_by_fix(home_store: Engram) -> None:
    ids = {home_store.remember(f"memory {n}", check_duplicates=False).id for n in range(3)}
    assert {m.id for m in home_store.memories()} == ids
    home_store.close()
    cache = home_store.personal.local_dir / "cache" / "projection.sqlite3"
    cache.write_bytes(os.urandom(8192))

    code, report = doctor()
    [damaged] = problems(report)
    assert code == 1 and damaged["check"] == "cache" and damaged["path"] == str(cache)
    assert commands(damaged["fix"])[0] == "engram reindex --personal"
    assert doctor("--fix")[0] == 0
    assert {m.id for m in Engram().memories()} == ids


def test_missing_caches_are_a_note(home_store: Engram) -> None:
    home_store.remember("caches are built by the first read")
    home_store.close()
    for path in (home_store.personal.local_dir / "cache").iterdir():
        if path.is_file():
            path.unlink()
    code, report = doctor()
    [note] = findings(report, "cache")
    assert code == 0 and note["level"] == "note" and "not built yet" in note["message"]


def test_damaged_writer_bookkeeping_is_removed_by_fix(home_store: Engram) -> None:
    first = home_store.remember("before the damage", check_duplicates=False)
    state = home_store.personal.local_dir / "writer.json"
    state.write_bytes(b'{"writer": 7, "size": "x"}')
    code, report = doctor()
    [damaged] = problems(report)
    assert code == 1 and damaged["check"] == "local-state" and damaged["path"] == str(state)
    assert doctor("--fix")[0] == 0
    second = Engram().remember("after the repair", check_duplicates=False)
    assert {m.id for m in Engram().memories()} == {first.id, second.id}


def test_a_committed_file_gone_from_the_work_tree_is_restored_by_the_printed_command(
    project: Path,
) -> None:
    engram = Engram(cwd=project)
    kept = engram.remember("committed, then deleted by hand", check_duplicates=False)
    engram.commit()
    path = writer_file(engram.project)
    path.unlink()
    code, report = doctor(cwd=project)
    [missing] = [f for f in problems(report) if f["check"] == "missing-file"]
    assert code == 1 and missing["path"] == engram.project.rel(path)
    subprocess.run(commands(missing["fix"])[0], shell=True, check=True, capture_output=True)
    assert doctor(cwd=project)[0] == 0
    assert kept.id in {m.id for m in Engram(cwd=project).memories()}


def test_a_committed_part_changed_by_hand_is_reported_with_diff_and_checkout(project: Path) -> None:
    engram = Engram(cwd=project)
    for n in range(3):
        engram.remember(f"memory {n}", check_duplicates=False)
    engram.commit()
    path = writer_file(engram.project)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:1] + lines[2:]))  # a whole line deleted by hand
    code, report = doctor(cwd=project)
    [changed] = [f for f in problems(report) if f["check"] == "committed-changed"]
    assert code == 1 and changed["path"] == engram.project.rel(path)
    diff, checkout = commands(changed["fix"])
    assert " diff HEAD -- " in diff and " checkout HEAD -- " in checkout
    subprocess.run(checkout, shell=True, check=True, capture_output=True)
    assert doctor(cwd=project)[0] == 0


def test_a_hand_edited_line_that_still_parses_is_reported(home_store: Engram) -> None:
    home_store.remember("one", check_duplicates=False)
    path = writer_file(home_store.personal)
    line = path.read_bytes().splitlines()[-1]
    path.write_bytes(path.read_bytes().replace(line, json.dumps(json.loads(line)).encode()))
    code, report = doctor()
    [edited] = problems(report)
    assert code == 1 and edited["check"] == "event-file" and "canonical" in edited["message"]


def test_missing_store_files_are_recreated_and_committed_by_fix(home_store: Engram) -> None:
    root = home_store.personal.root
    for name in ("config.yaml", "README.md", ".gitattributes"):
        (root / name).unlink()
    code, report = doctor()
    assert code == 1
    assert sorted(f["path"] for f in problems(report)) == [
        ".gitattributes",
        "README.md",
        "config.yaml",
    ]
    assert all("`engram init`" in f["fix"] for f in problems(report))
    assert doctor("--fix")[0] == 0
    assert all((root / name).exists() for name in ("config.yaml", "README.md", ".gitattributes"))
    assert git(root, "status", "--porcelain") == ""


@pytest.mark.skipif(
    not fsjail.can_mount() and os.geteuid() == 0,
    reason="needs a mount namespace (CAP_SYS_ADMIN) when running as root",
)
def test_a_read_only_store_is_reported(home_store: Engram) -> None:
    home_store.remember("written before the disk went read-only")
    with fsjail.read_only(home_store.personal.root) as jail:
        done = jail.engram("doctor", "--json")
    report = json.loads(done.stdout)
    [disk] = problems(report)
    assert done.returncode == 1 and disk["check"] == "disk" and disk["level"] == "error"
    assert "reads work, writes fail" in disk["message"]
    assert ("remount" in disk["fix"]) if jail.holder else ("chmod -R u+w" in disk["fix"])


@pytest.mark.skipif(not fsjail.can_mount(), reason="needs a mount namespace (CAP_SYS_ADMIN)")
def test_a_full_disk_is_reported(tmp_path: Path) -> None:
    disk = tmp_path / "home"
    with fsjail.small_disk(disk, 2048) as jail:
        assert jail.engram("init").returncode == 0
        jail.shell(f"dd if=/dev/zero of={disk}/filler bs=4k count=4096 2>/dev/null")
        done = jail.engram("doctor", "--json")
    report = json.loads(done.stdout)
    [full] = problems(report)
    assert done.returncode == 1 and full["check"] == "disk" and "full" in full["message"]
    assert "df -h" in full["fix"]


def test_lines_git_converted_to_crlf_are_read_and_fix_names_and_undoes_the_cause(
    home_store: Engram,
) -> None:
    """A committed .gitattributes asks git for CR LF event files (a fresh checkout then has
    them): everything still reads, verify fails, doctor names the attribute, and --fix restores
    the store's own attribute lines and checks the files out again with LF endings."""
    store = home_store.personal
    kept = home_store.remember("Use Postgres for the job queue", check_duplicates=False)
    home_store.commit()
    (store.root / ".gitattributes").write_text("*.jsonl text eol=crlf\n")
    git(store.root, "commit", "-q", "-am", "line endings")
    for path in store.event_files():
        path.unlink()
    git(store.root, "checkout", "--", "events")
    assert all(b"\r\n" in p.read_bytes() for p in store.event_files())

    assert kept.id in {m.id for m in Engram().memories()}
    verified = cli("verify")
    assert verified.exit_code == 1 and "line ends with CR LF" in verified.output
    code, report = doctor()
    assert {f["check"] for f in problems(report)} == {"attributes"}, problems(report)
    converted = [f for f in problems(report) if f["level"] == "error"]
    assert code == 1 and converted
    assert all("`eol=crlf` (converts its line endings)" in f["message"] for f in converted)

    fixed = cli("doctor", "--fix")
    assert "out again as they were committed (git had converted them: eol=crlf)" in fixed.output
    assert "*.jsonl text eol=lf merge=union" in (store.root / ".gitattributes").read_text()
    assert not any(b"\r" in p.read_bytes() for p in store.event_files())
    cli("commit")
    assert cli("verify").exit_code == 0
    assert doctor()[0] == 0
    assert kept.id in {m.id for m in Engram().memories()}


def test_symbolic_links_anywhere_in_the_store_are_listed(
    home_store: Engram, tmp_path: Path
) -> None:
    store = home_store.personal
    home_store.remember("Use Postgres for the job queue", check_duplicates=False)
    outside = tmp_path / "outside"
    outside.mkdir()
    (store.root / "handoffs" / "t1").parent.mkdir(exist_ok=True)
    (store.root / "handoffs" / "t1").symlink_to(outside, target_is_directory=True)
    (store.root / "config.yaml").rename(outside / "config.yaml")
    (store.root / "config.yaml").symlink_to(outside / "config.yaml")

    code, report = doctor()
    links = findings(report, "symlink")
    assert code == 1 and sorted(f["path"] for f in links) == ["config.yaml", "handoffs/t1"]
    assert all("git -C" in f["fix"] and " rm -- " in f["fix"] for f in links)
    verified = cli("verify", "--json")
    assert verified.exit_code == 1
    assert {p["path"] for p in json.loads(verified.stdout)["stores"][0]["problems"]} >= {
        "config.yaml",
        "handoffs/t1",
    }


def test_a_teammates_lines_a_merge_brings_in_are_never_taken_out_by_fix(
    tmp_path: Path, project: Path
) -> None:
    """Bob pushes an event file with a line a newer Engram wrote; Alice's pull stops on a
    conflict in her code; `doctor --fix` during the merge must leave Bob's lines, and the
    pre-commit check must refuse a merge commit that drops them."""
    bare = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    (project / "a.txt").write_text("base\n")
    git(project, "add", "a.txt")
    git(project, "commit", "-q", "-m", "base")
    git(project, "remote", "add", "origin", str(bare))
    git(project, "push", "-q", "-u", "origin", "main")
    bob = tmp_path / "bob"
    git(tmp_path, "clone", "-q", str(bare), str(bob))
    rel = "events/2026/12/bobmachine-newer001.jsonl"
    mine = Engram(cwd=bob).remember("Bob's decision", check_duplicates=False).memory
    Engram(cwd=bob).commit()
    bobs = (bob / ".engram" / WriterState.load(Engram(cwd=bob).project).segment).read_bytes()
    newer = json.loads(bobs.splitlines()[-1])
    newer.update(schema=2, id=newer["id"][:-1] + ("A" if newer["id"][-1] != "A" else "B"))
    lines = bobs + json.dumps(newer, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    (bob / ".engram" / rel).parent.mkdir(parents=True, exist_ok=True)
    (bob / ".engram" / rel).write_bytes(lines)
    (bob / "a.txt").write_text("bob\n")
    git(bob, "add", "-A")
    git(bob, "commit", "-q", "-m", "bob's work")
    git(bob, "push", "-q", "origin", "main")

    (project / "a.txt").write_text("alice\n")
    git(project, "commit", "-q", "-am", "alice's work")
    assert "CONFLICT" in git(project, "pull", "--no-rebase", "origin", "main", check=False)
    path = project / ".engram" / rel
    assert path.read_bytes() == lines  # the merge brought Bob's file in

    doctor("--fix", cwd=project)
    assert path.read_bytes() == lines  # a teammate's lines are set aside, never taken out
    (project / "a.txt").write_text("both\n")
    git(project, "add", "a.txt")
    git(project, "commit", "-q", "--no-edit")
    assert git(project, "show", f"HEAD:.engram/{rel}").encode() == lines
    assert mine.id in {m.id for m in Engram(cwd=project).memories()}

    # Had the line been taken out by hand, the pre-commit check refuses the merge commit.
    from engram.git.hooks import lost_lines
    from engram.git.repo import open_repository

    git(project, "reset", "-q", "--hard", "HEAD~1")
    assert "CONFLICT" in git(project, "pull", "--no-rebase", "origin", "main", check=False)
    path.write_bytes(bobs)
    git(project, "add", "-A")
    repo = open_repository(project)
    problems_found = lost_lines(Engram(cwd=project).project, repo, repo.head.peel().tree)
    assert any(rel in p and "would be in no event file" in p for p in problems_found)
