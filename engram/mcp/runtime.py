"""The MCP server's runtime for its lifetime: the stores of the client's project, one `Engram`
per actor, the agent session (opened, heartbeaten, closed), the commit timer, and the lock
every tool call runs under.

`Runtime.run` checks the caller's scope, runs a call against the facade in the worker thread,
and turns library errors into `ToolError`s worded for agents. Where the project is: the
client's roots when it offers them, else WORKSPACE_FOLDER_PATHS, else the working directory
(`Runtime.locate`).
"""

from __future__ import annotations

import os
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar, cast

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from .. import __version__
from ..api import Engram
from ..base.config import check_value
from ..base.errors import EngramError
from ..base.vocab import AGENT
from .messages import agent_message
from .models import READ, SCOPES, SESSION, WRITE, Receipted, Result, RuntimeView
from .views import receipt_views

HEARTBEAT_SECONDS = 30.0
COMMIT_CHECK_SECONDS = 30.0  # the commit timer looks at least this often whether a batch waits
CLIENT_WAIT_SECONDS = 1.0  # how long the session waits to learn the client's name


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


class Runtime:
    """The server's state for its lifetime: one `Engram` per actor, the session, the lock."""

    def __init__(
        self,
        *,
        cwd: Path | str | None = None,
        agent: str | None = None,
        actor: str | None = None,
        scopes: Sequence[str] | None = None,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
        roots: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        # Where the stores are found: `cwd` if given; else the client's roots (asked for at
        # the first call, when `roots` and the client offers them), WORKSPACE_FOLDER_PATHS,
        # the working directory.
        self.cwd = (
            Path(cwd) if cwd is not None else (project_folder(workspace_folders()) or Path.cwd())
        )
        self.located = threading.Event()  # the folder to work in is settled
        self.roots_offered = False
        if cwd is not None or not roots:
            self.located.set()
        if agent is not None:
            AGENT.one_of(agent)
        self.agent = agent
        self.actor = check_value("actor", actor) if actor is not None else None
        unknown = set(scopes or ()) - set(SCOPES)
        if unknown:
            raise ValueError(
                f"unknown scope(s) {', '.join(sorted(unknown))}; known: {', '.join(SCOPES)}"
            )
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
        if self.session_id is not None:
            try:
                if self._engram(None).session_info(self.session_id).state == "open":
                    return
            except EngramError:
                pass
            self.session_id = None
        try:
            engram = self._engram(None)
            opened = engram.session_start(agent=self.agent or agent_for(self.client_name))
        except EngramError as exc:  # no store yet (or a bad ENGRAM_SESSION): tools say why
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
            wait = (
                COMMIT_CHECK_SECONDS
                if due_in is None or due_in <= 0
                else min(COMMIT_CHECK_SECONDS, due_in + 0.05)
            )

    def commit_due(self) -> float | None:
        """One look of the commit timer: commit what is due; seconds until the next batch is."""
        with self.lock:
            if self._closed:
                return None
            try:
                return self._engram(None).commit_due()
            except EngramError:  # the stores cannot be opened (a bad ENGRAM_SESSION): tools say
                return None

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
                        engram.session_end(
                            outcome=self.outcome, how=how or self.how, session_id=session_id
                        )
                except EngramError as exc:
                    print(
                        f"engram: could not close session {session_id[:8]}: {exc}", file=sys.stderr
                    )
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
            raise ToolError(
                f"{tool} needs the scope {scope}; this connection has {held}. "
                f"Use a token that grants {scope}"
            )
        self._opened.wait(timeout=30)
        with self.lock:
            if self._closed:
                raise ToolError("the server is shutting down; call again after it restarts")
            if self.writes:
                self._ensure_session()
            try:
                engram = self._engram(actor)
                engram.session = self.session_id
                mark = engram.write_mark()
                result = call(engram)
                if scope != READ and isinstance(result, Receipted):
                    result.receipts = receipt_views(engram.receipts(since=mark))
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
            version=__version__,
            session=self.session_id,
            agent=self.session_agent,
            client=self.client_name,
            actor=actor or self.actor or (engram.actor(engram.write_store()) if stores else None),
            scopes=sorted(scopes),
            cwd=str(self.cwd),
            stores=stores,
            embedding_model_loaded=bool(
                getattr(sys.modules.get("engram.search.embed"), "_loaded", None)
            ),
            uptime_seconds=round(time.time() - self.started, 1),
            interruptions_found=list(self.interrupted),
            problems=list(self.problems),
        )


def runtime_of(ctx: Context) -> Runtime:
    # The server's lifespan (engram.mcp.server) yields the Runtime; a bare Context says dict.
    return cast(Runtime, ctx.request_context.lifespan_context)
