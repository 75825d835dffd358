"""Clocks cannot be dragged: three clones, one hostile, one 15 minutes slow, through git daemon.

Each clone is its own ENGRAM_HOME driven through the real `engram` command in child processes,
sharing a store through a real `git daemon` on 127.0.0.1. A clone's wrong wall clock is made with
`ENGRAM_TEST_CLOCK_OFFSET` (seconds added to what the process takes for this machine's time).
The hostile clone writes its lines with plain git, as a broken or malicious machine would.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engram.api import Engram
from engram.domain.interop import from_micros
from engram.storage import events as ev
from engram.storage.store import Store
from tests.conftest import git, make_repo
from tests.test_sync import Machine, Server

HOUR = 3600
SLOW = -15 * 60  # the teammate's clock is 15 minutes slow


class Team:
    """Alpha (an honest author), beta (hostile, writes with plain git) and gamma (honest, its
    clock 15 minutes slow), sharing one store through a git daemon."""

    def __init__(self, tmp_path: Path) -> None:
        root = tmp_path / "server"
        root.mkdir()
        self.server = Server(root, "daemon")
        self.alpha = Machine(tmp_path, "alpha")
        self.beta = Machine(tmp_path, "beta")
        self.gamma = Machine(tmp_path, "gamma")
        self.gamma.env[ev.TEST_CLOCK_OFFSET] = str(SLOW)
        self.alpha.run("init")
        self.alpha.run("remote", "add", "origin", self.server.url)
        self.memory = self.alpha.json("remember", "Deploys run from main only")["id"]
        self.alpha.run("sync")
        self.beta.run("clone", self.server.url)
        self.gamma.run("clone", self.server.url)
        self.pushed = 0

    @property
    def clones(self) -> tuple[Machine, ...]:
        return (self.alpha, self.beta, self.gamma)

    def push_crafted(self, *events: dict[str, Any]) -> None:
        """Beta writes these events as a new event file with plain git and pushes it."""
        self.pushed += 1
        git(self.beta.home, "pull", "-q", "--no-rebase")
        store = Store(self.beta.home, "personal")
        month = store.event_files()[0].parent
        lines = b"".join(ev.Event(**event).to_line() for event in events)
        (month / f"crafted-{self.pushed}.jsonl").write_bytes(lines)
        git(self.beta.home, "add", "-A")
        git(self.beta.home, "commit", "-q", "-m", "crafted lines")
        git(self.beta.home, "push", "-q", "origin", "HEAD")

    def crafted(self, kind: str, data: dict[str, Any], ahead_s: float) -> dict[str, Any]:
        """An event dated `ahead_s` seconds ahead of now, in every field that holds a time."""
        clock = time.time_ns() // 1000 + round(ahead_s * 1e6)
        return {
            "id": ev.new_event_id(clock // 1000),
            "kind": kind,
            "clock": clock,
            "time": ev.format_time(from_micros(clock)),
            "actor": "Mallory <mallory@example.com>",
            "session": None,
            "machine": "beta",
            "data": data,
        }

    def events(self, machine: Machine) -> dict[str, dict[str, Any]]:
        """Every event line in the machine's store, by id."""
        out = {}
        for path in Store(machine.home, "personal").event_files():
            for raw in path.read_bytes().splitlines():
                event = json.loads(raw)
                out[event["id"]] = event
        return out

    def memories(self, machine: Machine) -> dict[str, str]:
        listed = machine.json("list", "--all")
        assert isinstance(listed, list)
        return {m["id"]: m["content"] for m in listed}

    def sync_all(self) -> None:
        for machine in (self.alpha, self.gamma, self.alpha, self.gamma):
            machine.run("sync")
        git(self.beta.home, "pull", "-q", "--no-rebase")

    def converged(self) -> dict[str, str]:
        """Every clone holds the same events and shows the same memories, and nothing is set
        aside or reported anywhere: verify and doctor pass on each."""
        ids = [set(self.events(machine)) for machine in self.clones]
        assert ids[0] == ids[1] == ids[2]
        shown = [self.memories(machine) for machine in self.clones]
        assert shown[0] == shown[1] == shown[2]
        for machine in self.clones:
            verified = machine.run("verify", ok=False)
            assert verified.returncode == 0, (machine.name, verified.stdout, verified.stderr)
            listed = machine.run("list", "--all")
            assert "skipped" not in listed.stderr and "set aside" not in listed.stderr, (
                machine.name,
                listed.stderr,
            )
        return shown[0]

    def close(self) -> None:
        self.server.stop()


@pytest.fixture
def team(tmp_path: Path) -> Iterator[Team]:
    made = Team(tmp_path)
    yield made
    made.close()


def _clock_of(team: Team, machine: Machine, text: str) -> dict[str, Any]:
    [event] = [
        e
        for e in team.events(machine).values()
        if text in json.dumps(e["data"], ensure_ascii=False)
    ]
    return event


@pytest.mark.slow
def test_a_line_dated_23h50_ahead_drags_no_clock_and_a_slow_teammate_sets_nothing_aside(
    team: Team,
) -> None:
    ahead = 23 * HOUR + 50 * 60
    team.push_crafted(
        team.crafted(
            "memory.updated",
            {"memory": team.memory, "content": "Deploys run from any branch"},
            ahead,
        ),
        team.crafted(
            "memory.created",
            {"memory": ev.new_entity_id(), "content": "Mallory was here tomorrow"},
            ahead,
        ),
    )
    team.alpha.run("sync")
    assert team.memories(team.alpha)[team.memory] == "Deploys run from any branch"

    # The honest author's next events are not dragged: their clocks stay at its own time.
    team.alpha.run("remember", "Alpha writes after the crafted push")
    team.alpha.run("update", team.memory, "Deploys run from main only, reviewed")
    team.alpha.run("sync")
    limit = (time.time() + ev.MAX_SKEW_US / 1e6 + 60) * 1e6
    new = _clock_of(team, team.alpha, "Alpha writes after the crafted push")
    fixed = _clock_of(team, team.alpha, "reviewed")
    assert new["clock"] < limit and fixed["clock"] < limit, "a clock followed the crafted line"
    hostile = _clock_of(team, team.alpha, "any branch")
    assert fixed["data"]["after"] == hostile["clock"]  # ordered after what alpha had read

    # The teammate 15 minutes slow reads everything (nothing more than a day ahead of it but
    # the crafted lines, which it reads in their place too) and its own clock is not dragged.
    team.gamma.run("sync")
    shown = team.memories(team.gamma)
    assert shown[team.memory] == "Deploys run from main only, reviewed"
    assert "Mallory was here tomorrow" in shown.values()
    assert "Alpha writes after the crafted push" in shown.values()
    team.gamma.run("update", team.memory, "Deploys run from main only, reviewed twice")
    team.gamma.run("remember", "Gamma writes with a slow clock")
    slow = _clock_of(team, team.gamma, "Gamma writes with a slow clock")
    assert slow["clock"] < (time.time() + SLOW + ev.MAX_SKEW_US / 1e6 + 60) * 1e6
    doctor = team.gamma.run("doctor", ok=False)
    assert doctor.returncode == 0, doctor.stdout
    team.gamma.run("doctor", "--fix")

    team.sync_all()
    final = team.converged()
    # Nothing lost anywhere, and the last edit, made on the slowest clock, is what all show.
    assert final[team.memory] == "Deploys run from main only, reviewed twice"
    assert {
        "Mallory was here tomorrow",
        "Alpha writes after the crafted push",
        "Gamma writes with a slow clock",
    } <= set(final.values())


@pytest.mark.slow
def test_a_far_future_edit_never_overrides_three_newer_edits_when_its_time_comes(
    team: Team,
) -> None:
    ten_days = 10 * 24 * HOUR
    team.push_crafted(
        team.crafted(
            "memory.updated",
            {"memory": team.memory, "content": "Deploys run from a laptop"},
            ten_days,
        )
    )
    team.alpha.run("sync")
    team.gamma.run("sync")
    for machine in (team.alpha, team.gamma):
        assert team.memories(machine)[team.memory] == "Deploys run from a laptop"

    # Three edits made after it arrived, on two clones whose clocks disagree.
    team.alpha.run("update", team.memory, "Edit 1: deploys run from main")
    team.alpha.run("sync")
    team.gamma.run("sync")
    team.gamma.run("update", team.memory, "Edit 2: deploys run from main, tagged")
    team.gamma.run("sync")
    team.alpha.run("sync")
    team.alpha.run("update", team.memory, "Edit 3: deploys run from main, tagged, signed")
    team.sync_all()
    assert team.converged()[team.memory] == "Edit 3: deploys run from main, tagged, signed"

    # Its time comes: every clock is ten days and an hour on. Read again from scratch, the
    # edits still win, and a new edit then wins by its clock alone.
    for machine in team.clones:
        offset = float(machine.env.get(ev.TEST_CLOCK_OFFSET, "0"))
        machine.env[ev.TEST_CLOCK_OFFSET] = str(offset + ten_days + HOUR)
        machine.run("reindex")
    assert team.converged()[team.memory] == "Edit 3: deploys run from main, tagged, signed"
    team.gamma.run("update", team.memory, "Edit 4: ten days later")
    later = _clock_of(team, team.gamma, "Edit 4")
    assert "after" not in later["data"]
    team.sync_all()
    assert team.converged()[team.memory] == "Edit 4: ten days later"


# -- in one process (quick) ----------------------------------------------------------------------


def _foreign_line(store: Store, kind: str, data: dict[str, Any], clock: int) -> None:
    """A line another clone wrote, as a pull brings it: a writer file of its own."""
    event = ev.Event(
        id=ev.new_event_id(clock // 1000),
        kind=kind,
        clock=clock,
        time=ev.format_time(from_micros(clock)),
        actor="Other <o@example.com>",
        session=None,
        machine="elsewhere",
        data=data,
    )
    path = store.event_files()[0].parent / "elsewhere-writer.jsonl"
    with path.open("ab") as handle:
        handle.write(event.to_line())


def test_edits_made_after_reading_a_far_future_edit_stay_after_it(
    home_store: Engram, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = home_store.remember("The cache lives in Redis").memory.id
    far = time.time_ns() // 1000 + 10 * 24 * HOUR * 10**6
    _foreign_line(
        home_store.personal,
        "memory.updated",
        {"memory": memory, "content": "The cache lives on a laptop"},
        far,
    )
    engram = Engram()
    assert engram.get(memory).content == "The cache lives on a laptop"  # read in its place
    for n in (1, 2, 3):
        engram.update(memory, f"Edit {n}: the cache lives in Redis")
    assert engram.get(memory).content == "Edit 3: the cache lives in Redis"
    clocks = [e.clock for e, _ in engram.history(memory)]
    assert max(clocks[-3:]) < (time.time() + ev.MAX_SKEW_US / 1e6 + 60) * 1e6  # not dragged
    unrelated = engram.remember("Tests run in CI only").memory.id
    [(created, _)] = engram.history(unrelated)
    assert created.clock < (time.time() + ev.MAX_SKEW_US / 1e6 + 60) * 1e6
    assert engram.verify().ok
    # Ten days and an hour later, read again from the files alone.
    monkeypatch.setenv(ev.TEST_CLOCK_OFFSET, str(10 * 24 * HOUR + HOUR))
    later = Engram()
    later.reindex()
    assert later.get(memory).content == "Edit 3: the cache lives in Redis"
    later.update(memory, "Edit 4: ten days later")
    assert Engram().get(memory).content == "Edit 4: ten days later"


def test_the_skew_comes_only_from_the_users_own_configuration(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "project")
    Engram().init()
    Engram(cwd=repo).init(project=True)
    store = Engram(cwd=repo).project_store()
    (store.root / "config.yaml").write_text("clock:\n  max_skew: 3600\n")  # pushed
    Engram().config_set("clock.max_skew", "60")  # the user's own
    ahead = time.time_ns() // 1000 + 30 * 60 * 10**6  # a clone 30 minutes fast
    _foreign_line(store, "memory.created", {"memory": ev.new_entity_id(), "content": "fast"}, ahead)
    engram = Engram(cwd=repo)
    written = engram.remember("Written after the fast clone's line").memory
    assert any(
        "clock.max_skew is ignored in a project's configuration" in w for w in engram.warnings
    )
    [(event, _)] = engram.history(written.id)
    now = time.time_ns() // 1000
    assert now + 30 * 10**6 < event.clock <= now + 61 * 10**6  # a minute ahead, not 30
