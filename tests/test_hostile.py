"""Hostile commits: what one clone pushes, every other clone must survive.

A second clone writes crafted event lines (and files, links and attributes) with plain git and
pushes them to a real `git daemon` on 127.0.0.1, as a hostile teammate or a broken machine
would. The first clone syncs and then runs every command: each exits as it would on a healthy
store (no traceback), the bad lines are named with file and line, everything else reads as
before, the clone still writes and syncs, and `engram verify` fails naming each bad line.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.storage import events as ev
from engram.storage.store import Store
from tests.conftest import cli, git
from tests.test_fuzz import events as fuzz_events
from tests.test_fuzz import json_values, line_of
from tests.test_sync import Machine, Server

Edit = Callable[[dict[str, Any]], object]

YEAR_2200 = 7_258_118_400 * 10**6


class Clones:
    """Alpha (the victim) and beta (the hostile clone), sharing a store through a git daemon."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        root = tmp_path / "server"
        root.mkdir()
        self.server = Server(root, "daemon")
        self.monkeypatch = monkeypatch
        self.a, self.b = Machine(tmp_path, "alpha"), Machine(tmp_path, "beta")
        self.a.run("init")
        self.a.run("remote", "add", "origin", self.server.url)
        self.a.run("remember", "alpha decided to keep the job queue in Postgres")
        self.a.run("sync")
        self.b.run("clone", self.server.url)
        self.b.run("remember", "beta was here before the crafted lines")
        self.task = json.loads(
            self.b.run(
                "task", "create", "Add OAuth login", "--goal", "login with GitHub", "--json"
            ).stdout
        )["id"]
        self.b.run("task", "progress", self.task, "callback handler", "--status", "done")
        self.b.run("task", "failure", self.task, "token exchange returns 401")
        self.b.run(
            "handoff",
            "--task",
            self.task,
            "--summary",
            "callback works",
            "--next",
            "refresh tokens",
        )
        self.b.run("push")
        self.bases = {}
        for path in Store(self.b.home, "personal").event_files():
            for raw in path.read_bytes().splitlines():
                event = json.loads(raw)
                self.bases.setdefault(event["kind"], event)
        created = self.bases["memory.created"]
        memory = created["data"]["memory"]
        for kind, data in (
            ("session.started", {"session_id": "s-crafted", "agent": "cli", "pid": 1}),
            ("memory.updated", {"memory": memory, "content": "beta was here, updated"}),
            ("memory.forgotten", {"memory": memory, "reason": "crafted"}),
            ("task.updated", {"task": self.task, "name": "Add OAuth login, renamed"}),
        ):
            self.bases.setdefault(kind, {**created, "kind": kind, "data": data})
        self.pushed = 0

    def base(self, kind: str = "memory.created") -> dict[str, Any]:
        event = json.loads(json.dumps(self.bases[kind]))
        event["id"] = ev.new_event_id()
        return event

    def push_lines(
        self,
        lines: list[bytes],
        *,
        folder: str | None = None,
        name: str = "crafted-{n:04d}.jsonl",
        tail: bytes = b"",
    ) -> str:
        """Beta commits `lines` (and an unterminated `tail`) as a new event file with plain git
        and pushes it; returns the file's store-relative path."""
        self.pushed += 1
        store = Store(self.b.home, "personal")
        month = store.root / folder if folder else store.event_files()[0].parent
        month.mkdir(parents=True, exist_ok=True)
        path = month / name.format(n=self.pushed)
        path.write_bytes(b"".join(line + b"\n" for line in lines) + tail)
        git(self.b.home, "add", "-A")
        git(self.b.home, "commit", "-q", "-m", "crafted lines")
        git(self.b.home, "push", "-q", "origin", "HEAD")
        return store.rel(path)

    def alpha(self, *args: str) -> Result:
        """An `engram` command on alpha, in this process (a crash fails the test with its
        traceback)."""
        for name, value in self.a.env.items():
            self.monkeypatch.setenv(name, value)
        self.monkeypatch.chdir(self.a.home.parent)
        return cli(*args)

    def every_command(self) -> dict[str, Result]:
        """Every command a user or agent runs, on alpha; each must exit as on a healthy store
        (`verify` and `doctor` exit 1: they report the damage)."""
        commands = [
            ("list",),
            ("list", "--json"),
            ("status",),
            ("recall", "job queue"),
            ("recall", "beta", "--json"),
            ("resume",),
            ("resume", "--json"),
            ("log",),
            ("sessions",),
            ("stats",),
            ("task", "list", "--all"),
            ("task", "show", self.task),
            ("timeline", self.task),
            ("checkpoints", "--task", self.task),
            ("export", "-"),
            ("consolidate",),
            ("continuity", "--task", self.task),
            ("show", self.task),
            ("reindex",),
            ("sync",),
        ]
        results = {}
        for args in commands:
            done = self.alpha(*args)
            assert done.exit_code == 0, (args, done.output)
            results[" ".join(args)] = done
        for args in (("verify",), ("doctor",)):
            done = self.alpha(*args)
            assert done.exit_code == 1, (args, done.output)
            results[" ".join(args)] = done
        return results

    def intact(self) -> None:
        """What was there before is all still there, and alpha still writes and syncs."""
        listed = self.alpha("list", "--all").stdout
        assert "alpha decided to keep the job queue" in listed
        assert "beta was here before the crafted lines" in listed
        assert "job queue in Postgres" in self.alpha("recall", "where do jobs wait").stdout
        assert "Add OAuth login" in self.alpha("resume", "--task", self.task).stdout
        text = f"alpha writes after crafted push {self.pushed}"
        done = self.alpha("remember", text)
        assert done.exit_code == 0, done.output
        [clock] = [
            json.loads(raw)["clock"]
            for p in Store(self.a.home, "personal").event_files()
            for raw in p.read_bytes().splitlines()
            if text.encode() in raw
        ]
        assert clock < (time.time() + 3600) * 1e6, "a new event followed a crafted clock"
        assert self.alpha("sync").exit_code == 0
        self.b.run("pull")
        assert f"alpha writes after crafted push {self.pushed}" in self.b.run("list").stdout

    def verify_names(self, rel: str, numbers: set[int]) -> None:
        report = json.loads(self.alpha("verify", "--json").stdout)
        named = {(p["path"], p["line"]) for store in report["stores"] for p in store["problems"]}
        assert {(rel, n) for n in numbers} <= named, sorted(named)

    def close(self) -> None:
        self.server.stop()


@pytest.fixture
def clones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Clones]:
    made = Clones(tmp_path, monkeypatch)
    yield made
    made.close()


def _data(**fields: Any) -> Edit:
    return lambda event: event["data"].update(fields)


# Each crafted line: the kind of event it starts from, and how it is changed. Every one of them
# must be skipped and named.
HOSTILE: dict[str, tuple[str, Edit]] = {
    "clock 2^63": ("memory.created", lambda e: e.update(clock=2**63)),
    "clock 2^63 - 1": ("memory.created", lambda e: e.update(clock=2**63 - 1)),
    "clock 2^64 - 1": ("memory.created", lambda e: e.update(clock=2**64 - 1)),
    "clock negative": ("memory.created", lambda e: e.update(clock=-1)),
    "memory id Hello-World.1": ("memory.created", _data(memory="Hello-World.1")),
    "memory id of 14 characters": (
        "memory.created",
        lambda e: e["data"].update(memory=e["data"]["memory"] + "xy"),
    ),
    "memory id 0 + a real id": (
        "memory.created",
        lambda e: e["data"].update(memory="0" + e["data"]["memory"]),
    ),
    "memory id a path": ("memory.updated", _data(memory="../../etc/passwd", content="x")),
    "kind in capitals": ("memory.created", lambda e: e.update(kind="Memory.Created")),
    "kind of 5000 characters": ("memory.created", lambda e: e.update(kind="m." + "x" * 5000)),
    "actor with a terminal escape": (
        "memory.created",
        lambda e: e.update(actor="\x1b]0;owned\x07Tester"),
    ),
    "actor with a newline": ("memory.created", lambda e: e.update(actor="a\n## Must preserve")),
    "actor of 10,000 characters": ("memory.created", lambda e: e.update(actor="a" * 10_000)),
    "session a path": ("memory.created", lambda e: e.update(session="../../etc")),
    "machine with escapes": ("memory.created", lambda e: e.update(machine="\x1b[2Jbox")),
    "schema a string": ("memory.created", lambda e: e.update(schema="1")),
    "schema 2^64 - 1": ("memory.created", lambda e: e.update(schema=2**64 - 1)),
    "schema a long list": ("memory.created", lambda e: e.update(schema=[1] * 500)),
    "time without offset": ("memory.created", lambda e: e.update(time="2026-01-01T00:00:00")),
    "id not a ULID": ("memory.created", lambda e: e.update(id="x" * 26)),
    "id missing": ("memory.created", lambda e: e.pop("id")),
    "an unknown field": ("memory.created", lambda e: e.update(evil=True)),
    "an unknown field named with escapes": (
        "memory.created",
        lambda e: e.update({"\x1b]0;x\x07" * 500: 1}),
    ),
    "data a list": ("memory.created", lambda e: e.update(data=[1, 2])),
    "tags a string": ("memory.created", _data(tags="../../etc")),
    "content a number": ("memory.created", _data(content=7)),
    "task id a path": ("task.updated", _data(task="../../x", name="y")),
    "checkpoint seq 2^63": ("checkpoint.saved", _data(seq=2**63)),
    "checkpoint seq negative": ("checkpoint.saved", _data(seq=-5)),
    "session pid 2^62": ("session.started", _data(pid=2**62)),
    "session pid 2^64 - 1": ("session.started", _data(pid=2**64 - 1)),
    "working set not a mapping": ("checkpoint.saved", _data(working_set=["a"])),
}

RAW: dict[str, bytes] = {
    "blank": b"",
    "spaces": b"   ",
    "conflict marker": b"<<<<<<< HEAD",
    "conflict separator": b"=======",
    "not JSON": b"{nope",
    "a JSON array": b"[1, 2, 3]",
    "a JSON string": b'"memory.created"',
    "invalid UTF-8": b'{"actor":"\xff\xfe"}',
    "nested 100,000 deep": b"[" * 100_000 + b"]" * 100_000,
    "a line of 17 MiB": b'{"actor":"' + b"x" * (17 * 1024 * 1024) + b'"}',
    "a NUL": b"\x00",
}

# Lines that are events, if strange ones: they are read, and must break nothing either.
STRANGE: dict[str, tuple[str, Edit]] = {
    # Read in its place; the clocks written here never follow it (`Clones.intact`).
    "clock in 2200": ("memory.created", lambda e: e.update(clock=YEAR_2200)),
    "dated 9999-12-31": ("memory.created", lambda e: e.update(time="9999-12-31T23:59:59.999999Z")),
    "dated 0001-01-01": ("memory.created", lambda e: e.update(time="0001-01-01T00:00:00.000000Z")),
    "an update of an unknown memory": (
        "memory.updated",
        _data(memory="zzzzzzzzzzzz", content="ghost"),
    ),
    "supersedes itself": (
        "memory.created",
        lambda e: e["data"].update(supersedes=[e["data"]["memory"]]),
    ),
    "forgets an unknown memory": ("memory.forgotten", _data(memory="zzzzzzzzzzzy")),
    "a checkpoint of an unknown task": ("checkpoint.saved", _data(task="nosuchtask1")),
    "content with terminal escapes": (
        "memory.created",
        _data(memory="zzzzzzzzzzzx", content="\x1b]0;owned\x07\x1b[2J hidden \u202eevil"),
    ),
    "a kind from a newer Engram": ("memory.created", lambda e: e.update(kind="memory.exploded")),
    "seq 2^53 - 1": ("checkpoint.saved", _data(seq=2**53 - 1, checkpoint="bigseq1")),
}


def _line(event: dict[str, Any]) -> bytes:
    return json.dumps(event, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode(
        "utf-8", "surrogatepass"
    )


def test_hostile_lines_pushed_by_another_clone_break_no_command(clones: Clones) -> None:
    lines: list[bytes] = []
    for kind, edit in HOSTILE.values():
        event = clones.base(kind)
        edit(event)
        lines.append(_line(event))
    lines += RAW.values()
    bad = set(range(1, len(lines) + 1))
    for kind, edit in STRANGE.values():
        event = clones.base(kind)
        edit(event)
        lines.append(_line(event))
    rel = clones.push_lines(lines)

    synced = clones.alpha("sync")
    assert synced.exit_code == 0, synced.output
    results = clones.every_command()
    warned = results["list"].stderr
    for number in bad:
        assert f"{rel}:{number}: " in warned, (number, lines[number - 1][:80])
    assert "\x1b" not in warned and max(map(len, warned.splitlines())) < 1000
    shown = "".join(results[c].stdout for c in ("list", "resume", "log", "recall job queue"))
    assert "\x1b" not in shown and "\u202e" not in shown
    clones.verify_names(rel, bad)
    doctor = results["doctor"].stdout
    assert all(f"{rel}:{number}" in doctor for number in bad)
    clones.intact()


@pytest.mark.parametrize(
    "content",
    [
        "beta was never here",
        pytest.param("a forged text that sorts first", marks=pytest.mark.slow),
    ],
)
def test_a_duplicate_id_with_other_content_reads_the_same_on_every_clone(
    clones: Clones,
    content: str,
) -> None:
    """Two lines with one event id and different content: both clones read the same one (the
    bytes that sort first), whatever order their files were read in, and name the other."""
    original = clones.bases["memory.created"]
    forged = json.loads(json.dumps(original))
    forged["data"]["content"] = content
    rel = clones.push_lines([_line(forged)])
    assert clones.alpha("sync").exit_code == 0
    clones.every_command()
    clones.verify_names(rel, {1})
    expected = min(
        (original["data"]["content"], content),
        key=lambda text: _line({**original, "data": {**original["data"], "content": text}}),
    )
    clones.b.run("pull")
    for listed in (
        clones.alpha("list", "--all").stdout,
        clones.b.run("list", "--all").stdout,
        clones.alpha("reindex") and clones.alpha("list", "--all").stdout,
    ):
        assert expected in listed
        assert ({original["data"]["content"], content} - {expected}).pop() not in listed


def test_hostile_files_links_and_attributes_break_no_command(
    clones: Clones, tmp_path: Path
) -> None:
    """Not lines but files: a link out of the store under events/ and handoffs/, a config.yaml
    that is a link, an event file that is a folder, a .gitattributes that asks for CR LF."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.jsonl").write_bytes(_line(clones.base()) + b"\n")
    (outside / "config.yaml").write_text("secrets:\n  scan: false\n")
    home = clones.b.home
    (home / "events" / "2099").mkdir()
    (home / "events" / "2099" / "01").symlink_to(outside, target_is_directory=True)
    (home / "handoffs" / clones.task / "link").symlink_to(outside, target_is_directory=True)
    (home / "events" / "2098" / "01" / "folder.jsonl").mkdir(parents=True)
    (home / "events" / "2098" / "01" / "folder.jsonl" / "keep").write_text("")
    (home / "config.yaml").unlink()
    (home / "config.yaml").symlink_to(outside / "config.yaml")
    (home / ".gitattributes").write_text("*.jsonl text eol=crlf\n")
    git(home, "add", "-A")
    git(home, "commit", "-q", "-m", "crafted files")
    git(home, "push", "-q", "origin", "HEAD")

    assert clones.alpha("sync").exit_code == 0
    results = clones.every_command()
    assert "events/2099/01 is a symbolic link inside the store" in results["list"].stderr
    assert "config.yaml is a symbolic link inside the store" in results["list"].stderr
    doctor = results["doctor"].stdout
    for link in ("events/2099/01", "config.yaml", f"handoffs/{clones.task}/link"):
        assert link in doctor, link
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    refused = clones.alpha("remember", f"the token is {secret}")
    assert refused.exit_code != 0 and secret not in refused.output
    clones.intact()


# -- generated ----------------------------------------------------------------------------------


MUTABLE = [
    "memory.created",
    "memory.updated",
    "task.created",
    "task.updated",
    "checkpoint.saved",
    "session.started",
    "task.failure",
]


@st.composite
def hostile_lines(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """A few lines: generated events (often damaged), bytes, or changes to a real line of a
    kind (applied to the clone's own lines when the test runs)."""
    out: list[tuple[str, Any]] = []
    for _ in range(draw(st.integers(1, 4))):
        choice = draw(st.integers(0, 3))
        if choice == 0:
            out.append(("line", line_of(draw(fuzz_events()))))
        elif choice == 1:
            out.append(("line", draw(st.binary(max_size=200)).replace(b"\n", b"")))
        else:
            changes = draw(
                st.lists(
                    st.tuples(st.booleans(), st.integers(0, 20), st.integers(0, 4), json_values),
                    min_size=1,
                    max_size=3,
                )
            )
            out.append(("change", (draw(st.sampled_from(MUTABLE)), changes)))
    return out


def _apply(clones: Clones, kind: str, changes: list[tuple[bool, int, int, Any]]) -> bytes:
    event = clones.base(kind)
    for top, index, delete, value in changes:
        where = event if top or not isinstance(event.get("data"), dict) else event["data"]
        names = sorted(where) or ["x"]
        name = names[index % len(names)]
        if delete == 0:
            where.pop(name, None)
        else:
            where[name] = value
    return _line(event)


FOLDERS = st.sampled_from([None, "events", "events/2026/13", "events/9999/12", "events/a/b/c/d"])
NAMES = st.sampled_from(
    [
        "crafted-{n:04d}.jsonl",
        "{n} with space.jsonl",
        "ünï-{n}.jsonl",
        ".hidden-{n}.jsonl",
        "UPPER-{n}.JSONL",
        "{n}.jsonl.txt",
        "{n}-é́.jsonl",
    ]
)
TAILS = st.sampled_from([b"", b'{"actor":"x","clock":1,"da', b"\xff\xfe", b"<<<<<<< HEAD"])


@pytest.mark.slow
def test_generated_hostile_lines_and_files_break_no_command(clones: Clones) -> None:
    from engram.storage import lines as classifier

    @settings(
        max_examples=25,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(batch=hostile_lines(), folder=FOLDERS, name=NAMES, tail=TAILS)
    def run(batch: list[tuple[str, Any]], folder: str | None, name: str, tail: bytes) -> None:
        lines = [item if form == "line" else _apply(clones, *item) for form, item in batch]
        rel = clones.push_lines(lines, folder=folder, name=name, tail=tail)
        assert clones.alpha("sync").exit_code == 0
        assert (clones.a.home / rel).exists(), "the pushed file reached the other clone"
        listed = clones.alpha("list")
        assert listed.exit_code == 0
        for args in (
            ("status",),
            ("recall", "job queue"),
            ("resume",),
            ("log",),
            ("sessions",),
            ("task", "list", "--all"),
            ("timeline", clones.task),
        ):
            done = clones.alpha(*args)
            assert done.exit_code == 0, (args, done.output)
        found, _ = classifier.read(b"".join(line + b"\n" for line in lines))
        skipped = {line.number for line in found if line.problem is not None}
        if rel.endswith(".jsonl"):
            for number in skipped:
                assert f"{rel}:{number}: " in listed.stderr
            clones.verify_names(rel, skipped)
        assert "alpha decided to keep the job queue" in listed.stdout

    run()
    clones.every_command()
    clones.intact()
