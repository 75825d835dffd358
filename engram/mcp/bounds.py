"""The HTTP server's bounds: sessions per client and in all, idle expiry, header and body time.

An HTTP server is reachable by whoever can open a socket to it, so each of its resources is
bounded, and one client that takes too much pays for it itself, never the others:

- **Sessions** (`SessionBounds`): a client (the principal of its verified token, else its
  address) keeps at most `client_sessions`; all clients together at most `sessions`. A new
  session past either cap ends the least recently used one (idle before busy) of that client,
  or, past the total, of the client that holds the most: nobody else is refused. A session
  with no request for `idle_minutes` expires (the SDK's idle timeout).
- **Request heads** (`protocol`): a connection that has not sent a whole request head within
  `header_seconds` of opening, or of its previous answer, is closed (a slowloris holds nothing).
- **Bodies** (`BodyBounds`): a body over `body_bytes` gets 413, one not complete within
  `body_seconds` 408, and either way the connection is closed, so a refused body stops being
  read (it is not drained).

The numbers and their ranges are declared here (`LIMITS`), once: `engram serve --http` takes them
as options. This module imports only the standard library at the top; the SDK, Starlette and
uvicorn are imported where they are used.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

SESSION_HEADER = b"mcp-session-id"


@dataclass(frozen=True)
class Limit:
    default: int | float  # a whole number when the limit is one
    minimum: int | float
    maximum: int | float
    help: str


LIMITS: dict[str, Limit] = {
    "sessions": Limit(1000, 1, 100_000, "most open sessions, all clients together"),
    "client_sessions": Limit(
        100,
        1,
        10_000,
        "most open sessions of one client (the principal "
        "of its token, else its address); its oldest ends for a new one",
    ),
    "idle_minutes": Limit(10.0, 0.01, 1440, "minutes without a request after which a session ends"),
    "header_seconds": Limit(10.0, 0.1, 300, "seconds a connection has to send a request's head"),
    "body_seconds": Limit(30.0, 0.1, 3600, "seconds a request has to send its whole body"),
    "body_bytes": Limit(4 * 1024 * 1024, 1024, 64 * 1024 * 1024, "largest request body, in bytes"),
}


@dataclass(frozen=True)
class HttpBounds:
    """What one HTTP server allows (see the module docstring); defaults from `LIMITS`."""

    sessions: int = int(LIMITS["sessions"].default)
    client_sessions: int = int(LIMITS["client_sessions"].default)
    idle_minutes: float = float(LIMITS["idle_minutes"].default)
    header_seconds: float = float(LIMITS["header_seconds"].default)
    body_seconds: float = float(LIMITS["body_seconds"].default)
    body_bytes: int = int(LIMITS["body_bytes"].default)

    def __post_init__(self) -> None:
        from ..base.errors import UsageError

        for name, limit in LIMITS.items():
            value = getattr(self, name)
            if not limit.minimum <= value <= limit.maximum:
                raise UsageError(
                    f"{name.replace('_', ' ')} must be from {limit.minimum:g} to "
                    f"{limit.maximum:g}, not {value:g}"
                )


def _error(status: int, message: str) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """A JSON-RPC error body (no request id) that closes the connection after it."""
    import json

    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    ).encode()
    return [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ], body


async def _answer(send: Send, status: int, message: str) -> None:
    headers, body = _error(status, message)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class BodyBounds:
    """The whole app, with each request's body read first within `body_bytes` and
    `body_seconds` (then replayed to the app); over either, 413 or 408, and the connection is
    closed rather than the rest of the body read."""

    def __init__(self, app: App, bounds: HttpBounds) -> None:
        self.app = app
        self.most = bounds.body_bytes
        self.seconds = bounds.body_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > self.most:
            await _answer(send, 413, f"Request body too large: more than {self.most} bytes")
            return
        import anyio

        received: list[Message] = []
        size = 0
        with anyio.move_on_after(self.seconds) as waited:
            while True:
                message = await receive()
                received.append(message)
                if message["type"] != "http.request":
                    break
                size += len(message.get("body", b""))
                if size > self.most:
                    await _answer(send, 413, f"Request body too large: more than {self.most} bytes")
                    return
                if not message.get("more_body", False):
                    break
        if waited.cancelled_caught:
            await _answer(send, 408, f"Request body not received within {self.seconds:g} seconds")
            return

        async def replay() -> Message:
            return received.pop(0) if received else await receive()

        await self.app(scope, replay, send)


def protocol(header_seconds: float) -> type:
    """uvicorn's h11 protocol with a deadline for each request head: a connection that has not
    sent one whole within `header_seconds` of opening, or of its previous answer, is closed."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadBoundedProtocol(H11Protocol):
        head_timer: Any = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self.await_head()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:
                self.head_in()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self.await_head()

        def connection_lost(self, exc: Exception | None) -> None:
            self.head_in()
            super().connection_lost(exc)

        def await_head(self) -> None:
            self.head_in()
            self.head_timer = self.loop.call_later(header_seconds, self.cut_off)

        def head_in(self) -> None:
            if self.head_timer is not None:
                self.head_timer.cancel()
                self.head_timer = None

        def cut_off(self) -> None:
            self.head_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

    return HeadBoundedProtocol


@dataclass
class _Held:
    """A session this server opened: whose it is, how to end it, when it was last used."""

    client: Any
    ending: Scope  # a DELETE of the session, as its own client would send it
    last: float = field(default_factory=time.monotonic)
    busy: int = 0


def client_of(scope: Scope) -> Any:
    """Who a request is from: the principal of its verified token, else its address."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context

    user = scope.get("user")
    if isinstance(user, AuthenticatedUser):
        context = authorization_context(user)
        return ("token", context["client_id"], context["issuer"], context["subject"])
    peer = scope.get("client")
    return ("address", peer[0] if peer else None)


class SessionBounds:
    """The SDK's streamable-HTTP endpoint, with its sessions bounded per client and in all
    (see the module docstring). A session is ended the way its client would end it: a DELETE
    with its id and credentials, which the SDK answers by closing it."""

    def __init__(self, app: App, bounds: HttpBounds) -> None:
        import anyio

        self.app = app
        self.bounds = bounds
        self.idle = bounds.idle_minutes * 60
        self.held: dict[str, _Held] = {}
        self.opening: Counter[Any] = Counter()  # sessions being opened, per client
        self.lock = anyio.Lock()
        self.ended = 0  # sessions ended to make room (for the server's own report)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or ())
        session = headers.get(SESSION_HEADER)
        answered: dict[str, Any] = {}

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                answered["status"] = message["status"]
                answered["session"] = dict(message.get("headers") or ()).get(SESSION_HEADER)
            await send(message)

        if session is None:
            await self.open(scope, receive, watch, answered)
            return
        sid = session.decode("latin-1")
        held = self.held.get(sid)
        if held is not None:
            held.busy += 1
        try:
            await self.app(scope, receive, watch)
        finally:
            if held is not None:
                held.busy -= 1
                held.last = time.monotonic()
            ended = scope["method"] == "DELETE" and answered.get("status", 500) < 300
            if ended or answered.get("status") == 404:
                self.held.pop(sid, None)

    async def open(
        self, scope: Scope, receive: Receive, send: Send, answered: dict[str, Any]
    ) -> None:
        client = client_of(scope)
        async with self.lock:
            crowded = self.opening[client] >= self.bounds.client_sessions
            if not crowded:
                await self.make_room(client)
                self.opening[client] += 1
        if crowded:
            await _answer(send, 429, "Too many sessions being opened at once by this client")
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.opening[client] -= 1
            if not self.opening[client]:
                del self.opening[client]
        session = answered.get("session")
        if session and answered.get("status", 500) < 400:
            sid = session.decode("latin-1")
            ending = {
                **scope,
                "method": "DELETE",
                "headers": [
                    (name, value)
                    for name, value in scope.get("headers") or ()
                    if name in (b"host", b"origin")
                ]
                + [(SESSION_HEADER, session)],
            }
            self.held[sid] = _Held(client, ending)

    async def make_room(self, client: Any) -> None:
        """End sessions until `client` may open one more: its own least recently used past
        its cap, then, past the total, that of the client holding the most."""
        now = time.monotonic()
        for sid, held in list(self.held.items()):  # expired by the SDK by now
            if not held.busy and now - held.last > self.idle:
                self.held.pop(sid, None)
        while True:
            mine = [sid for sid, held in self.held.items() if held.client == client]
            if len(mine) + self.opening[client] >= self.bounds.client_sessions and mine:
                await self.end(self.oldest(mine))
                continue
            if len(self.held) + sum(self.opening.values()) >= self.bounds.sessions and self.held:
                count = Counter(held.client for held in self.held.values())
                most = max(count.values())
                await self.end(
                    self.oldest(
                        [sid for sid, held in self.held.items() if count[held.client] == most]
                    )
                )
                continue
            return

    def oldest(self, sids: list[str]) -> str:
        return min(sids, key=lambda sid: (self.held[sid].busy > 0, self.held[sid].last))

    async def end(self, sid: str) -> None:
        held = self.held.pop(sid)
        self.ended += 1

        async def nothing() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def drop(message: Message) -> None:
            pass

        await self.app(dict(held.ending), nothing, drop)


def bounded_app(app: Any, path: str, bounds: HttpBounds) -> tuple[BodyBounds, SessionBounds]:
    """The SDK's Starlette app with its MCP endpoint's sessions bounded and every request's
    body bounded; the session bounds are returned too (they count what they ended)."""
    from mcp.server.auth.middleware.bearer_auth import RequireAuthMiddleware
    from starlette.routing import Route

    [route] = [r for r in app.routes if isinstance(r, Route) and r.path == path]
    # Inside the token check: only an authenticated request may make room (end sessions).
    outer = route.app if isinstance(route.app, RequireAuthMiddleware) else route
    sessions = SessionBounds(outer.app, bounds)
    outer.app = sessions
    return BodyBounds(app, bounds), sessions
