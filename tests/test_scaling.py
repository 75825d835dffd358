"""Scaling: resuming a task costs what the task holds, not what the store holds, and a write to
a task costs about the same however long its history is (and folding a task on from its stored
state gives the task folded from the start).

The stores are built quickly but honestly: a real store (`Engram.init`, `search.model` off) is
filled through `Engram.import_from` with an Engram export of synthetic events (tens of
thousands of `remember` calls would take minutes). Before it is used, `check_shapes` writes a
memory, a task with progress, a failure and a handoff through the public API in the same store
and checks that the synthetic payloads carry exactly the fields the API writes, so a change of
event format fails here rather than measuring a store Engram would not write.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engram.api import Engram
from engram.model.memories import MEMORY_KINDS
from engram.readmodel.projection import Projection
from engram.storage import events as ev

ACTOR = "Bench Agent <bench@example.com>"
WORDS = (
    "upload",
    "retry",
    "cache",
    "schema",
    "login",
    "queue",
    "index",
    "parser",
    "billing",
    "export",
    "session",
    "search",
    "router",
    "worker",
    "config",
    "deploy",
    "metrics",
)
# The long task's working set: failures of other tasks in these components are relevant to it.
WORKING_SET = ("src/api/upload.py", "src/storage/blob.py")
RELATED_TASKS = 3  # other tasks with a failure in a working-set component, whatever the size


def open_store(home: Path, monkeypatch: pytest.MonkeyPatch) -> Engram:
    monkeypatch.setenv("ENGRAM_HOME", str(home))
    engram = Engram()
    engram.init()
    engram.config_set("search.model", "off")
    return engram


class Synthetic:
    """Events as the public API writes them, with increasing clocks ending about now."""

    def __init__(self, seed: int, count: int, *, clock: int | None = None) -> None:
        self.rng = random.Random(seed)
        # 1 ms apart, from `clock` or so as to end before now
        self.clock = clock if clock is not None else time.time_ns() // 1000 - 2 * count * 1000
        self.lines: list[bytes] = []
        self.carried: dict[str, dict[str, list[str]]] = {}

    def add(self, kind: str, data: dict[str, Any]) -> None:
        self.clock += 1000
        moment = ev.format_time(datetime.fromtimestamp(self.clock / 1e6, UTC))
        event = ev.Event(
            id=ev.new_event_id(self.clock // 1000),
            kind=kind,
            clock=self.clock,
            time=moment,
            actor=ACTOR,
            session=None,
            machine="bench",
            data=data,
        )
        self.lines.append(event.to_line())

    def sentence(self) -> str:
        words = self.rng.sample(WORDS, 4)
        return f"The {words[0]} {words[1]} needs the {words[2]} step before {words[3]}"

    def memory(self, *, task: str | None = None, kind: str | None = None) -> None:
        rng = self.rng
        until = None
        if rng.random() < 0.05:  # some have expired
            until = ev.format_time(ev.utc_now() - timedelta(days=rng.randint(1, 30)))
        data = {
            "memory": ev.new_entity_id(),
            "content": f"{self.sentence()} ({len(self.lines)})",
            "kind": kind or rng.choice(list(MEMORY_KINDS)),
            "tags": rng.sample(WORDS, 2),
            "scope": None,
            "source": "agent-inferred",
            "importance": round(rng.random(), 2),
            "valid_from": None,
            "valid_until": until,
            "at": ev.format_time(ev.utc_now()),
            "task": task,
        }
        self.add("memory.created", data)

    def task(self, name: str) -> str:
        task_id = ev.new_entity_id()
        self.add(
            "task.created",
            {
                "task": task_id,
                "name": name,
                "goal": self.sentence(),
                "status": "open",
                "tags": [],
                "parent": None,
            },
        )
        return task_id

    def progress(self, task: str, number: int) -> None:
        self.add(
            "task.progress",
            {
                "task": task,
                "feature": f"feature {number}: {self.sentence()}",
                "status": self.rng.choice(("done", "done", "in_progress", "todo")),
                "note": self.sentence(),
                "component": self.rng.choice(WORDS),
                "files": [self.rng.choice(WORKING_SET)],
            },
        )

    def failure(self, task: str, component: str) -> None:
        self.add(
            "task.failure",
            {
                "task": task,
                "error": self.sentence(),
                "component": component,
                "root_cause": self.sentence(),
                "fix": self.sentence(),
            },
        )

    def checkpoint(self, task: str, seq: int) -> None:
        # As a handoff is written: what is done and must hold carries over, with one item more;
        # the plan is new.
        carried = self.carried.setdefault(task, {})
        for name in ("completed", "must_not_redo", "must_preserve"):
            carried[name] = [*carried.get(name, ()), self.sentence()]
        self.add(
            "checkpoint.saved",
            {
                "task": task,
                "checkpoint": ev.new_entity_id(),
                "seq": seq,
                "reason": "handoff",
                "goal": self.sentence(),
                "summary": self.sentence(),
                **{
                    name: [self.sentence() for _ in range(3)]
                    for name in ("in_progress", "blocked", "next", "open_questions")
                },
                **{name: list(items) for name, items in carried.items()},
                "working_set": {
                    "files": [{"path": p, "commit": None} for p in WORKING_SET],
                    "commands": ["make test"],
                    "artifacts": [],
                },
                "confidence": 0.8,
                "head": f"{self.rng.getrandbits(160):040x}",
            },
        )


def build(engram: Engram, tmp: Path, *, memories: int, task_events: int, seed: int = 7) -> str:
    """Fill the store: a long task of `task_events` events (its memories among them), and
    `memories` other memories with a small task for every hundred of them. Returns the long
    task's id."""
    synthetic = Synthetic(seed, memories + task_events + memories // 10 + 10)
    rng = synthetic.rng
    for number in range(memories // 100):
        other = synthetic.task(f"other task {number}")
        for step in range(8):
            synthetic.progress(other, step)
        related = number < RELATED_TASKS
        synthetic.failure(other, "api" if related else f"component-{number}")
    for _ in range(memories):
        synthetic.memory()
    task = synthetic.task("the long task")
    for number in range(task_events - 1):
        roll = rng.random()
        if roll < 0.04:
            synthetic.memory(task=task, kind=rng.choice(("decision", "gotcha", "fact")))
        elif roll < 0.06:
            synthetic.failure(task, rng.choice(WORDS))
        elif number % 100 == 50:
            synthetic.checkpoint(task, number // 100 + 1)
        else:
            synthetic.progress(task, number)
    synthetic.checkpoint(task, task_events // 100 + 2)
    export = tmp / f"synthetic-{seed}-{memories}.jsonl"
    export.write_bytes(b"".join(synthetic.lines))
    engram.import_from(export)
    check_shapes(engram, export)
    return task


def check_shapes(engram: Engram, export: Path) -> None:
    """The synthetic payloads have exactly the fields the public API writes."""
    task = engram.task_create("shape check", goal="the fields the API writes")
    engram.remember("The shape check memory", task=task.id, at=ev.utc_now(), check_duplicates=False)
    engram.progress(task.id, "a feature", note="a note", component="api", files=["a.py"])
    engram.failure(task.id, "an error", component="api", root_cause="a cause", fix="a fix")
    engram.handoff(task.id, summary="where it stands", next=["a step"], files=["a.py"])
    written = {e.kind: set(e.data) for _, e in engram.log(task=task.id)}
    synthetic: dict[str, set[str]] = {}
    for line in export.read_bytes().splitlines():
        event = ev.parse_line(line)
        synthetic.setdefault(event.kind, set()).update(event.data)
    for kind, fields in synthetic.items():
        assert fields == written[kind], (
            f"{kind}: synthetic {sorted(fields)} != API {sorted(written[kind])}"
        )


def median_seconds(*actions: Callable[[], Any], runs: int) -> list[float]:
    """The median time of each action, run in turns so that a busy moment of the machine
    weighs on all of them alike."""
    for action in actions:
        action()  # warm: caches, imports, the first refresh
    times: list[list[float]] = [[] for _ in actions]
    for _ in range(runs):
        for action, taken in zip(actions, times, strict=True):
            started = time.perf_counter()
            action()
            taken.append(time.perf_counter() - started)
    return [statistics.median(taken) for taken in times]


@pytest.mark.slow
def test_resume_costs_the_same_in_a_store_ten_times_larger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    resumes = []
    for memories in (2_000, 20_000):
        engram = open_store(tmp_path / f"store-{memories}", monkeypatch)
        task = build(engram, tmp_path, memories=memories, task_events=2_000)
        # A new instance over the built read model, timed warm, as an MCP server resumes.
        engram = Engram()
        resumes.append(lambda engram=engram, task=task: engram.resume(task=task).markdown)
    small, large = median_seconds(*resumes, runs=15)
    print(
        f"\nresume of a 2k-event task: {small * 1e3:.1f} ms with 2k other memories, "
        f"{large * 1e3:.1f} ms with 20k ({large / small:.2f}x)"
    )
    for resume in resumes:
        text = resume()
        assert "## Failures to avoid repeating" in text and "## Other memories" in text
    assert large < 1.5 * small


@pytest.mark.slow
def test_progress_on_a_long_task_costs_about_what_it_costs_on_a_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engram = open_store(tmp_path / "store", monkeypatch)
    long_task = build(engram, tmp_path, memories=200, task_events=2_000)
    new_task = engram.task_create("a new task", goal="nothing yet").id
    # One long-lived instance, as the MCP server runs (a new process reads the task once).
    engram = Engram()
    counter = iter(range(1_000_000))

    def progress(task: str) -> Callable[[], Any]:
        return lambda: engram.progress(
            task, f"step {next(counter)}", status="done", component="api"
        )

    new, long = median_seconds(progress(new_task), progress(long_task), runs=15)
    print(
        f"\nprogress(): {new * 1e3:.1f} ms on a new task, {long * 1e3:.1f} ms on a task with "
        f"{len(engram.task(long_task).progress)} progress items ({long / new:.2f}x)"
    )
    assert len(engram.task(long_task).progress) > 1_500
    assert long < 3 * new


def test_a_task_folded_on_from_its_stored_state_is_the_task_folded_from_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = open_store(tmp_path / "store", monkeypatch)
    task = writer.task_create("fold on", goal="the same state either way").id
    reader = Engram()  # another instance, holding the rows it read between the writes

    def same() -> None:
        # A read model built from the files now folds every task from the start.
        fresh = Projection(reader.write_store())
        fresh.path = tmp_path / f"fresh-{time.monotonic_ns()}.sqlite3"
        fresh.refresh()
        assert reader.task(task) == fresh.tasks(ids=[task])[0]
        assert [f.to_dict() for f in reader.failures_for(component="api")] == sorted(
            fresh.failures({"api"}), key=lambda f: f["time"], reverse=True
        )
        fresh.close()

    for number in range(3):
        writer.progress(task, f"step {number}", component="api", files=["src/api.py"])
        same()
    writer.failure(task, "it broke", component="api", root_cause="a cause", fix="a fix")
    same()
    # Events from elsewhere that fall between the task's own (a pull, an import).
    older = Synthetic(3, 4, clock=writer.task(task).created_clock + 1)
    older.progress(task, 99)
    older.failure(task, "api")
    export = tmp_path / "older.jsonl"
    export.write_bytes(b"".join(older.lines))
    writer.import_from(export, allow_changes=True)  # they add to a task it holds
    assert any(p.feature.startswith("feature 99") for p in reader.task(task).progress)
    same()
    writer.progress(task, "after the import", status="todo")
    writer.handoff(task, summary="where it stands", next=["the next step"])
    same()
    # Events taken away (a checkout without the file that held them).
    [held] = [p for p in writer.write_store().event_files() if b"feature 99" in p.read_bytes()]
    held.unlink()
    assert not any(p.feature.startswith("feature 99") for p in reader.task(task).progress)
    same()
    writer.failure(task, "broke again", component="api")
    same()
