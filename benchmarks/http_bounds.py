"""What an HTTP server holds under abuse from one client: abandoned sessions, a slowloris, an
oversized body (docs/mcp.md, "Over HTTP").

    python benchmarks/http_bounds.py [--sessions N] [--code DIR] [SERVE OPTIONS...]

starts `python -m engram serve --http --port 0` (with `--code DIR`, the engram package found
in DIR first, to measure another version) in a scratch HOME on 127.0.0.1, and:

1. opens N sessions (default 3000) from one client and abandons each: the status codes, the
   time, the server's RSS before and after, whether a new client then gets a session;
2. holds a connection that sends its request head a byte a second: how long until it is cut;
3. declares a 7 GB body and sends as fast as it can for up to 15 s: how much the server read
   before closing the connection.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def rss_kb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]


def start(work: Path, code: str | None, options: list[str]) -> tuple[subprocess.Popen[str], str]:
    env = {
        **os.environ,
        "HOME": str(work),
        "ENGRAM_HOME": str(work / ".engram"),
        "ENGRAM_MCP_TOKEN": "",
        "ENGRAM_ACTOR": "Bench <bench@example.com>",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    if code:
        env["PYTHONPATH"] = code
    subprocess.run(
        [sys.executable, "-m", "engram", "init"], env=env, cwd=work, check=True, capture_output=True
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "engram", "serve", "--http", "--port", "0", *options],
        env=env,
        cwd=work,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if "serving MCP" in line:
            return proc, line.rsplit(" at ", 1)[1].strip()
    raise SystemExit(f"the server did not start ({proc.wait()})")


def flood(url: str, pid: int, count: int) -> dict[str, object]:
    codes: dict[int, int] = {}
    before = rss_kb(pid)
    started = time.monotonic()
    with httpx2.Client(timeout=60) as client:
        for _ in range(count):
            status = client.post(url, json=INITIALIZE, headers=HEADERS).status_code
            codes[status] = codes.get(status, 0) + 1
        took = time.monotonic() - started
        fresh = client.post(url, json=INITIALIZE, headers=HEADERS).status_code
    return {
        "sessions": count,
        "seconds": round(took, 1),
        "codes": codes,
        "new_client": fresh,
        "rss_kb_before": before,
        "rss_kb_after": rss_kb(pid),
    }


def slowloris(url: str, hold: float = 60) -> float | None:
    """Seconds until the server cut a head sent a byte a second (None: held `hold` s)."""
    host, port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\n")
        sock.settimeout(1)
        started = time.monotonic()
        while time.monotonic() - started < hold:
            try:
                sock.sendall(b"X")
                if sock.recv(1) == b"":
                    return round(time.monotonic() - started, 1)
            except TimeoutError:
                continue
            except OSError:
                return round(time.monotonic() - started, 1)
    return None


def big_body(url: str, seconds: float = 15) -> dict[str, object]:
    host, port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
    sent = 0
    chunk = b"x" * (1 << 20)
    started = time.monotonic()
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
            b"\r\nContent-Length: 7000000000\r\n\r\n"
        )
        sock.settimeout(1)
        closed = False
        while time.monotonic() - started < seconds:
            try:
                sent += sock.send(chunk)
            except TimeoutError:
                continue
            except OSError:
                closed = True
                break
    return {
        "bytes_sent": sent,
        "seconds": round(time.monotonic() - started, 1),
        "closed_by_server": closed,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=3000)
    parser.add_argument("--code", default=None)
    known, options = parser.parse_known_args()
    with tempfile.TemporaryDirectory() as work:
        proc, url = start(Path(work), known.code, options)
        try:
            result = {
                "flood": flood(url, proc.pid, known.sessions),
                "slowloris_cut_after_s": slowloris(url),
                "7GB_body": big_body(url),
            }
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
