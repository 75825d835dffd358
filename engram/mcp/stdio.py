"""Over stdio, every request gets an answer, a malformed one a JSON-RPC error.

The SDK's stdio transport passes a line it cannot read as a JSON-RPC message (invalid JSON, a
lone surrogate such as `\\ud800`, JSON nested deeper than its parser goes, an array or a bare
value) on as an exception, which its dispatcher only logs: the client, waiting for the answer to
its request, hangs. `Answering` sits between the two and answers such a line itself: a parse
error (-32700) or an invalid request (-32600), with the request's id when the line names one at
its top level (found by a scan that neither recurses nor decodes), else with a null id, as
JSON-RPC 2.0 says. A line that is a notification, or a client's response, is not answered (no
one waits for it). Every other line goes on to the server unchanged.
"""

from __future__ import annotations

import json
import re
from types import TracebackType
from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
ID_CHARS = 200  # the longest string id echoed back

# A JSON token: a string (escapes kept), a structural character, or a bare literal.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"?|[{}\[\]:,]|[^\s{}\[\]:,"]+')
_SURROGATES = re.compile(
    r"\\u[dD]([89abAB])[0-9a-fA-F]{2}(\\u[dD][c-fC-F][0-9a-fA-F]{2})?"
    r"|\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


def request_id(text: str) -> int | str | None:
    """The `id` a JSON-RPC line gives at its top level, read without parsing the rest (which
    may be what is wrong with it); None if it gives none, or none a client could match."""
    depth = 0
    previous: str | None = None
    awaiting = False
    for number, match in enumerate(_TOKEN.finditer(text)):
        token = match.group()
        if number == 0 and token != "{":
            return None
        if awaiting:
            return _id_value(token)
        if token in ("{", "["):
            depth += 1
        elif token in ("}", "]"):
            depth -= 1
        elif token == ":" and depth == 1 and previous == '"id"':
            awaiting = True
        previous = token if depth == 1 else None
    return None


def _id_value(token: str) -> int | str | None:
    if re.fullmatch(r"-?\d{1,16}", token):
        return int(token)
    if token.startswith('"') and token.endswith('"') and len(token) > 1:
        try:
            value = json.loads(token)
            value.encode("utf-8")  # a lone surrogate cannot be written back
        except (ValueError, UnicodeEncodeError):
            return None
        return value if len(value) <= ID_CHARS else None
    return None


def _lone_surrogate(text: str) -> str | None:
    """The first `\\uXXXX` escape of `text` that is half of a surrogate pair on its own."""
    for match in _SURROGATES.finditer(text):
        if match.group(1) is None or match.group(2) is None:
            return match.group()[:6]
    return None


def answer_to(exc: Exception) -> tuple[int | str | None, int, str] | None:
    """(id, code, message) of the error that answers a line the transport could not read, or
    None when no answer is due (a notification, a client's response, or not a read error)."""
    errors = getattr(exc, "errors", None)
    try:
        found = errors() if callable(errors) else []
    except Exception:  # noqa: BLE001 (whatever it is, the line still gets an answer)
        found = []
    if not found:
        return None
    invalid = [e for e in found if e.get("type") == "json_invalid"]
    if invalid and isinstance(invalid[0].get("input"), str):
        text = invalid[0]["input"]
        lone = _lone_surrogate(text)
        if lone is not None:
            why = (
                f"the message holds a lone surrogate ({lone}), which is not valid Unicode; "
                "send text as UTF-8, or a character outside the BMP as a surrogate pair"
            )
        else:
            why = str(invalid[0].get("msg") or "invalid JSON")
        return request_id(text), PARSE_ERROR, f"Parse error: {why}"
    top = next((e.get("input") for e in found if len(e.get("loc") or ()) == 1), None)
    if top is None:
        top = next(
            (
                e.get("input")
                for e in found
                if e.get("type") == "missing" and len(e.get("loc") or ()) == 2
            ),
            None,
        )
    if isinstance(top, dict):
        if "id" not in top or "result" in top or "error" in top:
            return None  # a notification, or a response: nobody waits for an answer
        ident = top["id"]
        if isinstance(ident, bool) or not isinstance(ident, (int, str)):
            ident = None
        elif isinstance(ident, str):
            ident = _id_value(json.dumps(ident))
        return (
            ident,
            INVALID_REQUEST,
            (
                "Invalid Request: not a JSON-RPC 2.0 request (an "
                'object with "jsonrpc": "2.0", a string '
                '"method" and an "id")'
            ),
        )
    return (
        None,
        INVALID_REQUEST,
        (
            "Invalid Request: a JSON-RPC 2.0 message is one JSON "
            "object per line (batches are not supported)"
        ),
    )


class Answering:
    """The read side of the stdio transport, answering each line it could not read (see the
    module docstring) on `write` and passing everything else on."""

    def __init__(self, inner: Any, write: Any) -> None:
        self.inner = inner
        self.write = write

    @property
    def last_context(self) -> Any:
        """The sender's context of the last message (the SDK's streams keep it)."""
        return getattr(self.inner, "last_context", None)

    async def receive(self) -> Any:
        from mcp.shared.message import SessionMessage
        from mcp_types import ErrorData, JSONRPCError

        while True:
            item = await self.inner.receive()
            if not isinstance(item, Exception):
                return item
            answer = answer_to(item)
            if answer is not None:
                ident, code, message = answer
                await self.write.send(
                    SessionMessage(
                        JSONRPCError(
                            jsonrpc="2.0", id=ident, error=ErrorData(code=code, message=message)
                        )
                    )
                )

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __aiter__(self) -> Answering:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Answering:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()
