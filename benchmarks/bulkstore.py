"""Large synthetic stores for the benchmark suite, built in bulk and kept between runs.

Writing a million memories through `Engram.remember` would take hours (and embedding them
days), so a store is built the way a long-lived store would look on disk, quickly:

1. `Engram.init()` creates the store (its repository, config, first event and commit);
2. valid event lines (canonical JSON through `engram.storage.events.Event.to_line`, the memories'
   text from benchmarks/speed.py's generator) are written in bulk to writer files laid out as
   `engram.storage.store.Store` lays them out (`events/YYYY/MM/<writer>.jsonl`, a new file per
   month,
   past `MAX_FILE_BYTES`, and after every commit), with clocks and times spread over the last
   half year;
3. they are committed by `Engram.commit()` (once, or once per chunk when many commits are
   asked for);
4. optionally, the embedding cache (`engram.search.embed.EmbeddingCache`, keyed by model
   identity and content hash) is filled with random unit vectors, one per text, so that the
   first `Engram.reindex()` embeds nothing; otherwise the reindex embeds every text for real;
5. `Engram.reindex()` builds the read model and both indexes.

Before the first build in a process, `check_shapes()` writes a memory, a task with progress, a
failure and a handoff through the public API in a scratch store and checks that the payloads
written here carry exactly the same fields, so a change of event format fails loudly here
rather than measuring a store Engram would not write.

A built store lives in `<work>/stores/<name>/` (the store in `engram/`, a throwaway HOME in
`home/`), with `bench-store.json` written last: a directory whose record is missing or whose
build parameters differ is built again from scratch.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import speed  # noqa: E402  (benchmarks/speed.py: the synthetic memory generator and helpers)

from engram.search.retrieval import embedding_text  # noqa: E402

BUILDER_VERSION = 4  # bump when what a build writes changes: kept stores are rebuilt
ACTOR = "bench <bench@example.com>"
MACHINE = "bench"
SPAN_DAYS = 180  # events are spread over this many days before the build


@dataclass(frozen=True)
class StoreSpec:
    """What a store holds. Two specs with equal fields are the same store."""

    name: str
    memories: int  # memory.created events (besides those of tasks)
    task_events: int = 0  # events of the one long task (0: no task)
    other_tasks: int = 0  # small tasks (10 events each) around it
    commits: int = 1  # commits the bulk events are split into
    prefill_vectors: bool = True  # random vectors in the embedding cache: reindex embeds nothing
    seed: int = 20240601

    def record(self) -> dict[str, Any]:
        return {**asdict(self), "builder": BUILDER_VERSION}


@dataclass
class Built:
    spec: StoreSpec
    base: Path  # <work>/stores/<name>
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def store_dir(self) -> Path:
        return self.base / "engram"

    @property
    def task_id(self) -> str | None:
        return self.info.get("task_id")


def store_base(work: Path, name: str) -> Path:
    return work / "stores" / name


def load_built(work: Path, spec: StoreSpec) -> Built | None:
    base = store_base(work, spec.name)
    try:
        info = json.loads((base / "bench-store.json").read_text())
    except (OSError, ValueError):
        return None
    if info.get("spec") != spec.record():
        return None
    return Built(spec, base, info)


def ensure_store(work: Path, spec: StoreSpec, *, rebuild: bool = False) -> Built:
    """The store of `spec`, built now unless an identical one is kept under `work`.

    Points this process's environment (ENGRAM_HOME, HOME, git config) at it, as speed.py does.
    """
    base = store_base(work, spec.name)
    built = None if rebuild else load_built(work, spec)
    if built is None:
        built = build(base, spec)
    speed.setup_env(base)
    return built


# --------------------------------------------------------------------------------------------
# Event payloads, as the public API writes them.
# --------------------------------------------------------------------------------------------


def memory_data(
    rng: random.Random, memory_id: str, *, task: str | None = None, kind: str | None = None
) -> dict[str, Any]:
    text, made_kind, tags = speed.make_memory(rng)
    data: dict[str, Any] = {
        "memory": memory_id,
        "content": text,
        "kind": kind or made_kind,
        "tags": tags,
        "scope": None,
        "source": "agent-inferred",
        "importance": 0.5,
        "valid_from": None,
        "valid_until": None,
    }
    if task is not None:
        data["task"] = task
    return data


def task_created(task_id: str, name: str, goal: str) -> dict[str, Any]:
    return {
        "task": task_id,
        "name": name,
        "goal": goal,
        "status": "open",
        "tags": [],
        "parent": None,
    }


def progress_data(rng: random.Random, task_id: str, step: int) -> dict[str, Any]:
    status = rng.choices(["done", "in_progress", "todo", "blocked"], [6, 2, 2, 1])[0]
    component = rng.choice(speed.COMPONENTS).replace(" ", "-")
    return {
        "task": task_id,
        "feature": f"step {step}: {rng.choice(speed.VERBS)} the {rng.choice(speed.NOUNS)} "
        f"in the {rng.choice(speed.COMPONENTS)}",
        "status": status,
        "component": component,
        "files": [speed._file(rng) for _ in range(rng.randint(0, 2))],
    }


def failure_data(rng: random.Random, task_id: str) -> dict[str, Any]:
    return {
        "task": task_id,
        "error": f"{speed._ident(rng)}() hit {rng.choice(speed.ERRORS)} when "
        f"{rng.choice(speed.CONDITIONS)}",
        "component": rng.choice(speed.COMPONENTS).replace(" ", "-"),
        "root_cause": f"{rng.choice(speed.ERRORS)} in {speed._file(rng)}",
        "fix": rng.choice(speed.FIXES),
    }


def checkpoint_data(
    rng: random.Random,
    task_id: str,
    seq: int,
    done: list[str],
) -> dict[str, Any]:
    def items(count: int) -> list[str]:
        return [
            f"{rng.choice(speed.VERBS)} the {rng.choice(speed.NOUNS)} in the "
            f"{rng.choice(speed.COMPONENTS)}"
            for _ in range(count)
        ]

    return {
        "task": task_id,
        "checkpoint": _entity_id(rng),
        "seq": seq,
        "reason": rng.choice(["handoff", "plan_change", "working_set", "quiet"]),
        "goal": "Move the billing worker onto the outbox relay without losing an invoice",
        "summary": f"checkpoint {seq}: {rng.choice(speed.TASKS)}",
        "completed": done[-20:],
        "in_progress": items(2),
        "blocked": items(rng.randint(0, 1)),
        "next": items(4),
        "must_not_redo": items(2),
        "must_preserve": items(1),
        "open_questions": items(rng.randint(0, 2)),
        "working_set": {
            "files": [{"path": speed._file(rng), "commit": None} for _ in range(4)],
            "commands": [f"pytest tests/test_{rng.choice(speed.NOUNS)}.py"],
            "artifacts": [],
        },
        "confidence": round(rng.uniform(0.4, 0.9), 4),
        # The commit the store's repository was at (a personal store's resume does not read it).
        "head": "".join(rng.choice("0123456789abcdef") for _ in range(40)),
    }


_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"


def _entity_id(rng: random.Random) -> str:
    return "".join(rng.choice(_CROCKFORD) for _ in range(12))


def _event_id(rng: random.Random, ms: int) -> str:
    value = (ms << 80) | rng.getrandbits(80)
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    return "".join(alphabet[(value >> (5 * i)) & 31] for i in range(25, -1, -1))


# --------------------------------------------------------------------------------------------
# The event stream of a spec: memories with the long task's events spread evenly among them.
# --------------------------------------------------------------------------------------------


def event_stream(
    spec: StoreSpec,
    rng: random.Random,
    task_id: str | None,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(kind, data) pairs in the order they are written."""
    slots = spec.memories + spec.task_events + spec.other_tasks * 10
    task_every = slots / spec.task_events if spec.task_events else 0.0
    others_every = slots / (spec.other_tasks * 10) if spec.other_tasks else 0.0
    next_task, next_other = 0.0, others_every / 2
    task_step = 0
    done: list[str] = []
    other_ids = [_entity_id(rng) for _ in range(spec.other_tasks)]
    other_step = 0
    for slot in range(slots):
        if spec.task_events and slot >= next_task and task_step < spec.task_events:
            next_task += task_every
            yield _task_event(rng, task_id or "", task_step, done)
            task_step += 1
            continue
        if spec.other_tasks and slot >= next_other and other_step < spec.other_tasks * 10:
            next_other += others_every
            # Ten events per small task, one task after another.
            which, step = divmod(other_step, 10)
            other_step += 1
            tid = other_ids[which]
            if step == 0:
                yield (
                    "task.created",
                    task_created(
                        tid, f"chore {which}: {speed._ident(rng)}", rng.choice(speed.TASKS)
                    ),
                )
            elif step == 9:
                yield "task.failure", failure_data(rng, tid)
            else:
                yield "task.progress", progress_data(rng, tid, step)
            continue
        yield "memory.created", memory_data(rng, _entity_id(rng))


def _task_event(
    rng: random.Random,
    task_id: str,
    step: int,
    done: list[str],
) -> tuple[str, dict[str, Any]]:
    if step == 0:
        return "task.created", task_created(
            task_id,
            "outbox migration",
            "Move the billing worker onto the outbox relay without losing an invoice",
        )
    if step % 100 == 0:
        return "checkpoint.saved", checkpoint_data(rng, task_id, step // 100, done)
    if step % 50 == 25:
        return "task.failure", failure_data(rng, task_id)
    if step % 20 == 10:
        kind = rng.choice(["decision", "gotcha", "failure", "lesson"])
        return "memory.created", memory_data(rng, _entity_id(rng), task=task_id, kind=kind)
    data = progress_data(rng, task_id, step)
    if data["status"] == "done":
        done.append(data["feature"])
    return "task.progress", data


# --------------------------------------------------------------------------------------------
# Building.
# --------------------------------------------------------------------------------------------


def build(base: Path, spec: StoreSpec) -> Built:
    from engram.api import Engram
    from engram.storage import events as ev
    from engram.storage.store import MAX_FILE_BYTES

    check_shapes()
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(parents=True)
    speed.setup_env(base)
    info: dict[str, Any] = {"spec": spec.record(), "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    rng = random.Random(spec.seed)
    t_start = time.perf_counter()
    e = Engram()
    store, _ = e.init()
    task_id = _entity_id(rng) if spec.task_events else None
    info["task_id"] = task_id
    total = spec.memories + spec.task_events + spec.other_tasks * 10
    speed.log(f"[{spec.name}] writing {total} events in bulk ({spec.commits} commit(s))")

    now = datetime.now(UTC) - timedelta(hours=1)
    start = now - timedelta(days=SPAN_DAYS)
    step_us = max(1, int(SPAN_DAYS * 86400e6 / max(total, 1)))
    start_us = int(start.timestamp() * 1e6)
    per_commit = -(-total // spec.commits)
    writer_base = f"{MACHINE}-"
    texts: list[str] = []
    written = 0
    t_write = t_commit = 0.0
    handle = None
    path: Path | None = None
    size = 0
    month = None

    def new_file(moment: datetime) -> None:
        nonlocal handle, path, size, month
        if handle is not None:
            handle.close()
        month = (moment.year, moment.month)
        path = (
            store.events_dir
            / f"{moment:%Y}"
            / f"{moment:%m}"
            / f"{writer_base}{_entity_id(rng)[:8]}.jsonl"
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "ab")  # noqa: SIM115  kept open across files, closed when it rolls
        size = 0

    stream = event_stream(spec, rng, task_id)
    for chunk in range(spec.commits):
        t0 = time.perf_counter()
        handle = None
        count = min(per_commit, total - written)
        for _ in range(count):
            kind, data = next(stream)
            clock = start_us + written * step_us
            moment = datetime.fromtimestamp(clock / 1e6, UTC)
            if handle is None or (moment.year, moment.month) != month or size >= MAX_FILE_BYTES:
                new_file(moment)
            event = ev.Event(
                id=_event_id(rng, clock // 1000),
                kind=kind,
                clock=clock,
                time=ev.format_time(moment),
                actor=ACTOR,
                session=None,
                machine=MACHINE,
                data=data,
            )
            line = event.to_line()
            assert handle is not None
            handle.write(line)
            size += len(line)
            if kind == "memory.created":
                # What the model sees of the memory, as the embedding cache keys it.
                texts.append(embedding_text(data["kind"], data.get("tags") or [], data["content"]))
            written += 1
        if handle is not None:
            handle.close()
        t_write += time.perf_counter() - t0
        t0 = time.perf_counter()
        e.commit(subject=f"bench: bulk events {chunk + 1}/{spec.commits}")
        t_commit += time.perf_counter() - t0
        if spec.commits > 1 and (chunk + 1) % max(1, spec.commits // 10) == 0:
            speed.log(f"[{spec.name}]   {chunk + 1}/{spec.commits} commits")
    info.update(
        events=written + 1,
        memories=len(texts),
        write_s=round(t_write, 1),
        commit_s=round(t_commit, 1),
    )
    speed.log(
        f"[{spec.name}] wrote {written} events in {t_write:.1f}s, committed in {t_commit:.1f}s"
    )

    if spec.prefill_vectors:
        t0 = time.perf_counter()
        prefill_embeddings(store, texts, seed=spec.seed)
        info["prefill_s"] = round(time.perf_counter() - t0, 1)
        speed.log(
            f"[{spec.name}] embedding cache filled with {len(texts)} random unit vectors "
            f"in {info['prefill_s']}s"
        )
    del texts
    if not spec.prefill_vectors:
        # Every text would be embedded: left to the stage that measures exactly that.
        return finish(base, spec, info, e, t_start, store)
    t0 = time.perf_counter()
    marks: dict[str, int] = {}

    def progress(stage: str, done: int, todo: int) -> None:
        tenth = done * 10 // max(todo, 1)
        if marks.get(stage) != tenth:
            marks[stage] = tenth
            speed.log(f"[{spec.name}]   reindex vectors: {done}/{todo}")

    out = e.reindex(progress=progress)
    info["reindex_s"] = round(time.perf_counter() - t0, 1)
    info["reindex"] = {k: v for k, v in asdict(out).items() if k != "stores"}
    return finish(base, spec, info, e, t_start, store)


def finish(
    base: Path, spec: StoreSpec, info: dict[str, Any], e: Any, t_start: float, store: Any
) -> Built:
    e.close()
    info["build_s"] = round(time.perf_counter() - t_start, 1)
    info["head"] = git(store.root, "rev-parse", "HEAD")
    info["complete"] = True
    (base / "bench-store.json").write_text(json.dumps(info, indent=2) + "\n")
    speed.log(f"[{spec.name}] built in {info['build_s']}s (reindex {info.get('reindex_s', '-')}s)")
    return Built(spec, base, info)


def prefill_embeddings(store: Any, texts: list[str], *, seed: int) -> None:
    """One random unit vector per distinct text, under the built-in model's identity."""
    from engram.search.embed import EmbeddingCache, content_hash, load_embedder

    embedder = load_embedder("builtin")
    cache = EmbeddingCache(store.local_dir / "cache" / "embeddings.sqlite3")
    gen = np.random.default_rng(seed)
    hashes = list(dict.fromkeys(content_hash(t) for t in texts))
    for start in range(0, len(hashes), 20_000):
        chunk = hashes[start : start + 20_000]
        vectors = random_unit_vectors(gen, len(chunk), embedder.dim)
        cache.put(embedder.identity, dict(zip(chunk, vectors, strict=True)))
    cache.close()


def random_unit_vectors(gen: np.random.Generator, count: int, dim: int) -> np.ndarray:
    vectors = gen.standard_normal((count, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def append_bulk(
    store: Any, events: list[tuple[str, dict[str, Any]]], *, rng: random.Random, actor: str = ACTOR
) -> Path:
    """Write events to a new writer file of their own (as another clone would), uncommitted.

    Clocks follow the store's observed clock, so they sort after everything already seen.
    """
    from engram.storage import events as ev

    moment = datetime.now(UTC)
    clock = max(int(moment.timestamp() * 1e6), store.observed_clock() + 1)
    path = (
        store.events_dir
        / f"{moment:%Y}"
        / f"{moment:%m}"
        / f"{MACHINE}-{_entity_id(rng)[:8]}.jsonl"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as handle:
        for offset, (kind, data) in enumerate(events):
            event = ev.Event(
                id=_event_id(rng, (clock + offset) // 1000),
                kind=kind,
                clock=clock + offset,
                time=ev.format_time(moment),
                actor=actor,
                session=None,
                machine=MACHINE,
                data=data,
            )
            handle.write(event.to_line())
        os.fsync(handle.fileno())
    return path


def git(cwd: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {cwd}: {done.stderr.strip()}")
    return done.stdout.strip()


# --------------------------------------------------------------------------------------------
# The payloads above against what the public API writes.
# --------------------------------------------------------------------------------------------

_SHAPES_CHECKED = False


def check_shapes() -> None:
    """Write each kind of event through the API in a scratch store; compare payload fields."""
    global _SHAPES_CHECKED
    if _SHAPES_CHECKED:
        return
    import tempfile

    from engram.api import Engram

    saved = dict(os.environ)
    scratch = Path(tempfile.mkdtemp(prefix="engram-bench-shapes-"))
    try:
        speed.setup_env(scratch)
        e = Engram(cwd=scratch)  # outside any repository: no project of its own
        e.init()
        rng = random.Random(1)
        task = e.task_create("shape check", goal="a goal")
        e.remember(
            "a memory about the payment service",
            kind="decision",
            tags=["payment"],
            task=task.id,
            check_duplicates=False,
        )
        e.progress(
            task.id, "first step", status="done", component="billing-worker", files=["src/a.py"]
        )
        e.failure(
            task.id, "it broke", component="billing-worker", root_cause="a cause", fix="a fix"
        )
        e.handoff(
            task.id,
            summary="where it stands",
            next=["one", "two"],
            completed=["x"],
            must_not_redo=["y"],
            must_preserve=["z"],
            in_progress=["w"],
            blocked=["b"],
            open_questions=["q"],
            commands=["pytest"],
            files=["src/a.py"],
        )
        api: dict[str, set[str]] = {}
        for _, event in e.log(limit=None):
            keys = set(event.data)
            if event.kind == "checkpoint.saved":
                keys |= {f"working_set.{k}" for k in event.data["working_set"]}
            api.setdefault(event.kind, set()).update(keys)
        e.close()
        ours = {
            "memory.created": memory_data(rng, "m", task="t"),
            "task.created": task_created("t", "n", "g"),
            "task.progress": progress_data(rng, "t", 1),
            "task.failure": failure_data(rng, "t"),
            "checkpoint.saved": checkpoint_data(rng, "t", 1, ["x"]),
        }
        for kind, data in ours.items():
            keys = set(data)
            if kind == "checkpoint.saved":
                keys |= {f"working_set.{k}" for k in data["working_set"]}
            if kind == "task.progress":  # the API leaves out empty optional fields
                keys -= {"note"}
            if keys != api.get(kind, set()) - ({"note"} if kind == "task.progress" else set()):
                raise RuntimeError(
                    f"benchmarks/bulkstore.py writes {kind} with fields {sorted(keys)}, the API "
                    f"with {sorted(api.get(kind, set()))}: update bulkstore.py"
                )
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(scratch, ignore_errors=True)
    _SHAPES_CHECKED = True
