"""`engram mcp install`: add Engram's MCP server to a client's own configuration.

Each client keeps its MCP servers in its own file and format:

| client | user scope | project scope (`--project`) |
|---|---|---|
| Claude Code | `~/.claude.json` (`mcpServers`) | `.mcp.json` at the repository root |
| Cursor | `~/.cursor/mcp.json` (`mcpServers`) | `.cursor/mcp.json` |
| Codex | `~/.codex/config.toml` (`[mcp_servers.<name>]`) | `.codex/config.toml` |

Installing merges: only Engram's own entry is added or replaced; everything else in the file
stays as it was. Engram's entry is written in full (`entries.server_entry`): every key of it is
Engram's, and whatever else it held (`env`, `cwd`, `envFile`, `url`, `headers`...) is dropped and
named, since a cloned repository could plant any of them to make the client run its own code
(`PYTHONPATH=.`, a `PATH` that finds its own `engram`). A file that cannot be read as its format
is refused, never overwritten. Claude Code's hooks (`--hooks`) go to its settings file,
`~/.claude/settings.json` or `.claude/settings.json`, merged the same way: each of Engram's hooks
is written in full, and an `env` there that changes what runs is warned about (`claude_notes`).

A user's entries run this installation by its console script's path, or by its Python with
`-I` (`engram.base.entries`): never a plain `python -m engram`, which would import an `engram`
package from the project directory the client starts it in. Installing rewrites Engram's
older entries (the server and, for Claude Code, hooks that ran `python -m engram.hooks`).

Claude Code asks each person to approve a project's servers (`.mcp.json`) before it starts them;
`--approve` records that approval for the person installing (only with the entry it has just
written in full, never one a repository wrote), as Claude Code does, in
`enabledMcpjsonServers` of `.claude/settings.local.json` (per person, and kept out of git in
`.git/info/exclude`: Claude Code stops honouring an approval that is committed). The
installer also says when Engram is configured for Claude Code in more than one scope (user,
local, project), which makes Claude Code warn and run the hooks twice (`claude_notes`).

TOML is written without a TOML writer (none is a dependency): `toml_table` removes Engram's
table from the text and appends it again, and the result must parse to exactly the old document
with only that table changed, or nothing is written.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base import entries
from ..base.config import find_work_tree
from ..base.errors import UsageError
from ..base.files import atomic_write
from ..base.vocab import one_of_message
from .toml_table import set_toml_table

AGENTS = entries.AGENTS
HOOKS = {
    "SessionStart": "session-start",
    "PreCompact": "precompact",
    "SessionEnd": "session-end",
    "PostToolUse": "capture",
    "PostToolUseFailure": "capture",
    "UserPromptSubmit": "prompt",
}
# The tools whose calls a hook is for (Claude Code's `matcher`); the others run for every call.
MATCHERS = {"PostToolUse": "Edit|Write|MultiEdit|NotebookEdit|Bash", "PostToolUseFailure": "Bash"}
HOOK_TIMEOUT_SECONDS = entries.HOOK_TIMEOUT_SECONDS

AGENT_INSTRUCTIONS = """\
## Memory and continuity (Engram)

This project uses Engram (MCP server `engram`) as durable memory shared across sessions, agents
and machines.

- At the start of a session, call `session_resume` (pass `task` if several tasks are active).
- Before deciding or exploring, `memory_recall` what may already be known.
- `memory_remember` what stays true: decisions and why, the user's preferences, conventions,
  gotchas, failures and their causes. Cite code facts with `discovery_record`.
- Track multi-step work with `task_create`, `task_progress` and `task_failure`.
- Before you stop or when your context is nearly full, call `session_handoff` with a one-line
  summary, the next steps in order, what must not be redone and what must be preserved.
- Never store secrets.
"""


@dataclass(frozen=True)
class Change:
    path: Path
    what: str
    existed: bool
    text: str


def install(
    client: str,
    *,
    project: bool = False,
    hooks: bool = False,
    name: str = "engram",
    cwd: Path | None = None,
    home: Path | None = None,
    dry_run: bool = False,
    approve: bool = False,
) -> list[Change]:
    """Write (or, with dry_run, only compute) the client's configuration for Engram; with
    `approve` (Claude Code, project scope), also approve the project's server for this user."""
    if client not in AGENTS:
        raise UsageError(one_of_message("client", client, tuple(AGENTS)))
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
        raise UsageError("a server name is 1-64 letters, digits, '_' or '-'")
    if hooks and client != "claude":
        raise UsageError("hooks are installed for Claude Code (claude) only")
    if approve and not (client == "claude" and project):
        raise UsageError(
            "--approve is for Claude Code's project servers: use it with "
            "`engram mcp install claude --project`"
        )
    home = home or Path.home()
    root = _project_root(cwd or Path.cwd()) if project else None
    command, args = server_command(project=project, agent=AGENTS[client])
    changes = []
    path = (root / entries.PROJECT_CONFIGS[client]) if root else home / entries.USER_CONFIGS[client]
    write_server = _toml_server if client == "codex" else _json_server
    changes.append(write_server(path, name, entries.server_entry(client, command, args)))
    settings = (root or home) / entries.CLAUDE_SETTINGS
    if hooks or (client == "claude" and _stale_hooks(settings)):
        # Hooks an older version wrote run from the working directory: those are rewritten
        # with the server, --hooks or not (without it, none is added).
        changes.append(_claude_hooks(settings, project=project, add=hooks))
    if approve and root is not None:
        _approvable(root / entries.CLAUDE_SETTINGS)
        changes.append(_approval(root / LOCAL_SETTINGS, name))
    if client == "claude" and root is not None and (approve or (root / LOCAL_SETTINGS).exists()):
        kept_out = _excluded(root)
        if kept_out is not None:
            changes.append(kept_out)
    if not dry_run:
        for change in changes:
            _write(change.path, change.text)
    return changes


# -- Claude Code: approval and scopes -----------------------------------------------------------

LOCAL_SETTINGS = entries.CLAUDE_LOCAL_SETTINGS


def _approval(path: Path, name: str) -> Change:
    """This user's approval of the project server `name`: listed in `enabledMcpjsonServers`
    (and no longer in `disabledMcpjsonServers`) of `.claude/settings.local.json`."""
    data, existed = _read_json(path)
    for key in ("enabledMcpjsonServers", "disabledMcpjsonServers"):
        if not isinstance(data.get(key, []), list):
            raise UsageError(f"{path}: {key} is not a list; fix it by hand")
    enabled = data.setdefault("enabledMcpjsonServers", [])
    already = name in enabled
    if not already:
        enabled.append(name)
    if name in data.get("disabledMcpjsonServers", []):
        data["disabledMcpjsonServers"] = [n for n in data["disabledMcpjsonServers"] if n != name]
        already = False
    what = f"project MCP server {name!r} " + (
        "already approved for you" if already else "approved for you"
    )
    return Change(path, what, existed, _dump_json(data))


def _git_text(root: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(
            ["git", "-C", str(root), *args], check=False, capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def _excluded(root: Path) -> Change | None:
    """`.claude/settings.local.json` added to the repository's own `.git/info/exclude` (never
    committed, unlike .gitignore), so that a plain `git add -A` never commits this person's
    approval, which Claude Code then stops honouring. None when git already ignores the file,
    tracks it (a note says how to stop), or cannot tell."""
    local = root / LOCAL_SETTINGS
    if git_ignored(root, local) is not False or tracked(root, local) is not False:
        return None
    done = _git_text(root, "rev-parse", "--git-path", "info/exclude")
    if done is None or done.returncode != 0 or not done.stdout.strip():
        return None
    path = Path(done.stdout.strip())
    path = path if path.is_absolute() else root / path
    existed = path.exists()
    text = _read_text(path) if existed else ""
    line = "/" + LOCAL_SETTINGS.as_posix()
    text += (
        ("" if not text or text.endswith("\n") else "\n")
        + "# your own Claude Code approvals (engram mcp install)\n"
        + line
        + "\n"
    )
    return Change(
        path, f"{LOCAL_SETTINGS} kept out of git (your approval stays yours)", existed, text
    )


def tracked(root: Path, path: Path) -> bool | None:
    """Whether git tracks `path` in the work tree `root` (None if git cannot tell)."""
    done = _git_text(root, "ls-files", "--error-unmatch", "--", str(path.relative_to(root)))
    if done is None:
        return None
    return done.returncode == 0


def approved(root: Path, name: str) -> bool:
    """Whether this user has approved the project server `name` for Claude Code."""
    try:
        data, _ = _read_json(root / LOCAL_SETTINGS)
    except UsageError:
        return False
    enabled = data.get("enabledMcpjsonServers")
    return data.get("enableAllProjectMcpServers") is True or (
        isinstance(enabled, list) and name in enabled
    )


def git_ignored(root: Path, path: Path) -> bool | None:
    """Whether git ignores `path` in the work tree `root` (None if git cannot tell)."""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "check-ignore", "-q", "--", str(path.relative_to(root))],
            check=False,
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    return {0: True, 1: False}.get(done.returncode)


def claude_scopes(name: str, *, home: Path, root: Path | None) -> dict[str, Path]:
    """Where Engram's server `name` is configured for Claude Code: `user` (~/.claude.json),
    `local` (~/.claude.json, this project's entry) and `project` (.mcp.json)."""
    found: dict[str, Path] = {}
    user_file = home / ".claude.json"
    try:
        user, _ = _read_json(user_file)
    except UsageError:
        user = {}
    if isinstance(user.get("mcpServers"), dict) and name in user["mcpServers"]:
        found["user"] = user_file
    projects = user.get("projects")
    if root is not None and isinstance(projects, dict):
        entry = projects.get(str(root)) or projects.get(str(root.resolve()))
        if (
            isinstance(entry, dict)
            and isinstance(entry.get("mcpServers"), dict)
            and name in entry["mcpServers"]
        ):
            found["local"] = user_file
    if root is not None:
        try:
            shared, _ = _read_json(root / ".mcp.json")
        except UsageError:
            shared = {}
        if isinstance(shared.get("mcpServers"), dict) and name in shared["mcpServers"]:
            found["project"] = root / ".mcp.json"
    return found


def _our_hooks(path: Path) -> list[str]:
    """The commands of Engram's hooks in the Claude Code settings file at `path`."""
    try:
        data, _ = _read_json(path)
    except UsageError:
        return []
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return []
    found = []
    for event, name in HOOKS.items():
        groups = hooks.get(event)
        for group in groups if isinstance(groups, list) else []:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                found += [
                    h["command"]
                    for h in group["hooks"]
                    if isinstance(h, dict) and _is_ours(h.get("command"), name)
                ]
    return found


def _has_hooks(path: Path) -> bool:
    """Whether the Claude Code settings file at `path` holds Engram's hooks."""
    return bool(_our_hooks(path))


def _stale_hooks(path: Path) -> bool:
    """Whether Engram's hooks in `path` run `python -m engram.hooks` from the working
    directory (as older versions wrote them)."""
    return any(entries.shell_runs_from_cwd(command) for command in _our_hooks(path))


def claude_notes(
    *, project: bool, name: str = "engram", cwd: Path | None = None, home: Path | None = None
) -> list[str]:
    """What the person installing for Claude Code should know: a project server waits for
    their approval; Engram configured in two scopes at once."""
    home = home or Path.home()
    root = find_work_tree(cwd or Path.cwd())
    notes = []
    if project and root is not None:
        local = root / LOCAL_SETTINGS
        if approved(root, name):
            if tracked(root, local):
                notes.append(
                    f"note: {local} is committed; it holds your own approvals, which "
                    "Claude Code ignores in a committed file: stop tracking it with "
                    f"`git rm --cached {LOCAL_SETTINGS}` and commit that"
                )
            elif git_ignored(root, local) is False:
                notes.append(
                    f"note: {local} is not ignored by git; it holds your own "
                    "approvals and settings: add `.claude/settings.local.json` to "
                    ".gitignore rather than commit it"
                )
        else:
            notes.append(
                f'Claude Code shows {name!r} as "Pending approval" until you approve '
                "it: answer its prompt, or run this again with --approve"
            )
    scopes = claude_scopes(name, home=home, root=root)
    if len(scopes) > 1:
        listed = " and ".join(f"{scope} ({path})" for scope, path in scopes.items())
        keep = "project" if "project" in scopes else "local"
        how = " and ".join(f"`claude mcp remove --scope {s} {name}`" for s in scopes if s != keep)
        notes.append(
            f"warning: {name!r} is configured for Claude Code in {listed}: Claude Code "
            f"warns about the conflict. Keep the {keep} entry (it is this "
            f"repository's) and remove the other: {how}"
        )
    if root is not None:
        notes += _env_notes(root / entries.CLAUDE_SETTINGS)
    user_hooks = home / ".claude" / "settings.json"
    if (
        root is not None
        and _has_hooks(user_hooks)
        and _has_hooks(root / ".claude" / "settings.json")
    ):
        notes.append(
            f"warning: Engram's hooks are in both {user_hooks} and "
            f"{root / '.claude' / 'settings.json'}, so they run twice in this project; "
            f"keep the project's and remove them from {user_hooks}"
        )
    return notes


def _approvable(settings: Path) -> None:
    """Refuses (before anything is written) to approve a server that Claude Code would start
    with a variable the project's settings set to change what it runs (`PYTHONPATH=.`)."""
    found = _run_variables(settings)
    if found:
        raise UsageError(
            f"{settings} sets {', '.join(found)} in `env` for every command Claude Code runs, "
            "so Engram's server would run this repository's code: nothing was changed; "
            "remove them from its `env`, then run this again"
        )


def _env_notes(settings: Path) -> list[str]:
    """A warning when the project's Claude Code settings set such a variable."""
    found = _run_variables(settings)
    if not found:
        return []
    return [
        f"warning: {settings} sets {', '.join(found)} in `env` for every command Claude Code "
        "runs, Engram's server and hooks included, so they could run this repository's code: "
        "remove them from its `env` (and commit that)"
    ]


def _run_variables(settings: Path) -> list[str]:
    """The variables a Claude Code settings file sets in `env`, for every command Claude Code
    runs (Engram's server and hooks too), that change what runs (`entries.run_variables`)."""
    try:
        data, _ = _read_json(settings)
    except UsageError:
        return []
    return entries.run_variables(data.get("env"))


def _project_root(cwd: Path) -> Path:
    top = find_work_tree(cwd)
    if top is None:
        raise UsageError(
            f"{cwd} is not inside a git repository; run this in the project, or "
            "drop --project to configure your user settings"
        )
    return top


def server_command(*, project: bool, agent: str) -> tuple[str, list[str]]:
    """How the client starts the server. A project's config is shared, so it names `engram`
    on the PATH; a user's config names this very installation: its console script by its path,
    or its Python with -I (never a plain `python -m`, which would import an `engram` package
    from the project the client starts it in; see `engram.base.entries`)."""
    args = ["serve", "--agent", agent]
    if project:
        return "engram", args
    script = entries.console_script()
    if script is not None:
        return str(script), args
    command = entries.python_command("engram", *args)
    return command[0], command[1:]


def not_on_path(*, project: bool) -> str | None:
    """A warning when a project's config runs `engram` by name (`server_command`) and this
    PATH does not find it: the client would fail to start the server and the hooks."""
    if not project or entries.startable("engram"):
        return None
    return (
        "warning: `engram` is not on PATH here, and a project's config runs it by name (it is "
        "shared, so it names no path of this machine), so the client cannot start the server "
        f"or its hooks: {entries.not_on_path_fix()}"
    )


def hook_command(event: str, *, project: bool) -> str:
    """The command of a Claude Code hook: `engram` on the PATH in a project's settings, this
    installation's Python with -I in a user's."""
    if project:
        return f"engram mcp hook {event}"
    return entries.shell_command("engram.hooks", event)


# -- JSON ---------------------------------------------------------------------------------------


def _read_json(path: Path) -> tuple[dict[str, Any], bool]:
    if not path.exists():
        return {}, False
    text = _read_text(path)
    if not text.strip():
        return {}, True
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{path} is not valid JSON (line {exc.lineno}: {exc.msg}); fix it or "
            "move it away, then run this again"
        ) from None
    except RecursionError:
        raise UsageError(
            f"{path} is nested too deeply to read; fix it or move it away, then run this again"
        ) from None
    if not isinstance(data, dict):
        raise UsageError(f"{path} does not hold a JSON object; fix it or move it away")
    return data, True


def _dump_json(data: Mapping[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _json_server(path: Path, name: str, entry: dict[str, Any]) -> Change:
    data, existed = _read_json(path)
    servers = data.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise UsageError(f"{path}: mcpServers is not an object; fix it by hand")
    old = servers.get(name)
    servers[name] = dict(entry)
    what = f"MCP server {name!r} " + ("updated" if old is not None else "added")
    return Change(path, what + _dropped(old, entry), existed, _dump_json(data))


def _dropped(old: object, entry: Mapping[str, Any]) -> str:
    """What writing `entry` in full drops of the entry it replaces, said in one clause."""
    keys = sorted(str(k) for k in old if k not in entry) if isinstance(old, dict) else []
    return f"; dropped {', '.join(keys)} (Engram writes its entry in full)" if keys else ""


def _claude_hooks(path: Path, *, project: bool, add: bool = True) -> Change:
    """Engram's hooks in the settings file: updated where they are, and (with `add`) added
    for the events that have none."""
    data, existed = _read_json(path)
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise UsageError(f"{path}: hooks is not an object; fix it by hand")
    dropped: set[str] = set()
    replaced = 0  # commands of Engram's hooks that were not the one it writes
    for event, name in HOOKS.items():
        command = hook_command(name, project=project)
        groups = hooks.setdefault(event, []) if add else hooks.get(event, [])
        if not isinstance(groups, list):
            raise UsageError(f"{path}: hooks.{event} is not a list; fix it by hand")
        ours = [
            h
            for g in groups
            if isinstance(g, dict)
            for h in g.get("hooks") or []
            if isinstance(h, dict) and _is_ours(h.get("command"), name)
        ]
        if ours:
            for hook in ours:  # in full: a key or a command around ours is not kept
                dropped |= {str(k) for k in hook if k not in entries.hook_entry(command)}
                replaced += hook.get("command") != command
                hook.clear()
                hook.update(entries.hook_entry(command))
        elif add:
            matcher = {"matcher": MATCHERS[event]} if event in MATCHERS else {}
            groups.append({**matcher, "hooks": [entries.hook_entry(command)]})
    what = (
        f"Claude Code hooks {', '.join(HOOKS)}"
        if add
        else "Engram's Claude Code hooks rewritten (they ran `python -m engram.hooks` without -I)"
    )
    changed = [f"dropped {', '.join(sorted(dropped))}"] if dropped else []
    changed += [f"replaced {replaced} other command(s)"] if replaced and add else []
    if changed:
        what += f"; Engram's hooks written in full ({'; '.join(changed)})"
    return Change(path, what, existed, _dump_json(data))


def _is_ours(command: Any, name: str) -> bool:
    return entries.hook_name(command) == name


# -- TOML ---------------------------------------------------------------------------------------


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(
            f"{path} is not valid UTF-8; fix it or move it away, then run this again"
        ) from None


def _toml_server(path: Path, name: str, entry: dict[str, Any]) -> Change:
    existed = path.exists()
    text = _read_text(path) if existed else ""
    try:
        before = tomllib.loads(text)
    except RecursionError:
        raise UsageError(
            f"{path} is nested too deeply to read; fix it or move it away, then run this again"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(
            f"{path} is not valid TOML ({exc}); fix it or move it away, then run this again"
        ) from None
    servers = before.get("mcp_servers", {})
    if not isinstance(servers, dict):
        raise UsageError(f"{path}: mcp_servers is not a table; fix it by hand")
    old = servers.get(name)
    new_text = set_toml_table(text, ("mcp_servers", name), entry, where=path)
    what = f"MCP server {name!r} " + ("updated" if old is not None else "added")
    return Change(path, what + _dropped(old, entry), existed, new_text)


# -- writing -------------------------------------------------------------------------------------


def _write(path: Path, text: str) -> None:
    """Replace the file atomically, keeping its permissions (~/.claude.json is private)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else None
    atomic_write(
        path,
        text,
        durable=False,
        mode=mode,
        temp=path.with_name(f".{path.name}.engram-{os.getpid()}.tmp"),
    )
