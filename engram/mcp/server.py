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
bounded (`OUTPUT_CHARS`) and say when they were cut. Over stdio a line that is not a JSON-RPC
message gets a JSON-RPC error rather than no answer (`stdio`).

Over stdio, the stores are those of the client's project: its roots when it offers them, else
WORKSPACE_FOLDER_PATHS, else the working directory (`Runtime.locate`).

Over HTTP, a bearer token (static, or an OIDC/JWT verified against the issuer's JWKS) names the
actor of every event the caller writes, and its scopes (`memory:read`, `memory:write`,
`session:write`) limit which tools it may use.

The parts: `models` (parameter and result types), `views` (facade results as tool results),
`messages` (errors in an agent's words), `runtime` (stores, session, threads), `tools` and the
tool families `memory_tools`, `task_tools`, `session_tools`; this module builds the server and
serves it over stdio (`stdio` answers what the transport cannot read), `http` over HTTP
(`bounds` limits its sessions, time and bytes).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from pydantic import ValidationError

from .. import __version__
from ..base.display import hidden_shown
from .memory_tools import add_memory_tools
from .messages import invalid_arguments
from .review_tools import add_review_tools
from .runtime import ROOTS_WAIT_SECONDS, Runtime, root_folders
from .session_tools import add_discovery_tools, add_prompts, add_session_tools
from .task_tools import add_task_tools
from .tools import known_fields, strict, whole

if TYPE_CHECKING:
    from .http import HttpAuth

SERVER_NAME = "engram"

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


class EngramServer(MCPServer):
    """The SDK's server, with arguments that fail a tool's input schema reported in plain
    words (the SDK passes on pydantic's own report, with links and every input)."""

    def add_tool(self, fn: Any, *args: Any, **kwargs: Any) -> None:
        """The SDK's tool, with its arguments checked strictly (`tools.strict`)."""
        super().add_tool(fn, *args, **kwargs)
        added = self._tool_manager.get_tool(kwargs.get("name") or fn.__name__)
        assert added is not None
        strict(added)

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        await _locate(context)
        try:
            return await super().call_tool(name, whole(arguments), context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError):
                raise
            # Error text may quote what the caller or a store gave: bidi and other invisible
            # characters in it are shown as escapes, never passed to the agent raw.
            if isinstance(cause, ValidationError):
                found = self._tool_manager.get_tool(name)
                model = found.fn_metadata.arg_model if found is not None else None
                problem = invalid_arguments(
                    cause,
                    tool=name,
                    known=(lambda loc: known_fields(model, loc)) if model is not None else None,
                )
                raise ToolError(hidden_shown(f"Error executing tool {name}: {problem}")) from cause
            raise ToolError(hidden_shown(str(exc))) from cause

    async def get_prompt(self, name: str, arguments: Any = None, context: Any = None) -> Any:
        await _locate(context)
        return await super().get_prompt(name, arguments, context)

    async def run_stdio_async(self) -> None:
        """The SDK's stdio transport, with every line it cannot read answered (`stdio`)."""
        from mcp.server.stdio import stdio_server

        from .stdio import Answering

        server = self._lowlevel_server
        async with stdio_server() as (read_stream, write_stream):
            await server.run(
                Answering(read_stream, write_stream),
                write_stream,
                server.create_initialization_options(),
            )


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
        runtime.problems.append(
            f"the client's roots/list failed ({type(exc).__name__}); working in {runtime.cwd}"
        )
    await anyio.to_thread.run_sync(runtime.locate, root_folders(uris))


def _client_name(params: Any) -> str | None:
    if not isinstance(params, dict):
        return None
    info = params.get("clientInfo") or (params.get("_meta") or {}).get(
        "io.modelcontextprotocol/clientInfo"
    )
    if isinstance(info, dict) and isinstance(info.get("name"), str):
        return str(info["name"])[:100]
    return None


def _offers_roots(params: Any) -> bool:
    """Whether the client declares the roots capability: in `initialize`, or (from protocol
    2026-07-28 on) in each request's `_meta`."""
    if not isinstance(params, dict):
        return False
    capabilities = params.get("capabilities") or (params.get("_meta") or {}).get(
        "io.modelcontextprotocol/clientCapabilities"
    )
    return isinstance(capabilities, dict) and capabilities.get("roots") is not None


def build(
    *,
    cwd: Path | str | None = None,
    agent: str | None = None,
    actor: str | None = None,
    scopes: Sequence[str] | None = None,
    auth: HttpAuth | None = None,
    roots: bool = False,
) -> tuple[MCPServer, Runtime]:
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
        SERVER_NAME,
        title="Engram",
        version=__version__,
        instructions=INSTRUCTIONS,
        description="Durable memory and task continuity for coding agents, kept in git.",
        lifespan=lifespan,
        middleware=[learn_client],
        log_level="WARNING",
        token_verifier=auth.verifier if auth else None,
        auth=auth.settings if auth else None,
    )
    add_memory_tools(server)
    add_task_tools(server)
    add_session_tools(server)
    add_discovery_tools(server)
    add_review_tools(server)
    add_prompts(server)
    return server, runtime


def build_server(
    *,
    cwd: Path | str | None = None,
    agent: str | None = None,
    actor: str | None = None,
    scopes: Sequence[str] | None = None,
    auth: HttpAuth | None = None,
) -> MCPServer:
    """The Engram MCP server for the stores of `cwd`.

    `agent` names the agent tool for the session (default: from the client's name); `actor`
    is who events are attributed to (default: Engram's usual resolution); `scopes` caps what
    callers may do (default: everything); `auth` requires a bearer token over HTTP.
    """
    return build(cwd=cwd, agent=agent, actor=actor, scopes=scopes, auth=auth)[0]


def serve_stdio(
    *,
    cwd: Path | str | None = None,
    agent: str | None = None,
    actor: str | None = None,
    scopes: Sequence[str] | None = None,
) -> int:
    """Serve over stdin/stdout until the client closes them (or SIGTERM). Returns the exit
    status. Without `cwd`, the stores are those of the client's project: its roots if it
    offers them, else WORKSPACE_FOLDER_PATHS, else the working directory."""
    server, runtime = build(cwd=cwd, agent=agent, actor=actor, scopes=scopes, roots=True)
    from ..base import classcode

    classcode.save()  # a server is often ended by a signal, which `atexit` never sees
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
