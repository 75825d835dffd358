"""Crashes and crowds, with real processes and real git.

- A loop of writer processes killed with SIGKILL at random moments (start-up, mid-write,
  mid-commit): every event whose id a writer printed (after the call returned) is found
  afterwards, every file reads, and what a crash leaves is repaired by the next start, by
  `engram doctor --fix` and by the next commit.
- Processes of every kind writing to one clone at once (API writers, `engram` CLI commands, MCP
  servers over stdio): nothing lost, nothing duplicated, every line whole.
- `engram reindex` killed half-way: the next use detects what it left and rebuilds it; answers
  are the same as before. Killed after saving part of the vector index: the next reindex goes
  on from there, with the answers of a reindex from scratch.
- A process killed after folding changes into the vector index but before saving it: no memory
  is left out of the index.

Each test records its figures, printed in the run's summary (a `figures` section).
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import git

from engram.api import Engram
from engram.storage.store import WriterState

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parent.parent
WRITER = Path(__file__).with_name("writer.py")
ENV = {"PYTHONPATH": str(ROOT)}


def engram_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "engram", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **ENV},
    )


class Lane(threading.Thread):
    """Start a writer, kill it with SIGKILL at a random moment, collect what it acknowledged;
    again and again."""

    def __init__(self, number: int, repo: Path, kills: int, seed: int) -> None:
        super().__init__(daemon=True)
        self.number, self.repo, self.kills = number, repo, kills
        self.rng = random.Random(seed)
        self.acknowledged: list[str] = []
        self.first_ack: list[float] = []  # seconds from start to the first acknowledged write
        self.survived = 0
        self.power_cuts = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for round_ in range(self.kills):
                self.one(round_)
        except BaseException as exc:  # reported by the test
            self.error = exc

    def one(self, round_: int) -> None:
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, str(WRITER), str(self.repo), "1000000", f"w{self.number}.{round_}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **ENV},
        )
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        data = b""
        if self.rng.random() < 0.25:
            time.sleep(self.rng.uniform(0.0, 0.5))  # anywhere, start-up included
        else:  # while it writes and commits
            deadline = started + 60
            while b"\n" not in data and time.monotonic() < deadline:
                ready, _, _ = select.select([fd], [], [], 1.0)
                if ready:
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        break
                    data += chunk
            assert b"\n" in data, f"writer {round_} acknowledged nothing in 60s"
            self.first_ack.append(time.monotonic() - started)
            time.sleep(self.rng.uniform(0.0, 0.08))
        proc.send_signal(signal.SIGKILL)
        while chunk := os.read(fd, 65536):
            data += chunk
        proc.wait()
        assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""
        self.survived += 1
        whole = data[: data.rfind(b"\n") + 1]  # a line is acknowledged once it is complete
        self.acknowledged += whole.decode().split()
        if self.rng.random() < 0.1:
            self.power_cut()

    def power_cut(self) -> None:
        """What a power cut during the next write leaves (SIGKILL cannot tear a line: the
        kernel finishes a write to a file before the process dies): part of a line at the end
        of the writer's file, after everything acknowledged."""
        store = Engram(cwd=self.repo, use="project").project
        with store.lock():
            segment = WriterState.load(store).segment
            path = store.root / segment if segment else None
            if path is None or not path.exists() or not path.read_bytes().endswith(b"\n"):
                return  # no write since the last cut: nothing in flight to tear
            with open(path, "ab") as handle:
                handle.write(b'{"actor":"Test Agent","clock":17,"data":{"con')
            self.power_cuts += 1


def committed_ids(repo: Path) -> set[str]:
    """The ids of the memories created in HEAD's event files, read with plain git."""
    ids = set()
    listing = git(repo, "ls-tree", "-r", "--name-only", "HEAD", "--", ".engram/events")
    for name in listing.split():
        for line in git(repo, "show", f"HEAD:{name}").splitlines():
            event = json.loads(line)
            if event["kind"] == "memory.created":
                ids.add(event["data"]["memory"])
    return ids


def test_writers_killed_at_random_moments_lose_no_acknowledged_event(
    project: Path, figures: Callable[[str], None]
) -> None:
    kills, lanes = 200, 2
    setup = Engram(cwd=project, use="project")
    setup.config_set("commit.every_events", "3")  # commits often, so kills land in them too
    setup.close()
    started = time.monotonic()
    workers = [Lane(n, project, kills // lanes, seed=n) for n in range(lanes)]
    for lane in workers:
        lane.start()
    for lane in workers:
        lane.join(timeout=600)
        assert not lane.is_alive() and lane.error is None, lane.error
    loop_seconds = time.monotonic() - started
    acknowledged = [i for lane in workers for i in lane.acknowledged]
    survived = sum(lane.survived for lane in workers)
    slowest_start = max(t for lane in workers for t in lane.first_ack)

    power_cuts = sum(lane.power_cuts for lane in workers)
    store = Engram(cwd=project).project
    torn_set_aside = (
        len(list((store.local_dir / "torn").glob("*")))
        if (store.local_dir / "torn").is_dir()
        else 0
    )
    before = json.loads(engram_cli("doctor", "--json", cwd=project).stdout)
    found_by_doctor = sorted(
        {f["check"] for s in before["stores"] for f in s["findings"] if f["level"] != "note"}
    )
    torn_left = sum(1 for s in before["stores"] for f in s["findings"] if f["check"] == "torn-line")
    assert torn_set_aside + torn_left == power_cuts
    fixed = engram_cli("doctor", "--fix", "--json", cwd=project)
    repaired = [line for s in json.loads(fixed.stdout)["stores"] for line in s["fixed"]]
    assert engram_cli("commit", cwd=project).returncode == 0
    after = engram_cli("doctor", "--json", cwd=project)
    assert after.returncode == 0, after.stdout

    reader = Engram(cwd=project, use="project")
    memories = reader.memories(limit=None)
    found = {m.id for m in memories}
    assert len(found) == len(memories)  # no duplicate
    missing = set(acknowledged) - found
    assert not missing, f"{len(missing)} acknowledged events lost"
    assert len(set(acknowledged)) == len(acknowledged)
    assert reader.warnings == []  # every file reads whole
    assert reader.verify().ok
    for path in store.event_files():
        assert path.read_bytes().endswith(b"\n")
    assert git(project, "status", "--porcelain", "--", ".engram") == ""
    assert set(acknowledged) <= committed_ids(project)
    figures(
        f"\nkills survived: {survived} (in {loop_seconds:.0f}s, {lanes} writers at a time); "
        f"events acknowledged: {len(acknowledged)}; acknowledged events found: "
        f"{len(set(acknowledged) & found)}; written but killed before acknowledging: "
        f"{len(found - set(acknowledged))}; power cuts mid-write: {power_cuts}, their torn "
        f"lines set aside by the next writer: {torn_set_aside}, by doctor --fix: {torn_left}; "
        f"found by doctor after the loop: {found_by_doctor or 'nothing'}; "
        f"repaired by doctor --fix: {len(repaired)}; slowest first write after a kill: "
        f"{slowest_start:.2f}s"
    )


# -- many writers of every kind -----------------------------------------------------------------


async def _mcp_writer(repo: Path, label: str, count: int) -> list[str]:
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp_types import Implementation

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "engram", "serve"], env={**os.environ, **ENV}, cwd=repo
    )
    ids = []
    async with Client(
        params, client_info=Implementation(name=label, version="1.0"), read_timeout_seconds=120
    ) as client:
        for number in range(count):
            result = await client.call_tool(
                "memory_remember", {"content": f"{label} wrote memory number {number}"}
            )
            assert not result.is_error, result.content[0].text
            assert result.structured_content is not None
            assert result.structured_content["duplicate"] is False
            ids.append(result.structured_content["memory"]["id"])
    return ids


def test_api_cli_and_mcp_writers_at_once_lose_and_duplicate_nothing(
    project: Path, figures: Callable[[str], None]
) -> None:
    setup = Engram(cwd=project, use="project")
    setup.config_set("remember.check_duplicates", "false")  # every write is a new memory
    setup.close()
    api = [
        subprocess.Popen(
            [sys.executable, str(WRITER), str(project), "40", f"api{n}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **ENV},
        )
        for n in range(3)
    ]
    cli_script = (
        'for n in $(seq 1 12); do "$0" -m engram remember "$1 wrote memory $n" '
        "--json || exit 1; done"
    )
    cli = [
        subprocess.Popen(
            ["sh", "-c", cli_script, sys.executable, f"cli{n}"],
            cwd=project,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **ENV},
        )
        for n in range(2)
    ]

    async def servers() -> list[list[str]]:
        results: list[list[str]] = [[], []]

        async def one(index: int) -> None:
            results[index] = await _mcp_writer(project, f"mcp{index}", 40)

        async with anyio.create_task_group() as group:
            for index in range(2):
                group.start_soon(one, index)
        return results

    by_kind: dict[str, list[str]] = {"mcp": [i for ids in anyio.run(servers) for i in ids]}
    by_kind["api"] = []
    for proc in api:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        by_kind["api"] += out.split()
    by_kind["cli"] = []
    for proc in cli:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        decoder = json.JSONDecoder()
        text = out.strip()
        while text:
            value, end = decoder.raw_decode(text)
            by_kind["cli"].append(value["id"])
            text = text[end:].strip()

    written = [i for ids in by_kind.values() for i in ids]
    engram = Engram(cwd=project, use="project")
    memories = engram.memories(limit=None)
    assert sorted(m.id for m in memories) == sorted(written)  # nothing lost, nothing extra
    assert len({m.content for m in memories}) == len(memories)  # nothing duplicated
    report = engram.verify()
    assert report.ok, report
    for path in engram.project.event_files():
        assert path.read_bytes().endswith(b"\n")
    assert engram_cli("commit", cwd=project).returncode == 0
    assert set(written) <= committed_ids(project)
    figures(
        f"\nconcurrent writers: {len(api)} API processes, {len(cli)} CLI loops, 2 MCP servers "
        f"(7 at once); events acknowledged: "
        + ", ".join(f"{kind} {len(ids)}" for kind, ids in by_kind.items())
        + f"; found: {len(memories)}; duplicates: 0"
    )


# -- an index update killed half-way ------------------------------------------------------------


def test_a_reindex_killed_half_way_is_detected_and_rebuilt(
    project: Path, figures: Callable[[str], None]
) -> None:
    engram = Engram(cwd=project)
    texts = [
        "Use Postgres for the job queue: we need SKIP LOCKED",
        "The API listens on port 9090 behind the load balancer",
        "Deploys happen on every merge to main",
        "Secrets live in the vault",
    ]
    for n in range(100):
        engram.remember(f"{texts[n % 4]} (note {n} on topic {n * 7 % 13})", check_duplicates=False)
    engram.reindex()
    engram.close()
    cache = engram.project.local_dir / "cache"

    def answers() -> tuple[Any, ...]:
        reader = Engram(cwd=project)
        try:
            return (
                [h.memory.id for h in reader.recall("which database for the job queue")],
                [h.memory.id for h in reader.recall("port of the API")],
                [m.id for m in reader.memories(limit=None)],
            )
        finally:
            reader.close()

    want = answers()
    rng = random.Random(3)

    def forget_embeddings() -> None:  # so that reindex embeds everything again
        for suffix in ("", "-wal", "-shm"):
            Path(f"{cache / 'embeddings.sqlite3'}{suffix}").unlink(missing_ok=True)

    forget_embeddings()
    timed = time.monotonic()
    assert engram_cli("reindex", cwd=project).returncode == 0
    duration = time.monotonic() - timed
    trials, detected = 10, 0
    for trial in range(trials):
        forget_embeddings()
        proc = subprocess.Popen(
            [sys.executable, "-m", "engram", "reindex"],
            cwd=project,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **ENV},
        )
        time.sleep(rng.uniform(0.3, 1.0) * duration)
        proc.kill()
        proc.wait()
        report = json.loads(engram_cli("doctor", "--json", cwd=project).stdout)
        detected += any(f["check"] == "cache" for s in report["stores"] for f in s["findings"])
        assert answers() == want, f"trial {trial}"
    figures(
        f"\nreindex killed half-way: {trials} times (a whole reindex takes {duration:.1f}s); "
        f"doctor saw the unfinished caches after {detected}; answers the same after each "
        "automatic rebuild: all"
    )


# -- a fold into the vector index killed half-way ------------------------------------------------

FOLDER = Path(__file__).with_name("folder.py")
SAFARI = "zebra and giraffe safari note {n}: the elephants crossed the river at dawn"
ANIMALS = "animals walking through water at sunrise"  # shares no word with SAFARI


def fold_and_die(project: Path, command: str, kill_at: int) -> None:
    done = subprocess.run(
        [sys.executable, str(FOLDER), str(project), command, str(kill_at)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **ENV},
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert done.stdout.strip() == "killed"


def vector_ids(project: Path) -> set[str]:
    """The memories in the saved vector index, as saved."""
    from engram.search.vectors import VectorIndex

    cache = Engram(cwd=project).project.local_dir / "cache"
    meta = json.loads((cache / "vectors.json").read_text())
    return set(VectorIndex(cache / "vectors.usearch", meta["identity"], meta["dim"]).ids())


def test_a_process_killed_before_saving_the_vector_index_loses_no_memory_from_it(
    project: Path,
) -> None:
    engram = Engram(cwd=project)
    engram.remember("The parser caches tokens per file", check_duplicates=False)
    engram.reindex()
    safari = [engram.remember(SAFARI.format(n=n), check_duplicates=False).id for n in range(300)]
    engram.close()
    # The recall folds the 300 into the index (256 or more changed) and dies before saving it.
    fold_and_die(project, "recall", kill_at=1)
    reader = Engram(cwd=project)
    hits = [h.memory.id for h in reader.recall(ANIMALS, k=3)]
    assert hits and set(hits) <= set(safari)  # found by meaning alone, as before the kill
    reader.close()
    assert set(safari) <= vector_ids(project)  # folded, saved, complete


def test_a_reindex_killed_half_way_goes_on_from_where_it_stopped(project: Path) -> None:
    from engram.search.vectors import VectorIndex

    engram = Engram(cwd=project)
    ids = [engram.remember(SAFARI.format(n=n), check_duplicates=False).id for n in range(400)]
    engram.reindex()
    engram.close()
    # Killed as it saves the index for the third time: two saves of the graph are kept.
    fold_and_die(project, "reindex", kill_at=3)
    saved = vector_ids(project)
    assert 0 < len(saved) < len(ids)
    check = engram_cli("reindex", "--check", cwd=project)
    assert check.returncode == 0, check.stdout  # behind, not broken: the caches work
    assert "`engram reindex` stopped before it finished" in check.stdout
    assert "behind by design" not in check.stdout
    stats = engram_cli("stats", cwd=project)
    assert "indexes: behind: an `engram reindex` stopped before it finished" in stats.stdout
    doctor = json.loads(engram_cli("doctor", "--json", cwd=project).stdout)
    assert any(
        "stopped before it finished" in f["message"]
        for s in doctor["stores"]
        for f in s["findings"]
    )
    # Meanwhile one memory is written and another changed; and the saved index holds the
    # vector of a memory that is no longer one (as a branch switched away from leaves it).
    writer = Engram(cwd=project)
    new = writer.remember("a hippo wallowed in the mud", check_duplicates=False).id
    changed = next(m for m in ids if m in saved)
    writer.supersede(changed, "a rhino slept under the acacia tree")
    writer.close()
    cache = Engram(cwd=project).project.local_dir / "cache"
    meta = json.loads((cache / "vectors.json").read_text())
    index = VectorIndex(cache / "vectors.usearch", meta["identity"], meta["dim"])
    stray = "0000000000zz"
    index.update({stray: next(iter(index.vectors_for(sorted(saved)).values()))}, [])
    index.save()
    done = engram_cli("reindex", cwd=project)
    assert done.returncode == 0, done.stderr
    assert "went on from a reindex that was stopped" in done.stdout
    # Every vector saved was kept, but perhaps the superseded one's (the commands in between
    # may have linked more: a write folds the changes once 256 are waiting, and goes on from
    # the saved index too).
    kept = int(done.stdout.split("stopped: ")[1].split()[0])
    assert len(saved) - 1 <= kept <= len(ids) + 1
    resumed = vector_ids(project)
    assert stray not in resumed and new in resumed
    check = engram_cli("reindex", "--check", cwd=project)
    assert "stopped before it finished" not in check.stdout

    def answers() -> list[tuple[str, float]]:
        reader = Engram(cwd=project)
        try:
            return [(h.memory.id, round(h.score, 4)) for h in reader.recall(ANIMALS, k=10)]
        finally:
            reader.close()

    # The same as a reindex from scratch, which keeps nothing.
    got = answers()
    scratch = engram_cli("reindex", cwd=project)
    assert "went on" not in scratch.stdout
    assert vector_ids(project) == resumed
    assert answers() == got


def test_a_reindex_stopped_with_ctrl_c_says_so_and_the_next_goes_on(project: Path) -> None:
    engram = Engram(cwd=project)
    for n in range(300):
        engram.remember(SAFARI.format(n=n), check_duplicates=False)
    engram.reindex()
    engram.close()
    stopped = subprocess.run(
        [sys.executable, str(FOLDER), str(project), "cli-reindex", "3"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **ENV},
    )
    assert stopped.returncode == 130, stopped.stderr
    assert "stopped: the next `engram reindex` goes on from what this one saved" in stopped.stderr
    assert "Traceback" not in stopped.stderr
    done = engram_cli("reindex", cwd=project)
    assert "went on from a reindex that was stopped" in done.stdout, done.stdout
