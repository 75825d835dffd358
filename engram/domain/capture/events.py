"""Reading one hook event into a `Captured`: Claude Code's payloads, and Engram's own form.

Claude Code (`PostToolUse`, `PostToolUseFailure`, as its hooks pass them on stdin):

- `Edit`, `Write`, `MultiEdit` (`tool_input.file_path`), `NotebookEdit` (`notebook_path`): a
  file the agent changed.
- `Bash` after `PostToolUse`: a command that ran; a failure when its response carries a
  non-zero exit status (`exit_code`, `exitCode`, `returncode`). After `PostToolUseFailure`:
  a failure whose `error` says `Exit code N` and the output; an interrupt is not a failure.

Engram's own form, for any other harness (`engram capture`, one JSON object a line):

    {"event": "file", "path": "src/app.py", "session": "s1", "cwd": "/repo"}
    {"event": "command", "command": "pytest -q", "exit_code": 1, "output": "...",
     "session": "s1", "cwd": "/repo"}

Everything is untrusted: a field of the wrong type or size makes the event `Skipped` (with the
reason), never an exception. Commands and output are cut to a few lines and their secrets
redacted (`[REDACTED:type]`) before anything keeps them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

FILE_TOOLS = {
    "Edit": "file_path",
    "Write": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
COMMAND_TOOLS = ("Bash",)
OUTPUT_LINES = 6  # of a failed command's output, the first ones
LINE_CHARS = 240
COMMAND_CHARS = 1000
SCAN_CHARS = 8000  # of a command or an output line, scanned for secrets before it is cut
PATH_CHARS = 1024
SESSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
_EXIT = re.compile(
    r"\A\s*(?:Exit code|exit status|exited with code)\s*:?\s*(-?\d{1,4})\b", re.IGNORECASE
)


@dataclass(frozen=True)
class Captured:
    """One thing an agent did that is worth keeping: a file it changed (`kind` "file", `path`
    as the client gave it) or a command (`kind` "command"; `exit_code` 0 is a success)."""

    kind: str
    session: str | None
    cwd: str | None
    tool: str = ""
    path: str = ""
    command: str = ""
    exit_code: int = 0
    output: str = ""
    redacted: bool = False

    @property
    def failed(self) -> bool:
        return self.kind == "command" and self.exit_code != 0


@dataclass(frozen=True)
class Skipped:
    """An event left out, and why (one line, no quoted secrets)."""

    reason: str


def read(payload: Any) -> Captured | Skipped:
    """The event `payload` (a decoded JSON object) as a `Captured`, or why it is skipped."""
    if not isinstance(payload, dict):
        return Skipped("not a JSON object")
    session = payload.get("session_id", payload.get("session"))
    if session is not None and not (isinstance(session, str) and SESSION.fullmatch(session)):
        return Skipped("session is not 1-128 letters, digits, '.', '_', ':' or '-'")
    cwd = payload.get("cwd")
    if cwd is not None and not _text(cwd, PATH_CHARS):
        return Skipped(f"cwd is not a path of at most {PATH_CHARS} characters")
    if "hook_event_name" in payload:
        return _claude(payload, session, cwd)
    return _own(payload, session, cwd)


def _claude(
    payload: dict[str, Any],
    session: str | None,
    cwd: str | None,
) -> Captured | Skipped:
    event, tool = payload.get("hook_event_name"), payload.get("tool_name")
    if event not in ("PostToolUse", "PostToolUseFailure"):
        return Skipped(f"not a tool event ({str(event)[:40]!r})")
    tool_input = payload.get("tool_input")
    if not isinstance(tool_input, dict):
        return Skipped("tool_input is not an object")
    if tool in FILE_TOOLS:
        if event == "PostToolUseFailure":
            return Skipped(f"{tool} failed: no file was changed")
        return _file(tool_input.get(FILE_TOOLS[tool]), session, cwd, str(tool))
    if tool in COMMAND_TOOLS:
        command = tool_input.get("command")
        if event == "PostToolUseFailure":
            if payload.get("is_interrupt") is True:
                return Skipped("interrupted by the user")
            error = payload.get("error")
            if not isinstance(error, str):
                return Skipped("error is not text")
            found = _EXIT.match(error)
            code = int(found.group(1)) if found else 1
            output = error[found.end() :] if found else error
            return _command(command, code or 1, output, session, cwd, str(tool))
        response = payload.get("tool_response")
        code, output = 0, ""
        if isinstance(response, dict):
            for key in ("exit_code", "exitCode", "returncode", "returnCode"):
                value = response.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    code = value
                    break
            parts = [response.get("stderr"), response.get("stdout")]
            output = "\n".join(p for p in parts if isinstance(p, str) and p.strip())
        return _command(command, code, output, session, cwd, str(tool))
    return Skipped(f"tool {str(tool)[:40]!r} is not captured")


def _own(payload: dict[str, Any], session: str | None, cwd: str | None) -> Captured | Skipped:
    event = payload.get("event")
    if event == "file":
        tool = payload.get("tool", "")
        return _file(payload.get("path"), session, cwd, tool if _text(tool, 64) else "")
    if event == "command":
        code = payload.get("exit_code")
        if not isinstance(code, int) or isinstance(code, bool) or not -(2**31) <= code < 2**31:
            return Skipped("exit_code is not an integer")
        output = payload.get("output", "")
        if not isinstance(output, str):
            return Skipped("output is not text")
        return _command(payload.get("command"), code, output, session, cwd, "command")
    return Skipped('event is neither "file" nor "command"')


def _text(value: Any, most: int) -> bool:
    return isinstance(value, str) and 0 < len(value) <= most and "\x00" not in value


def _file(path: Any, session: str | None, cwd: str | None, tool: str) -> Captured | Skipped:
    if not _text(path, PATH_CHARS) or "\n" in path:
        return Skipped(f"the file path is not a path of at most {PATH_CHARS} characters")
    return Captured("file", session, cwd, tool=tool, path=path)


def _command(
    command: Any, code: int, output: str, session: str | None, cwd: str | None, tool: str
) -> Captured | Skipped:
    if not isinstance(command, str) or not command.strip() or "\x00" in command:
        return Skipped("the command is not text")
    if code == 0:  # only counted: neither the command nor its output is kept
        return Captured("command", session, cwd, tool=tool, exit_code=0)
    from ...base.secrets import find_secrets, redact

    # Secrets are found in the whole of what is kept (and a margin), then the text is cut: a
    # cut through a secret would leave a piece the scanner no longer recognises.
    texts = [" ".join(command[:SCAN_CHARS].split())]
    texts += [
        line.rstrip()[:SCAN_CHARS]
        for line in output.replace("\x00", "").splitlines()
        if line.strip()
    ][:OUTPUT_LINES]
    redacted = False
    cleaned = []
    for text in texts:
        findings = find_secrets(text)
        redacted = redacted or bool(findings)
        cleaned.append(redact(text, findings) if findings else text)
    return Captured(
        "command",
        session,
        cwd,
        tool=tool,
        command=_cut(cleaned[0], COMMAND_CHARS),
        exit_code=code,
        output="\n".join(_cut(line, LINE_CHARS) for line in cleaned[1:]),
        redacted=redacted,
    )


def _cut(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"
