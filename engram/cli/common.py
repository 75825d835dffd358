"""What every `engram` command shares: the group class, the store and output options, the facade.

`open_engram` opens `engram.api.Engram` for a command (closed, and due batches committed, when
the command ends); `EngramGroup` turns library errors into one line on stderr and their exit
status; `print_json` prints `--json` output.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click
import orjson

from ..base import classcode
from ..base.display import echo, visible_json
from ..base.errors import EngramError

if TYPE_CHECKING:
    from ..domain.workspace import Use

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


# -- plumbing ---------------------------------------------------------------------------------

# click 8.2 and later raise this for a group given no command; 8.1 prints the help itself.
_NO_ARGS_IS_HELP: type[click.UsageError] = getattr(
    click.exceptions, "NoArgsIsHelpError", type("_NeverRaised", (click.UsageError,), {})
)


class EngramGroup(click.Group):
    def main(
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Like click's, but a usage error is one line on stderr too (exit status 2). A group
        run without a command (click's `NoArgsIsHelpError`, whose message is the help) shows
        the help as click does: folded to one line it could not be read."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except _NO_ARGS_IS_HELP as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            message = " ".join(exc.format_message().split())
            if isinstance(exc, click.UsageError) and exc.ctx is not None:
                message += f" (see `{exc.ctx.command_path} --help`)"
            echo(f"error: {message}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) and not isinstance(code, bool) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except EngramError as exc:
            _flush_warnings(ctx)
            echo(f"error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        finally:
            _flush_warnings(ctx)


def end_process(code: object) -> None:
    """End the `engram` process with exit status `code` (what `SystemExit` carries), without
    the interpreter's teardown when that is safe: the command has returned, so every write is
    fsynced, due batches are committed and the stores are closed (`open_engram`); what is left
    is freeing memory and unloading modules, which costs more than many commands' work.

    Output is flushed first; if it cannot be (a closed pipe), or another thread still runs, or
    the MCP server ran in this process, Python ends as usual. Only the console script calls
    this: a library user or a test calling `main` keeps its interpreter."""
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # a message: Python prints it and exits with 1
        echo(str(code), err=True)
        status = 1
    if threading.active_count() == 1 and not any(
        name in sys.modules for name in ("engram.mcp.server", "engram.mcp.http")
    ):
        classcode.save()  # what `atexit` would have written
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        else:
            os._exit(status)
    sys.exit(status)


def _flush_warnings(ctx: click.Context) -> None:
    engram = ctx.meta.get("engram")
    if engram is None:
        return
    for warning in engram.warnings:
        echo(f"warning: {warning}", err=True)
    engram.warnings.clear()


def open_engram(
    ctx: click.Context, project: bool = False, personal: bool = False, at: str | None = None
) -> Any:
    from ..api import Engram

    if project and personal:
        raise click.UsageError("--project and --personal cannot be used together")
    use: Use = "project" if project else "personal" if personal else "both"
    engram = Engram(cwd=ctx.obj["cwd"], use=use)
    ctx.meta["engram"] = engram
    ctx.call_on_close(engram.close)
    # Before closing (callbacks run last first): a batch that fell due while this command ran
    # is committed now rather than whenever the next write comes.
    ctx.call_on_close(engram.commit_due)
    # A committed config.yaml that is left out (not YAML, out of range) is said by every
    # command, also by those that read no setting.
    engram.settings()
    if at is not None:
        engram, where = engram.at(at)
        ctx.meta["engram"] = engram
        ctx.call_on_close(engram.close)
        for line in where:
            echo(f"as of: {line}", err=True)
    return engram


def at_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--at",
        "at",
        default=None,
        metavar="REV",
        help="As the stores were at a commit, tag, branch or date (2026-11-30, 3d), from git "
        "history alone; nothing is written.",
    )(func)


def store_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option(
        "--personal", is_flag=True, help="Only the personal store (~/.engram or ENGRAM_HOME)."
    )(func)
    func = click.option(
        "--project", is_flag=True, help="Only the project store (.engram/ in this git repository)."
    )(func)
    return func


def json_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(func)


def print_json(value: Any) -> None:
    """JSON for scripts, with bidi and other format characters as `\\u` escapes (the same
    values once parsed)."""
    click.echo(
        visible_json(
            orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()
        )
    )


def read_text(text: str) -> str:
    """TEXT, or all of stdin for `-`. Bytes that are not UTF-8 stay visible to the checks."""
    if text != "-":
        return text
    return sys.stdin.buffer.read().decode("utf-8", "surrogateescape")


def task_choice(command: Callable[..., Any]) -> Callable[..., Any]:
    """The task a command is about, as `TASK` or as `--task TASK`: every command that takes one
    accepts both, so none has to be remembered."""
    command = click.option(
        "--task",
        "task_option",
        metavar="TASK",
        default=None,
        help="The task (id or name); the same as giving TASK.",
    )(command)
    return click.argument("task_argument", metavar="[TASK]", required=False)(command)


def task_of(task_argument: str | None, task_option: str | None, command: str) -> str:
    if task_argument is not None and task_option is not None and task_argument != task_option:
        raise click.UsageError(
            f"two tasks given ({task_argument!r} and {task_option!r}); "
            "give one, as TASK or --task TASK"
        )
    task = task_argument if task_argument is not None else task_option
    if task is None:
        raise click.UsageError(
            f"which task? `engram {command} TASK` (an id or name; `engram task list` lists them)"
        )
    return task
