"""`engram serve` and `engram mcp ...`: the MCP server and client set-up, as click commands.

`register(main)` adds them to the `engram` group. This module imports only click: the MCP SDK
(seconds to import) loads when `engram serve` runs, never for `engram --help`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from ..base.display import echo

CLIENTS = ("claude", "cursor", "codex")
# The bounds of an HTTP server (engram.mcp.bounds, standard library only), as options.
HTTP_LIMITS = {
    "sessions": "--max-sessions",
    "client_sessions": "--client-sessions",
    "idle_minutes": "--session-idle-minutes",
    "header_seconds": "--header-timeout",
    "body_seconds": "--body-timeout",
    "body_bytes": "--max-body-bytes",
}


def _limit_options(command: Any) -> Any:
    from ..mcp.bounds import LIMITS

    for name, flag in reversed(HTTP_LIMITS.items()):
        limit = LIMITS[name]
        kind = (
            click.IntRange(int(limit.minimum), int(limit.maximum))
            if isinstance(limit.default, int)
            else click.FloatRange(limit.minimum, limit.maximum)
        )
        command = click.option(
            flag,
            name,
            default=limit.default,
            show_default=True,
            type=kind,
            help=f"With --http: {limit.help}.",
        )(command)
    return command


def _scopes(text: str | None) -> list[str] | None:
    if text is None:
        return None
    from_text = [s.strip() for s in text.replace(" ", ",").split(",") if s.strip()]
    known = ("memory:read", "memory:write", "session:write")
    unknown = [s for s in from_text if s not in known]
    if unknown:
        raise click.BadParameter(
            f"unknown scope(s) {', '.join(unknown)}; known: {', '.join(known)}",
            param_hint="--scopes",
        )
    return from_text


def _token(token_file: Path | None) -> tuple[str | None, str]:
    """The static bearer token, and where it came from (for errors)."""
    if token_file is not None:
        try:
            text = token_file.read_text(encoding="utf-8").strip().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "it is not valid UTF-8"
            raise click.BadParameter(
                f"cannot read {token_file}: {why}", param_hint="--token-file"
            ) from None
        if not text or not text[0].strip():
            raise click.BadParameter(f"{token_file} is empty", param_hint="--token-file")
        return text[0].strip(), f"the token in {token_file}"
    return os.environ.get("ENGRAM_MCP_TOKEN") or None, "ENGRAM_MCP_TOKEN"


@click.command()
@click.option(
    "--http",
    "use_http",
    is_flag=True,
    help="Serve streamable HTTP instead of stdio (stdio is what clients spawn).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind with --http; anything but loopback (127.0.0.0/8, ::1, "
    "localhost) requires a token.",
)
@click.option(
    "--port",
    default=8765,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port with --http (0: any free port, printed at start).",
)
@click.option(
    "--path",
    "http_path",
    default="/mcp",
    show_default=True,
    help="URL path of the MCP endpoint with --http.",
)
@click.option(
    "--agent",
    default=None,
    help="The agent tool for the session: claude-code, cursor, codex, cli or other "
    "(default: from the client's name).",
)
@click.option(
    "--actor",
    default=None,
    help="Who events are attributed to (default: the actor setting, ENGRAM_ACTOR, "
    "git user); with --http, verified tokens name their own.",
)
@click.option(
    "--scopes",
    default=None,
    metavar="LIST",
    help="Cap what callers may do: memory:read,memory:write,session:write (default: all).",
)
@click.option(
    "--token-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="With --http: require this bearer token (first line of the "
    "file; default: $ENGRAM_MCP_TOKEN), 32 characters or more.",
)
@click.option(
    "--oidc-issuer",
    default=None,
    metavar="URL",
    help="With --http: accept JWTs from this OIDC issuer (signature from its JWKS, "
    "issuer, expiry).",
)
@click.option("--oidc-audience", default=None, help="With --oidc-issuer: the required `aud`.")
@click.option(
    "--jwks-url",
    default=None,
    metavar="URL",
    help="With --oidc-issuer: the JWKS (default: from the issuer's "
    "/.well-known/openid-configuration).",
)
@_limit_options
@click.pass_context
def serve(
    ctx: click.Context,
    /,
    use_http: bool,
    host: str,
    port: int,
    http_path: str,
    agent: str | None,
    actor: str | None,
    scopes: str | None,
    token_file: Path | None,
    oidc_issuer: str | None,
    oidc_audience: str | None,
    jwks_url: str | None,
    **limits: Any,
) -> None:
    """Run the MCP server for agents (stdio by default; see docs/mcp.md)."""
    # `-C DIR` if given; else the server finds the client's project (docs/mcp.md)
    cwd = ctx.find_root().params.get("cwd")
    allowed = _scopes(scopes)
    if not use_http:
        if token_file or oidc_issuer:
            raise click.UsageError(
                "--token-file and --oidc-issuer apply to --http only; a "
                "stdio server belongs to the client that spawned it"
            )
        from ..mcp.server import serve_stdio

        ctx.exit(serve_stdio(cwd=cwd, agent=agent, actor=actor, scopes=allowed))
    from ..mcp.bounds import HttpBounds
    from ..mcp.http import http_auth, serve_http

    token, token_source = _token(token_file)
    auth = http_auth(
        token=token,
        actor=actor,
        scopes=allowed,
        oidc_issuer=oidc_issuer,
        oidc_audience=oidc_audience,
        jwks_url=jwks_url,
        base_url=f"http://{host}:{port}",
        token_source=token_source,
    )
    ctx.exit(
        serve_http(
            host=host,
            port=port,
            path=http_path,
            cwd=cwd,
            agent=agent,
            actor=actor,
            scopes=allowed,
            auth=auth,
            bounds=HttpBounds(**limits),
        )
    )


@click.group(name="mcp")
def mcp_group() -> None:
    """Connect agents (Claude Code, Cursor, Codex) to Engram's MCP server."""


@mcp_group.command(name="install")
@click.argument("client", type=click.Choice(CLIENTS))
@click.option(
    "--project",
    is_flag=True,
    help="Configure this repository (committed, shared) instead of your user config.",
)
@click.option(
    "--hooks",
    is_flag=True,
    help="Claude Code only: also install its hooks (SessionStart, PreCompact, "
    "SessionEnd; PostToolUse and PostToolUseFailure capture, UserPromptSubmit "
    "recall).",
)
@click.option(
    "--name", default="engram", show_default=True, help="The server's name in the client."
)
@click.option(
    "--approve",
    is_flag=True,
    help="Claude Code with --project: approve the project's server for you now (adds "
    "it to enabledMcpjsonServers in .claude/settings.local.json); on a terminal, "
    "you are asked.",
)
@click.option("--dry-run", is_flag=True, help="Print what would be written; change nothing.")
@click.pass_context
def mcp_install(
    ctx: click.Context,
    client: str,
    project: bool,
    hooks: bool,
    name: str,
    approve: bool,
    dry_run: bool,
) -> None:
    """Add Engram to CLIENT's MCP configuration, keeping everything else in it."""
    from ..base.config import find_work_tree
    from ..base.errors import EngramError
    from ..mcp.install import approved, claude_notes, install, not_on_path

    if hooks and client != "claude":
        raise click.UsageError("--hooks is for Claude Code (claude) only")
    cwd = Path((ctx.obj or {}).get("cwd") or Path.cwd())
    if (
        client == "claude"
        and project
        and not approve
        and not dry_run
        and sys.stdin.isatty()
        and sys.stdout.isatty()
    ):
        root = find_work_tree(cwd)
        if root is not None and not approved(root, name):
            approve = click.confirm(
                f"Approve the project server {name!r} for you now (Claude Code asks otherwise)?",
                default=True,
            )
    try:
        changes = install(
            client,
            project=project,
            hooks=hooks,
            name=name,
            cwd=cwd,
            dry_run=dry_run,
            approve=approve,
        )
        notes = (
            claude_notes(project=project, name=name, cwd=cwd)
            if client == "claude" and not dry_run
            else []
        )
    except EngramError as exc:
        echo(f"error: {exc}", err=True)
        ctx.exit(exc.exit_code)
    for change in changes:
        verb = "would write" if dry_run else ("updated" if change.existed else "created")
        echo(f"{verb} {change.path}: {change.what}")
        if dry_run:
            echo(change.text)
    unreachable = not_on_path(project=project)
    for note in [*notes, *([unreachable] if unreachable else [])]:
        echo(note, err=note.startswith("warning:"))
    if not dry_run:
        echo(_next_steps(client, find_work_tree(cwd) if project else None, changes))


def _next_steps(client: str, root: Path | None, changes: list[Any]) -> str:
    """The last line: how to connect, and in a project which files to commit and which not."""
    from ..mcp.install import LOCAL_SETTINGS

    restart = {
        "claude": "Restart Claude Code (or run /mcp) to connect.",
        "cursor": "Enable it in Cursor: Settings → MCP.",
        "codex": "Start a new Codex session to connect.",
    }[client]
    text = f"{restart} Add the block from `engram mcp instructions` to your AGENTS.md or CLAUDE.md."
    if root is None:
        return text
    shared = [
        c.path.relative_to(root).as_posix()
        for c in changes
        if c.path.is_relative_to(root)
        and ".git" not in c.path.relative_to(root).parts
        and c.path != root / LOCAL_SETTINGS
    ]
    if shared:
        text += f" Commit {' and '.join(shared)} so teammates get it"
    if client == "claude":
        text += (
            f"{';' if shared else ''} never commit {LOCAL_SETTINGS.as_posix()}: it holds "
            "your own approval, which Claude Code ignores once it is committed"
        )
    return text + "."


@mcp_group.command(name="instructions")
def mcp_instructions() -> None:
    """Print a short block for AGENTS.md / CLAUDE.md telling agents how to use Engram."""
    from ..mcp.install import AGENT_INSTRUCTIONS

    echo(AGENT_INSTRUCTIONS, nl=False)


@mcp_group.command(name="hook", hidden=True)
@click.argument(
    "event", type=click.Choice(["session-start", "precompact", "session-end", "capture", "prompt"])
)
def mcp_hook(event: str) -> None:
    """Run a Claude Code hook (what `engram mcp install claude --hooks --project` installs)."""
    from .hooks import main as run_hook

    sys.exit(run_hook([event]))


def register(main: click.Group) -> None:
    """Add `engram serve` and `engram mcp` to the `engram` command group."""
    main.add_command(serve)
    main.add_command(mcp_group)
