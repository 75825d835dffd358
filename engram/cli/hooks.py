"""Claude Code hooks: `python -I -m engram.hooks <hook>`.

Installed by `engram mcp install claude --hooks`. Claude Code runs them as commands and passes
the event as JSON on stdin (`cwd`, `session_id`, `trigger`, `reason`, ...).

- `session-start`: the output of `engram resume --depth brief`, handed to Claude Code as
  additional context (when several tasks are active, their list and how to choose).
- `precompact`: before the context is compacted, a checkpoint with reason `overflow` for the
  active task (the most recently changed one when several are active); nothing when none is.
  Its working set adds what `capture` recorded in this session: the files edited, the failed
  commands.
- `session-end`: the Engram session of this Claude Code instance is closed (the session of the
  MCP server that Claude Code spawned, found through the process tree, or `$ENGRAM_SESSION`).
- `capture` (`PostToolUse`, `PostToolUseFailure`): a file edited or written, or a command that
  failed, folded into this session's capture journal (`engram.domain.capture`): a file write,
  no event, no commit, no embedding model.
- `prompt` (`UserPromptSubmit`): the memories relevant to the prompt, by words and clause by
  clause, within the token budget `capture.recall_tokens`, as additional context; nothing when
  none is relevant.

A hook is fast (it never loads the embedding model or the MCP SDK) and never blocks the client:
whatever happens it exits 0, prints nothing but the context on stdout, and reports problems on
stderr only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

CONTEXT_CHARS = 9_000  # Claude Code caps hook context at 10,000 characters


def _cwd(payload: dict[str, Any]) -> Path | None:
    cwd = payload.get("cwd")
    return Path(cwd) if isinstance(cwd, str) and Path(cwd).is_dir() else None


def _session(payload: dict[str, Any]) -> str | None:
    from ..domain.capture.events import SESSION

    value = payload.get("session_id")
    return value if isinstance(value, str) and SESSION.fullmatch(value) else None


def _engram(payload: dict[str, Any]) -> Any:
    from ..api import Engram

    return Engram(cwd=_cwd(payload))


def session_start(payload: dict[str, Any]) -> str:
    from ..base.display import md
    from ..base.errors import NoStoreError
    from ..domain.continuity import rehydrate
    from ..domain.continuity.service import AmbiguousResumeError

    with _engram(payload) as engram:
        try:
            budget = min(
                engram.settings()["resume.hook_tokens"], CONTEXT_CHARS // rehydrate.CHARS_PER_TOKEN
            )
            markdown = engram.resume(
                depth="brief", max_chars=CONTEXT_CHARS, max_tokens=budget
            ).markdown
        except NoStoreError:
            return ""
        except AmbiguousResumeError as exc:
            listing = "\n".join(
                f"- `{t.id}` {md(t.name)} ({t.status})" for t in exc.candidates[:20]
            )
            markdown = (
                "# Engram: several active tasks\n\nCall the `session_resume` tool with "
                f"`task` set to the one you work on:\n\n{listing}\n"
            )
    return json.dumps(
        {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": markdown}}
    )


def precompact(payload: dict[str, Any]) -> str:
    from ..base.errors import NoStoreError, UsageError

    with _engram(payload) as engram:
        try:
            active = engram.tasks()  # most recently changed first
        except NoStoreError:
            return ""
        if not active:
            return ""
        task = active[0]
        trigger = payload.get("trigger") if payload.get("trigger") in ("manual", "auto") else "auto"
        latest = (task.latest_checkpoint or {}).get("summary")
        note = f"saved before the context was compacted ({trigger})"
        summary = f"{latest} [{note}]" if latest else note[0].upper() + note[1:]
        try:
            captured = _captured(engram, task, payload)
        except Exception as exc:  # noqa: BLE001 (the checkpoint matters more than its extras)
            print(f"engram hook precompact: captured working set left out: {exc}", file=sys.stderr)
            captured = {}
        try:
            engram.handoff(task.id, summary=summary, reason="overflow", **captured)
        except UsageError as exc:  # what capture saw is refused: the checkpoint without it
            if not captured:
                raise
            print(f"engram hook precompact: captured working set left out: {exc}", file=sys.stderr)
            engram.handoff(task.id, summary=summary, reason="overflow")
    return ""


def _captured(engram: Any, task: Any, payload: dict[str, Any]) -> dict[str, list[str]]:
    """The working set this session's capture journal adds to the task's checkpoint."""
    from ..domain.capture.service import checkpoint_fields

    store = engram.workspace.find_task(task.id, items=False)[0]
    most = engram.workspace.checks(store).limit("limits.list_items")
    return checkpoint_fields(store, _session(payload), task.latest_checkpoint, most=most)


def capture(payload: dict[str, Any]) -> str:
    from ..domain.capture import events
    from ..domain.capture.service import hook_target, record

    record(hook_target(_cwd(payload)), [events.read(payload)])
    return ""


def prompt(payload: dict[str, Any]) -> str:
    from ..domain.capture.prompt import prompt_context
    from ..domain.workspace import Workspace

    text = payload.get("prompt")
    if not isinstance(text, str) or not text.strip():
        return ""
    workspace = Workspace(cwd=_cwd(payload))
    try:
        found = prompt_context(workspace, text, session=_session(payload))
    finally:
        workspace.close()
    if not found.text:
        return ""
    return json.dumps(
        {
            "hookSpecificOutput": {
                "hookEventName": "UserPromptSubmit",
                "additionalContext": found.text[:CONTEXT_CHARS],
            }
        }
    )


def session_end(payload: dict[str, Any]) -> str:
    from ..base.errors import EngramError, NoStoreError
    from ..storage import events as ev

    with _engram(payload) as engram:
        try:
            candidates = engram.sessions(states=["open"])
        except NoStoreError:
            return ""
        wanted = engram.session  # $ENGRAM_SESSION, checked (blank is none)
        if wanted:
            mine = [s for s in candidates if s.id == wanted]
        else:
            family = _ancestors(os.getpid())
            mine = [
                s
                for s in candidates
                if s.machine == ev.machine_name()
                and s.agent == "claude-code"
                and s.pid
                and _parent(s.pid) in family
            ]
        for session in mine:
            try:
                engram.session_end(session_id=session.id, how="exit")
            except EngramError as exc:
                print(f"engram: could not close session {session.id[:8]}: {exc}", file=sys.stderr)
    return ""


HOOKS: dict[str, Callable[[dict[str, Any]], str]] = {
    "session-start": session_start,
    "precompact": precompact,
    "session-end": session_end,
    "capture": capture,
    "prompt": prompt,
}


def _parent(pid: int) -> int | None:
    """The parent of a process, or None if it is gone (or this platform cannot tell)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[1])
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return None  # Linux, and the process is gone
    except (OSError, ValueError, IndexError):
        return None
    if sys.platform == "win32":
        return None
    try:
        done = subprocess.run(
            ["ps", "-o", "ppid=", "-p", str(pid)],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        return int(done.stdout.strip()) if done.returncode == 0 else None
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def _ancestors(pid: int, depth: int = 16) -> set[int]:
    """This process's ancestors: Claude Code is one of them, and the MCP server's parent."""
    found: set[int] = set()
    current: int | None = pid
    for _ in range(depth):
        current = _parent(current) if current else None
        if not current or current in found or current == 1:
            break
        found.add(current)
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] not in HOOKS:
        print(f"usage: python -m engram.hooks {{{','.join(HOOKS)}}}", file=sys.stderr)
        return 0
    try:
        raw = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
        payload = json.loads(raw) if raw.strip() else {}
        if not isinstance(payload, dict):
            payload = {}
    except (OSError, ValueError):
        payload = {}
    try:
        out = HOOKS[args[0]](payload)
    except Exception as exc:  # noqa: BLE001 (a hook must never block or break the client)
        print(f"engram hook {args[0]}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 0
    if out:
        sys.stdout.write(out + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
