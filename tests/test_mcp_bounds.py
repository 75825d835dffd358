"""The MCP server's bounds, against real server processes over real sockets: HTTP sessions
capped per client and in all (the oldest of whoever holds the most ends, nobody is refused),
idle sessions expiring, a slowloris cut off, a refused body no longer read; and over a raw
stdio pipe, every malformed request answered with a JSON-RPC error."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from conftest import make_repo
from test_mcp import serve_args
from test_mcp_http import AUDIENCE, HEADERS, INITIALIZE, Issuer, http_server, tools_as

from engram.api import Engram
from engram.mcp.stdio import request_id

NO_TOKEN = {"ENGRAM_MCP_TOKEN": ""}
PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}


def _open(client: httpx2.Client, url: str, token: str | None = None) -> tuple[int, str | None]:
    """Initialize a session and abandon it: its status and session id."""
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    answer = client.post(url, json=INITIALIZE, headers={**HEADERS, **auth})
    return answer.status_code, answer.headers.get("mcp-session-id")


def _ping(client: httpx2.Client, url: str, session: str, token: str | None = None) -> int:
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    return client.post(
        url,
        json=PING,
        headers={
            **HEADERS,
            **auth,
            "mcp-session-id": session,
            "mcp-protocol-version": "2025-06-18",
        },
    ).status_code


def _address(url: str) -> tuple[str, int]:
    host, port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
    return host, int(port)


def test_abandoned_sessions_end_oldest_first_and_never_refuse_anyone(tmp_path: Path) -> None:
    """One local client opens 150 sessions and abandons them (the attack: thousands of them
    made every later client get 503 for 30 minutes). With room for 10, every request is
    answered 200, the 10 newest live, the older ones answer 404 (ended), and a new client still
    gets a session that works."""
    Engram().init()
    with http_server(tmp_path, "--client-sessions", "10", "--max-sessions", "25", env=NO_TOKEN) as (
        url,
        _,
        stderr,
    ):
        assert any("at most 10 per client and 25 in all" in line for line in stderr)
        with httpx2.Client(timeout=30) as client:
            opened = [_open(client, url) for _ in range(150)]
            assert {status for status, _ in opened} == {200}
            sessions = [sid for _, sid in opened]
            assert len(set(sessions)) == 150
            assert [_ping(client, url, sid) for sid in sessions[-10:]] == [200] * 10
            assert {_ping(client, url, sid) for sid in sessions[:-10]} == {404}
            status, fresh = _open(client, url)
            assert status == 200 and fresh is not None
            assert _ping(client, url, fresh) == 200


def test_one_client_flooding_sessions_ends_only_its_own(tmp_path: Path) -> None:
    """Per client: Mallory's tokens and three other flooding principals fill the caps; Ada's
    one session, opened first and so the oldest of all, lives on through it, and she works."""
    issuer = Issuer()
    try:
        Engram().init()
        with http_server(
            tmp_path,
            "--oidc-issuer",
            issuer.url,
            "--oidc-audience",
            AUDIENCE,
            "--client-sessions",
            "5",
            "--max-sessions",
            "12",
        ) as (url, _, _):

            async def scenario() -> None:
                async with await tools_as(url, issuer.token()) as ada:
                    made = await ada.call_tool(
                        "memory_remember",
                        {"content": "The nightly export runs at 02:00 UTC", "kind": "fact"},
                    )
                    assert not made.is_error, made.content[0].text
                    with httpx2.Client(timeout=30) as client:
                        floods = [
                            issuer.token(sub=f"flood-{n}", name=f"Flood {n}", email=None)
                            for n in range(4)
                        ]
                        opened = [_open(client, url, token) for token in floods for _ in range(40)]
                    assert {status for status, _ in opened} == {200}
                    found = await ada.call_tool("memory_recall", {"query": "nightly export"})
                    assert not found.is_error, found.content[0].text
                    assert found.structured_content["hits"]

            anyio.run(scenario)
    finally:
        issuer.http.shutdown()


def test_an_idle_session_expires_after_its_minutes(tmp_path: Path) -> None:
    """0.02 minutes is 1.2 seconds. Each use of a session starts its idle time again, so it is
    asked after longer and longer pauses (a bounded wait): it lives through the short ones and
    has ended after the first pause longer than its idle time."""
    Engram().init()
    with http_server(tmp_path, "--session-idle-minutes", "0.02", env=NO_TOKEN) as (url, _, _):
        with httpx2.Client(timeout=30) as client:
            status, session = _open(client, url)
            assert status == 200 and session is not None
            pauses = {}
            pause = 0.15
            while _ping(client, url, session) == 200:
                assert pause < 30, "the idle session never expired"
                pause *= 2
                start = time.monotonic()
                time.sleep(pause)
                pauses[pause] = time.monotonic() - start
            longest = max(pauses)
            assert pauses[longest] >= 1.2  # it ended only after a pause past its idle time
            assert any(took < 1.0 for took in pauses.values())  # and lived through short ones
            assert _open(client, url)[0] == 200


def _closed_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the server closes `sock` (reading and dropping what it sends), or None."""
    start = time.monotonic()
    sock.settimeout(0.2)
    while time.monotonic() - start < seconds:
        try:
            if sock.recv(65536) == b"":
                return time.monotonic() - start
        except TimeoutError:
            continue
        except ConnectionResetError:
            return time.monotonic() - start
    return None


def test_a_slow_or_silent_request_head_is_cut_off(tmp_path: Path) -> None:
    Engram().init()
    with http_server(tmp_path, "--header-timeout", "1", env=NO_TOKEN) as (url, _, _):
        address = _address(url)
        with socket.create_connection(address) as silent:
            took = _closed_within(silent, 15)
            assert took is not None and 0.8 < took < 10
        with socket.create_connection(address) as slow:  # slowloris: a byte at a time
            slow.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            start = time.monotonic()
            cut = None
            for byte in b"X-Slow: " + b"a" * 200:
                try:
                    slow.sendall(bytes([byte]))
                except (BrokenPipeError, ConnectionResetError):
                    cut = time.monotonic() - start
                    break
                if _closed_within(slow, 0.2) is not None:
                    cut = time.monotonic() - start
                    break
            assert cut is not None and cut < 10, "the slow head was not cut off"
        # A request whose head comes at once is served as before.
        assert httpx2.post(url, json=INITIALIZE, headers=HEADERS, timeout=30).status_code == 200


def _send_until_closed(sock: socket.socket, seconds: float) -> int:
    """Bytes of body sent before the server closed the connection (bounded by `seconds`)."""
    sent = 0
    chunk = b"x" * 65536
    sock.settimeout(1)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            sent += sock.send(chunk)
        except TimeoutError:
            continue
        except (BrokenPipeError, ConnectionResetError):
            return sent
    raise AssertionError(f"the server kept reading: {sent} bytes in {seconds} s")


def test_a_refused_body_stops_being_read_and_a_slow_one_is_cut_off(tmp_path: Path) -> None:
    Engram().init()
    with http_server(
        tmp_path, "--body-timeout", "1", "--max-body-bytes", "65536", env=NO_TOKEN
    ) as (url, _, _):
        address = _address(url)
        head = (
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\n"
        )
        # Declared too large (7 GB): answered 413 at once, then the connection is closed.
        with socket.create_connection(address) as big:
            big.sendall((head + "Content-Length: 7000000000\r\n\r\n").encode())
            big.settimeout(10)
            assert big.recv(4096).startswith(b"HTTP/1.1 413")
            assert _send_until_closed(big, 15) < 64 * 1024 * 1024
        # Not declared (chunked), and over the limit as it arrives: the same.
        with socket.create_connection(address) as chunked:
            chunked.sendall((head + "Transfer-Encoding: chunked\r\n\r\n").encode())
            piece = b"x" * 16384
            for _ in range(5):  # 80 KiB, past the limit by one piece: all of it is read
                chunked.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            chunked.settimeout(10)
            assert chunked.recv(4096).startswith(b"HTTP/1.1 413")
            assert _closed_within(chunked, 10) is not None
        # Declared, but sent too slowly: 408 after the body timeout, and closed.
        with socket.create_connection(address) as slow:
            slow.sendall((head + "Content-Length: 1000\r\n\r\n").encode() + b'{"jsonrpc"')
            slow.settimeout(15)
            start = time.monotonic()
            answer = slow.recv(4096)
            assert answer.startswith(b"HTTP/1.1 408"), answer
            assert 0.8 < time.monotonic() - start < 10
            assert b"connection: close" in answer.lower()
        assert httpx2.post(url, json=INITIALIZE, headers=HEADERS, timeout=30).status_code == 200


# -- stdio ---------------------------------------------------------------------------------------

MALFORMED: dict[str, tuple[bytes, Any, int]] = {  # name: (line, the id answered, the code)
    "invalid JSON": (b'{"jsonrpc":"2.0","id":11,"method":"tools/call","params":', 11, -32700),
    "a lone surrogate": (
        b'{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":'
        b'"memory_recall","arguments":{"query":"\\ud800"}}}',
        12,
        -32700,
    ),
    "a lone low surrogate in the method": (
        b'{"jsonrpc":"2.0","id":"s-13","method":"\\udc00"}',
        "s-13",
        -32700,
    ),
    "deeply nested JSON": (
        b'{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":'
        b'"memory_recall","arguments":{"query":' + b"[" * 100_000 + b"]" * 100_000 + b"}}}",
        14,
        -32700,
    ),
    "nested, id last": (
        b'{"jsonrpc":"2.0","method":"x","params":' + b"[" * 5000 + b"]" * 5000 + b',"id":15}',
        15,
        -32700,
    ),
    "an array": (b"[1, 2, 3]", None, -32600),
    "no method": (b'{"jsonrpc":"2.0","id":16}', 16, -32600),
    "not JSON-RPC 2.0": (b'{"jsonrpc":"1.0","id":17,"method":"ping"}', 17, -32600),
    "an id holding a surrogate": (b'{"jsonrpc":"2.0","id":"\\ud800","method":', None, -32700),
}


class Pipe:
    """`engram serve` over stdio, spoken to line by line through a raw pipe."""

    def __init__(self, cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, *serve_args()],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=os.environ.copy(),
        )

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def answer(self, seconds: float = 60) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], seconds)
        assert ready, "no answer: the client would hang"
        line = self.proc.stdout.readline()
        assert line, f"the server exited ({self.proc.poll()})"
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def test_stdio_answers_every_malformed_request_and_goes_on(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    Engram(cwd=repo).init(project=True)
    pipe = Pipe(repo)
    try:
        pipe.send(json.dumps(INITIALIZE).encode())
        assert pipe.answer()["id"] == 1
        pipe.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        for name, (line, ident, code) in MALFORMED.items():
            pipe.send(line)
            answer = pipe.answer()
            assert answer["id"] == ident, (name, answer)
            assert answer["error"]["code"] == code, (name, answer)
            assert "\n" not in answer["error"]["message"], name
        said = {}
        for name in ("a lone surrogate", "deeply nested JSON"):
            pipe.send(MALFORMED[name][0])
            said[name] = pipe.answer()["error"]["message"]
        assert "lone surrogate (\\ud800)" in said["a lone surrogate"]
        assert "recursion limit" in said["deeply nested JSON"]
        # A malformed notification (no id) is not answered: the next answer is the ping's.
        pipe.send(b'{"jsonrpc":"2.0","method":5}')
        pipe.send(json.dumps({**PING, "id": 99}).encode())
        assert pipe.answer() == {"jsonrpc": "2.0", "id": 99, "result": {}}
        # And the server still works.
        pipe.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 100,
                    "method": "tools/call",
                    "params": {
                        "name": "memory_remember",
                        "arguments": {"content": "Backups are tested monthly", "kind": "fact"},
                    },
                }
            ).encode()
        )
        done = pipe.answer()
        assert done["id"] == 100 and not done["result"].get("isError"), done
    finally:
        pipe.close()


@pytest.mark.parametrize(
    ("line", "ident"),
    [
        ('{"id": 3, "method": "x"', 3),
        ('{"params": {"id": 9}, "id": "a", "method":', "a"),
        ('{"params": [{"id": 9}], "method": "x"', None),
        ('  {"id":-4}', -4),
        ('{"id": {"a": 1}}', None),
        ('{"id": 1.5}', None),
        ('{"id": true}', None),
        ('["id", 3]', None),
        ('{"x": "\\"id\\"", "id": 7', 7),
        ('{"id": "' + "x" * 300 + '"}', None),
    ],
)
def test_the_id_of_a_broken_line_is_found_at_its_top_level_only(line: str, ident: Any) -> None:
    assert request_id(line) == ident
