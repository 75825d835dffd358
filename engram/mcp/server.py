"""The MCP server: Engram's memory and continuity tools for coding agents.

`build_server()` returns an `MCPServer` whose tools are thin over `engram.api.Engram`, the same
library calls the CLI makes. Its lifespan (`Runtime`) opens the stores and the agent session
(named after `--agent` or the client's own name), records interruptions it finds, heartbeats, and
closes the session when the server stops (`exit`, or `sigterm` on SIGTERM).

Every tool call runs in a worker thread under one lock: Engram is one store writer per process,
and the event loop stays free to answer (and to heartbeat) while a call loads the embedding model.
Library errors (`EngramError`, whose messages name the fix) become `ToolError`s worded for agents
(tools and parameters, not commands and options), and arguments that fail a tool's schema are
reported one line per call in plain words (`EngramServer`); anything else is a bug. Results are
bounded (`OUTPUT_CHARS`) and say when they were cut.

Over stdio, the stores are those of the client's project: its roots when it offers them, else
WORKSPACE_FOLDER_PATHS, else the working directory (`Runtime.locate`).

Over HTTP, a bearer token (static, or an OIDC/JWT verified against the issuer's JWKS) names the
actor of every event the caller writes, and its scopes (`memory:read`, `memory:write`,
`session:write`) limit which tools it may use.
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import ipaddress
import json
import os
import re
import signal
import socket
import sys
import threading
import time
import unicodedata
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import anyio
import anyio.to_thread
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from .. import __version__
from ..domain import discovery
from ..api import Engram
from ..base.config import check_value
from ..model.sessions import AGENTS
from ..base.errors import EngramError, UsageError, quote
from ..search.neardup import describe as describe_differences

SERVER_NAME = "engram"
SCOPES = ("memory:read", "memory:write", "session:write")
READ, WRITE, SESSION = SCOPES
OUTPUT_CHARS = 24_000  # budget for the JSON of one result's items
ITEM_CHARS = 2_000  # a memory's content in lists and search results
FULL_CHARS = 100_000  # a memory's content on its own (memory_get)
LIST_ITEMS = 100  # items of each list of a checkpoint (the latest; the first of `next`)
HEARTBEAT_SECONDS = 30.0
COMMIT_CHECK_SECONDS = 30.0  # the commit timer looks at least this often whether a batch waits
TOKEN_MIN_CHARS = 32  # a static bearer token: secrets.token_urlsafe(32) gives 43
MAKE_TOKEN = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
NAME_CHARS = 64  # the display name of an OIDC actor, and its subject before it is hashed
EMAIL_CHARS = 100  # a verified email longer than this names the subject instead
CLIENT_WAIT_SECONDS = 1.0  # how long the session waits to learn the client's name

_EMAIL = re.compile(r"[^\s<>@\x00-\x1f\x7f]+@[^\s<>@\x00-\x1f\x7f]+")

Kind = Literal["fact", "decision", "preference", "convention", "gotcha", "failure", "lesson",
               "procedure", "note"]
TaskStatus = Literal["open", "in_progress", "blocked", "done", "abandoned"]
ProgressStatus = Literal["done", "in_progress", "blocked", "todo"]
Outcome = Literal["success", "failure", "unknown"]
Interruption = Literal["crash", "overflow", "rate_limit", "tool_failure", "user_away", "unknown"]

INSTRUCTIONS = """\
Engram is this project's durable memory and task continuity, kept as events in git: what you \
store here reaches the next agent, on any machine, after any crash.

Start of a session: call session_resume (no arguments resumes the only active task; when \
several are active it lists them, then pass task). It gives the goal, where the last agent \
stopped, next steps, what must not be redone, and failures not to repeat. With no task, \
memory_list shows what is known.

While working:
- memory_recall (query) before deciding or exploring something that may be known already.
- memory_remember (content, kind) only what stays true: decisions and why, the user's \
preferences, conventions, gotchas, failures and their causes, procedures. Not progress chatter.
- discovery_record for facts about the code, cited by file and line range; discovery_check \
tells whether the citations still hold.
- For multi-step work: task_create, task_progress as parts land, task_failure when something \
fails (it returns earlier failures of the same component: do not repeat them).

Before you stop, or when your context is nearly full: session_handoff with a one-line summary, \
next steps in order, must_not_redo for side effects already done, must_preserve for the user's \
invariants. session_report records the outcome, or why you are stopping.

Your session is opened and closed by the server. Never store secrets: content that looks like \
a credential is refused.
"""


# -- results ---------------------------------------------------------------------------------


class Result(BaseModel):
    warnings: list[str] = Field(default_factory=list,
                                description="Things to know about this answer (e.g. recall fell "
                                            "back to words only).")


class MemoryView(BaseModel):
    id: str
    kind: str
    content: str
    content_truncated: bool = Field(False, description="The content was cut; memory_get has "
                                                       "all of it.")
    tags: list[str]
    scope: str | None
    store: str | None = Field(description="personal or project")
    status: str = Field(description="active, forgotten or superseded")
    importance: float
    source: str
    task: str | None
    created_at: str
    updated_at: str
    created_by: str
    version: int
    valid_from: str | None
    valid_until: str | None
    supersedes: list[str]
    superseded_by: str | None
    forgotten_reason: str | None
    reinforced: int


class Related(BaseModel):
    id: str
    similarity: float
    summary: str


class RememberResult(Result):
    memory: MemoryView
    duplicate: bool = Field(description="True when an existing near-duplicate was reinforced "
                                        "instead of adding a memory; `memory` is that one.")
    related: list[Related] = Field(description="Close but different memories: possible "
                                               "contradictions.")
    note: str


class RecallHit(BaseModel):
    memory: MemoryView
    score: float
    relevance: float
    strength: float


class RecallResult(Result):
    query: str
    hits: list[RecallHit]
    truncated: bool = Field(description="Some hits were left out to keep the answer short.")
    note: str | None = None


class MemoryList(Result):
    memories: list[MemoryView]
    truncated: bool
    note: str | None = None


class Version(BaseModel):
    event: str
    kind: str
    time: str
    actor: str
    memory: MemoryView


class MemoryResult(Result):
    memory: MemoryView
    history: list[Version] | None = Field(None, description="Every version, oldest first "
                                                            "(when asked for).")
    truncated: bool = False
    note: str | None = None


class ForgetResult(Result):
    memory: MemoryView = Field(description="The retired memory.")
    replacement: MemoryView | None = Field(description="The memory that supersedes it, when "
                                                       "replace_with was given.")


class ClusterMember(BaseModel):
    id: str
    summary: str


class Cluster(BaseModel):
    store: str
    members: list[ClusterMember]
    content: str
    kind: str
    tags: list[str]
    importance: float
    merged_into: str | None


class ConsolidateResult(Result):
    applied: bool
    clusters: list[Cluster]
    truncated: bool
    note: str


class StoreStats(BaseModel):
    store: str
    path: str
    memories: int
    forgotten: int
    superseded: int
    events: int
    by_kind: dict[str, int]
    by_scope: dict[str, int]
    average_strength: float | None
    decayed: int
    index_current: bool | None
    index: dict[str, Any] | None


class RuntimeView(BaseModel):
    version: str
    session: str | None = Field(description="The agent session this server opened.")
    agent: str | None
    client: str | None = Field(description="The client's name, as it introduced itself.")
    actor: str | None = Field(description="Who the events you write are attributed to.")
    scopes: list[str]
    cwd: str
    stores: list[str]
    embedding_model_loaded: bool
    uptime_seconds: float
    interruptions_found: list[str] = Field(description="Sessions found interrupted at start.")
    problems: list[str]


class StatsResult(Result):
    stores: list[StoreStats]
    runtime: RuntimeView


class ProgressView(BaseModel):
    feature: str
    status: str
    note: str | None
    component: str | None
    files: list[str]
    time: str
    actor: str


class FailureView(BaseModel):
    error: str
    component: str | None
    root_cause: str | None
    fix: str | None
    time: str
    actor: str


class WorkingFile(BaseModel):
    path: str
    commit: str | None


class WorkingSet(BaseModel):
    files: list[WorkingFile] = Field(default_factory=list)
    commands: list[str] = Field(default_factory=list)
    artifacts: list[str] = Field(default_factory=list)


class CheckpointView(BaseModel):
    """A continuation package. Each list holds at most 100 items (the latest ones; the first
    100 next steps)."""

    checkpoint: str
    seq: int
    reason: str
    summary: str
    goal: str
    completed: list[str]
    in_progress: list[str]
    blocked: list[str]
    next: list[str]
    must_not_redo: list[str]
    must_preserve: list[str]
    open_questions: list[str]
    working_set: WorkingSet
    confidence: float
    time: str
    actor: str
    session: str | None


class TaskView(BaseModel):
    id: str
    name: str
    goal: str
    status: str
    parent: str | None
    tags: list[str]
    store: str | None
    created_at: str
    updated_at: str
    created_by: str
    progress: list[ProgressView] = Field(description="Newest last; the latest 50 at most.")
    failures: list[FailureView] = Field(description="Newest last; the latest 50 at most.")
    checkpoints: int = Field(description="How many checkpoints the task has.")
    latest_checkpoint: CheckpointView | None


class TaskSummary(BaseModel):
    id: str
    name: str
    status: str
    goal: str
    parent: str | None
    tags: list[str]
    updated_at: str
    latest_summary: str | None = Field(description="The latest checkpoint's summary.")


class EarlierFailure(BaseModel):
    task: str
    task_name: str
    error: str
    component: str | None
    root_cause: str | None
    fix: str | None
    time: str


class TaskResult(Result):
    task: TaskView
    memories: list[MemoryView] = Field(default_factory=list)
    children: list[str] = Field(default_factory=list)
    checkpoints: list[CheckpointView] | None = None
    truncated: bool = False
    note: str | None = None


class TaskChange(Result):
    task: TaskSummary
    checkpoint: CheckpointView | None = Field(None, description="A checkpoint this saved, if "
                                                                "any.")
    earlier_failures: list[EarlierFailure] = Field(
        default_factory=list, description="Failures already recorded on the same component "
                                          "(any task): do not repeat them.")


class TaskList(Result):
    tasks: list[TaskSummary]
    truncated: bool


class ContinuityResult(Result):
    task: str
    before: int
    after: int
    goal_retention: float
    action_consistency: float
    failure_recall: float
    working_set_stability: float
    replanning_rate: float
    redundant_exploration: float
    composite: float


class HandoffResult(Result):
    task: str
    checkpoint: CheckpointView
    note: str


class ResumeResult(Result):
    task: str | None
    confidence: float | None
    truncated: bool
    markdown: str


class SessionView(BaseModel):
    id: str
    agent: str
    actor: str
    machine: str | None
    state: str = Field(description="open, ended or interrupted")
    started_at: str
    ended_at: str | None
    outcome: str | None
    how: str | None
    reason: str | None = Field(description="Why it was interrupted.")
    reported: str | None
    evidence: str | None
    current: bool = Field(description="This server's own session.")


class SessionList(Result):
    sessions: list[SessionView]
    truncated: bool


class ReportResult(Result):
    session: str | None
    outcome: str | None = Field(description="The outcome the session will close with.")
    interruption: str | None = Field(description="The interruption reason recorded now.")
    note: str


class CitationIn(BaseModel):
    path: Annotated[str, Field(description="File path relative to the repository root "
                                           "(no absolute paths, no '..').")]
    start_line: Annotated[int, Field(ge=1, description="First cited line, counting from 1.")]
    end_line: Annotated[int | None, Field(ge=1, description="Last cited line (inclusive); "
                                                            "default: start_line.")] = None
    excerpt: Annotated[str | None, Field(description="The cited lines as you read them; if "
                                                     "given, they must match the file.")] = None


class CitationView(BaseModel):
    path: str
    start_line: int
    end_line: int
    commit: str
    excerpt_kept: bool = Field(description="The excerpt is stored in the memory because git "
                                           "cannot give it back (uncommitted lines of a "
                                           "tracked file). Never for an untracked or ignored "
                                           "file: warnings then say so.")


class CitationCheckView(CitationView):
    status: Literal["valid", "moved", "broken", "unknown"]
    reason: str
    moved_to: list[dict[str, int]]


class DiscoveryResult(Result):
    memory: MemoryView
    fact: str
    citations: list[CitationView]
    duplicate: bool


class DiscoveryCheck(BaseModel):
    id: str
    fact: str
    status: Literal["valid", "moved", "broken", "unknown"] = Field(
        description="The worst status among its citations.")
    citations: list[CitationCheckView]


class CheckResult(Result):
    discoveries: list[DiscoveryCheck]
    counts: dict[str, int] = Field(description="Citations by status.")
    truncated: bool


# -- views -----------------------------------------------------------------------------------


def _memory(memory: Any, *, limit: int | None = ITEM_CHARS) -> MemoryView:
    content = memory.content
    cut = limit is not None and len(content) > limit
    return MemoryView(
        id=memory.id, kind=memory.kind, content=content[:limit] + "…" if cut else content,
        content_truncated=cut, tags=list(memory.tags), scope=memory.scope, store=memory.store,
        status=memory.status, importance=memory.importance, source=memory.source,
        task=memory.task, created_at=memory.created_at, updated_at=memory.updated_at,
        created_by=memory.created_by, version=memory.version, valid_from=memory.valid_from,
        valid_until=memory.valid_until, supersedes=list(memory.supersedes),
        superseded_by=memory.superseded_by, forgotten_reason=memory.forgotten_reason,
        reinforced=memory.reinforced,
    )


def _items(value: Any) -> list[Any]:
    return list(value or [])[-LIST_ITEMS:]


def _checkpoint(data: dict[str, Any] | None) -> CheckpointView | None:
    if not data:
        return None
    working = data.get("working_set") or {}
    return CheckpointView(
        checkpoint=data["checkpoint"], seq=data["seq"], reason=data.get("reason") or "",
        summary=data.get("summary") or "", goal=data.get("goal") or "",
        completed=_items(data.get("completed")), in_progress=_items(data.get("in_progress")),
        blocked=_items(data.get("blocked")), next=list(data.get("next") or [])[:LIST_ITEMS],
        must_not_redo=_items(data.get("must_not_redo")),
        must_preserve=_items(data.get("must_preserve")),
        open_questions=_items(data.get("open_questions")),
        working_set=WorkingSet(
            files=[WorkingFile(path=f["path"], commit=f.get("commit"))
                   for f in _items(working.get("files"))],
            commands=_items(working.get("commands")),
            artifacts=_items(working.get("artifacts"))),
        confidence=float(data.get("confidence") or 0.0), time=data.get("time") or "",
        actor=data.get("actor") or "", session=data.get("session"),
    )


def _task(task: Any) -> TaskView:
    return TaskView(
        id=task.id, name=task.name, goal=task.goal, status=task.status, parent=task.parent,
        tags=list(task.tags), store=task.store, created_at=task.created_at,
        updated_at=task.updated_at, created_by=task.created_by,
        progress=[ProgressView(feature=p.feature, status=p.status, note=p.note,
                               component=p.component, files=list(p.files), time=p.time,
                               actor=p.actor) for p in task.progress[-50:]],
        failures=[FailureView(error=f.error, component=f.component, root_cause=f.root_cause,
                              fix=f.fix, time=f.time, actor=f.actor)
                  for f in task.failures[-50:]],
        checkpoints=len(task.checkpoints),
        latest_checkpoint=_checkpoint(task.latest_checkpoint),
    )


def _summary(task: Any) -> TaskSummary:
    latest = task.latest_checkpoint or {}
    return TaskSummary(id=task.id, name=task.name, status=task.status, goal=task.goal,
                       parent=task.parent, tags=list(task.tags), updated_at=task.updated_at,
                       latest_summary=latest.get("summary"))


def _earlier(items: Sequence[dict[str, Any]]) -> list[EarlierFailure]:
    return [EarlierFailure(task=f["task"], task_name=f["task_name"], error=f["error"],
                           component=f.get("component"), root_cause=f.get("root_cause"),
                           fix=f.get("fix"), time=f["time"]) for f in items[:10]]


M = TypeVar("M", bound=BaseModel)


def fit(items: Sequence[M], budget: int = OUTPUT_CHARS) -> tuple[list[M], bool]:
    """As many items as fit in `budget` characters of JSON (always at least one)."""
    kept: list[M] = []
    used = 0
    for item in items:
        size = len(item.model_dump_json())
        if kept and used + size > budget:
            return kept, True
        kept.append(item)
        used += size
    return kept, False


# -- the runtime: stores, session, identity ----------------------------------------------------


def writes(scopes: frozenset[str]) -> bool:
    """Whether `scopes` allow writing at all: without a write scope nothing is written, not
    even a session or an interruption record."""
    return bool(scopes & {WRITE, SESSION})


def agent_for(client: str | None) -> str:
    """Engram's agent name for an MCP client's own name ("claude-code", "cursor-vscode", ...)."""
    name = (client or "").lower()
    for needle, agent in (("claude", "claude-code"), ("cursor", "cursor"), ("codex", "codex")):
        if needle in name:
            return agent
    return "other"


T = TypeVar("T")

_CLI_WORDS = (
    ("with --task ID", "with task=<id>"), ("pass --redact", "pass redact=true"),
    ("say why with --reason", "say why with reason"),
)


def agent_message(exc: EngramError) -> str:
    """The library's one-line message in an agent's words: the fix it carries, worded for MCP
    (tools and parameters); for an error that carries none, command-line options it names are
    replaced by their tool parameters."""
    if exc.fix is not None or exc.mcp_problem is not None:
        return exc.message("mcp")
    text = str(exc)
    for cli, tool in _CLI_WORDS:
        text = text.replace(cli, tool)
    return text


def _where(loc: Sequence[int | str]) -> str:
    """A parameter's place in the arguments: `citations[0].start_line`."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out or "arguments"


def _shown(value: Any) -> str:
    """An argument's value as a message shows it: short, quoted if text, never a secret."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, list):
        return "a list"
    return "an object" if isinstance(value, dict) else type(value).__name__


_TYPES = {"int": "a whole number", "float": "a number", "bool": "true or false",
          "string": "text", "list": "a list", "dict": "an object", "model": "an object"}


def _wrong(error: Any) -> str:
    """What pydantic found wrong with one argument, in plain words."""
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    if kind == "missing":
        return "required"
    if kind == "literal_error":
        allowed = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        return f"{_shown(value)} is not one of {', '.join(allowed)}"
    bounds = {"less_than_equal": ("over the maximum", "le"),
              "less_than": ("not under", "lt"),
              "greater_than_equal": ("under the minimum", "ge"),
              "greater_than": ("not over", "gt")}
    if kind in bounds:
        words, key = bounds[kind]
        bound = ctx.get(key)
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)
        return f"{_shown(value)} is {words} {bound}"
    if kind == "too_short":
        return f"needs at least {ctx.get('min_length')} item(s)"
    if kind == "too_long":
        return f"holds {ctx.get('actual_length')} items; at most {ctx.get('max_length')}"
    if kind == "extra_forbidden":
        return "not a parameter of this tool"
    base = kind.split("_", 1)[0]
    if base in _TYPES and kind.endswith(("_type", "_parsing", "_from_float", "_attributes_type")):
        return f"{_shown(value)} is not {_TYPES[base]}"
    return str(error.get("msg", "invalid")).removeprefix("Value error, ")


def invalid_arguments(error: ValidationError) -> str:
    """Arguments that failed the input schema, as one line that names each parameter, what
    was wrong and what is allowed: `kind: 'nonsense' is not one of fact, decision, ...`."""
    found = [f"{_where(e['loc'])}: {_wrong(e)}" for e in error.errors(include_url=False)]
    return "; ".join(dict.fromkeys(found))


# -- where the project is ----------------------------------------------------------------------

ROOTS_WAIT_SECONDS = 10.0  # how long a roots/list request may take


def workspace_folders(value: str | None = None) -> list[Path]:
    """The folders in WORKSPACE_FOLDER_PATHS (set by Cursor, which may start a server in `/`):
    one path, or several separated by commas or the path separator; those that exist."""
    text = (os.environ.get("WORKSPACE_FOLDER_PATHS", "") if value is None else value).strip()
    if not text:
        return []
    if Path(text).is_dir():
        return [Path(text)]
    parts = [p.strip() for chunk in text.split(",") for p in chunk.split(os.pathsep)]
    return [Path(p) for p in parts if p and Path(p).is_dir()]


def root_folders(uris: Sequence[str]) -> list[Path]:
    """The local folders among an MCP client's roots (`file://` URIs)."""
    found = []
    for uri in uris:
        parts = urllib.parse.urlsplit(uri)
        if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
            continue
        path = Path(urllib.request.url2pathname(parts.path))
        if path.is_dir():
            found.append(path)
    return found


def project_folder(candidates: Sequence[Path]) -> Path | None:
    """The folder to work in among `candidates`: the first whose git work tree holds a
    project store, else the first inside a git work tree, else the first."""
    from ..base.config import find_project_store, find_work_tree

    for test in (find_project_store, find_work_tree):
        for folder in candidates:
            if test(folder) is not None:
                return folder
    return candidates[0] if candidates else None


class EngramServer(MCPServer):
    """The SDK's server, with arguments that fail a tool's input schema reported in plain
    words (the SDK passes on pydantic's own report, with links and every input)."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Any = None) -> Any:
        await _locate(context)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            raise ToolError(f"Error executing tool {name}: {invalid_arguments(cause)}"
                            ) from cause

    async def get_prompt(self, name: str, arguments: Any = None, context: Any = None) -> Any:
        await _locate(context)
        return await super().get_prompt(name, arguments, context)


async def _locate(context: Any) -> None:
    """Before the first call that needs a store: ask a client that offers roots for them, so
    the server works in the client's project whatever directory it was started in."""
    try:
        runtime = context.request_context.lifespan_context
    except (AttributeError, LookupError, ValueError):
        return
    if not isinstance(runtime, Runtime) or runtime.located.is_set():
        return
    if not runtime.roots_offered:
        await anyio.to_thread.run_sync(runtime.locate, [])
        return
    import warnings

    from mcp.shared.exceptions import NoBackChannelError

    uris: list[str] = []
    try:
        with warnings.catch_warnings(), anyio.fail_after(ROOTS_WAIT_SECONDS):
            warnings.simplefilter("ignore")  # roots are deprecated from protocol 2026-07-28
            result = await context.session.list_roots()
        uris = [str(root.uri) for root in result.roots]
    except NoBackChannelError:  # protocol 2026-07-28 over stdio: no requests to the client
        pass
    except Exception as exc:  # noqa: BLE001 (whatever the client did, keep the first guess)
        runtime.problems.append(f"the client's roots/list failed ({type(exc).__name__}); "
                                f"working in {runtime.cwd}")
    await anyio.to_thread.run_sync(runtime.locate, root_folders(uris))


class Runtime:
    """The server's state for its lifetime: one `Engram` per actor, the session, the lock."""

    def __init__(self, *, cwd: Path | str | None = None, agent: str | None = None,
                 actor: str | None = None, scopes: Sequence[str] | None = None,
                 heartbeat_seconds: float = HEARTBEAT_SECONDS, roots: bool = False,
                 clock: Callable[[], float] = time.time) -> None:
        # Where the stores are found: `cwd` if given; else the client's roots (asked for at
        # the first call, when `roots` and the client offers them), WORKSPACE_FOLDER_PATHS,
        # the working directory.
        self.cwd = Path(cwd) if cwd is not None else (project_folder(workspace_folders())
                                                      or Path.cwd())
        self.located = threading.Event()  # the folder to work in is settled
        self.roots_offered = False
        if cwd is not None or not roots:
            self.located.set()
        if agent is not None and agent not in AGENTS:
            raise UsageError(f"unknown agent {quote(agent)}; use one of {', '.join(AGENTS)}")
        self.agent = agent
        self.actor = check_value("actor", actor) if actor is not None else None
        unknown = set(scopes or ()) - set(SCOPES)
        if unknown:
            raise ValueError(f"unknown scope(s) {', '.join(sorted(unknown))}; "
                             f"known: {', '.join(SCOPES)}")
        self.scopes = frozenset(SCOPES if scopes is None else scopes)
        self.writes = writes(self.scopes)
        self.heartbeat_seconds = heartbeat_seconds
        self.clock = clock  # what the commit policy reads as "now"
        self.lock = threading.RLock()
        self.client_name: str | None = None
        self.session_id: str | None = None
        self.session_agent: str | None = None
        self.outcome: str | None = None
        self.how = "exit"
        self.interrupted: list[str] = []
        self.problems: list[str] = []
        self.started = time.time()
        self._engrams: dict[str | None, Engram] = {}
        self._client_seen = threading.Event()
        self._opened = threading.Event()
        self._stop = threading.Event()
        self._wake = threading.Event()  # a tool call wrote: the commit timer looks again
        self._threads: list[threading.Thread] = []
        self._closed = False

    # lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Open the session in the background: the server answers at once."""
        self._stop.clear()
        self._wake.clear()
        self._opened.clear()
        self._closed = False
        self.started = time.time()
        threads = [(self._open, "engram-session"), (self._beat, "engram-heartbeat")]
        if self.writes:  # a read-only server commits nothing, not even others' events
            threads.append((self._commit_timer, "engram-commit"))
        for target, name in threads:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def saw_client(self, name: str | None, *, roots: bool = False) -> None:
        """The client introduced itself (`initialize`): its name, and whether it offers its
        roots (folders) to ask for."""
        if self.client_name is None and name:
            self.client_name = name
        if not self._client_seen.is_set() and not self.located.is_set():
            self.roots_offered = roots
            if not roots:
                self.located.set()
        self._client_seen.set()

    @property
    def client_seen(self) -> bool:
        return self._client_seen.is_set()

    def locate(self, folders: Sequence[Path]) -> None:
        """Settle the folder to work in: the project among the client's root `folders`, or
        the first guess (WORKSPACE_FOLDER_PATHS or the working directory) if none is local."""
        with self.lock:
            if self.located.is_set():
                return
            found = project_folder(folders)
            if found is not None and found != self.cwd:
                self.cwd = found
                for engram in self._engrams.values():
                    engram.close()
                self._engrams.clear()
            self.located.set()

    def _open(self) -> None:
        try:
            if not self.writes:
                return
            if self.agent is None or not self.located.is_set():
                self._client_seen.wait(CLIENT_WAIT_SECONDS)
            while self.roots_offered and not self.located.wait(0.5):  # the first call asks
                if self._stop.is_set():
                    return
            with self.lock:
                self._ensure_session()
                if self.session_id is None:
                    return
                try:
                    engram = self._engram(None)
                    found = [engram.session_info(s.id) for s in engram.detect_interruptions()]
                    self.interrupted = [f"{s.id} ({s.agent}): {s.reason}" for s in found]
                except EngramError as exc:
                    self.problems.append(f"could not check for interrupted sessions: {exc}")
        finally:
            self._opened.set()

    def _ensure_session(self) -> None:
        """An open session for this server: opened once, and again if something (the Claude
        Code SessionEnd hook, `engram session end`) closed it while the server kept running."""
        engram = self._engram(None)
        if self.session_id is not None:
            try:
                if engram.session_info(self.session_id).state == "open":
                    return
            except EngramError:
                pass
            self.session_id = None
        try:
            opened = engram.session_start(agent=self.agent or agent_for(self.client_name))
        except EngramError as exc:  # no store yet: tools say how to make one
            problem = f"no session opened: {exc}"
            if problem not in self.problems:
                self.problems.append(problem)
            return
        self.session_id = opened.id
        self.session_agent = opened.agent
        self.problems = [p for p in self.problems if not p.startswith("no session opened")]
        for other in self._engrams.values():
            other.session = opened.id

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_seconds):
            with self.lock:
                self._heartbeat()

    def _heartbeat(self) -> None:
        if self.session_id is None or self._closed:
            return
        try:
            self._engram(None).heartbeat(session_id=self.session_id)
        except EngramError:
            pass

    def _commit_timer(self) -> None:
        """Commit a batch of pending events when it falls due (`commit.every_seconds`), even if
        no further write comes. Under the runtime's lock, so never during a tool call; the
        store's write lock keeps other processes' writes out."""
        wait = 0.0
        while True:
            self._wake.wait(wait)
            self._wake.clear()
            if self._stop.is_set():
                return
            due_in = self.commit_due()
            # A batch that stays due (its commit failed: a detached HEAD, a merge under way)
            # is tried again at the usual pace, not in a loop.
            wait = COMMIT_CHECK_SECONDS if due_in is None or due_in <= 0 else \
                min(COMMIT_CHECK_SECONDS, due_in + 0.05)

    def commit_due(self) -> float | None:
        """One look of the commit timer: commit what is due; seconds until the next batch is."""
        with self.lock:
            if self._closed:
                return None
            return self._engram(None).commit_due()

    def stop(self, how: str | None = None) -> None:
        """Close the session (with the outcome the agent reported) and the stores."""
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads.clear()
        with self.lock:
            if self._closed:
                return
            self._closed = True
            session_id = self.session_id
            if session_id is not None:
                engram = self._engram(None)
                try:
                    if engram.session_info(session_id).state == "open":
                        engram.session_end(outcome=self.outcome, how=how or self.how,
                                           session_id=session_id)
                except EngramError as exc:
                    print(f"engram: could not close session {session_id[:8]}: {exc}",
                          file=sys.stderr)
            for engram in self._engrams.values():
                engram.close()
            self._engrams.clear()

    # calls ----------------------------------------------------------------------------------

    def _engram(self, actor: str | None) -> Engram:
        engram = self._engrams.get(actor)
        if engram is None:
            engram = Engram(cwd=self.cwd, actor=actor or self.actor, session=self.session_id)
            engram.clock = self.clock
            self._engrams[actor] = engram
        return engram

    def identity(self) -> tuple[str | None, frozenset[str]]:
        """Who is calling: the actor and scopes of the verified token (HTTP), or the server's."""
        from mcp.server.auth.middleware.auth_context import get_access_token

        token = get_access_token()
        if token is None:
            return None, self.scopes
        actor = (token.claims or {}).get("engram_actor")
        return actor, self.scopes & frozenset(token.scopes)

    def run(self, tool: str, scope: str, call: Callable[[Engram], T]) -> T:
        actor, scopes = self.identity()
        if scope not in scopes:
            held = ", ".join(sorted(scopes)) or "none"
            raise ToolError(f"{tool} needs the scope {scope}; this connection has {held}. "
                            f"Use a token that grants {scope}")
        self._opened.wait(timeout=30)
        with self.lock:
            if self._closed:
                raise ToolError("the server is shutting down; call again after it restarts")
            if self.writes:
                self._ensure_session()
            try:
                engram = self._engram(actor)
                engram.session = self.session_id
                result = call(engram)
            except EngramError as exc:
                raise ToolError(agent_message(exc)) from None
            finally:
                self._heartbeat()
                self._wake.set()
            warnings = list(dict.fromkeys(engram.warnings))
            engram.warnings.clear()
        if warnings and isinstance(result, Result):
            result.warnings = [*result.warnings, *warnings]
        return result

    def view(self) -> RuntimeView:
        actor, scopes = self.identity()
        engram = self._engram(actor)
        try:
            stores = [f"{s.kind}: {s.root}" for s in engram.stores()]
        except EngramError as exc:
            stores = []
            if str(exc) not in self.problems:
                self.problems.append(str(exc))
        return RuntimeView(
            version=__version__, session=self.session_id, agent=self.session_agent,
            client=self.client_name,
            actor=actor or self.actor or (engram.actor(engram.write_store()) if stores
                                          else None),
            scopes=sorted(scopes), cwd=str(self.cwd), stores=stores,
            embedding_model_loaded=bool(getattr(sys.modules.get("engram.search.embed"),
                                                "_loaded", None)),
            uptime_seconds=round(time.time() - self.started, 1),
            interruptions_found=list(self.interrupted), problems=list(self.problems),
        )


# -- the tools ---------------------------------------------------------------------------------

Id = Annotated[str, Field(description="A memory id, or any unique prefix of 4+ characters.")]
TaskRef = Annotated[str, Field(description="A task id (or unique prefix of 4+ characters), or "
                                           "the task's exact name.")]
Tags = Annotated[list[str], Field(description="Tags (lower-cased); e.g. [\"db\", \"testing\"].")]


def _annotations(title: str, *, read_only: bool = False, destructive: bool = False,
                 idempotent: bool = False) -> ToolAnnotations:
    if read_only:
        return ToolAnnotations(title=title, read_only_hint=True, open_world_hint=False)
    return ToolAnnotations(title=title, read_only_hint=False, destructive_hint=destructive,
                           idempotent_hint=idempotent, open_world_hint=False)


def describe(doc: str | None) -> str:
    """A docstring as a tool description: dedented, each paragraph on one line."""
    return "\n\n".join(" ".join(p.split()) for p in inspect.cleandoc(doc or "").split("\n\n"))


def _tool(server: MCPServer, title: str, *, read_only: bool = False, destructive: bool = False,
          idempotent: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        server.add_tool(fn, title=title, description=describe(fn.__doc__),
                        annotations=_annotations(title, read_only=read_only,
                                                 destructive=destructive, idempotent=idempotent))
        return fn
    return register


def _runtime(ctx: Context) -> Runtime:
    return ctx.request_context.lifespan_context


def _add_memory_tools(server: MCPServer) -> None:
    @_tool(server, "Remember")
    def memory_remember(
        content: Annotated[str, Field(description="The memory's text: one self-contained "
                                                  "statement, e.g. \"Use Postgres for the job "
                                                  "queue: we need SKIP LOCKED\".")],
        ctx: Context,
        kind: Annotated[Kind, Field(description="fact (default), decision, preference, "
                                                "convention, gotcha, failure, lesson, "
                                                "procedure or note.")] = "fact",
        tags: Tags = [],  # noqa: B006 (pydantic copies defaults)
        scope: Annotated[str | None, Field(description="Where it applies: a component or a "
                                                       "relative path such as src/api.")] = None,
        importance: Annotated[float, Field(ge=0, le=1, description="0 to 1; 0.7+ comes back at "
                                                                   "every resume.")] = 0.5,
        source: Annotated[Literal["user-said", "agent-inferred"],
                          Field(description="Who said it.")] = "agent-inferred",
        task: Annotated[str | None, Field(description="The task id it belongs to.")] = None,
        valid_until: Annotated[str | None, Field(description="Not valid from this date on "
                                                             "(2026-12-01, or an age like "
                                                             "3d).")] = None,
        redact: Annotated[bool, Field(description="Store detected secrets as [REDACTED:type] "
                                                  "instead of refusing.")] = False,
    ) -> RememberResult:
        """Store a durable memory: a decision and its reason, a user preference, a convention,
        a gotcha, a failure and its cause, a procedure. Use it for what will still be true next
        session, not for progress (task_progress) or a hand-over (session_handoff); for a fact
        about the code with file and line citations, use discovery_record.

        Side effects: appends an event to the store (durable when this returns; committed to
        git in batches). A near-duplicate of an active memory reinforces that memory instead of
        adding one (`duplicate` is then true). Close but different memories come back in
        `related`: if one is now wrong, retire it with memory_forget. Content that looks like a
        credential is refused unless redact is true."""
        task_id = task
        return _runtime(ctx).run("memory_remember", WRITE, lambda e: _remembered(e.remember(
            content, kind=kind, tags=tags, scope=scope, importance=importance, source=source,
            task=task_id, valid_until=valid_until, redact=redact)))

    @_tool(server, "Recall", read_only=True)
    def memory_recall(
        query: Annotated[str, Field(description="What you need, in words: a question or "
                                                "keywords.")],
        ctx: Context,
        k: Annotated[int, Field(ge=1, le=50, description="At most this many results.")] = 10,
        kinds: Annotated[list[Kind], Field(description="Only these kinds.")] = [],  # noqa: B006
        tags: Annotated[list[str], Field(description="Only memories with all these "
                                                     "tags.")] = [],  # noqa: B006
        scope: Annotated[str | None, Field(description="Only this scope.")] = None,
        task: Annotated[str | None, Field(description="Only memories of this task id.")] = None,
        since: Annotated[str | None, Field(description="Only memories from this date (or age, "
                                                       "e.g. 7d) on.")] = None,
        include_all: Annotated[bool, Field(description="Also forgotten, superseded, expired "
                                                       "and decayed memories.")] = False,
    ) -> RecallResult:
        """Search memories by meaning and by words (hybrid BM25 + embeddings, weighted by each
        memory's strength), best first. Use it before deciding or exploring something that may
        be known already. For the latest memories without a query use memory_list; for one
        memory in full, memory_get.

        Read-only (the first call loads the embedding model, a few seconds; if it cannot load,
        recall uses words only and says so in warnings). Contents longer than 2,000 characters
        are cut (`content_truncated`); the list is cut to fit the answer (`truncated`)."""
        def call(engram: Engram) -> RecallResult:
            hits = engram.recall(query, k=k, kinds=kinds, tags=tags, scope=scope, task=task,
                                 since=since, include_forgotten=include_all,
                                 include_expired=include_all, include_decayed=include_all)
            views = [RecallHit(memory=_memory(h.memory), score=round(h.score, 4),
                               relevance=round(h.relevance, 4), strength=round(h.strength, 4))
                     for h in hits]
            kept, cut = fit(views)
            return RecallResult(query=query, hits=kept, truncated=cut,
                                note=None if kept else "nothing found; try other words, or "
                                                       "memory_list for the latest memories")
        return _runtime(ctx).run("memory_recall", READ, call)

    @_tool(server, "List recent memories", read_only=True)
    def memory_list(
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many.")] = 20,
        kinds: Annotated[list[Kind], Field(description="Only these kinds.")] = [],  # noqa: B006
        tags: Annotated[list[str], Field(description="Only memories with all these "
                                                     "tags.")] = [],  # noqa: B006
        scope: Annotated[str | None, Field(description="Only this scope.")] = None,
        include_all: Annotated[bool, Field(description="Also forgotten memories and those "
                                                       "outside their validity window.")] = False,
    ) -> MemoryList:
        """The most recently changed memories, newest first, with no query: what is known, at
        the start of a session or before a broad task. To search, use memory_recall.

        Read-only. Contents longer than 2,000 characters are cut (`content_truncated`); the
        list is cut to fit the answer (`truncated`)."""
        def call(engram: Engram) -> MemoryList:
            found = engram.memories(kinds=kinds, tags=tags, scope=scope, limit=limit,
                                    include_forgotten=include_all,
                                    include_expired=include_all)
            kept, cut = fit([_memory(m) for m in found])
            return MemoryList(memories=kept, truncated=cut,
                              note=None if kept else "no memories yet" if not (
                                  kinds or tags or scope) else "no memories match")
        return _runtime(ctx).run("memory_list", READ, call)

    @_tool(server, "Get a memory", read_only=True)
    def memory_get(
        id: Id,  # the name agents expect
        ctx: Context,
        history: Annotated[bool, Field(description="Also every version, oldest first.")] = False,
    ) -> MemoryResult:
        """One memory in full, by id or unique prefix (from memory_recall, memory_list or a
        resume), optionally with every earlier version and who changed it.

        Read-only. The history is cut to fit the answer (`truncated`)."""
        def call(engram: Engram) -> MemoryResult:
            memory = engram.get(id)
            if not history:
                return MemoryResult(memory=_memory(memory, limit=FULL_CHARS))
            versions = [Version(event=e.id, kind=e.kind, time=e.time, actor=e.actor,
                                memory=_memory(m)) for e, m in engram.history(id)]
            kept, cut = fit(versions[::-1])
            return MemoryResult(memory=_memory(memory, limit=FULL_CHARS), history=kept[::-1],
                                truncated=cut,
                                note="the oldest versions were left out" if cut else None)
        return _runtime(ctx).run("memory_get", READ, call)

    @_tool(server, "Update a memory", idempotent=True)
    def memory_update(
        id: Id,
        ctx: Context,
        content: Annotated[str | None, Field(description="New text (omit to keep).")] = None,
        kind: Annotated[Kind | None, Field(description="New kind (omit to keep).")] = None,
        tags: Annotated[list[str] | None, Field(description="New tags, replacing the old "
                                                            "ones (omit to keep).")] = None,
        scope: Annotated[str | None, Field(description="New scope (omit to keep).")] = None,
        importance: Annotated[float | None, Field(ge=0, le=1, description="New importance "
                                                                          "(omit to keep).")
                              ] = None,
        valid_until: Annotated[str | None, Field(description="New end of validity (a date or "
                                                             "an age like 3d).")] = None,
        redact: Annotated[bool, Field(description="Store detected secrets as [REDACTED:type] "
                                                  "instead of refusing.")] = False,
    ) -> MemoryResult:
        """Change a memory's text or fields in place, when it was incomplete or slightly wrong
        (the earlier version stays in its history). When what it says is no longer true, use
        memory_forget (with replace_with for the new truth) instead.

        Side effects: appends a `memory.updated` event with only the changed fields. Giving
        only values it already has is an error (nothing to change)."""
        return _runtime(ctx).run("memory_update", WRITE, lambda e: MemoryResult(
            memory=_memory(e.update(id, content, kind=kind, tags=tags, scope=scope,
                                    importance=importance, valid_until=valid_until,
                                    redact=redact), limit=None)))

    @_tool(server, "Forget or supersede a memory", destructive=True,
                                          idempotent=True)
    def memory_forget(
        id: Id,
        ctx: Context,
        reason: Annotated[str | None, Field(description="Why it no longer holds (kept in its "
                                                        "history). Required unless "
                                                        "replace_with is given.")] = None,
        replace_with: Annotated[str | None, Field(description="The new truth: a new memory "
                                                              "with this text (same kind, "
                                                              "tags, scope, task) supersedes "
                                                              "the old one.")] = None,
    ) -> ForgetResult:
        """Retire a memory that is wrong or obsolete, so it leaves recall, listings and
        resumes. With replace_with, a new memory holding the corrected text supersedes it in
        one step (use this when a fact changed); otherwise give the reason.

        Side effects: a tombstone (`memory.forgotten`) or a supersede event. Nothing is
        deleted: memory_get with history=true still shows it, but it cannot be brought back."""
        def call(engram: Engram) -> ForgetResult:
            if replace_with is None:
                if not reason or not reason.strip():
                    raise ToolError("say why in reason, or give the corrected text in "
                                    "replace_with")
                return ForgetResult(memory=_memory(engram.forget(id, reason=reason)),
                                    replacement=None)
            old = engram.get(id)
            new = engram.remember(replace_with, kind=old.kind, tags=old.tags, scope=old.scope,
                                  importance=old.importance, source=old.source, task=old.task,
                                  supersedes=[old.id])
            return ForgetResult(memory=_memory(engram.get(old.id)),
                                replacement=_memory(new.memory))
        return _runtime(ctx).run("memory_forget", WRITE, call)

    @_tool(server, "Consolidate near-duplicates", destructive=True,
                                          idempotent=True)
    def memory_consolidate(
        ctx: Context,
        apply: Annotated[bool, Field(description="Merge the clusters; false (default) only "
                                                 "shows them.")] = False,
        similarity: Annotated[float | None, Field(ge=0, le=1, description="Merge memories at "
                                                                          "least this similar "
                                                                          "(default: the "
                                                                          "consolidate."
                                                                          "similarity setting, "
                                                                          "0.90).")] = None,
    ) -> ConsolidateResult:
        """Find clusters of near-duplicate memories of the same kind; with apply=true, merge
        each into one memory (the longest text, all tags, the highest importance) that
        supersedes its members. Run it without apply first and read the clusters. For one
        wrong memory, use memory_forget.

        Side effects with apply=true: supersede events (the members' histories stay). Loads
        the embedding model (a few seconds the first time)."""
        def call(engram: Engram) -> ConsolidateResult:
            plans = engram.consolidate(apply=apply, similarity=similarity)
            clusters = [Cluster(store=p["store"], members=[ClusterMember(**m)
                                                           for m in p["members"]],
                                content=p["content"][:ITEM_CHARS], kind=p["kind"],
                                tags=p["tags"], importance=p["importance"],
                                merged_into=p["merged_into"]) for p in plans]
            kept, cut = fit(clusters)
            note = ("no near-duplicates found" if not plans else
                    f"merged {len(plans)} cluster(s)" if apply else
                    f"{len(plans)} cluster(s) would be merged; call again with apply=true")
            return ConsolidateResult(applied=apply, clusters=kept, truncated=cut, note=note)
        return _runtime(ctx).run("memory_consolidate", WRITE, call)

    @_tool(server, "Store statistics and server health", read_only=True)
    def memory_stats(ctx: Context) -> StatsResult:
        """Health and statistics: for each store, memory counts by kind and scope, average
        strength and whether the search indexes are current; for this server, its version,
        session, agent, client, the actor your events are attributed to, your scopes, and any
        problem (such as no store yet). Use it when something looks wrong.

        Read-only."""
        def call(engram: Engram) -> StatsResult:
            runtime = _runtime(ctx)
            try:
                report = engram.stats()
            except EngramError as exc:  # no store: the runtime part still answers
                return StatsResult(stores=[], runtime=runtime.view(), warnings=[str(exc)])
            stores = [StoreStats(
                store=r["store"], path=r["path"], memories=r["memories"],
                forgotten=r["forgotten"], superseded=r["superseded"], events=r["events"],
                by_kind=r["by_kind"], by_scope=r["by_scope"],
                average_strength=r["average_strength"], decayed=r["decayed"],
                index_current=(r["index"] or {}).get("current"), index=r["index"],
            ) for r in report]
            return StatsResult(stores=stores, runtime=runtime.view())
        return _runtime(ctx).run("memory_stats", READ, call)


def _remembered(result: Any) -> RememberResult:
    related = [Related(id=m.id, similarity=round(s, 4), summary=m.summary())
               for m, s in result.related]
    if result.duplicate:
        note = (f"reinforced existing memory {result.memory.id[:8]} instead of adding a "
                "duplicate (it says the same facts; your text is kept in the reinforcement "
                "event)")
    elif related:
        new = result.memory.id[:8]
        differ = "".join(f"; the new text differs from {r.id[:8]} in "
                         f"{describe_differences(found)}"
                         for r in related if (found := result.differs_from(r.id)))
        note = (f"remembered {new}; {len(related)} close memories may contradict it{differ}. "
                "If one is now wrong, replace it: memory_forget with its id and replace_with "
                f"set to this same text (it is then superseded by {new})")
    else:
        note = f"remembered {result.memory.id[:8]} in the {result.memory.store} store"
    return RememberResult(memory=_memory(result.memory, limit=None),
                          duplicate=result.duplicate, related=related, note=note)


def _add_task_tools(server: MCPServer) -> None:
    @_tool(server, "Create a task")
    def task_create(
        name: Annotated[str, Field(description="Short name, e.g. \"Add OAuth login\".")],
        ctx: Context,
        goal: Annotated[str, Field(description="What done looks like.")] = "",
        parent: Annotated[str | None, Field(description="A parent task (id or name).")] = None,
        tags: Tags = [],  # noqa: B006
        status: Annotated[TaskStatus, Field(description="Initial status.")] = "open",
    ) -> TaskChange:
        """Create a task for multi-step work that may outlive this session: later progress,
        failures, memories (task=<id>) and handoffs attach to it, and session_resume picks it
        up. Check task_list first: continue an existing task rather than create a twin.

        Side effects: appends a `task.created` event."""
        return _runtime(ctx).run("task_create", WRITE, lambda e: TaskChange(task=_summary(
            e.task_create(name, goal=goal, parent=parent, tags=tags, status=status))))

    @_tool(server, "Get a task", read_only=True)
    def task_get(
        task: TaskRef,
        ctx: Context,
        checkpoints: Annotated[bool, Field(description="Also every checkpoint, oldest "
                                                       "first.")] = False,
    ) -> TaskResult:
        """A task in full: goal, status, progress, failures, its latest checkpoint (the
        continuation package), its memories and subtasks; with checkpoints=true, every
        checkpoint. For what the next agent needs as one document, use session_resume.

        Read-only. Lists are cut to fit the answer (`truncated`)."""
        def call(engram: Engram) -> TaskResult:
            view = engram.task_view(task)
            found = engram.task(view["task"]["id"])
            memories, cut_memories = fit([_memory(m) for m in
                                          _task_memories(engram, found.id)], OUTPUT_CHARS // 2)
            saved = None
            cut_saved = False
            if checkpoints:
                items = [c for c in (_checkpoint(c) for c in engram.checkpoints(found.id)) if c]
                kept, cut_saved = fit(items[::-1], OUTPUT_CHARS // 2)
                saved = kept[::-1]
            long_lists = len(found.progress) > 50 or len(found.failures) > 50
            cut = cut_memories or cut_saved or long_lists
            return TaskResult(task=_task(found), memories=memories, children=view["children"],
                              checkpoints=saved, truncated=cut,
                              note="left out to keep the answer short: " + ", ".join(
                                  what for what, left in (
                                      ("early progress and failures", long_lists),
                                      ("some memories", cut_memories),
                                      ("early checkpoints", cut_saved)) if left)
                              if cut else None)
        return _runtime(ctx).run("task_get", READ, call)

    @_tool(server, "Update a task", idempotent=True)
    def task_update(
        task: TaskRef,
        ctx: Context,
        name: Annotated[str | None, Field(description="New name.")] = None,
        goal: Annotated[str | None, Field(description="New goal.")] = None,
        status: Annotated[TaskStatus | None, Field(description="New status: done or abandoned "
                                                               "closes the task.")] = None,
        parent: Annotated[str | None, Field(description="New parent task.")] = None,
        tags: Annotated[list[str] | None, Field(description="New tags, replacing the old "
                                                            "ones.")] = None,
    ) -> TaskChange:
        """Change a task's name, goal, status, parent or tags; mark it done or abandoned when
        it is. To record work on it, use task_progress or task_failure.

        Side effects: appends a `task.updated` event with the changed fields. Giving only
        values it already has is an error (nothing to change)."""
        return _runtime(ctx).run("task_update", WRITE, lambda e: TaskChange(task=_summary(
            e.task_update(task, name=name, goal=goal, status=status, parent=parent,
                          tags=tags))))

    @_tool(server, "List tasks", read_only=True)
    def task_list(
        ctx: Context,
        statuses: Annotated[list[TaskStatus], Field(description="Only these statuses "
                                                                "(default: the active ones: "
                                                                "open, in_progress, "
                                                                "blocked).")] = [],  # noqa: B006
        include_closed: Annotated[bool, Field(description="Also done and abandoned "
                                                          "tasks.")] = False,
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many.")] = 20,
    ) -> TaskList:
        """Tasks, most recently changed first, each with its status, goal and latest checkpoint
        summary: the active ones (open, in_progress, blocked) unless statuses or include_closed
        say otherwise. Use it to find the task to continue or to attach work to before
        task_create; for one task in full, task_get.

        Read-only."""
        def call(engram: Engram) -> TaskList:
            found = engram.tasks(statuses=statuses, include_closed=include_closed)
            kept, cut = fit([_summary(t) for t in found[:limit]])
            return TaskList(tasks=kept, truncated=cut or len(found) > limit)
        return _runtime(ctx).run("task_list", READ, call)

    @_tool(server, "Record progress")
    def task_progress(
        task: TaskRef,
        feature: Annotated[str, Field(description="The piece of work, e.g. \"Register the "
                                                  "OAuth app\".")],
        ctx: Context,
        status: Annotated[ProgressStatus, Field(description="done (default), in_progress, "
                                                            "blocked or todo.")] = "done",
        note: Annotated[str | None, Field(description="Detail worth keeping.")] = None,
        component: Annotated[str | None, Field(description="The component it touches, e.g. "
                                                           "auth.")] = None,
        files: Annotated[list[str], Field(description="Files it touches, relative to the "
                                                      "repository.")] = [],  # noqa: B006
    ) -> TaskChange:
        """Record progress on a feature of a task as it happens (done, in progress, blocked,
        or still to do). It moves an open task to in_progress and keeps the continuation
        package current, so a crash loses little. For something that went wrong, use
        task_failure.

        Side effects: appends a `task.progress` event; may save an automatic checkpoint
        (returned). Returns failures already recorded for the same component or files: read
        them before repeating an approach."""
        return _runtime(ctx).run("task_progress", WRITE, lambda e: _change(e.progress(
            task, feature, status=status, note=note, component=component, files=files)))

    @_tool(server, "Record a failure")
    def task_failure(
        task: TaskRef,
        error: Annotated[str, Field(description="What failed, with the error message.")],
        ctx: Context,
        component: Annotated[str | None, Field(description="The component, e.g. auth.")] = None,
        root_cause: Annotated[str | None, Field(description="Why it failed, if known.")] = None,
        fix: Annotated[str | None, Field(description="What fixed it or should, if known.")
                       ] = None,
    ) -> TaskChange:
        """Record a failure on a task: an error, a dead end, an approach that did not work,
        with its root cause and fix when known. Later agents are shown it before they repeat
        it. Use task_progress for work that succeeded.

        Side effects: appends a `task.failure` event and always saves a checkpoint (returned).
        Returns earlier failures of the same component, on any task."""
        return _runtime(ctx).run("task_failure", WRITE, lambda e: _change(e.failure(
            task, error, component=component, root_cause=root_cause, fix=fix)))

    @_tool(server, "Evaluate continuity", read_only=True)
    def task_continuity(
        task: TaskRef,
        ctx: Context,
        before: Annotated[str | None, Field(description="The earlier checkpoint (seq number or "
                                                        "id); default: the one before "
                                                        "`after`.")] = None,
        after: Annotated[str | None, Field(description="The later checkpoint (seq or id); "
                                                       "default: the latest.")] = None,
    ) -> ContinuityResult:
        """Score how well work continued from one checkpoint to the next: goal retention,
        action consistency, failure recall, working-set stability, replanning rate, redundant
        exploration and a composite (0..1). Use it to judge a restore; it needs two
        checkpoints.

        Read-only."""
        return _runtime(ctx).run("task_continuity", READ, lambda e: ContinuityResult(
            **e.continuity(task, before=before, after=after)))


def _for_agents(resumed: Any) -> str:
    """A resume's Markdown, its note on being cut naming tool parameters, not options."""
    from ..domain.continuity.rehydrate import CUT

    if not resumed.truncated:
        return resumed.markdown
    return resumed.markdown.replace(CUT.cli, CUT.mcp)


def _task_memories(engram: Engram, task_id: str) -> list[Any]:
    return [m for m in engram.memories(limit=None) if m.task == task_id]


def _change(result: dict[str, Any]) -> TaskChange:
    return TaskChange(task=_summary(result["task"]), checkpoint=_checkpoint(result["checkpoint"]),
                      earlier_failures=_earlier(result["earlier_failures"]))


def _add_session_tools(server: MCPServer) -> None:
    @_tool(server, "Hand off")
    def session_handoff(
        task: TaskRef,
        summary: Annotated[str, Field(description="Where things stand, in one line.")],
        ctx: Context,
        completed: Annotated[list[str], Field(description="What is done (added to what was "
                                                          "done before).")] = [],  # noqa: B006
        in_progress: Annotated[list[str], Field(description="What is under way.")
                               ] = [],  # noqa: B006
        blocked: Annotated[list[str], Field(description="What is blocked, and on what.")
                           ] = [],  # noqa: B006
        next: Annotated[list[str], Field(description="Next steps, in the order to take them.")
                        ] = [],  # noqa: B006
        must_not_redo: Annotated[list[str], Field(description="Done or side-effecting: never "
                                                              "repeat (a migration that ran, an "
                                                              "app that was created).")
                                 ] = [],  # noqa: B006
        must_preserve: Annotated[list[str], Field(description="Invariants the user set "
                                                              "(\"don't touch main\").")
                                 ] = [],  # noqa: B006
        files: Annotated[list[str], Field(description="Working-set files: path or "
                                                      "path@commit.")] = [],  # noqa: B006
        commands: Annotated[list[str], Field(description="Commands that matter (build, test, "
                                                         "run).")] = [],  # noqa: B006
        artifacts: Annotated[list[str], Field(description="Artifacts: URLs, branches, "
                                                          "outputs.")] = [],  # noqa: B006
        open_questions: Annotated[list[str], Field(description="What the next agent should ask "
                                                               "or decide.")] = [],  # noqa: B006
        goal: Annotated[str | None, Field(description="The goal, if it changed.")] = None,
    ) -> HandoffResult:
        """Save the continuation package for a task so the next agent (after this session
        ends, the context fills, or a switch to another agent or machine) continues instead of
        starting over. Call it before you stop and when your context is nearly full.
        completed, must_not_redo and must_preserve add to what earlier handoffs said; next,
        in_progress, blocked and open_questions replace the plan (or keep the current one when
        omitted).

        Side effects: a `checkpoint.saved` event and a Markdown rendering under handoffs/,
        committed to git at once (so it shows in the pull request); on a detached HEAD it is
        saved but not committed, and warnings say how to fix that."""
        def call(engram: Engram) -> HandoffResult:
            saved = engram.handoff(
                task, summary=summary, completed=completed, in_progress=in_progress,
                blocked=blocked, next=next, must_not_redo=must_not_redo,
                must_preserve=must_preserve, files=files, commands=commands,
                artifacts=artifacts, open_questions=open_questions, goal=goal)
            view = _checkpoint(saved)
            assert view is not None
            done = "recorded and committed" if saved["commit"] else \
                "recorded, not committed (see warnings)"
            return HandoffResult(task=saved["task"], checkpoint=view,
                                 note=f"handoff {saved['seq']} {done} "
                                      f"(continuation confidence {saved['confidence']:.2f})")
        return _runtime(ctx).run("session_handoff", SESSION, call)

    @_tool(server, "Resume", idempotent=True)
    def session_resume(
        ctx: Context,
        task: Annotated[str | None, Field(description="The task to resume (id or name); "
                                                      "default: the only active task.")] = None,
        session: Annotated[str | None, Field(description="Resume what this session id was "
                                                         "working on.")] = None,
        depth: Annotated[Literal["brief", "standard", "full"],
                         Field(description="How much history: brief, standard (default), "
                                           "full.")] = "standard",
        since: Annotated[str | None, Field(description="Only events since a date or age "
                                                       "(2d).")] = None,
        restore: Annotated[Literal["full", "selective", "none"],
                           Field(description="Which memories come back: selective (default: "
                                             "important ones and failures/gotchas), full, "
                                             "none.")] = "selective",
        max_chars: Annotated[int, Field(ge=1000, le=100_000, description="Cut the Markdown at "
                                                                         "this length.")
                             ] = 20_000,
    ) -> ResumeResult:
        """What you need to continue, as Markdown: the task and its goal, why the last session
        stopped, where it stopped, next steps, what must not be redone or must be preserved,
        failures not to repeat, decisions and gotchas, recent events. Call it at the start of
        a session. With no task and several active tasks it fails and lists them: call again
        with task. (Also available as the `resume` prompt.)

        Side effects: sessions of this machine whose process is gone are recorded as
        interrupted (with the likely reason), unless this connection may only read. The
        Markdown is cut at max_chars (`truncated`)."""
        record = writes(_runtime(ctx).identity()[1])

        def call(engram: Engram) -> ResumeResult:
            result = engram.resume(task=task, session=session, depth=depth, since=since,
                                   restore=restore, max_chars=max_chars, record=record)
            return ResumeResult(task=result.task, confidence=result.confidence,
                                truncated=result.truncated, markdown=_for_agents(result))
        return _runtime(ctx).run("session_resume", READ, call)

    @_tool(server, "List sessions", read_only=True)
    def session_list(
        ctx: Context,
        state: Annotated[Literal["open", "ended", "interrupted"] | None,
                         Field(description="Only sessions in this state.")] = None,
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many.")] = 20,
    ) -> SessionList:
        """Agent sessions, newest first: which agent, who, on which machine, whether each
        ended normally (and its outcome) or was interrupted (and why: crash, overflow,
        rate_limit, tool_failure, user_away). `current` marks this server's own session.

        Read-only."""
        def call(engram: Engram) -> SessionList:
            found = engram.sessions(states=[state] if state else [])
            current = _runtime(ctx).session_id
            views = [SessionView(**{k: v for k, v in s.to_dict().items()
                                    if k in SessionView.model_fields},
                                 current=s.id == current) for s in found[:limit]]
            kept, cut = fit(views)
            return SessionList(sessions=kept, truncated=cut or len(found) > limit)
        return _runtime(ctx).run("session_list", READ, call)

    @_tool(server, "Report on the session")
    def session_report(
        ctx: Context,
        outcome: Annotated[Outcome | None, Field(description="How the session went: success, "
                                                             "failure or unknown; applied "
                                                             "when the session closes.")
                           ] = None,
        interruption: Annotated[Interruption | None,
                                Field(description="Why you are about to stop, if you are: "
                                                  "overflow (context full), rate_limit, "
                                                  "tool_failure, user_away, crash, "
                                                  "unknown.")] = None,
        note: Annotated[str | None, Field(description="A line of detail, e.g. the error "
                                                      "message.")] = None,
    ) -> ReportResult:
        """Tell Engram how this session is going. `outcome` is applied when the session
        closes: success raises, failure lowers the importance of the memories this session
        created or relied on. `interruption` records now why you are about to stop, so the next
        agent is told (it wins over Engram's own guess). Hand off first (session_handoff).

        Side effects: interruption appends a `session.reported` event; outcome is kept by the
        server and written with `session.ended` at exit."""
        runtime = _runtime(ctx)

        def call(engram: Engram) -> ReportResult:
            if outcome is None and interruption is None:
                raise ToolError("give an outcome, an interruption reason, or both")
            if runtime.session_id is None:
                raise ToolError("no session is open (no Engram store yet?); see memory_stats")
            if interruption is not None:
                engram.report_interruption(interruption, note=note,
                                           session_id=runtime.session_id)
            if outcome is not None:
                runtime.outcome = outcome
            parts = []
            if interruption:
                parts.append(f"interruption '{interruption}' recorded")
            if outcome:
                parts.append(f"outcome '{outcome}' will be recorded when the session closes")
            return ReportResult(session=runtime.session_id, outcome=runtime.outcome,
                                interruption=interruption, note="; ".join(parts))
        return runtime.run("session_report", SESSION, call)


def _add_discovery_tools(server: MCPServer) -> None:
    @_tool(server, "Record a discovery")
    def discovery_record(
        content: Annotated[str, Field(description="The fact, in a sentence or two, e.g. "
                                                  "\"Retries are enforced in the HTTP client, "
                                                  "not the queue\".")],
        citations: Annotated[list[CitationIn], Field(min_length=1, max_length=20,
                                                     description="Where the code shows it: "
                                                                 "file and line range (1-20 "
                                                                 "citations).")],
        ctx: Context,
        tags: Tags = [],  # noqa: B006
        task: Annotated[str | None, Field(description="The task id it belongs to.")] = None,
        importance: Annotated[float, Field(ge=0, le=1, description="0 to 1.")] = 0.5,
        redact: Annotated[bool, Field(description="Store detected secrets as [REDACTED:type] "
                                                  "instead of refusing.")] = False,
    ) -> DiscoveryResult:
        """Record a fact about this codebase with citations (file, line range, optional
        excerpt), pinned to the current git commit, so later agents can trust it without
        re-reading the code, and can tell when it went stale (discovery_check). Use it for
        findings you had to dig for: where something is enforced, why code is shaped a certain
        way. For knowledge without code citations use memory_remember.

        Side effects: stores a memory of kind fact tagged discovery whose content ends with one
        `cite: path:start-end@commit` line per citation (uncommitted lines of a file git tracks
        are kept as an excerpt, scanned for secrets like the content; an untracked or ignored
        file, or one inside .git/, is cited without its lines, and warnings say so). Each
        citation is checked first: the file must exist inside the repository, the range must
        be in it, and an excerpt, if given, must match."""
        def call(engram: Engram) -> DiscoveryResult:
            result, pinned = discovery.record(
                engram, content, [c.model_dump() for c in citations], tags=tags, task=task,
                importance=importance, redact=redact)
            found = discovery.as_discovery(result.memory)
            return DiscoveryResult(
                memory=_memory(result.memory, limit=None),
                fact=found.text if found else content.strip(),
                citations=[CitationView(**c.to_dict()) for c in
                           (found.citations if found else pinned)],
                duplicate=result.duplicate,
                warnings=[c.note for c in pinned if c.note])
        return _runtime(ctx).run("discovery_record", WRITE, call)

    @_tool(server, "Check discoveries", read_only=True)
    def discovery_check(
        ctx: Context,
        id: Annotated[str | None, Field(description="One discovery's memory id (or prefix); "
                                                    "default: the most recent "
                                                    "discoveries.")] = None,
        limit: Annotated[int, Field(ge=1, le=50, description="How many recent discoveries to "
                                                             "check.")] = 10,
    ) -> CheckResult:
        """Check whether discoveries still hold in the current work tree: each citation is
        valid (same lines), moved (the excerpt is at other lines, given in moved_to), broken
        (file gone or excerpt not found: re-check the fact, then forget or re-record it) or
        unknown (its commit is not in this clone: fetch; or the file was not tracked by git, so
        nothing was kept to compare with). Use it before relying on a discovery recorded at
        another commit; without id it also lists the recent discoveries.

        Read-only (reads files and git)."""
        def call(engram: Engram) -> CheckResult:
            found = [discovery.get(engram, id)] if id else discovery.recent(engram, limit=limit)
            order = {"valid": 0, "moved": 1, "unknown": 2, "broken": 3}
            counts = {name: 0 for name in order}
            views = []
            for item in found:
                checks = discovery.check(engram, item)
                for c in checks:
                    counts[c.status] += 1
                worst = max((c.status for c in checks), key=order.__getitem__)
                views.append(DiscoveryCheck(
                    id=item.memory.id, fact=item.text[:ITEM_CHARS], status=worst,
                    citations=[CitationCheckView(**c.to_dict()) for c in checks]))
            kept, cut = fit(views)
            return CheckResult(discoveries=kept, counts=counts, truncated=cut)
        return _runtime(ctx).run("discovery_check", READ, call)


def _add_prompts(server: MCPServer) -> None:
    async def resume(
        ctx: Context,
        task: Annotated[str | None, Field(description="The task to resume: its id (or a "
                                                      "unique prefix) or exact name; default: "
                                                      "the only active task.")] = None,
    ) -> str:
        """Load what the next agent needs (goal, where work stopped, next steps, what must not
        be redone, failures to avoid) and continue the task. Optional argument: the task id or
        name (default: the only active task)."""
        runtime = _runtime(ctx)
        record = writes(runtime.identity()[1])

        def call(engram: Engram) -> str:
            return _for_agents(engram.resume(task=task or None, depth="standard",
                                             max_chars=20_000, record=record))

        try:
            markdown = await anyio.to_thread.run_sync(
                lambda: runtime.run("resume", READ, call))
        except ToolError as exc:
            return (f"Engram could not resume: {exc}\n\nCall the session_resume tool with the "
                    "right task, then continue.")
        return ("Continue the work described below. It is Engram's continuation package from "
                "the previous session: follow the next steps in order, do not redo what is "
                "listed under must-not-redo, keep what is listed under must-preserve, and do "
                "not repeat the failures listed. Record progress with task_progress and hand "
                "off with session_handoff before you stop.\n\n" + markdown)

    server.prompt(name="resume", title="Resume where the last agent stopped",
                  description=describe(resume.__doc__))(resume)


# -- building and serving ------------------------------------------------------------------------


def _client_name(params: Any) -> str | None:
    if not isinstance(params, dict):
        return None
    info = params.get("clientInfo") or (params.get("_meta") or {}).get(
        "io.modelcontextprotocol/clientInfo")
    if isinstance(info, dict) and isinstance(info.get("name"), str):
        return info["name"][:100]
    return None


def _offers_roots(params: Any) -> bool:
    """Whether the client declares the roots capability: in `initialize`, or (from protocol
    2026-07-28 on) in each request's `_meta`."""
    if not isinstance(params, dict):
        return False
    capabilities = params.get("capabilities") or (params.get("_meta") or {}).get(
        "io.modelcontextprotocol/clientCapabilities")
    return isinstance(capabilities, dict) and capabilities.get("roots") is not None


def _build(*, cwd: Path | str | None = None, agent: str | None = None,
           actor: str | None = None, scopes: Sequence[str] | None = None,
           auth: HttpAuth | None = None, roots: bool = False) -> tuple[MCPServer, Runtime]:
    runtime = Runtime(cwd=cwd, agent=agent, actor=actor, scopes=scopes, roots=roots)

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[Runtime]:
        runtime.start()
        try:
            yield runtime
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(runtime.stop)

    async def learn_client(ctx: Any, call_next: Any) -> Any:
        if runtime.client_name is None or not runtime.client_seen:
            runtime.saw_client(_client_name(ctx.params), roots=_offers_roots(ctx.params))
        return await call_next(ctx)

    server: MCPServer = EngramServer(
        SERVER_NAME, title="Engram", version=__version__, instructions=INSTRUCTIONS,
        description="Durable memory and task continuity for coding agents, kept in git.",
        lifespan=lifespan, middleware=[learn_client], log_level="WARNING",
        token_verifier=auth.verifier if auth else None, auth=auth.settings if auth else None,
    )
    _add_memory_tools(server)
    _add_task_tools(server)
    _add_session_tools(server)
    _add_discovery_tools(server)
    _add_prompts(server)
    return server, runtime


def build_server(*, cwd: Path | str | None = None, agent: str | None = None,
                 actor: str | None = None, scopes: Sequence[str] | None = None,
                 auth: HttpAuth | None = None) -> MCPServer:
    """The Engram MCP server for the stores of `cwd`.

    `agent` names the agent tool for the session (default: from the client's name); `actor`
    is who events are attributed to (default: Engram's usual resolution); `scopes` caps what
    callers may do (default: everything); `auth` requires a bearer token over HTTP.
    """
    return _build(cwd=cwd, agent=agent, actor=actor, scopes=scopes, auth=auth)[0]


def serve_stdio(*, cwd: Path | str | None = None, agent: str | None = None,
                actor: str | None = None, scopes: Sequence[str] | None = None) -> int:
    """Serve over stdin/stdout until the client closes them (or SIGTERM). Returns the exit
    status. Without `cwd`, the stores are those of the client's project: its roots if it
    offers them, else WORKSPACE_FOLDER_PATHS, else the working directory."""
    server, runtime = _build(cwd=cwd, agent=agent, actor=actor, scopes=scopes, roots=True)
    terminated = False

    async def main() -> None:
        nonlocal terminated
        async with anyio.create_task_group() as group:
            async def on_sigterm() -> None:
                nonlocal terminated
                with anyio.open_signal_receiver(signal.SIGTERM) as signals:
                    async for _ in signals:
                        terminated = True
                        runtime.how = "sigterm"
                        # A worker blocked reading stdin cannot be cancelled: close the
                        # session now, and make sure the process goes even if it hangs.
                        await anyio.to_thread.run_sync(runtime.stop)
                        _exit_later(143)
                        group.cancel_scope.cancel()
                        return

            if sys.platform != "win32":  # no signal receivers there; the client closes stdin
                group.start_soon(on_sigterm)
            await server.run_stdio_async()
            group.cancel_scope.cancel()

    anyio.run(main)
    return 143 if terminated else 0


def _exit_later(status: int, seconds: float = 1.0) -> None:
    timer = threading.Timer(seconds, os._exit, (status,))
    timer.daemon = True
    timer.start()


# -- HTTP and its authentication -------------------------------------------------------------


@dataclass
class HttpAuth:
    """What `build_server` needs to require a bearer token over HTTP."""

    verifier: Any
    settings: Any
    describe: str = ""


@dataclass
class StaticTokenVerifier:
    """One shared secret token (ENGRAM_MCP_TOKEN or a token file): whoever holds it acts as
    the server's actor, with the server's scopes."""

    token: str
    actor: str | None = None
    scopes: Sequence[str] = SCOPES

    async def verify_token(self, token: str) -> AccessToken | None:
        if not self.token or not hmac.compare_digest(token.encode(), self.token.encode()):
            return None
        return AccessToken(token="static", client_id="engram-token", scopes=list(self.scopes),
                           subject=self.actor, claims={"engram_actor": self.actor})


@dataclass
class JwtVerifier:
    """OIDC access tokens (JWTs): signature against the issuer's JWKS, issuer, expiry, and the
    audience when one is configured. The actor is `actor_from_claims`; the scopes come from
    `scope` (space-separated) or `scp`."""

    issuer: str
    audience: str | None = None
    jwks_url: str | None = None
    algorithms: Sequence[str] = ("RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256",
                                 "PS384", "PS512", "EdDSA")
    leeway: float = 30.0
    _client: Any = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def _jwks(self) -> Any:
        import jwt

        with self._lock:
            if self._client is None:
                url = self.jwks_url or _discover_jwks(self.issuer)
                self._client = jwt.PyJWKClient(url, cache_keys=True, lifespan=300, timeout=10)
            return self._client

    def decode(self, token: str) -> dict[str, Any]:
        import jwt

        key = self._jwks().get_signing_key_from_jwt(token).key
        return jwt.decode(token, key, algorithms=list(self.algorithms), issuer=self.issuer,
                          audience=self.audience, leeway=self.leeway,
                          options={"require": ["exp", "iss", "sub"],
                                   "verify_aud": self.audience is not None})

    async def verify_token(self, token: str) -> AccessToken | None:
        import jwt

        try:
            claims = await anyio.to_thread.run_sync(self.decode, token)
        except (jwt.PyJWTError, OSError, ValueError) as exc:
            print(f"engram: refused a token: {type(exc).__name__}: {exc}", file=sys.stderr)
            return None
        return AccessToken(token="jwt", client_id=str(claims.get("azp") or claims.get(
            "client_id") or claims["sub"]), scopes=token_scopes(claims),
            expires_at=int(claims["exp"]), subject=str(claims["sub"]),
            claims={"iss": claims.get("iss"), "engram_actor": actor_from_claims(claims)})


@dataclass
class EitherVerifier:
    verifiers: Sequence[Any]

    async def verify_token(self, token: str) -> AccessToken | None:
        for verifier in self.verifiers:
            found = await verifier.verify_token(token)
            if found is not None:
                return found
        return None


def check_token(token: str, source: str = "the bearer token") -> str:
    """A static token strong enough to stand for a person: `TOKEN_MIN_CHARS` or more printable
    ASCII characters without spaces (what an Authorization header carries as is)."""
    if not all("!" <= c <= "~" for c in token):
        raise UsageError(f"{source} holds a space, a control character or non-ASCII text, "
                         f"which a bearer token cannot; make one with: {MAKE_TOKEN}")
    if len(token) < TOKEN_MIN_CHARS:
        count = f"{len(token)} character{'s' if len(token) != 1 else ''}"
        raise UsageError(f"{source} is {count}; a bearer token needs at least "
                         f"{TOKEN_MIN_CHARS} random ones; make one with: {MAKE_TOKEN}")
    return token


def token_scopes(claims: dict[str, Any]) -> list[str]:
    raw = claims.get("scope", claims.get("scp", []))
    items = raw.split() if isinstance(raw, str) else [str(x) for x in raw or []]
    return [s for s in items if s in SCOPES]


def actor_from_claims(claims: dict[str, Any]) -> str:
    """Who a verified token speaks for, in a form its display claims cannot forge:
    `Name <email>` when the issuer vouches for the email (`email_verified`), else
    `Name <sub@issuer-host>`, the subject percent-encoded (hashed when long). The name comes
    from `name`, `preferred_username` or `sub`, without `<`, `>` or control characters."""
    sub = str(claims["sub"])
    name = next((cleaned for cleaned in (_display(claims.get("name")),
                                         _display(claims.get("preferred_username")),
                                         _display(sub)) if cleaned), _encoded(sub))
    email = claims.get("email")
    verified = str(claims.get("email_verified")).lower() == "true"  # True, or "true"
    if verified and isinstance(email, str) and len(email) <= EMAIL_CHARS \
            and _EMAIL.fullmatch(email):
        return f"{name} <{email}>"
    host = urllib.parse.urlsplit(str(claims.get("iss") or "")).hostname or "oidc"
    return f"{name} <{_encoded(sub)}@{_encoded(host)}>"


def _display(value: Any) -> str:
    """A display claim as one plain line: no `<`, `>`, control or format characters."""
    if not isinstance(value, str):
        return ""
    kept = "".join(" " if unicodedata.category(c)[0] == "C" else c for c in value
                   if c not in "<>")
    return " ".join(kept.split())[:NAME_CHARS].strip()


def _encoded(text: str) -> str:
    """`text` as the local part of an address: percent-encoded, so two subjects never meet,
    and beyond `NAME_CHARS` hashed as `sha256=...` (an `=` is encoded otherwise)."""
    quoted = urllib.parse.quote(text, safe="-._~!$&'*+:|")
    if len(quoted) <= NAME_CHARS:
        return quoted
    return "sha256=" + hashlib.sha256(text.encode()).hexdigest()[:32]


def _discover_jwks(issuer: str) -> str:
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    with urllib.request.urlopen(url, timeout=10) as response:
        document = json.load(response)
    jwks = document.get("jwks_uri")
    if not isinstance(jwks, str):
        raise ValueError(f"{url} names no jwks_uri")
    return jwks


def http_auth(*, token: str | None = None, actor: str | None = None,
              scopes: Sequence[str] | None = None, oidc_issuer: str | None = None,
              oidc_audience: str | None = None, jwks_url: str | None = None,
              base_url: str = "http://127.0.0.1",
              token_source: str = "the bearer token") -> HttpAuth | None:
    """Bearer-token authentication from a static token and/or an OIDC issuer; None if
    neither is configured. A weak token (`check_token`) is refused with how to make one;
    `token_source` names where it came from."""
    from mcp.server.auth.settings import AuthSettings

    verifiers: list[Any] = []
    described = []
    if token:
        check_token(token, token_source)
        verifiers.append(StaticTokenVerifier(token, actor, tuple(scopes or SCOPES)))
        described.append("a bearer token")
    if oidc_issuer:
        verifiers.append(JwtVerifier(oidc_issuer, oidc_audience, jwks_url))
        described.append(f"OIDC tokens from {oidc_issuer}" +
                         (f" for audience {oidc_audience}" if oidc_audience else ""))
    if not verifiers:
        return None
    settings = AuthSettings(issuer_url=oidc_issuer or base_url, resource_server_url=None)
    verifier = verifiers[0] if len(verifiers) == 1 else EitherVerifier(verifiers)
    return HttpAuth(verifier, settings, " or ".join(described))


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def loopback_addresses(host: str) -> list[str] | None:
    """The addresses binding `host` listens on, if every one is loopback (127.0.0.0/8, ::1);
    None if any is not, or the name does not resolve."""
    address = _address(host)
    if address is not None:
        return [str(address)] if address.is_loopback else None
    if not host:
        return None
    try:
        found = {info[4][0] for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)}
    except (OSError, UnicodeError):
        return None
    resolved = [_address(text.split("%", 1)[0]) for text in sorted(found)]
    if not resolved or not all(a is not None and a.is_loopback for a in resolved):
        return None
    return [str(a) for a in resolved]


def is_loopback(host: str) -> bool:
    """Whether binding `host` serves this machine only: an address of 127.0.0.0/8 or ::1
    (IPv4-mapped too), `localhost`, or any name that resolves to loopback addresses only."""
    return loopback_addresses(host) is not None


def rebinding_protection(host: str, addresses: Sequence[str] = ()) -> Any:
    """Host and Origin checks for a loopback bind: a request must name this machine
    (`127.0.0.1`, `localhost`, `[::1]`, the bound name or its addresses), so a web page whose
    name was rebound to 127.0.0.1 cannot reach the server (421, or 403 for its Origin)."""
    from mcp.server.transport_security import TransportSecuritySettings

    names = ["127.0.0.1", "localhost", "::1", host, host.lower(), *addresses]
    shown = list(dict.fromkeys(f"[{n}]" if ":" in n else n for n in names))
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{n}{port}" for n in shown for port in ("", ":*")],
        allowed_origins=[f"http://{n}{port}" for n in shown for port in ("", ":*")])


def serve_http(*, host: str = "127.0.0.1", port: int = 8765, path: str = "/mcp",
               cwd: Path | str | None = None, agent: str | None = None,
               actor: str | None = None, scopes: Sequence[str] | None = None,
               auth: HttpAuth | None = None) -> int:
    """Serve streamable HTTP. Any address but loopback requires `auth`; every loopback bind
    checks the Host and Origin headers (DNS rebinding)."""
    import asyncio

    import uvicorn

    loopback = loopback_addresses(host)
    if auth is None and loopback is None:
        raise UsageError(f"refusing to serve {host} without authentication; set "
                          "ENGRAM_MCP_TOKEN (or --token-file) or --oidc-issuer, or bind "
                          "127.0.0.1")
    server, runtime = _build(cwd=cwd, agent=agent, actor=actor, scopes=scopes, auth=auth)
    app = server.streamable_http_app(
        streamable_http_path=path, host=host,
        transport_security=None if loopback is None else rebinding_protection(host, loopback))

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            if sig == signal.SIGTERM:
                runtime.how = "sigterm"
            super().handle_exit(sig, frame)

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            for bound in self.servers:
                for sock in bound.sockets:
                    address = sock.getsockname()
                    shown = f"[{address[0]}]" if ":" in address[0] else address[0]
                    print(f"engram: serving MCP (streamable HTTP) at "
                          f"http://{shown}:{address[1]}{path}", file=sys.stderr, flush=True)
            if auth is None:
                print("engram: WARNING: no authentication: any process on this machine can "
                      "read and write your memories through this server. Set "
                      "ENGRAM_MCP_TOKEN or --oidc-issuer to require a token.",
                      file=sys.stderr, flush=True)
            else:
                print(f"engram: requiring {auth.describe}", file=sys.stderr, flush=True)

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    asyncio.run(Server(config).serve())
    return 143 if runtime.how == "sigterm" else 0
