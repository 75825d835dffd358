"""`engram serve --http`: a real streamable-HTTP server on 127.0.0.1 in a child process, with
authentication on, against a real OIDC issuer stand-in (a JWKS served over HTTP)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jwt
import pytest
from conftest import ACTOR, make_repo
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from test_mcp import fail, serve_args

from engram.api import Engram

AUDIENCE = "engram-test"
ADA = {"sub": "user-1", "name": "Ada Lovelace", "email": "ada@example.com", "email_verified": True}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "curl", "version": "1"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
TOKEN = "ZmR1c3Qtc3RhdGljLXRva2VuLWZvci10ZXN0cy0wMDAx"  # 44 characters


class Issuer:
    """An OIDC issuer stand-in: discovery document and JWKS over HTTP, and a signing key."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        self.jwks = {"keys": [{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]}
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    body = {"issuer": issuer.url, "jwks_uri": f"{issuer.url}/jwks.json"}
                elif self.path == "/jwks.json":
                    body = issuer.jwks
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def token(
        self,
        scopes: str = "memory:read memory:write session:write",
        *,
        key: Any = None,
        expires_in: int = 600,
        audience: str = AUDIENCE,
        issuer: str | None = None,
        **claims: Any,
    ) -> str:
        now = int(time.time())
        body = {
            "iss": issuer or self.url,
            "aud": audience,
            "iat": now,
            "exp": now + expires_in,
            "scope": scopes,
            **ADA,
            **claims,
        }
        body = {name: value for name, value in body.items() if value is not None}
        return jwt.encode(body, key or self.key, algorithm="RS256", headers={"kid": "k1"})


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    found = Issuer()
    yield found
    found.http.shutdown()


# The last line of the server's start-up banner: after the "serving MCP ... at URL" lines it says
# how it authenticates, one way or the other.
BANNER_END = ("engram: WARNING: no authentication", "engram: requiring ")


@contextmanager
def http_server(
    cwd: Path,
    *args: str,
    env: dict[str, str] | None = None,
) -> Iterator[tuple[str, subprocess.Popen[str], list[str]]]:
    """`engram serve --http --port 0 ...`; yields the endpoint URL, the process and its stderr
    lines up to the end of its start-up banner."""
    proc = subprocess.Popen(
        [sys.executable, *serve_args("--http", "--port", "0", *args)],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    lines: queue.Queue[str | None] = queue.Queue()
    seen: list[str] = []

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)  # the process closed stderr: nothing more will come

    threading.Thread(target=pump, daemon=True).start()
    try:
        url = None
        started = False
        deadline = time.monotonic() + 60
        while not started:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            seen.append(line)
            if "serving MCP" in line and url is None:
                url = line.rsplit(" at ", 1)[1].strip()
            started = url is not None and line.startswith(BANNER_END)
        assert url and started, f"the server did not start: {''.join(seen)}"
        yield url, proc, seen
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def tools_as(url: str, token: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    return Client(streamable_http_client(url, http_client=http), read_timeout_seconds=60)


def test_http_with_oidc_refuses_bad_tokens_and_takes_the_actor_from_the_token(
    tmp_path: Path, issuer: Issuer
) -> None:
    repo = make_repo(tmp_path / "repo")
    Engram(cwd=repo).init(project=True)
    with http_server(
        repo, "--oidc-issuer", issuer.url, "--oidc-audience", AUDIENCE, "--agent", "other"
    ) as (url, proc, stderr):
        assert any("requiring OIDC tokens" in line for line in stderr)
        assert not any("no authentication" in line for line in stderr)
        refused = {
            "no token": {},
            "not a JWT": {"Authorization": "Bearer not-a-token"},
            "another key": {
                "Authorization": "Bearer "
                + issuer.token(key=rsa.generate_private_key(public_exponent=65537, key_size=2048))
            },
            "expired": {"Authorization": "Bearer " + issuer.token(expires_in=-3600)},
            "other audience": {"Authorization": "Bearer " + issuer.token(audience="billing")},
            "other issuer": {
                "Authorization": "Bearer " + issuer.token(issuer="https://evil.example.com")
            },
        }
        for why, headers in refused.items():
            answer = httpx2.post(url, json=INITIALIZE, headers={**HEADERS, **headers}, timeout=30)
            assert answer.status_code == 401, why
            assert answer.headers["www-authenticate"].lower().startswith("bearer"), why

        async def scenario() -> None:
            async with await tools_as(url, issuer.token()) as client:
                made = await client.call_tool(
                    "memory_remember",
                    {"content": "The staging database is read-only on Sundays", "kind": "gotcha"},
                )
                assert not made.is_error, made.content[0].text
                assert (
                    made.structured_content["memory"]["created_by"]
                    == "Ada Lovelace <ada@example.com>"
                )
                stats = await client.call_tool("memory_stats", {})
                runtime = stats.structured_content["runtime"]
                assert runtime["actor"] == "Ada Lovelace <ada@example.com>"
                assert runtime["scopes"] == ["memory:read", "memory:write", "session:write"]
            async with await tools_as(
                url, issuer.token("memory:read", sub="user-2", name="Bob", email=None)
            ) as client:
                found = await client.call_tool("memory_recall", {"query": "staging database"})
                assert not found.is_error and found.structured_content["hits"]
                message = await fail(client, "memory_remember", content="x")
                assert "needs the scope memory:write; this connection has memory:read" in message

        anyio.run(scenario)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) in (0, 143, -signal.SIGTERM)
    with Engram(cwd=repo) as engram:
        written = [e for _, e in engram.log(kinds=["memory.created"])]
        assert [e.actor for e in written] == ["Ada Lovelace <ada@example.com>"]
        [session] = engram.sessions()
        assert (session.state, session.how) == ("ended", "sigterm")
        assert written[0].session == session.id


def test_http_with_a_static_token(tmp_path: Path) -> None:
    Engram().init()
    token_file = tmp_path / "token"
    token_file.write_text(f"{TOKEN}\n")
    with http_server(
        tmp_path, "--token-file", str(token_file), "--actor", "Build Bot <bot@example.com>"
    ) as (url, _, stderr):
        assert any("requiring a bearer token" in line for line in stderr)
        for header in (
            {},
            {"Authorization": "Bearer wrong"},
            {"Authorization": f"Bearer {TOKEN[:-1]}"},
        ):
            answer = httpx2.post(url, json=INITIALIZE, headers={**HEADERS, **header}, timeout=30)
            assert answer.status_code == 401

        async def scenario() -> None:
            async with await tools_as(url, TOKEN) as client:
                made = await client.call_tool("task_create", {"name": "Nightly build"})
                assert not made.is_error, made.content[0].text

        anyio.run(scenario)
    with Engram() as engram:
        [(_, event)] = engram.log(kinds=["task.created"])
        assert event.actor == "Build Bot <bot@example.com>"


def test_http_without_auth_warns_on_loopback_and_refuses_other_addresses(tmp_path: Path) -> None:
    Engram().init()
    with http_server(tmp_path, env={"ENGRAM_MCP_TOKEN": ""}) as (url, _, stderr):
        assert url.startswith("http://127.0.0.1:")
        assert any("WARNING: no authentication" in line for line in stderr)
        answer = httpx2.post(url, json=INITIALIZE, headers=HEADERS, timeout=30)
        assert answer.status_code == 200
    done = subprocess.run(
        [sys.executable, *serve_args("--http", "--host", "0.0.0.0")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "ENGRAM_MCP_TOKEN": ""},
    )
    assert done.returncode == 2
    assert "refusing to serve 0.0.0.0 without authentication" in done.stderr


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost"])
def test_every_loopback_bind_refuses_foreign_host_and_origin_headers(
    tmp_path: Path, host: str
) -> None:
    Engram().init()
    with http_server(tmp_path, "--host", host, env={"ENGRAM_MCP_TOKEN": ""}) as (url, _, stderr):
        assert any("WARNING: no authentication" in line for line in stderr)
        port = url.rsplit(":", 1)[1].split("/")[0]
        for name in (host, "127.0.0.1", "localhost"):
            answer = httpx2.post(
                url,
                json=INITIALIZE,
                timeout=30,
                headers={**HEADERS, "Host": f"{name}:{port}", "Origin": f"http://{name}:{port}"},
            )
            assert answer.status_code == 200, name
        rebound = httpx2.post(
            url, json=INITIALIZE, timeout=30, headers={**HEADERS, "Host": f"evil.example:{port}"}
        )
        assert rebound.status_code == 421
        assert "Invalid Host header" in rebound.text
        foreign = httpx2.post(
            url, json=INITIALIZE, timeout=30, headers={**HEADERS, "Origin": "http://evil.example"}
        )
        assert foreign.status_code == 403


def test_loopback_is_decided_by_address_not_by_spelling() -> None:
    from engram.mcp.http import is_loopback

    for host in (
        "127.0.0.1",
        "127.0.0.2",
        "127.255.255.254",
        "::1",
        "::ffff:127.0.0.3",
        "localhost",
        "LOCALHOST",
    ):
        assert is_loopback(host), host
    for host in (
        "0.0.0.0",
        "::",
        "192.0.2.1",
        "10.0.0.1",
        "::ffff:192.0.2.1",
        "fe80::1",
        "128.0.0.1",
        "",
    ):
        assert not is_loopback(host), host


@pytest.mark.parametrize("host", ["::", "192.0.2.1", "::ffff:10.0.0.1"])
def test_any_other_address_requires_authentication(tmp_path: Path, host: str) -> None:
    from engram.base.errors import UsageError
    from engram.mcp.http import serve_http

    with pytest.raises(UsageError, match=f"refusing to serve {host} without authentication"):
        serve_http(host=host, port=0, cwd=tmp_path)


def test_a_weak_static_token_is_refused_at_start_with_the_fix(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token-for-tests\n")
    for args, env, named in (
        (["--host", "0.0.0.0"], {"ENGRAM_MCP_TOKEN": "x"}, "ENGRAM_MCP_TOKEN is 1 character"),
        (["--token-file", str(token_file)], {}, f"the token in {token_file} is 22 characters"),
        ([], {"ENGRAM_MCP_TOKEN": "a" * 20 + " " + "b" * 20}, "ENGRAM_MCP_TOKEN holds a space"),
    ):
        done = subprocess.run(
            [sys.executable, *serve_args("--http", "--port", "0", *args)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            env={**os.environ, "ENGRAM_MCP_TOKEN": "", **env},
            check=False,
        )
        assert done.returncode == 2, done.stderr
        [line] = done.stderr.strip().splitlines()
        assert named in line
        assert "python -c 'import secrets; print(secrets.token_urlsafe(32))'" in line
        assert "serving MCP" not in done.stderr


def test_an_oidc_token_cannot_write_as_someone_else(tmp_path: Path, issuer: Issuer) -> None:
    """The actor is the verified email, else the subject at the issuer's host: display claims
    cannot forge an address (ACTOR, `Test Agent <agent@example.com>`, is the local user)."""
    Engram().init()
    tokens = {
        "Test Agent agent@example.com <mallory@127.0.0.1>": issuer.token(
            sub="mallory", name=ACTOR, email="agent@example.com", email_verified=None
        ),
        "Test Agent <mallory%40example.com@127.0.0.1>": issuer.token(
            sub="mallory@example.com",
            name="Test Agent",
            email="agent@example.com",
            email_verified=False,
        ),
        "Eve root@example.com <eve@example.com>": issuer.token(
            sub="eve", name="Eve\n<root@example.com>\u202e", email="eve@example.com"
        ),
        "Ada Lovelace <ada@example.com>": issuer.token(),
    }
    with http_server(tmp_path, "--oidc-issuer", issuer.url, "--oidc-audience", AUDIENCE) as (
        url,
        _,
        _,
    ):

        async def scenario() -> None:
            for actor, token in tokens.items():
                async with await tools_as(url, token) as client:
                    made = await client.call_tool("task_create", {"name": f"Task of {actor}"})
                    assert not made.is_error, made.content[0].text
                    stats = await client.call_tool("memory_stats", {})
                    assert stats.structured_content["runtime"]["actor"] == actor

        anyio.run(scenario)
    with Engram() as engram:
        written = {e.data["name"]: e.actor for _, e in engram.log(kinds=["task.created"])}
    assert written == {f"Task of {actor}": actor for actor in tokens}
    assert ACTOR not in written.values()


def test_the_actor_of_claims_names_the_subject_when_no_email_is_verified() -> None:
    from engram.mcp.http import actor_from_claims

    iss = "https://id.example.com:8443/tenant/v2.0"
    cases = [
        (
            {"sub": "u1", "name": "Ann", "email": "ann@example.com", "email_verified": True},
            "Ann <ann@example.com>",
        ),
        (
            {"sub": "u1", "name": "Ann", "email": "ann@example.com", "email_verified": "true"},
            "Ann <ann@example.com>",
        ),
        (
            {"sub": "u1", "name": "Ann", "email": "ann@example.com", "email_verified": "false"},
            "Ann <u1@id.example.com>",
        ),
        (
            {"sub": "u1", "name": "Ann", "email": "a <b>@x", "email_verified": True},
            "Ann <u1@id.example.com>",
        ),
        (
            {"sub": "auth0|42 <x>", "preferred_username": "ann\x00\x7f"},
            "ann <auth0|42%20%3Cx%3E@id.example.com>",
        ),
        ({"sub": "u1"}, "u1 <u1@id.example.com>"),
        ({"sub": "sha256=ab", "name": "A"}, "A <sha256%3Dab@id.example.com>"),
        ({"sub": "<>", "name": "<>"}, "%3C%3E <%3C%3E@id.example.com>"),
        ({"sub": "u1", "name": "  Ann\tB. \u2028 Lee  "}, "Ann B. Lee <u1@id.example.com>"),
    ]
    for claims, actor in cases:
        assert actor_from_claims({"iss": iss, **claims}) == actor, claims
    long = actor_from_claims({"iss": iss, "sub": "s" * 300, "name": "N" * 300})
    assert len(long) <= 200 and long.startswith("N" * 64 + " <sha256=")
    assert long != actor_from_claims({"iss": iss, "sub": "s" * 299 + "t", "name": "N"})
