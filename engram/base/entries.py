"""How the commands Engram installs start it: by the console script's own path, or by this
Python with `-I`, never with the working directory first on the import path.

Clients start MCP servers and hooks in the project's directory, and git runs hooks at the top of
the work tree. `python -m engram` puts that directory first on `sys.path`, so a repository that
holds an `engram/` package or an `engram.py` would run its own code in place of Engram. So every
entry Engram writes (MCP configs, Claude Code hooks, git hooks, the refresh a git hook starts):

- runs the console script by its absolute path (Python puts the script's own folder first on the
  path, not the working directory); or
- runs this very Python with `-I` (isolated mode: no working directory, no `PYTHON*` variables,
  no user site-packages), or with `-P` (no working directory only) when this installation lives
  in the user's site-packages, which `-I` cannot import.

`runs_from_cwd` and `shell_runs_from_cwd` recognise the entries older versions wrote (`python -m
engram…` without `-I` or `-P`) so that the doctor names them and the installers replace them.
The files where clients keep their MCP servers are named here once, for the installer and the
doctor alike, and so is the whole of each entry Engram writes there (`server_entry`,
`hook_entry`): a repository's committed config decides what its client runs, so every key of
Engram's entry is Engram's, and the doctor names one that is not as written.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

# Where each client keeps its MCP servers: under the home directory (user scope) and under the
# repository's top (project scope). Claude Code's hooks live in its settings files.
USER_CONFIGS = {
    "claude": Path(".claude.json"),
    "cursor": Path(".cursor") / "mcp.json",
    "codex": Path(".codex") / "config.toml",
}
PROJECT_CONFIGS = {
    "claude": Path(".mcp.json"),
    "cursor": Path(".cursor") / "mcp.json",
    "codex": Path(".codex") / "config.toml",
}
CLAUDE_SETTINGS = Path(".claude") / "settings.json"
CLAUDE_LOCAL_SETTINGS = Path(".claude") / "settings.local.json"

# What each client is called when Engram's server is told who starts it (`serve --agent`).
AGENTS = {"claude": "claude-code", "cursor": "cursor", "codex": "codex"}
HOOK_TIMEOUT_SECONDS = 30

# Variables that change which program, or which Python code, a command runs: set by a project
# for the processes its client starts (`env` of `.claude/settings.json`), they would make
# Engram's own entries run the repository's code.
_RUN_VARIABLES = re.compile(r"PATH|PYTHON[A-Z_]*|LD_[A-Z_]+|DYLD_[A-Z_]+|BASH_ENV|ENV|VIRTUAL_ENV")


def server_entry(client: str, command: str, args: Sequence[str]) -> dict[str, object]:
    """Engram's MCP server entry for `client`, in full. Every key of it is Engram's: an
    installation writes exactly this, dropping whatever else the entry held (`env`, `cwd`,
    `envFile`, `url`, `headers`...), any of which a cloned repository could plant to change
    what the client runs."""
    entry: dict[str, object] = {"command": command, "args": list(args)}
    return {"type": "stdio", **entry} if client == "claude" else entry


def project_server_entry(client: str) -> dict[str, object]:
    """The entry `engram mcp install CLIENT --project` writes: `engram` on the PATH."""
    return server_entry(client, "engram", ["serve", "--agent", AGENTS[client]])


def hook_entry(command: str) -> dict[str, object]:
    """One of Engram's Claude Code hooks, in full (as `server_entry`)."""
    return {"type": "command", "command": command, "timeout": HOOK_TIMEOUT_SECONDS}


def hook_name(command: object) -> str | None:
    """The name of the Engram hook (`session-start`, `capture`...) a Claude Code hook's command
    runs, or None if it runs none."""
    if not isinstance(command, str):
        return None
    found = _HOOK.search(command)
    return found.group(1) if found else None


_HOOK = re.compile(r"(?:engram\.hooks|engram mcp hook) ([a-z][a-z-]*)")


def run_variables(env: object) -> list[str]:
    """The variables of a client's settings `env` that change what a command runs."""
    if not isinstance(env, Mapping):
        return []
    return sorted(str(k) for k in env if _RUN_VARIABLES.fullmatch(str(k)))


_PYTHON = re.compile(r"(?:python|pypy)[0-9.]*w?(?:\.exe)?|py(?:\.exe)?", re.IGNORECASE)
_MODULE = re.compile(r"engram(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_PACKAGE_INIT = Path(__file__).resolve().parent.parent / "__init__.py"


def console_script() -> Path | None:
    """The `engram` console script installed with this Python (beside it, as pip, pipx and uv
    put it in an environment), or None. `sys.executable` is not resolved: in a virtual
    environment it is a link to the base interpreter, whose folder holds no `engram`."""
    name = "engram.exe" if sys.platform == "win32" else "engram"
    script = Path(sys.executable).parent / name
    if script.is_file() and os.access(script, os.X_OK):
        return script
    return None


def startable(program: str) -> bool:
    """Whether an entry's program starts here: a path to an executable, or a name this PATH
    finds (`shutil.which`), as a client or git looks it up."""
    return shutil.which(program) is not None


def not_on_path_fix() -> str:
    """What puts `engram` on the PATH, where an entry runs it by name and the PATH lacks it
    (Engram installed in a virtual environment that is not activated, say)."""
    script = console_script()
    link = (
        f"link this installation's script into a folder on PATH (`ln -s {shlex.quote(str(script))} "
        "~/.local/bin/engram`)"
        if script is not None
        else "put the folder of Engram's `engram` script on PATH"
    )
    return (
        "activate the virtual environment Engram is installed in before you start the client, "
        f"install Engram with pipx (`pipx install engram`), or {link}"
    )


@functools.cache
def isolation_flag() -> str:
    """`-I` when this installation of Engram imports in isolated mode (asked of Python itself,
    once), else `-P` (an installation in the user's site-packages, which `-I` leaves out)."""
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", "import engram, sys; sys.stdout.write(engram.__file__)"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=Path(sys.prefix),
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return "-P"
    found = done.stdout.strip()
    if done.returncode == 0 and found and Path(found).resolve() == _PACKAGE_INIT:
        return "-I"
    return "-P"


def python_command(module: str, *args: str) -> list[str]:
    """This Python running `module` of Engram, with the working directory kept off its path."""
    return [sys.executable, isolation_flag(), "-m", module, *args]


def shell_command(module: str, *args: str) -> str:
    """`python_command` as one line for a shell (a git hook, a Claude Code hook)."""
    return shlex.join(python_command(module, *args))


def child_command(module: str, *args: str) -> list[str]:
    """`module` of Engram in a child of this process, kept from the working directory as this
    process is (no new check of how Python imports it)."""
    flag = "-I" if sys.flags.isolated else "-P"
    return [sys.executable, flag, "-m", module, *args]


# -- recognising entries that run from the working directory ----------------------------------


def runs_from_cwd(words: Sequence[str], env: Mapping[str, object] | None = None) -> bool:
    """Whether the command `words` (a program and its arguments, with `env` set for it) runs
    `python -m engram…` with the working directory first on the import path: no `-I` or `-P`
    before `-m`, and no `PYTHONSAFEPATH` set."""
    if env is not None and str(env.get("PYTHONSAFEPATH") or ""):
        return False
    safe_env = False
    for at, word in enumerate(words):
        if re.fullmatch(r"PYTHONSAFEPATH=.+", word):
            safe_env = True
        if (
            _PYTHON.fullmatch(Path(word).name)
            and _unsafe_module_run(words[at + 1 :])
            and not safe_env
        ):
            return True
    return False


def _unsafe_module_run(options: Sequence[str]) -> bool:
    """Whether the interpreter options `options` run an Engram module with `-m`, unprotected."""
    protected = False
    at = 0
    while at < len(options):
        word = options[at]
        if not word.startswith("-") or word == "-" or word.startswith("--"):
            return False  # a script, stdin or a long option: not `-m engram`
        if word in ("-W", "-X"):
            at += 2
            continue
        for index, flag in enumerate(word[1:], 1):
            if flag in "IP":
                protected = True
            elif flag == "m":
                module = word[index + 1 :] or (options[at + 1] if at + 1 < len(options) else "")
                return bool(_MODULE.fullmatch(module)) and not protected
            elif flag in "cWX":
                return False
        at += 1
    return False


def shell_runs_from_cwd(text: str) -> bool:
    """`runs_from_cwd` for each simple command of a shell line (a git hook's line, a Claude
    Code hook's command)."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:  # an unclosed quote: read it word by word
        words = text.split()
    command: list[str] = []
    for word in [*words, ";"]:
        if word and set(word) <= set(";&|()"):
            if runs_from_cwd(command):
                return True
            command = []
        else:
            command.append(word)
    return False
