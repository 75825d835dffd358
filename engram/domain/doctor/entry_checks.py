"""The doctor's check of the commands Engram installed: MCP servers in clients' configs, Claude
Code hooks and git hooks that still run `python -m engram…` from the working directory.

Such an entry (written by older versions) imports an `engram/` package or an `engram.py` from
the directory the client or git starts it in, so a cloned repository can run its own code
through it. Each is named with the command that rewrites it (`engram.base.entries` says how
entries run now). A project store's check reads the repository's own configs and hooks; the
user's configs go with the personal store (or with the project store when the personal one is
not examined).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...base import entries
from ...base.layout import CONFIG_FILE, EVENTS_DIR
from ...git.hooks import stale
from ...storage.store import Store
from .report import Finding, Host, flag

WHY = (
    "imports an `engram` package or `engram.py` from the directory it is started in, so a "
    "cloned repository could run its own code"
)


def check_entries(engram: Host, store: Store) -> list[Finding]:
    out = [
        Finding(
            "entries",
            "error",
            f"the git hook {path.name} runs `python -m engram.githooks` without -I: "
            f"git runs it at the top of the work tree, so it {WHY}",
            f"`engram hooks install {flag(store)}` rewrites it",
            path=str(path),
        )
        for path in stale(store)
    ]
    roots: list[tuple[Path, bool]] = []
    if store.kind == "project":
        roots.append((store.work_tree, True))
    if store.kind == "personal" or not _personal_examined(engram):
        roots.append((Path.home(), False))
    for root, project in roots:
        out += [
            Finding("entries", "error", f"{where} {WHY}", fix, path=str(path))
            for path, where, fix in _stale_entries(root, project=project)
        ]
    return out


def _personal_examined(engram: Host) -> bool:
    """Whether this doctor run examines the personal store too (as `stores_to_examine`)."""
    personal = engram.personal
    if engram.use == "project" or personal is None or not personal.root.is_dir():
        return False
    return any((personal.root / name).exists() for name in (CONFIG_FILE, EVENTS_DIR, ".git"))


def _stale_entries(root: Path, *, project: bool) -> Iterator[tuple[Path, str, str]]:
    """(file, what runs from the working directory, the fix) for every such entry in the
    client configs under `root` (the home directory, or a repository's top)."""
    scope = " --project" if project else ""
    configs = entries.PROJECT_CONFIGS if project else entries.USER_CONFIGS
    for client, rel in configs.items():
        path = root / rel
        data = _read(path)
        if data is None:
            continue
        table = "mcp_servers" if path.suffix == ".toml" else "mcpServers"
        for name, _entry in _servers(data.get(table)):
            option = "" if name == "engram" else f" --name {name}"
            yield (
                path,
                f"MCP server {name!r} runs `python -m engram` without -I, so it",
                f"`engram mcp install {client}{scope}{option}` rewrites it",
            )
        if client == "claude" and not project:
            projects = data.get("projects")
            for folder, settings in projects.items() if isinstance(projects, dict) else ():
                for name, _ in _servers(
                    settings.get("mcpServers") if isinstance(settings, dict) else None
                ):
                    yield (
                        path,
                        f"MCP server {name!r} of {folder} (local scope) runs "
                        "`python -m engram` without -I, so it",
                        f'put "-I" before "-m" in its args, or remove it (`claude mcp '
                        f"remove --scope local {name}` in {folder}) and use `engram mcp "
                        "install claude`",
                    )
    for rel in (entries.CLAUDE_SETTINGS, entries.CLAUDE_LOCAL_SETTINGS):
        path = root / rel
        data = _read(path)
        hooks = data.get("hooks") if data is not None else None
        events = [
            event
            for event, groups in (hooks.items() if isinstance(hooks, dict) else ())
            if any(entries.shell_runs_from_cwd(command) for command in _commands(groups))
        ]
        if events:
            yield (
                path,
                f"the Claude Code hook(s) {', '.join(events)} run `python -m "
                "engram.hooks` without -I: Claude Code runs them in the project, so they",
                f"`engram mcp install claude --hooks{scope}` rewrites Engram's hooks"
                if rel == entries.CLAUDE_SETTINGS
                else "put -I before -m in those commands (Engram writes its hooks to "
                f"{entries.CLAUDE_SETTINGS}: `engram mcp install claude --hooks{scope}`)",
            )


def _read(path: Path) -> dict[str, Any] | None:
    """A client's config file as data; None if it is missing or cannot be read (the
    installer reports that when it is run)."""
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _servers(table: object) -> Iterator[tuple[str, dict[str, Any]]]:
    """The MCP servers of a config's server table that run `python -m engram…` unprotected."""
    for name, entry in table.items() if isinstance(table, dict) else ():
        if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
            continue
        args = entry.get("args")
        words = (
            [entry["command"], *(a for a in args if isinstance(a, str))]
            if isinstance(args, list)
            else [entry["command"]]
        )
        env = entry.get("env") if isinstance(entry.get("env"), dict) else None
        if entries.runs_from_cwd(words, env):
            yield str(name), entry


def _commands(groups: object) -> Iterator[str]:
    """The commands of a Claude Code hook event's groups."""
    for group in groups if isinstance(groups, list) else ():
        hooks = group.get("hooks") if isinstance(group, dict) else None
        for hook in hooks if isinstance(hooks, list) else ():
            if isinstance(hook, dict) and isinstance(hook.get("command"), str):
                yield hook["command"]
