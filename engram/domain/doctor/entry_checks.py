"""The doctor's check of the commands Engram installed: MCP servers in clients' configs, Claude
Code hooks and git hooks that still run `python -m engram…` from the working directory, or whose
program cannot be started here, and Engram's entries in a project's configs that are not as
Engram writes them.

Such an entry (written by older versions) imports an `engram/` package or an `engram.py` from
the directory the client or git starts it in, so a cloned repository can run its own code
through it. Each is named with the command that rewrites it (`engram.base.entries` says how
entries run now). An entry whose program this PATH does not find (a project's config runs
`engram` by name; a user's runs an installation by its path, which may have moved since) leaves
the client unable to start the server or the hooks: a warning that says how to put `engram` on
the PATH, or which command writes the entry again. A project store's check reads the
repository's own configs and hooks; the user's configs go with the personal store (or with the
project store when the personal one is not examined).

A project's configs are committed, so a teammate's push (or the repository cloned) can change
Engram's entry after it was installed: add an `env` with `PYTHONPATH=.`, a `cwd`, another
command. Each of Engram's entries there must be exactly what `engram mcp install … --project`
writes (`engram.base.entries.server_entry`, `hook_entry`), and the project's Claude Code
settings must not set, for every command Claude Code runs, a variable that changes what runs.
"""

from __future__ import annotations

import json
import re
import shlex
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
        out += [
            Finding("entries", "warning", what, fix, path=str(path))
            for path, what, fix in _unstartable(root, project=project)
        ]
    if store.kind == "project":
        out += [
            Finding("entries", "error", message, fix, path=str(path))
            for path, message, fix in _changed_entries(store.work_tree)
        ]
    return out


CHANGED = (
    "its client runs what the entry says, and a push can change it to run the repository's own code"
)


def _changed_entries(root: Path) -> Iterator[tuple[Path, str, str]]:
    """(file, what differs and why it matters, the fix) for each of Engram's entries in the
    repository `root`'s configs that is not exactly what `engram mcp install … --project`
    writes (those that run `python -m engram` unprotected are named by `_stale_entries`), and
    for an `env` in its Claude Code settings that changes what they run."""
    for client, rel in entries.PROJECT_CONFIGS.items():
        path = root / rel
        data = _read(path)
        if data is None:
            continue
        table = data.get("mcp_servers" if path.suffix == ".toml" else "mcpServers")
        stale = {name for name, _ in _servers(table)}
        expected = entries.project_server_entry(client)
        for name, entry in table.items() if isinstance(table, dict) else ():
            if name in stale or entry == expected or not _engram_server(name, entry):
                continue
            option = "" if name == "engram" else f" --name {name}"
            yield (
                path,
                f"MCP server {name!r} is not as Engram writes it "
                f"({_difference(entry, expected)}): {CHANGED}",
                f"`engram mcp install {client} --project{option}` writes it again in full; "
                "then commit it",
            )
    path = root / entries.CLAUDE_SETTINGS
    data = _read(path)
    if data is None:
        return
    hooks = data.get("hooks")
    changed = sorted(
        {
            f"{event} ({_difference(hook, entries.hook_entry(f'engram mcp hook {name}'))})"
            for event, groups in (hooks.items() if isinstance(hooks, dict) else ())
            for hook in _hooks(groups)
            if (name := entries.hook_name(hook.get("command")))
            and not entries.shell_runs_from_cwd(str(hook.get("command")))
            and hook != entries.hook_entry(f"engram mcp hook {name}")
        }
    )
    if changed:
        yield (
            path,
            f"Engram's Claude Code hook(s) {', '.join(changed)} are not as Engram writes "
            f"them: {CHANGED}",
            "`engram mcp install claude --hooks --project` writes them again in full; "
            "then commit it",
        )
    variables = entries.run_variables(data.get("env"))
    if variables:
        yield (
            path,
            f"its `env` sets {', '.join(variables)} for every command Claude Code runs, "
            "Engram's server and hooks included, which could make them run the repository's "
            "own code",
            f"remove {', '.join(variables)} from `env` in {entries.CLAUDE_SETTINGS} and "
            "commit that",
        )


def _engram_server(name: str, entry: object) -> bool:
    """Whether a server entry is Engram's: named `engram`, or running `engram serve`."""
    if name == "engram":
        return True
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
        return False
    args = entry.get("args")
    return Path(entry["command"]).name in ("engram", "engram.exe") and (
        isinstance(args, list) and args[:1] == ["serve"]
    )


def _difference(entry: object, expected: dict[str, object]) -> str:
    """How an entry differs from the one Engram writes, in a few words."""
    if not isinstance(entry, dict):
        return "not an object"
    extra = sorted(str(k) for k in entry if k not in expected)
    other = sorted(k for k in expected if k in entry and entry[k] != expected[k])
    missing = sorted(k for k in expected if k not in entry)
    parts = [f"{', '.join(extra)} added"] if extra else []
    parts += [f"{', '.join(other)} changed"] if other else []
    parts += [f"{', '.join(missing)} missing"] if missing else []
    return "; ".join(parts)


def _unstartable(root: Path, *, project: bool) -> Iterator[tuple[Path, str, str]]:
    """(file, what cannot start, the fix) for each of Engram's servers and Claude Code hooks
    under `root` whose program this PATH does not find: a project's config runs `engram` by
    name, a user's runs an installation by its path, which may have moved since."""
    scope = " --project" if project else ""
    configs = entries.PROJECT_CONFIGS if project else entries.USER_CONFIGS
    for client, rel in configs.items():
        path = root / rel
        data = _read(path) or {}
        table = data.get("mcp_servers" if path.suffix == ".toml" else "mcpServers")
        for name, entry in table.items() if isinstance(table, dict) else ():
            words = _words(entry)
            if words and _runs_engram(words) and not entries.startable(words[0]):
                option = "" if name == "engram" else f" --name {name}"
                yield (
                    path,
                    *_not_found(f"MCP server {name!r} runs", words[0], client, scope + option),
                )
    for rel in (entries.CLAUDE_SETTINGS, entries.CLAUDE_LOCAL_SETTINGS):
        path = root / rel
        data = _read(path) or {}
        hooks = data.get("hooks")
        missing = sorted(
            {
                words[0]
                for groups in (hooks.values() if isinstance(hooks, dict) else ())
                for command in _commands(groups)
                for words in [_shell_words(command)]
                if words and _runs_engram(words) and not entries.startable(words[0])
            }
        )
        for program in missing:
            yield (
                path,
                *_not_found(
                    "Engram's Claude Code hooks run", program, "claude", " --hooks" + scope
                ),
            )


def _not_found(what: str, program: str, client: str, options: str) -> tuple[str, str]:
    """The message and fix for an entry (`what` says what runs) whose program cannot be
    started here."""
    if Path(program).name == program:
        return (
            f"{what} `{program}` by name, which is not on PATH here: the client cannot start it",
            entries.not_on_path_fix(),
        )
    return (
        f"{what} {program}, which is not there any more (Engram moved or was removed): "
        "the client cannot start it",
        f"`engram mcp install {client}{options}` from the installation to use rewrites it",
    )


def _words(entry: object) -> list[str]:
    """An MCP server entry's program and arguments."""
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
        return []
    args = entry.get("args")
    return (
        [entry["command"], *(a for a in args if isinstance(a, str))]
        if isinstance(args, list)
        else [entry["command"]]
    )


def _shell_words(command: str) -> list[str]:
    """A hook's shell command as words, from its program on (variables set before it left out)."""
    try:
        words = shlex.split(command)
    except ValueError:  # an unclosed quote: read it word by word
        words = command.split()
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        words = words[1:]
    return words


def _runs_engram(words: list[str]) -> bool:
    """Whether a command runs Engram: its `engram` script, or a Python with `-m engram…`."""
    name = Path(words[0]).name
    return name in ("engram", "engram.exe") or any(
        re.fullmatch(r"engram(\.hooks)?", word) and words[at - 1].endswith("m")
        for at, word in enumerate(words[1:], 1)
    )


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
        words = _words(entry)
        if not words or not isinstance(entry, dict):
            continue
        env = entry.get("env") if isinstance(entry.get("env"), dict) else None
        if entries.runs_from_cwd(words, env):
            yield str(name), entry


def _hooks(groups: object) -> Iterator[dict[str, Any]]:
    """The hooks of a Claude Code hook event's groups."""
    for group in groups if isinstance(groups, list) else ():
        hooks = group.get("hooks") if isinstance(group, dict) else None
        for hook in hooks if isinstance(hooks, list) else ():
            if isinstance(hook, dict):
                yield hook


def _commands(groups: object) -> Iterator[str]:
    """The commands of a Claude Code hook event's groups."""
    for hook in _hooks(groups):
        if isinstance(hook.get("command"), str):
            yield hook["command"]
