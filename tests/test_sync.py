"""Two machines and a git server: clone to resume, work offline, sync, end with the union.

Each "machine" is its own ENGRAM_HOME and machine name, driven through the real `engram`
command in child processes. The server is a bare repository reached by path, or the same
repository served by a real `git daemon` on 127.0.0.1 (started here, stopped after).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engram.storage.store import Store
from tests.conftest import git, run_engram


class Server:
    def __init__(self, root: Path, transport: str) -> None:
        self.root = root
        self.transport = transport
        self.bare = root / "store.git"
        git(root, "init", "-q", "--bare", str(self.bare))
        self.daemon: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.start()

    @property
    def url(self) -> str:
        if self.transport == "daemon":
            return f"git://127.0.0.1:{self.port}/store.git"
        return str(self.bare)

    def start(self) -> None:
        if self.transport == "path":
            hidden = self.root / "store.git.offline"
            if hidden.exists():
                hidden.rename(self.bare)
            return
        if not self.port:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                self.port = probe.getsockname()[1]
        self.daemon = subprocess.Popen(
            [
                "git",
                "daemon",
                "--export-all",
                "--enable=receive-pack",
                "--reuseaddr",
                "--listen=127.0.0.1",
                f"--port={self.port}",
                f"--base-path={self.root}",
                str(self.root),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("git daemon did not start")

    def stop(self) -> None:
        """The network goes away: the daemon stops, or the path disappears."""
        if self.transport == "path":
            self.bare.rename(self.root / "store.git.offline")
            return
        if self.daemon is not None:
            self.daemon.terminate()
            self.daemon.wait(timeout=10)
            self.daemon = None


@pytest.fixture(params=["path", "daemon"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    root = tmp_path / "server"
    root.mkdir()
    srv = Server(root, request.param)
    yield srv
    if srv.daemon is not None:
        srv.stop()


class Machine:
    def __init__(self, tmp_path: Path, name: str) -> None:
        self.name = name
        self.home = tmp_path / name / ".engram"
        self.home.parent.mkdir(parents=True)
        self.env = {
            "ENGRAM_HOME": str(self.home),
            "ENGRAM_MACHINE": name,
            "ENGRAM_ACTOR": f"Agent on {name} <{name}@example.com>",
        }

    def run(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        done = run_engram(*args, env=self.env, cwd=self.home.parent)
        if ok and done.returncode != 0:
            raise AssertionError(
                f"engram {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
            )
        return done

    def json(self, *args: str) -> object:
        return json.loads(self.run(*args, "--json").stdout)

    def event_ids(self) -> list[str]:
        """Every event id in every event file, duplicates kept (so that they can be seen)."""
        ids = []
        for path in Store(self.home, "personal").event_files():
            ids += [json.loads(line)["id"] for line in path.read_text().splitlines()]
        return ids


def test_clone_to_resume_then_both_sides_work_offline_and_sync_to_the_union(
    tmp_path: Path, server: Server
) -> None:
    a, b = Machine(tmp_path, "alpha"), Machine(tmp_path, "beta")

    # Machine A records a task, progress, a failure and a handoff, and syncs.
    a.run("init")
    task = a.json("task", "create", "Port the parser", "--goal", "parser on the new API")["id"]
    a.run("task", "progress", task, "tokenizer", "--status", "done", "--component", "lexer")
    a.run(
        "task",
        "failure",
        task,
        "segfault in the lexer on empty input",
        "--component",
        "lexer",
        "--root-cause",
        "a NULL buffer",
    )
    a.run(
        "handoff",
        "--task",
        task,
        "--summary",
        "Tokenizer done; lexer crashes on empty input",
        "--next",
        "Guard the empty buffer in lex()",
        "--must-not-redo",
        "Regenerate the grammar tables (takes an hour)",
    )
    a.run("remember", "The lexer buffer is allocated lazily", "--kind", "gotcha")
    a.run("remote", "add", "origin", server.url)
    synced = a.run("sync").stdout
    assert "pushed" in synced

    # Machine B clones; resume returns A's state.
    cloned = b.run("clone", server.url)
    assert "cloned" in cloned.stdout
    resumed = b.run("resume", "--task", task).stdout
    for expected in (
        "Port the parser",
        "Tokenizer done; lexer crashes on empty input",
        "Guard the empty buffer in lex()",
        "segfault in the lexer",
        "Regenerate the grammar tables",
    ):
        assert expected in resumed
    assert b.run("reindex", "--check").returncode == 0

    # B works and syncs.
    b.run(
        "task", "progress", task, "empty-buffer guard", "--status", "done", "--component", "lexer"
    )
    b.run(
        "remember", "Run the lexer fuzzer with -runs=10000 before pushing", "--kind", "convention"
    )
    b.run("sync")

    # Meanwhile A works offline: everything but sync works, and sync says why it cannot.
    server.stop()
    a.run("remember", "Parser errors carry byte offsets, not line numbers", "--kind", "decision")
    a.run("task", "progress", task, "error positions", "--status", "done")
    assert "byte offsets" in a.run("recall", "error positions in the parser").stdout
    offline = a.run("sync", ok=False)
    assert offline.returncode == 1
    assert offline.stderr.startswith("error: could not fetch from origin")
    assert "next `engram sync`" in offline.stderr
    assert offline.stderr.count("\n") == 1

    # Back online, both sync: same events on both, no conflict, no duplicate, nothing lost.
    server.start()
    merged = a.run("sync").stdout
    assert "merged" in merged and "received" in merged
    b.run("sync")
    ids_a, ids_b = a.event_ids(), b.event_ids()
    assert len(ids_a) == len(set(ids_a)) and len(ids_b) == len(set(ids_b))
    assert set(ids_a) == set(ids_b)
    for machine in (a, b):
        assert machine.run("verify").returncode == 0
        status = machine.json("status")[0]
        assert status["uncommitted"] == 0
        assert status["upstream"] == {"upstream": "origin/main", "ahead": 0, "behind": 0}
        assert machine.run("reindex", "--check").returncode == 0  # indexes current
        found = machine.run("recall", "lexer fuzzer before pushing").stdout
        assert "-runs=10000" in found
        found = machine.run("recall", "byte offsets for parser errors").stdout
        assert "byte offsets" in found
        shown = machine.json("task", "show", task)
        features = {p["feature"]: p["status"] for p in shown["task"]["progress"]}
        assert features == {
            "tokenizer": "done",
            "empty-buffer guard": "done",
            "error positions": "done",
        }
    log = git(a.home, "log", "--format=%an|%s")
    assert "engram sync: merge origin/main" in log


def test_clone_refuses_an_existing_store_and_an_empty_remote(tmp_path: Path) -> None:
    root = tmp_path / "server"
    root.mkdir()
    git(root, "init", "-q", "--bare", "empty.git")
    b = Machine(tmp_path, "beta")
    empty = b.run("clone", str(root / "empty.git"), ok=False)
    assert empty.returncode == 1
    assert "is empty" in empty.stderr and "engram remote add origin" in empty.stderr
    assert not b.home.exists()
    assert [p.name for p in b.home.parent.iterdir()] == []  # nothing half-cloned left behind

    b.run("init")
    again = b.run("clone", str(root / "empty.git"), ok=False)
    assert again.returncode == 2
    assert "a personal store exists already" in again.stderr

    missing = Machine(tmp_path, "gamma").run("clone", str(root / "nowhere.git"), ok=False)
    assert missing.returncode == 1 and missing.stderr.startswith("error: could not clone")


def test_sync_without_a_remote_names_the_fix(tmp_path: Path) -> None:
    a = Machine(tmp_path, "alpha")
    a.run("init")
    done = a.run("sync", ok=False)
    assert done.returncode == 1
    assert "engram remote add origin URL" in done.stderr
    assert a.run("remote", "list").stdout.strip() == "personal store: no remotes"
    a.run("remote", "add", "backup", str(tmp_path / "b.git"))
    assert "backup" in a.run("remote", "list").stdout
    dup = a.run("remote", "add", "backup", "x", ok=False)
    assert dup.returncode == 2 and "exists already" in dup.stderr
    for name, url, says in (
        ("../x", "u", "must be letters"),
        ("ok", "", "the URL is empty"),
        ("ok", "a\x1bb", "control character"),
    ):
        bad = a.run("remote", "add", name, url, ok=False)
        assert bad.returncode == 2 and says in bad.stderr and bad.stderr.count("\n") == 1
    a.run("remote", "remove", "backup")
    gone = a.run("remote", "remove", "backup", ok=False)
    assert gone.returncode == 2 and "no remote named 'backup'" in gone.stderr


def _two_machines(tmp_path: Path) -> tuple[Machine, Machine]:
    """A store made on one machine, pushed to a bare repository, and cloned on another."""
    root = tmp_path / "server"
    root.mkdir()
    srv = Server(root, "path")
    a, b = Machine(tmp_path, "alpha"), Machine(tmp_path, "beta")
    a.run("init")
    a.run("remote", "add", "origin", srv.url)
    a.run("sync")
    b.run("clone", srv.url)
    return a, b


def test_push_refused_when_the_remote_moved_on_and_sync_merges(tmp_path: Path) -> None:
    a, b = _two_machines(tmp_path)
    b.run("remember", "beta was here")
    b.run("push")
    a.run("remember", "alpha was here")
    refused = a.run("push", ok=False)
    assert refused.returncode == 1 and "run `engram sync`" in refused.stderr
    pulled = a.run("pull").stdout
    assert "merged" in pulled
    a.run("push")
    b.run("pull")
    assert set(a.event_ids()) == set(b.event_ids())


def test_a_merge_conflict_outside_the_events_is_aborted_and_explained(tmp_path: Path) -> None:
    a, b = _two_machines(tmp_path)
    b.run("config", "set", "recall.min_relevance", "0.3")
    b.run("sync")
    a.run("config", "set", "recall.min_relevance", "0.25")
    head = git(a.home, "rev-parse", "HEAD")
    done = a.run("sync", ok=False)
    assert done.returncode == 1
    assert "conflicts in config.yaml" in done.stderr and "nothing was changed" in done.stderr
    assert git(a.home, "rev-parse", "HEAD") == head
    assert not (a.home / ".git" / "MERGE_HEAD").exists()
    assert "<<<<<<<" not in (a.home / "config.yaml").read_text()


def test_event_files_are_never_extended_after_a_commit(tmp_path: Path) -> None:
    """What keeps squash merges and cherry-picks conflict-free: each event file is added by one
    commit and never changed by a later one."""
    a = Machine(tmp_path, "alpha")
    a.run("init")
    for n in range(3):
        a.run("remember", f"fact number {n}")
        a.run("commit")
    changed_later = git(
        a.home, "log", "--format=", "--diff-filter=M", "--name-only", "--", "events"
    )
    assert changed_later.strip() == ""
    added = git(a.home, "log", "--format=", "--diff-filter=A", "--name-only", "--", "events")
    assert len(added.split()) >= 4  # init, then one per commit


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_runs_with_the_users_own_configuration(tmp_path: Path) -> None:
    """`url.<base>.insteadOf` in the user's git config is honoured, as by `git fetch`."""
    root = tmp_path / "server"
    root.mkdir()
    srv = Server(root, "path")
    config = Path(os.environ["GIT_CONFIG_GLOBAL"])
    config.write_text(f'[url "{root}/"]\n\tinsteadOf = company:\n')
    a = Machine(tmp_path, "alpha")
    a.run("init")
    a.run("remote", "add", "origin", "company:store.git")
    a.run("remember", "reached through insteadOf")
    a.run("sync")
    assert "reached through insteadOf" in git(srv.bare, "log", "-1", "--format=%s", "main")


def test_project_store_syncs_the_projects_branch_and_keeps_local_edits(tmp_path: Path) -> None:
    """In a project, `engram sync` is `git pull` + `git push` of the current branch: the other
    clone's events and code arrive, a local uncommitted edit stays as it was."""
    from tests.conftest import make_repo

    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    first = make_repo(tmp_path / "first", {"app.py": "print(1)\n", "notes.txt": "x\n"})
    assert run_engram("init", "--project", cwd=first).returncode == 0
    assert run_engram("commit", cwd=first).returncode == 0
    git(first, "remote", "add", "origin", str(origin))
    done = run_engram("sync", "--project", cwd=first)
    assert done.returncode == 0, done.stderr
    assert "created origin/main" in done.stdout
    second = tmp_path / "second"
    git(tmp_path, "clone", "-q", str(origin), str(second))

    assert run_engram("remember", "first clone's decision", cwd=first).returncode == 0
    (first / "app.py").write_text("print(2)\n")
    git(first, "commit", "-q", "-am", "code change")
    assert run_engram("sync", cwd=first).returncode == 0

    assert run_engram("remember", "second clone's gotcha", cwd=second).returncode == 0
    (second / "notes.txt").write_text("uncommitted local edit\n")
    done = run_engram("sync", cwd=second)
    assert done.returncode == 0, done.stderr
    assert "merged origin/main" in done.stdout
    assert (second / "app.py").read_text() == "print(2)\n"
    assert (second / "notes.txt").read_text() == "uncommitted local edit\n"
    assert run_engram("sync", cwd=first).returncode == 0
    for clone in (first, second):
        listed = run_engram("list", "--project", cwd=clone).stdout
        assert "first clone's decision" in listed and "second clone's gotcha" in listed


def test_a_url_that_git_would_read_as_an_option_is_refused(tmp_path: Path) -> None:
    machine = Machine(tmp_path, "alpha")
    marker = tmp_path / "ran"
    for args in (
        ("clone", "--", f"--upload-pack=touch {marker}"),
        ("remote", "add", "--", "origin", f"--upload-pack=touch {marker}"),
    ):
        if args[0] == "remote":
            machine.run("init")
        done = machine.run(*args, ok=False)
        assert done.returncode == 2 and "starts with '-'" in done.stderr, args
    assert not marker.exists()


def test_a_pushed_symlink_inside_the_store_sends_nothing_out_of_it(tmp_path: Path) -> None:
    """A clone commits `handoffs/<task>` and `events/2099/01` as links to a folder outside the
    store (which holds a crafted event file): the other clone neither writes there nor reads
    from there, says which link and how to remove it, and keeps working."""
    a, b = _two_machines(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    task = json.loads(a.run("task", "create", "Add OAuth login", "--json").stdout)["id"]
    a.run("sync")
    b.run("pull")
    b.run("remember", "beta was here")
    source = next(
        p for p in Store(b.home, "personal").event_files() if b"beta was here" in p.read_bytes()
    )
    crafted = source.read_bytes().replace(b"beta was here", b"read from outside")
    (outside / "x.jsonl").write_bytes(crafted.replace(b'"01', b'"02'))
    (b.home / "events" / "2099").mkdir()
    (b.home / "events" / "2099" / "01").symlink_to(outside, target_is_directory=True)
    (b.home / "handoffs").mkdir(exist_ok=True)
    (b.home / "handoffs" / task).symlink_to(outside, target_is_directory=True)
    b.run("commit")
    git(b.home, "add", "-A")
    git(b.home, "commit", "-q", "-m", "links")
    git(b.home, "push", "-q", "origin", "HEAD")
    a.run("sync")
    listed = a.run("list")
    assert "events/2099/01 is a symbolic link inside the store" in listed.stderr
    assert "beta was here" in listed.stdout and "read from outside" not in listed.stdout
    handed = a.run("handoff", "--task", task, "--summary", "callback next")
    assert "was not written through it" in handed.stderr
    assert sorted(p.name for p in outside.iterdir()) == ["x.jsonl"]
    assert task in a.run("resume").stdout


def test_events_are_never_written_through_a_symlink(home_store: Any, tmp_path: Path) -> None:
    """The folder the writer appends to is a link (however it got there): the write is refused
    with the fix, and nothing is written where the link points."""
    from engram.api import Engram
    from engram.base.errors import EngramError

    home_store.remember("first", check_duplicates=False)
    home_store.commit()  # the next write starts a new file, in the same month folder
    month = home_store.personal.event_files()[0].parent
    outside = tmp_path / "outside"
    month.rename(outside)
    month.symlink_to(outside, target_is_directory=True)
    before = sorted(outside.iterdir())
    with pytest.raises(EngramError, match="symbolic link inside the store.*git -C .* rm -- "):
        Engram().remember("second", check_duplicates=False)
    assert sorted(outside.iterdir()) == before


def test_checkpoints_saved_on_two_machines_are_numbered_once_in_the_merged_order(
    tmp_path: Path,
) -> None:
    """Both machines save their checkpoints 1 and 2 of one task: once merged, the task has
    checkpoints 1 to 4 in the merged order, on both, and every number names one checkpoint."""
    a, b = _two_machines(tmp_path)
    task = json.loads(a.run("task", "create", "Add OAuth login", "--json").stdout)["id"]
    a.run("sync")
    b.run("pull")
    for machine in (a, b):
        for step in ("callback", "refresh"):
            machine.run("handoff", "--task", task, "--summary", f"{machine.name} {step}")
    a.run("sync")
    b.run("sync")
    a.run("pull")
    written = sorted(
        json.loads(raw)["data"]["seq"]
        for p in Store(a.home, "personal").event_files()
        for raw in p.read_bytes().splitlines()
        if b'"checkpoint.saved"' in raw
    )
    assert written == [1, 1, 2, 2]  # what each writer counted
    for machine in (a, b):
        listed = machine.json("checkpoints", "--task", task)
        assert [c["seq"] for c in listed] == [1, 2, 3, 4]
        assert len({c["checkpoint"] for c in listed}) == 4
        assert [c["clock"] for c in listed] == sorted(c["clock"] for c in listed)
        latest = listed[-1]
        assert f"checkpoint 4 ({latest['reason']})" in machine.run("resume", "--task", task).stdout
        scored = machine.json("continuity", "--task", task, "--before", "3", "--after", "4")
        assert (scored["before"], scored["after"]) == (3, 4)


def _project_clones(tmp_path: Path, files: dict[str, str]) -> tuple[Path, Path]:
    """A project with a store pushed to a bare repository, and a second clone of it."""
    from tests.conftest import make_repo

    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    first = make_repo(tmp_path / "first", files)
    assert run_engram("init", "--project", cwd=first).returncode == 0
    git(first, "remote", "add", "origin", str(origin))
    assert run_engram("sync", cwd=first).returncode == 0
    second = tmp_path / "second"
    git(tmp_path, "clone", "-q", str(origin), str(second))
    return first, second


def test_sync_blocked_by_uncommitted_edits_names_the_files_and_the_fix(tmp_path: Path) -> None:
    first, second = _project_clones(tmp_path, {"app.py": "print(1)\n"})
    (first / "app.py").write_text("print(2)\n")
    git(first, "commit", "-q", "-am", "upstream change")
    assert run_engram("sync", cwd=first).returncode == 0
    (second / "app.py").write_text("print('mine')\n")
    head = git(second, "rev-parse", "HEAD")

    done = run_engram("sync", cwd=second)
    assert done.returncode == 1
    assert done.stderr == (
        "error: could not merge origin/main: it would overwrite work you have not committed; "
        "commit or stash your changes to app.py, then run `engram sync` again; "
        "nothing was changed\n"
    )
    assert git(second, "rev-parse", "HEAD") == head
    assert (second / "app.py").read_text() == "print('mine')\n"
    git(second, "stash", "-q")
    assert run_engram("sync", cwd=second).returncode == 0


def test_sync_blocked_by_many_files_names_a_few_and_untracked_ones_apart(tmp_path: Path) -> None:
    files = {f"m{n}.py": f"{n}\n" for n in range(6)}
    first, second = _project_clones(tmp_path, files)
    for name in files:
        (first / name).write_text("upstream\n")
    (first / "new.py").write_text("upstream\n")
    git(first, "add", "-A")
    git(first, "commit", "-q", "-m", "upstream change")
    assert run_engram("sync", cwd=first).returncode == 0
    for name in files:
        (second / name).write_text("mine\n")
    (second / "new.py").write_text("mine, never added\n")

    done = run_engram("sync", cwd=second)
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert (
        "commit or stash your changes to m0.py, m1.py, m2.py and 3 more, and move away the "
        "untracked new.py, then run `engram sync` again" in done.stderr
    )
    assert (second / "new.py").read_text() == "mine, never added\n"


def test_a_new_branch_counts_only_the_commits_the_remote_lacks(tmp_path: Path) -> None:
    first, _ = _project_clones(tmp_path, {"app.py": "print(1)\n"})
    for n in range(5):
        (first / "app.py").write_text(f"print({n})\n")
        git(first, "commit", "-q", "-am", f"change {n}")
    assert "pushed 5 commits to origin/main" in run_engram("sync", cwd=first).stdout
    git(first, "switch", "-q", "-c", "feature")
    (first / "feature.py").write_text("new\n")
    git(first, "add", "feature.py")
    git(first, "commit", "-q", "-m", "a feature")

    done = run_engram("sync", cwd=first)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "project store: created origin/feature, pushed 1 commit to origin/feature\n"
    )
    assert git(first, "rev-parse", "origin/feature") == git(first, "rev-parse", "HEAD")


def test_a_push_that_loses_the_race_for_the_remote_branch_merges_and_pushes_again(
    tmp_path: Path,
) -> None:
    """Another clone's push lands while this one's runs: the remote refuses the ref update
    (`cannot lock ref ...: is at X but expected Y`), and the sync fetches, merges, pushes again."""
    first, second = _project_clones(tmp_path, {"app.py": "print(1)\n"})
    (second / "other.py").write_text("theirs\n")
    git(second, "add", "other.py")
    git(second, "commit", "-q", "-m", "a teammate's change")
    git(second, "push", "-q", "origin", "HEAD:refs/heads/theirs")
    hook = tmp_path / "origin.git" / "hooks" / "pre-receive"
    hook.write_text(  # the teammate's push lands between this push's check and its update
        "#!/bin/sh\ncat >/dev/null\n"
        "if [ ! -e landed ]; then touch landed;\n"
        "  env -u GIT_QUARANTINE_PATH git update-ref refs/heads/main theirs; fi\n"
    )
    hook.chmod(0o755)
    assert run_engram("remember", "a memory that must reach the remote", cwd=first).returncode == 0

    done = run_engram("sync", cwd=first)
    assert done.returncode == 0, done.stderr
    assert "merged origin/main" in done.stdout
    assert git(first, "rev-parse", "origin/main") == git(first, "rev-parse", "HEAD")
    assert "a teammate's change" in git(first, "log", "--format=%s", "origin/main")
