"""The MCP server over streamable HTTP, and its authentication.

A bearer token (static, or an OIDC/JWT verified against the issuer's JWKS) names the actor of
every event the caller writes, and its scopes (`memory:read`, `memory:write`,
`session:write`) limit which tools it may use. Any address but loopback requires a token;
a loopback bind checks the Host and Origin headers (DNS rebinding).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import re
import signal
import socket
import sys
import threading
import unicodedata
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from mcp.server.auth.provider import AccessToken

from ..base.errors import UsageError
from .bounds import HttpBounds, bounded_app, protocol
from .models import SCOPES
from .server import build

TOKEN_MIN_CHARS = 32  # a static bearer token: secrets.token_urlsafe(32) gives 43
MAKE_TOKEN = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
NAME_CHARS = 64  # the display name of an OIDC actor, and its subject before it is hashed
EMAIL_CHARS = 100  # a verified email longer than this names the subject instead

_EMAIL = re.compile(r"[^\s<>@\x00-\x1f\x7f]+@[^\s<>@\x00-\x1f\x7f]+")


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
        return AccessToken(
            token="static",
            client_id="engram-token",
            scopes=list(self.scopes),
            subject=self.actor,
            claims={"engram_actor": self.actor},
        )


@dataclass
class JwtVerifier:
    """OIDC access tokens (JWTs): signature against the issuer's JWKS, issuer, expiry, and the
    audience when one is configured. The actor is `actor_from_claims`; the scopes come from
    `scope` (space-separated) or `scp`."""

    issuer: str
    audience: str | None = None
    jwks_url: str | None = None
    algorithms: Sequence[str] = (
        "RS256",
        "RS384",
        "RS512",
        "ES256",
        "ES384",
        "ES512",
        "PS256",
        "PS384",
        "PS512",
        "EdDSA",
    )
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
        return jwt.decode(
            token,
            key,
            algorithms=list(self.algorithms),
            issuer=self.issuer,
            audience=self.audience,
            leeway=self.leeway,
            options={"require": ["exp", "iss", "sub"], "verify_aud": self.audience is not None},
        )

    async def verify_token(self, token: str) -> AccessToken | None:
        import jwt

        try:
            claims = await anyio.to_thread.run_sync(self.decode, token)
        except (jwt.PyJWTError, OSError, ValueError) as exc:
            print(f"engram: refused a token: {type(exc).__name__}: {exc}", file=sys.stderr)
            return None
        return AccessToken(
            token="jwt",
            client_id=str(claims.get("azp") or claims.get("client_id") or claims["sub"]),
            scopes=token_scopes(claims),
            expires_at=int(claims["exp"]),
            subject=str(claims["sub"]),
            claims={"iss": claims.get("iss"), "engram_actor": actor_from_claims(claims)},
        )


@dataclass
class EitherVerifier:
    verifiers: Sequence[Any]

    async def verify_token(self, token: str) -> AccessToken | None:
        for verifier in self.verifiers:
            found: AccessToken | None = await verifier.verify_token(token)
            if found is not None:
                return found
        return None


def check_token(token: str, source: str = "the bearer token") -> str:
    """A static token strong enough to stand for a person: `TOKEN_MIN_CHARS` or more printable
    ASCII characters without spaces (what an Authorization header carries as is)."""
    if not all("!" <= c <= "~" for c in token):
        raise UsageError(
            f"{source} holds a space, a control character or non-ASCII text, "
            f"which a bearer token cannot; make one with: {MAKE_TOKEN}"
        )
    if len(token) < TOKEN_MIN_CHARS:
        count = f"{len(token)} character{'s' if len(token) != 1 else ''}"
        raise UsageError(
            f"{source} is {count}; a bearer token needs at least "
            f"{TOKEN_MIN_CHARS} random ones; make one with: {MAKE_TOKEN}"
        )
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
    name = next(
        (
            cleaned
            for cleaned in (
                _display(claims.get("name")),
                _display(claims.get("preferred_username")),
                _display(sub),
            )
            if cleaned
        ),
        _encoded(sub),
    )
    email = claims.get("email")
    verified = str(claims.get("email_verified")).lower() == "true"  # True, or "true"
    if (
        verified
        and isinstance(email, str)
        and len(email) <= EMAIL_CHARS
        and _EMAIL.fullmatch(email)
    ):
        return f"{name} <{email}>"
    host = urllib.parse.urlsplit(str(claims.get("iss") or "")).hostname or "oidc"
    return f"{name} <{_encoded(sub)}@{_encoded(host)}>"


def _display(value: Any) -> str:
    """A display claim as one plain line: no `<`, `>`, control or format characters."""
    if not isinstance(value, str):
        return ""
    kept = "".join(" " if unicodedata.category(c)[0] == "C" else c for c in value if c not in "<>")
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


def http_auth(
    *,
    token: str | None = None,
    actor: str | None = None,
    scopes: Sequence[str] | None = None,
    oidc_issuer: str | None = None,
    oidc_audience: str | None = None,
    jwks_url: str | None = None,
    base_url: str = "http://127.0.0.1",
    token_source: str = "the bearer token",
) -> HttpAuth | None:
    """Bearer-token authentication from a static token and/or an OIDC issuer; None if
    neither is configured. A weak token (`check_token`) is refused with how to make one;
    `token_source` names where it came from."""
    from mcp.server.auth.settings import AuthSettings
    from pydantic import AnyHttpUrl

    verifiers: list[Any] = []
    described = []
    if token:
        check_token(token, token_source)
        verifiers.append(StaticTokenVerifier(token, actor, tuple(scopes or SCOPES)))
        described.append("a bearer token")
    if oidc_issuer:
        verifiers.append(JwtVerifier(oidc_issuer, oidc_audience, jwks_url))
        described.append(
            f"OIDC tokens from {oidc_issuer}"
            + (f" for audience {oidc_audience}" if oidc_audience else "")
        )
    if not verifiers:
        return None
    settings = AuthSettings(
        issuer_url=AnyHttpUrl(oidc_issuer or base_url), resource_server_url=None
    )
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
        found = {
            str(info[4][0]) for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        }
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
        allowed_origins=[f"http://{n}{port}" for n in shown for port in ("", ":*")],
    )


def serve_http(
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    path: str = "/mcp",
    cwd: Path | str | None = None,
    agent: str | None = None,
    actor: str | None = None,
    scopes: Sequence[str] | None = None,
    auth: HttpAuth | None = None,
    bounds: HttpBounds | None = None,
) -> int:
    """Serve streamable HTTP. Any address but loopback requires `auth`; every loopback bind
    checks the Host and Origin headers (DNS rebinding). `bounds`: the sessions, time and
    bytes it allows (`engram.mcp.bounds`)."""
    import asyncio

    import uvicorn

    loopback = loopback_addresses(host)
    if auth is None and loopback is None:
        raise UsageError(
            f"refusing to serve {host} without authentication; set "
            "ENGRAM_MCP_TOKEN (or --token-file) or --oidc-issuer, or bind "
            "127.0.0.1"
        )
    limits = bounds or HttpBounds()
    server, runtime = build(cwd=cwd, agent=agent, actor=actor, scopes=scopes, auth=auth)
    app, _ = bounded_app(
        server.streamable_http_app(
            streamable_http_path=path,
            host=host,
            transport_security=None if loopback is None else rebinding_protection(host, loopback),
            session_idle_timeout=limits.idle_minutes * 60,
            max_request_body_size=limits.body_bytes,
            max_sessions=2 * limits.sessions,
        ),
        path,
        limits,
    )  # the SDK's cap: a backstop only

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
                    print(
                        f"engram: serving MCP (streamable HTTP) at "
                        f"http://{shown}:{address[1]}{path}",
                        file=sys.stderr,
                        flush=True,
                    )
            print(
                f"engram: sessions: at most {limits.client_sessions} per client and "
                f"{limits.sessions} in all, each ending after {limits.idle_minutes:g} minutes "
                "idle",
                file=sys.stderr,
                flush=True,
            )
            if auth is None:
                print(
                    "engram: WARNING: no authentication: any process on this machine can "
                    "read and write your memories through this server. Set "
                    "ENGRAM_MCP_TOKEN or --oidc-issuer to require a token.",
                    file=sys.stderr,
                    flush=True,
                )
            else:
                print(f"engram: requiring {auth.describe}", file=sys.stderr, flush=True)

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        http=protocol(limits.header_seconds),
    )
    asyncio.run(Server(config).serve())
    return 143 if runtime.how == "sigterm" else 0
