"""The `engram` command: thin click commands over `engram.api.Engram`.

Library errors become one line on stderr and their exit status (2 for bad input). `--json` on
every read command prints a JSON document for scripts; otherwise output is for people.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import orjson

from .. import __version__
from .mcp import register as register_mcp
from .sync import register as register_sync
from ..base.display import echo, local_time, visible_json
from ..base.errors import EngramError
from ..search.neardup import describe as describe_differences

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


# -- plumbing ---------------------------------------------------------------------------------


class EngramGroup(click.Group):
    def main(self, args: Any = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        """Like click's, but a usage error is one line on stderr too (exit status 2)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
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


def _flush_warnings(ctx: click.Context) -> None:
    engram = ctx.meta.get("engram")
    if engram is None:
        return
    for warning in engram.warnings:
        echo(f"warning: {warning}", err=True)
    engram.warnings.clear()


def _engram(ctx: click.Context, project: bool = False, personal: bool = False,
            at: str | None = None) -> Any:
    from ..api import Engram

    if project and personal:
        raise click.UsageError("--project and --personal cannot be used together")
    use = "project" if project else "personal" if personal else "both"
    engram = Engram(cwd=ctx.obj["cwd"], use=use)
    ctx.meta["engram"] = engram
    ctx.call_on_close(engram.close)
    # Before closing (callbacks run last first): a batch that fell due while this command ran
    # is committed now rather than whenever the next write comes.
    ctx.call_on_close(engram.commit_due)
    if at is not None:
        engram, where = engram.at(at)
        ctx.meta["engram"] = engram
        ctx.call_on_close(engram.close)
        for line in where:
            echo(f"as of: {line}", err=True)
    return engram


def at_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--at", "at", default=None, metavar="REV",
        help="As the stores were at a commit, tag, branch or date (2026-11-30, 3d), from git "
             "history alone; nothing is written.")(func)


def store_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("--personal", is_flag=True,
                        help="Only the personal store (~/.engram or ENGRAM_HOME).")(func)
    func = click.option("--project", is_flag=True,
                        help="Only the project store (.engram/ in this git repository).")(func)
    return func


def json_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(func)


def _print_json(value: Any) -> None:
    click.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode())


def _read_text(text: str) -> str:
    """TEXT, or all of stdin for `-`. Bytes that are not UTF-8 stay visible to the checks."""
    if text != "-":
        return text
    return sys.stdin.buffer.read().decode("utf-8", "surrogateescape")


# -- the group ----------------------------------------------------------------------------------


@click.group(cls=EngramGroup, context_settings=CONTEXT)
@click.version_option(__version__, "-V", "--version", prog_name="engram")
@click.option("-C", "cwd", type=click.Path(file_okay=False, exists=True, path_type=Path),
              default=None, help="Run as if started in this directory (like git -C).")
@click.pass_context
def main(ctx: click.Context, cwd: Path | None) -> None:
    """Durable memory and task continuity for coding agents, kept as JSONL events in git.

    A personal store lives in ~/.engram (ENGRAM_HOME moves it); a project store lives in .engram/
    inside a project's git repository. Commands read both unless told --project or --personal;
    writes go to the project store when there is one.
    """
    ctx.ensure_object(dict)
    ctx.obj["cwd"] = cwd or Path.cwd()


@main.command()
@click.option("--project", is_flag=True,
              help="Create .engram/ in the current git repository instead of the personal store.")
@click.pass_context
def init(ctx: click.Context, project: bool) -> None:
    """Create the personal store (~/.engram), or a project store with --project."""
    engram = _engram(ctx)
    store, created = engram.init(project=project)
    if created:
        echo(f"initialized {store.kind} store in {store.root}")
    else:
        echo(f"{store.kind} store already initialized in {store.root}")


# -- memories -----------------------------------------------------------------------------------


def memory_options(func: Callable[..., Any]) -> Callable[..., Any]:
    from ..base.kinds import MEMORY_KINDS, SOURCES

    options = [
        click.option("--kind", "kind", type=click.Choice(list(MEMORY_KINDS)), default=None,
                     help="What sort of memory this is (default: fact)."),
        click.option("--tag", "tags", multiple=True,
                     help="A tag; repeat, or separate with commas."),
        click.option("--scope", default=None,
                     help="Where it applies, e.g. a component or path: backend, src/api."),
        click.option("--source", type=click.Choice(list(SOURCES)), default=None,
                     help="Who said it (default: agent-inferred)."),
        click.option("--importance", type=click.FloatRange(0, 1), default=None,
                     help="0 to 1 (default 0.5)."),
        click.option("--valid-from", default=None,
                     help="Not valid before this date (2026-12-01, 2026-12-01T09:00, or 3d)."),
        click.option("--valid-until", default=None,
                     help="Not valid from this date on (same forms; an age counts forward)."),
        click.option("--redact", is_flag=True,
                     help="Store detected secrets as [REDACTED:type] instead of refusing."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _memory_text(memory: Any, *, many_stores: bool) -> str:
    tags = "  " + " ".join(f"#{t}" for t in memory.tags) if memory.tags else ""
    where = f"  ({memory.store})" if many_stores else ""
    state = "  [forgotten]" if memory.status == "forgotten" else ""
    return (f"{memory.id[:8]}  {memory.kind:<10} {local_time(memory.updated_at)[:10]}  "
            f"{memory.summary()}{tags}{where}{state}")


@main.command()
@click.argument("text")
@memory_options
@click.option("--at", default=None,
              help="When it happened or was said, if not now (a date, or an age like 3d).")
@click.option("--task", default=None, help="The task id it belongs to.")
@click.option("--supersedes", multiple=True, metavar="ID",
              help="A memory this one replaces (it leaves recall; its history stays).")
@click.option("--global", "everywhere", is_flag=True,
              help="For every project: a personal memory written inside a git repository "
                   "otherwise belongs to that project (its root commit) and is recalled only "
                   "there.")
@store_options
@json_option
@click.pass_context
def remember(ctx: click.Context, text: str, kind: str | None, tags: tuple[str, ...],
             scope: str | None, source: str | None, importance: float | None,
             valid_from: str | None, valid_until: str | None, redact: bool, at: str | None,
             task: str | None, supersedes: tuple[str, ...], everywhere: bool, project: bool,
             personal: bool, as_json: bool) -> None:
    """Store a memory (TEXT, or - to read it from stdin). Durable when this returns."""
    from ..base.kinds import DEFAULT_IMPORTANCE, DEFAULT_KIND, DEFAULT_SOURCE

    engram = _engram(ctx, project, personal)
    result = engram.remember(
        _read_text(text), kind=kind or DEFAULT_KIND, tags=tags, scope=scope,
        source=source or DEFAULT_SOURCE,
        importance=DEFAULT_IMPORTANCE if importance is None else importance,
        valid_from=valid_from, valid_until=valid_until, at=at, task=task,
        supersedes=supersedes, redact=redact, everywhere=everywhere,
    )
    if as_json:
        _print_json(result.to_dict())
        return
    memory = result.memory
    if result.duplicate:
        similarity = result.related[0][1]
        echo(f"reinforced {memory.id[:8]} instead of adding a near-duplicate "
             f"(similarity {similarity:.2f}): {memory.summary(60)}")
        echo(f"  your text is kept in its history: engram get --history {memory.id[:8]}")
        return
    belongs = f", project {memory.project[:8]}" if memory.project else \
        ", this project" if memory.project_remote else ""
    echo(f"remembered {memory.id[:8]} ({memory.kind}, {memory.store} store{belongs})")
    for other, similarity in result.related:
        short = other.id[:8]
        echo(f"  possible contradiction: {short} (similarity {similarity:.2f}) "
             f"{other.summary(50)}")
        found = result.differs_from(other.id)
        if found:
            echo(f"    the new text differs from {short} in {describe_differences(found)}")
        echo(f"    if {short} is now wrong, replace it: "
             f"engram remember ... --supersedes {short}")


@main.command()
@click.argument("ident", metavar="ID")
@click.option("--history", is_flag=True, help="Show every version, oldest first.")
@store_options
@json_option
@click.pass_context
def get(ctx: click.Context, ident: str, history: bool, project: bool, personal: bool,
        as_json: bool) -> None:
    """Show one memory by id (a unique prefix of at least 4 characters is enough)."""
    engram = _engram(ctx, project, personal)
    if history:
        versions = engram.history(ident)
        if as_json:
            _print_json([{"event": e.to_dict(), "memory": m.to_dict()} for e, m in versions])
            return
        for number, (event, memory) in enumerate(versions, start=1):
            echo(f"version {number}  {event.kind}  {local_time(event.time)}  by {event.actor}")
            if memory.status == "forgotten":
                echo(f"  forgotten: {memory.forgotten_reason}")
            elif event.kind == "memory.reinforced":
                similarity = event.data.get("similarity")
                echo("  confirmed by a near-duplicate" + (
                    f" (similarity {similarity:.2f})" if similarity is not None else "") + (
                    ", which said:" if "content" in event.data else ""))
                for line in str(event.data.get("content", "")).splitlines():
                    echo(f"  {line}")
            else:
                echo(f"  [{memory.kind}] {' '.join('#' + t for t in memory.tags)}".rstrip())
                for line in memory.content.splitlines():
                    echo(f"  {line}")
            echo()
        return
    memory = engram.get(ident)
    if as_json:
        _print_json(memory.to_dict())
        return
    rows = [
        ("id", memory.id),
        ("kind", memory.kind),
        ("store", memory.store),
        ("status", memory.status + (f" ({memory.forgotten_reason})"
                                    if memory.forgotten_reason else "")),
        ("tags", ", ".join(memory.tags) or "-"),
        ("scope", memory.scope or "-"),
        ("source", memory.source),
        ("importance", f"{memory.importance:g}"),
        ("valid", f"{local_time(memory.valid_from) or '…'} → "
                  f"{local_time(memory.valid_until) or '…'}"
         if memory.valid_from or memory.valid_until else "always"),
        ("created", f"{local_time(memory.created_at)} by {memory.created_by}"),
        ("updated", f"{local_time(memory.updated_at)} (version {memory.version})"),
    ]
    for name, value in rows:
        echo(f"{name + ':':<12}{value}")
    echo()
    echo(memory.content)


@main.command()
@click.argument("ident", metavar="ID")
@click.argument("text", required=False)
@memory_options
@store_options
@json_option
@click.pass_context
def update(ctx: click.Context, ident: str, text: str | None, kind: str | None,
           tags: tuple[str, ...], scope: str | None, source: str | None,
           importance: float | None, valid_from: str | None, valid_until: str | None,
           redact: bool, project: bool, personal: bool, as_json: bool) -> None:
    """Change a memory's TEXT or fields. The old version stays in its history."""
    engram = _engram(ctx, project, personal)
    memory = engram.update(
        ident, None if text is None else _read_text(text), kind=kind,
        tags=tags if tags else None, scope=scope, source=source, importance=importance,
        valid_from=valid_from, valid_until=valid_until, redact=redact,
    )
    if as_json:
        _print_json(memory.to_dict())
    else:
        echo(f"updated {memory.id[:8]} (version {memory.version})")


@main.command()
@click.argument("ident", metavar="ID")
@click.option("--reason", required=True, help="Why it no longer holds (kept in its history).")
@store_options
@json_option
@click.pass_context
def forget(ctx: click.Context, ident: str, reason: str, project: bool, personal: bool,
           as_json: bool) -> None:
    """Retire a memory. Nothing is deleted: `engram get --history ID` still shows it."""
    engram = _engram(ctx, project, personal)
    memory = engram.forget(ident, reason=reason)
    if as_json:
        _print_json(memory.to_dict())
    else:
        echo(f"forgot {memory.id[:8]}")


def filter_options(func: Callable[..., Any]) -> Callable[..., Any]:
    from ..base.kinds import MEMORY_KINDS

    options = [
        click.option("--kind", "kinds", multiple=True, type=click.Choice(list(MEMORY_KINDS)),
                     help="Only this kind; repeat for several."),
        click.option("--tag", "tags", multiple=True, help="Only memories with this tag (all given)."),
        click.option("--scope", default=None, help="Only this scope."),
        click.option("--all", "include_all", is_flag=True,
                     help="Include forgotten memories and those outside their validity window."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@main.command(name="list")
@click.option("-n", "--limit", default=20, show_default=True, type=click.IntRange(1),
              help="At most this many.")
@filter_options
@store_options
@json_option
@click.pass_context
def list_(ctx: click.Context, limit: int, kinds: tuple[str, ...], tags: tuple[str, ...],
          scope: str | None, include_all: bool, project: bool, personal: bool,
          as_json: bool) -> None:
    """Memories, most recently changed first."""
    engram = _engram(ctx, project, personal)
    found = engram.memories(kinds=kinds, tags=tags, scope=scope, limit=limit,
                            include_forgotten=include_all, include_expired=include_all)
    if as_json:
        _print_json([m.to_dict() for m in found])
        return
    many = len(engram.stores()) > 1
    for memory in found:
        echo(_memory_text(memory, many_stores=many))
    if not found:
        echo("no memories" + (" match" if kinds or tags or scope else " yet"))


@main.command()
@click.argument("query")
@click.option("-k", "--k", "k", default=10, show_default=True, type=click.IntRange(1),
              help="At most this many results.")
@filter_options
@click.option("--task", default=None, help="Only memories of this task.")
@click.option("--since", default=None, help="Only memories from this date (or age, 3d) on.")
@click.option("--until", default=None, help="Only memories before this date (or age).")
@click.option("--full", is_flag=True, help="Print whole memories, not one-line summaries.")
@click.option("--explain", is_flag=True, help="Show the scores behind each rank.")
@at_option
@store_options
@json_option
@click.pass_context
def recall(ctx: click.Context, query: str, k: int, kinds: tuple[str, ...],
           tags: tuple[str, ...], scope: str | None, include_all: bool, task: str | None,
           since: str | None, until: str | None, full: bool, explain: bool, at: str | None,
           project: bool, personal: bool, as_json: bool) -> None:
    """Find memories by meaning and by words (hybrid BM25 + vector ranking)."""
    engram = _engram(ctx, project, personal, at)
    hits = engram.recall(query, k=k, kinds=kinds, tags=tags, scope=scope, task=task,
                         since=since, until=until, include_forgotten=include_all,
                         include_expired=include_all, include_decayed=include_all)
    if as_json:
        _print_json([hit.to_dict(full=full or explain) for hit in hits])
        return
    many = len(engram.stores()) > 1
    for hit in hits:
        echo(_memory_text(hit.memory, many_stores=many))
        if explain:
            explained = hit.explain()
            parts = "  ".join(f"{k}={v:.3f}" for k, v in explained.items()
                              if isinstance(v, float))
            echo(f"          {parts}")
            for note in explained.get("notes", []):
                echo(f"          ({note})")
        if full:
            for line in hit.memory.content.splitlines():
                echo(f"          {line}")
    if not hits:
        echo("nothing found")


# -- history and state --------------------------------------------------------------------------


@main.command()
@click.option("--kind", "kinds", multiple=True,
              help="Only events of this kind or family (memory, memory.created); repeatable.")
@click.option("--task", default=None, help="Only events about this task id.")
@click.option("--actor", default=None, help="Only events whose actor contains this text.")
@click.option("--since", default=None, help="Only events since a date (2026-11-01) or age (3d).")
@click.option("-n", "--limit", default=50, show_default=True, type=click.IntRange(1))
@store_options
@json_option
@click.pass_context
def log(ctx: click.Context, kinds: tuple[str, ...], task: str | None, actor: str | None,
        since: str | None, limit: int, project: bool, personal: bool, as_json: bool) -> None:
    """Events, newest first, one per line (like git log --oneline)."""
    from ..api import describe

    engram = _engram(ctx, project, personal)
    entries = engram.log(kinds=kinds, task=task, actor=actor, since=since, limit=limit)
    if as_json:
        _print_json([{"store": store, **event.to_dict()} for store, event in entries])
        return
    many = len(engram.stores()) > 1
    for store, event in entries:
        where = f"  ({store})" if many else ""
        echo(f"{event.id[-8:].lower()}  {local_time(event.time)}  {describe(event)}  "
             f"— {event.actor}{where}")
    if not entries:
        echo("no events")


@main.command()
@click.argument("ident", metavar="ID")
@store_options
@json_option
@click.pass_context
def show(ctx: click.Context, ident: str, project: bool, personal: bool, as_json: bool) -> None:
    """Show any record by id: a memory, task or session with all its events, or one event."""
    engram = _engram(ctx, project, personal)
    record = engram.show(ident)
    if as_json:
        _print_json(record)
        return
    if record["type"] == "memory":
        memory = record["memory"]
        echo(f"memory {memory['id']} ({record['store']} store, {memory['status']})")
        echo(memory["content"])
        echo()
        events = record["events"]
    elif record["type"] in ("task", "session"):
        more = (f"`engram task show {record['id']}`" if record["type"] == "task" else
                "`engram sessions`")
        echo(f"{record['type']} {record['id']} ({record['store']} store; {more} "
             "shows its state)")
        events = record["events"]
    else:
        events = [record["event"]]
    for event in events:
        echo(visible_json(orjson.dumps(event, option=orjson.OPT_SORT_KEYS).decode()))


@main.command()
@store_options
@json_option
@click.pass_context
def status(ctx: click.Context, project: bool, personal: bool, as_json: bool) -> None:
    """Where the stores are, what they hold, what is not committed, how remotes stand."""
    engram = _engram(ctx, project, personal)
    report = engram.status()
    if as_json:
        _print_json(report)
        return
    for entry in report:
        echo(f"{entry['store']} store  {entry['path']}")
        head = entry["head"][:8] if entry["head"] else "no commits"
        echo(f"  branch {entry['branch'] or '(detached)'} at {head}; "
             f"{entry['memories']} memories ({entry['forgotten']} forgotten), "
             f"{entry['events']} events in {entry['files']} files")
        if entry["uncommitted"]:
            echo(f"  uncommitted: {entry['uncommitted']} events; "
                 "`engram commit` commits them now")
        else:
            echo("  uncommitted: none")
        upstream = entry["upstream"]
        if upstream:
            echo(f"  remote: {upstream['upstream']} ahead {upstream['ahead']}, "
                 f"behind {upstream['behind']} (as of the last fetch)")
        elif entry["remotes"]:
            names = ", ".join(r["name"] for r in entry["remotes"])
            echo(f"  remote: {names} (no upstream set for this branch)")
        else:
            echo("  remote: none")
        if entry["busy"]:
            echo(f"  note: {entry['busy']}; commits wait until it is finished")
        for rel in entry["refused"]:
            echo(f"  damaged: {rel} changed in its committed part; run `engram verify`")
        for rel in entry["missing"]:
            echo(f"  missing: {rel} is committed but gone from the work tree")
        if entry["missing"]:
            echo(f"    restore: `{entry['restore']}`")
        gone = entry["lost"]
        if gone["events"]:
            where = ", ".join(f"{rel} ({count})" for rel, count in gone["files"].items())
            echo(f"  lost: {gone['events']} events git took away, from {where}; "
                 f"`engram recover --{entry['store']}` brings them back")


@main.command()
@store_options
@json_option
@click.pass_context
def verify(ctx: click.Context, project: bool, personal: bool, as_json: bool) -> None:
    """Re-read every event file and report damage. Exit status 1 if anything is wrong."""
    engram = _engram(ctx, project, personal)
    report = engram.verify()
    if as_json:
        _print_json(report)
    else:
        for entry in report["stores"]:
            verdict = "ok" if entry["ok"] else f"{len(entry['problems'])} problem(s)"
            echo(f"{entry['store']} store  {entry['path']}: {entry['events']} events in "
                 f"{entry['files']} files, {entry['duplicates']} duplicate lines; {verdict}")
            for problem in entry["problems"]:
                echo(f"  {problem['severity']}: {problem['path']}:{problem['line']}: "
                     f"{problem['message']}")
    if not report["ok"]:
        ctx.exit(1)


@main.command()
@click.option("--fix", is_flag=True,
              help="Apply the repairs that lose nothing (backups are kept), then check again.")
@store_options
@json_option
@click.pass_context
def doctor(ctx: click.Context, fix: bool, project: bool, personal: bool, as_json: bool) -> None:
    """Find what is wrong with the stores and the command that fixes each. Exit 1 if anything."""
    engram = _engram(ctx, project, personal)
    report = engram.doctor(fix=fix)
    if as_json:
        _print_json(report)
    else:
        for entry in report["stores"]:
            problems = [f for f in entry["findings"] if f["level"] != "note"]
            verdict = f"{len(problems)} problem(s)" if problems else "healthy"
            echo(f"{entry['store']} store  {entry['path']}: {verdict}")
            for line in entry["fixed"]:
                echo(f"  fixed: {line}")
            for finding in entry["findings"]:
                where = f"{finding['path']}:{finding['line']}: " if finding["line"] else \
                    f"{finding['path']}: " if finding["path"] else ""
                echo(f"  {finding['level']}: {where}{finding['message']}")
                echo(f"    fix: {finding['fix']}")
    if not report["ok"]:
        ctx.exit(1)


@main.command()
@click.option("--all", "everything", is_flag=True,
              help="Also every event git still holds that is in no branch, not only those "
                   "seen here.")
@store_options
@json_option
@click.pass_context
def recover(ctx: click.Context, everything: bool, project: bool, personal: bool,
            as_json: bool) -> None:
    """Bring back the events git deleted (clean, stash drop, reset, revert, rebase).

    They are read from the reflogs, `git stash list`, unreachable objects and Engram's own
    ledger, written back unchanged to new event files and committed. History is never
    rewritten; an event already in the store is never written twice.
    """
    engram = _engram(ctx, project, personal)
    results = engram.recover(everything=everything)
    if as_json:
        _print_json([r.to_dict() for r in results])
        return
    for result in results:
        if not result.events:
            echo(f"{result.store} store: nothing to recover")
        else:
            where = ", ".join(result.files)
            echo(f"{result.store} store: recovered {result.events} events "
                 f"({result.from_git} from git, {result.events - result.from_git} from "
                 f"the ledger) into {where}" +
                 (f"; committed as {result.commit[:8]}" if result.commit else ""))
        for note in result.notes:
            echo(f"  note: {note}")


@main.command()
@click.option("-m", "--message", default=None, help="Subject line instead of the generated one.")
@store_options
@click.pass_context
def commit(ctx: click.Context, message: str | None, project: bool, personal: bool) -> None:
    """Commit pending events now (they are also committed in batches automatically)."""
    engram = _engram(ctx, project, personal)
    for result in engram.commit(subject=message):
        if result.commit:
            echo(f"{result.store} store: committed {result.events} events as "
                 f"{result.commit[:8]}")
        else:
            echo(f"{result.store} store: nothing to commit")
        for rel in result.refused:
            echo(f"  not committed: {rel} changed in its committed part; "
                 "run `engram verify`", err=True)


@main.command()
@click.option("--dry-run", is_flag=True, help="Say what would be folded; change nothing.")
@store_options
@json_option
@click.pass_context
def compact(ctx: click.Context, dry_run: bool, project: bool, personal: bool,
            as_json: bool) -> None:
    """Fold each month's closed event files into one file, in one commit.

    Every line is kept byte for byte (exact duplicates once), ordered by (clock, id). Runs by
    itself at commit and sync time once a month has `compact.files` files (default 64). A month
    with a damaged line is left alone until `engram doctor` has set the line aside.
    """
    engram = _engram(ctx, project, personal)
    results = engram.compact(dry_run=dry_run)
    if as_json:
        _print_json([r.to_dict() for r in results])
        return
    for result in results:
        verb = "would fold" if dry_run else "folded"
        if result.months:
            folded = sum(m["files"] for m in result.months)
            made = sum(len(m["into"]) for m in result.months)
            echo(f"{result.store} store: {verb} {folded} event files into {made} "
                 f"({result.events:,} events; {result.files_before} files before, "
                 f"{result.files_after} after)"
                 + (f" in commit {result.commit[:8]}" if result.commit else ""))
        else:
            echo(f"{result.store} store: nothing to compact "
                 f"({result.files_before} event files)")
        for why in result.skipped:
            echo(f"  {why}", err=True)


# -- continuity ---------------------------------------------------------------------------------


def _task_text(task: Any) -> str:
    return (f"{task.id[:8]}  {task.status:<11} {local_time(task.updated_at)[:10]}  {task.name}"
            + (f"  (parent {task.parent[:8]})" if task.parent else ""))


@main.group()
def task() -> None:
    """Tasks: create, show, update, list; record progress and failures."""


@task.command(name="create")
@click.argument("name")
@click.option("--goal", default="", help="What done looks like.")
@click.option("--parent", default=None, help="The parent task (id or name).")
@click.option("--tag", "tags", multiple=True, help="A tag; repeatable.")
@click.option("--status", default="open", show_default=True,
              type=click.Choice(["open", "in_progress", "blocked", "done", "abandoned"]))
@store_options
@json_option
@click.pass_context
def task_create(ctx: click.Context, name: str, goal: str, parent: str | None,
                tags: tuple[str, ...], status: str, project: bool, personal: bool,
                as_json: bool) -> None:
    """Create a task."""
    engram = _engram(ctx, project, personal)
    created = engram.task_create(name, goal=goal, parent=parent, tags=tags, status=status)
    if as_json:
        _print_json(created.to_dict())
    else:
        echo(f"created task {created.id[:8]}: {created.name}")


@task.command(name="show")
@click.argument("ident", metavar="ID")
@store_options
@json_option
@click.pass_context
def task_show(ctx: click.Context, ident: str, project: bool, personal: bool,
              as_json: bool) -> None:
    """A task with its memories, progress, failures and latest checkpoint."""
    engram = _engram(ctx, project, personal)
    view = engram.task_view(ident)
    if as_json:
        _print_json(view)
        return
    data = view["task"]
    echo(f"task {data['id']}  [{data['status']}]  {data['name']}")
    if data["goal"]:
        echo(f"goal: {data['goal']}")
    if data["parent"]:
        echo(f"parent: {data['parent']}")
    for item in data["progress"]:
        where = f" [{item['component']}]" if item.get("component") else ""
        echo(f"  progress {item['status']:<11} {item['feature']}{where}")
    for item in data["failures"]:
        where = f"[{item['component']}] " if item.get("component") else ""
        echo(f"  failure  {where}{item['error']}")
    for memory in view["memories"]:
        echo(f"  memory   {memory['id'][:8]} [{memory['kind']}] {memory['content'][:70]}")
    latest = data["latest_checkpoint"]
    if latest:
        echo(f"latest checkpoint {latest['seq']} ({latest['reason']}, {latest['time']}): "
             f"{latest.get('summary') or ''}")
        for step in latest.get("next") or []:
            echo(f"  next: {step}")


@task.command(name="update")
@click.argument("ident", metavar="ID")
@click.option("--name", default=None)
@click.option("--goal", default=None)
@click.option("--status", default=None,
              type=click.Choice(["open", "in_progress", "blocked", "done", "abandoned"]))
@click.option("--parent", default=None)
@click.option("--tag", "tags", multiple=True, help="Replace the tags; repeatable.")
@store_options
@json_option
@click.pass_context
def task_update(ctx: click.Context, ident: str, name: str | None, goal: str | None,
                status: str | None, parent: str | None, tags: tuple[str, ...], project: bool,
                personal: bool, as_json: bool) -> None:
    """Change a task's name, goal, status, parent or tags."""
    engram = _engram(ctx, project, personal)
    updated = engram.task_update(ident, name=name, goal=goal, status=status, parent=parent,
                                 tags=tags or None)
    if as_json:
        _print_json(updated.to_dict())
    else:
        echo(f"updated task {updated.id[:8]} ({updated.status})")


@task.command(name="list")
@click.option("--status", "statuses", multiple=True,
              type=click.Choice(["open", "in_progress", "blocked", "done", "abandoned"]))
@click.option("--all", "include_all", is_flag=True, help="Include done and abandoned tasks.")
@store_options
@json_option
@click.pass_context
def task_list(ctx: click.Context, statuses: tuple[str, ...], include_all: bool, project: bool,
              personal: bool, as_json: bool) -> None:
    """Tasks, most recently changed first (active ones unless told otherwise)."""
    engram = _engram(ctx, project, personal)
    found = engram.tasks(statuses=statuses, include_closed=include_all)
    if as_json:
        _print_json([t.to_dict() for t in found])
        return
    for item in found:
        echo(_task_text(item))
    if not found:
        echo("no tasks")


def _print_earlier_failures(failures: list[dict[str, Any]]) -> None:
    for failure in failures[:5]:
        echo(f"  earlier failure in {failure['component']} ({failure['task_name']}): "
             f"{failure['error']}" + (f" — fix: {failure['fix']}" if failure.get("fix")
                                      else ""))


@task.command(name="progress")
@click.argument("ident", metavar="ID")
@click.argument("feature")
@click.option("--status", default="done", show_default=True,
              type=click.Choice(["done", "in_progress", "blocked", "todo"]))
@click.option("--note", default=None)
@click.option("--component", default=None, help="The component this touches.")
@click.option("--file", "files", multiple=True, help="A file this touches; repeatable.")
@store_options
@json_option
@click.pass_context
def task_progress(ctx: click.Context, ident: str, feature: str, status: str, note: str | None,
                  component: str | None, files: tuple[str, ...], project: bool,
                  personal: bool, as_json: bool) -> None:
    """Record progress on a feature of a task."""
    engram = _engram(ctx, project, personal)
    result = engram.progress(ident, feature, status=status, note=note, component=component,
                             files=files)
    if as_json:
        _print_json({"task": result["task"].to_dict(), "checkpoint": result["checkpoint"],
                     "earlier_failures": result["earlier_failures"]})
        return
    echo(f"progress on {result['task'].id[:8]}: [{status}] {feature}")
    if result["checkpoint"]:
        echo(f"  checkpoint {result['checkpoint']['seq']} saved "
             f"({result['checkpoint']['reason']})")
    _print_earlier_failures(result["earlier_failures"])


@task.command(name="failure")
@click.argument("ident", metavar="ID")
@click.argument("error")
@click.option("--component", default=None)
@click.option("--root-cause", default=None)
@click.option("--fix", default=None, help="The fix, if known.")
@store_options
@json_option
@click.pass_context
def task_failure(ctx: click.Context, ident: str, error: str, component: str | None,
                 root_cause: str | None, fix: str | None, project: bool, personal: bool,
                 as_json: bool) -> None:
    """Record a failure on a task (a checkpoint is saved with it)."""
    engram = _engram(ctx, project, personal)
    result = engram.failure(ident, error, component=component, root_cause=root_cause, fix=fix)
    if as_json:
        _print_json({"task": result["task"].to_dict(), "checkpoint": result["checkpoint"],
                     "earlier_failures": result["earlier_failures"]})
        return
    echo(f"failure on {result['task'].id[:8]} recorded; checkpoint "
         f"{result['checkpoint']['seq'] if result['checkpoint'] else '-'} saved")
    _print_earlier_failures(result["earlier_failures"])


def _load_package(engram: Any, source: str) -> dict[str, Any]:
    """The package of `--from FILE` (YAML, or JSON for *.json), or of stdin for `-`."""
    if source == "-":
        return engram.read_package(sys.stdin.buffer, name="stdin")
    try:
        with open(source, "rb") as handle:
            return engram.read_package(handle, name=source)
    except OSError as exc:
        raise click.BadParameter(f"cannot read {source}: {exc.strerror}",
                                 param_hint="--from") from None


@main.command()
@click.option("--task", "task_id", required=True, help="The task (id or name).")
@click.option("--summary", default=None, help="Where things stand, in a line.")
@click.option("--completed", multiple=True, help="Done; repeatable.")
@click.option("--in-progress", multiple=True, help="Under way; repeatable.")
@click.option("--blocked", multiple=True, help="Blocked, and on what; repeatable.")
@click.option("--next", "next_steps", multiple=True, help="Next step, in order; repeatable.")
@click.option("--must-not-redo", multiple=True,
              help="Done or side-effecting: never repeat; repeatable.")
@click.option("--must-preserve", multiple=True,
              help="An invariant to keep, e.g. \"don't touch main\"; repeatable.")
@click.option("--file", "files", multiple=True,
              help="A working-set file (path or path@commit); repeatable.")
@click.option("--command", "commands", multiple=True, help="A command that matters; repeatable.")
@click.option("--artifact", "artifacts", multiple=True, help="An artifact; repeatable.")
@click.option("--question", "open_questions", multiple=True, help="An open question; repeatable.")
@click.option("--goal", default=None, help="The goal, if it changed.")
@click.option("--from", "from_file", type=click.Path(exists=True, dir_okay=False,
                                                     allow_dash=True),
              help="The whole package as YAML or JSON, or - for stdin (options add to it).")
@store_options
@json_option
@click.pass_context
def handoff(ctx: click.Context, task_id: str, summary: str | None, completed: tuple[str, ...],
            in_progress: tuple[str, ...], blocked: tuple[str, ...],
            next_steps: tuple[str, ...], must_not_redo: tuple[str, ...],
            must_preserve: tuple[str, ...], files: tuple[str, ...], commands: tuple[str, ...],
            artifacts: tuple[str, ...], open_questions: tuple[str, ...], goal: str | None,
            from_file: str | None, project: bool, personal: bool, as_json: bool) -> None:
    """Record a continuation package for a task and commit it for review."""
    engram = _engram(ctx, project, personal)
    package = _load_package(engram, from_file) if from_file else None
    saved = engram.handoff(
        task_id, summary=summary or "", package=package,
        completed=completed, in_progress=in_progress, blocked=blocked, next=next_steps,
        must_not_redo=must_not_redo, must_preserve=must_preserve, files=files,
        commands=commands, artifacts=artifacts, open_questions=open_questions, goal=goal,
    )
    if as_json:
        _print_json(saved)
    else:
        done = "recorded and committed" if saved["commit"] else "recorded, not committed"
        echo(f"handoff {saved['seq']} for task {saved['task'][:8]} {done} "
             f"(confidence {saved['confidence']:.2f})")


def task_choice(command: Callable[..., Any]) -> Callable[..., Any]:
    """The task a command is about, as `TASK` or as `--task TASK`: every command that takes one
    accepts both, so none has to be remembered."""
    command = click.option("--task", "task_option", metavar="TASK", default=None,
                           help="The task (id or name); the same as giving TASK.")(command)
    return click.argument("task_argument", metavar="[TASK]", required=False)(command)


def _task_of(task_argument: str | None, task_option: str | None, command: str) -> str:
    if task_argument is not None and task_option is not None and task_argument != task_option:
        raise click.UsageError(f"two tasks given ({task_argument!r} and {task_option!r}); "
                               "give one, as TASK or --task TASK")
    task = task_argument if task_argument is not None else task_option
    if task is None:
        raise click.UsageError(f"which task? `engram {command} TASK` (an id or name; "
                               "`engram task list` lists them)")
    return task


@main.command()
@task_choice
@store_options
@json_option
@click.pass_context
def checkpoints(ctx: click.Context, task_argument: str | None, task_option: str | None,
                project: bool, personal: bool, as_json: bool) -> None:
    """Every checkpoint of a task, oldest first."""
    task_id = _task_of(task_argument, task_option, "checkpoints")
    engram = _engram(ctx, project, personal)
    found = engram.checkpoints(task_id)
    if as_json:
        _print_json(found)
        return
    for item in found:
        echo(f"{item['seq']:>3}  {item['checkpoint'][:8]}  {local_time(item['time'])}  "
             f"{item['reason']:<12} {item['confidence']:.2f}  {item.get('summary') or ''}")
    if not found:
        echo("no checkpoints")


@main.group()
def session() -> None:
    """Sessions: start, heartbeat, report an interruption, end."""


@session.command(name="start")
@click.option("--agent", default="cli", help="claude-code, cursor, codex, cli or other.")
@click.option("--id", "session_id", default=None, help="Use this id instead of a new one.")
@click.option("--pid", type=int, default=None,
              help="The agent's process (default: the process that ran this command).")
@store_options
@click.pass_context
def session_start(ctx: click.Context, agent: str, session_id: str | None, pid: int | None,
                  project: bool, personal: bool) -> None:
    """Open a session; prints its id (set ENGRAM_SESSION to it for later commands)."""
    import os

    engram = _engram(ctx, project, personal)
    opened = engram.session_start(agent=agent, session_id=session_id, pid=pid or os.getppid())
    echo(opened.id)


@session.command(name="heartbeat")
@click.option("--context", type=click.FloatRange(0, 1), default=None,
              help="Share of the context window in use.")
@click.option("--id", "session_id", default=None, help="Default: $ENGRAM_SESSION.")
@store_options
@click.pass_context
def session_heartbeat(ctx: click.Context, context: float | None, session_id: str | None,
                      project: bool, personal: bool) -> None:
    """Say the session is alive."""
    _engram(ctx, project, personal).heartbeat(context=context, session_id=session_id)


@session.command(name="report")
@click.argument("reason", type=click.Choice(["crash", "overflow", "rate_limit", "tool_failure",
                                             "user_away", "unknown"]))
@click.option("--note", default=None)
@click.option("--id", "session_id", default=None, help="Default: $ENGRAM_SESSION.")
@store_options
@click.pass_context
def session_report(ctx: click.Context, reason: str, note: str | None, session_id: str | None,
                   project: bool, personal: bool) -> None:
    """Say why the session is about to stop (used when its interruption is classified)."""
    _engram(ctx, project, personal).report_interruption(reason, note=note,
                                                        session_id=session_id)


@session.command(name="end")
@click.option("--outcome", type=click.Choice(["success", "failure", "unknown"]), default=None)
@click.option("--id", "session_id", default=None, help="Default: $ENGRAM_SESSION.")
@store_options
@click.pass_context
def session_end(ctx: click.Context, outcome: str | None, session_id: str | None,
                project: bool, personal: bool) -> None:
    """Close the session and commit what waits (session events alone are not committed)."""
    closed = _engram(ctx, project, personal).session_end(outcome=outcome, session_id=session_id)
    echo(f"session {closed.id[:8]} ended ({closed.outcome or 'no outcome'})")


@main.command(name="sessions")
@store_options
@json_option
@click.pass_context
def sessions_(ctx: click.Context, project: bool, personal: bool, as_json: bool) -> None:
    """Sessions, newest first, with their state and interruption reason."""
    engram = _engram(ctx, project, personal)
    engram.detect_interruptions()
    found = engram.sessions()
    if as_json:
        _print_json([s.to_dict() for s in found])
        return
    for item in found:
        why = f"  {item.reason}: {item.evidence}" if item.state == "interrupted" else \
            (f"  {item.outcome}" if item.outcome else "")
        echo(f"{item.id[:8]}  {item.state:<11} {local_time(item.started_at)}  {item.agent:<11}"
             f" {item.machine or '-'}  {item.actor}{why}")
    if not found:
        echo("no sessions")


def _resume_command(ctx: click.Context, task_id: str | None, session_id: str | None,
                    depth: str, since: str | None, restore: str, max_chars: int | None,
                    max_tokens: int | None, at: str | None, project: bool, personal: bool,
                    as_json: bool) -> None:
    engram = _engram(ctx, project, personal, at)
    result = engram.resume(task=task_id, session=session_id, depth=depth, since=since,
                           restore=restore, max_chars=max_chars, record=at is None,
                           max_tokens=max_tokens)
    if as_json:
        _print_json(result.to_dict())
    else:
        echo(result.markdown, nl=not result.markdown.endswith("\n"))


def resume_options(func: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--task", "task_id", default=None, help="The task to resume (id or name)."),
        click.option("--session", "session_id", default=None,
                     help="Resume what this session was working on."),
        click.option("--depth", type=click.Choice(["brief", "standard", "full"]),
                     default="standard", show_default=True, help="How much history."),
        click.option("--since", default=None, help="Only events since a date or age (3d)."),
        click.option("--restore", type=click.Choice(["full", "selective", "none"]),
                     default="selective", show_default=True,
                     help="Which memories come back (selective: important or about failures)."),
        click.option("--max-chars", type=click.IntRange(1000), default=None,
                     help="Cut the output at this length (default: resume.max_chars)."),
        click.option("--max-tokens", type=click.IntRange(100), default=None,
                     help="Fill this token budget by priority (must-not-redo and "
                          "must-preserve first, then next steps, failures, memories) and name "
                          "what was left out."),
        at_option,
    ]
    for option in reversed(options):
        func = option(func)
    return func


@main.command()
@resume_options
@store_options
@json_option
@click.pass_context
def resume(ctx: click.Context, **options: Any) -> None:
    """What the next agent needs to continue, as Markdown (exit 3: choose a task)."""
    _resume_command(ctx, **options)


@main.command()
@resume_options
@store_options
@json_option
@click.pass_context
def rehydrate(ctx: click.Context, **options: Any) -> None:
    """Same as `engram resume`."""
    _resume_command(ctx, **options)


@main.command()
@task_choice
@click.option("--before", default=None, help="The earlier checkpoint (seq or id).")
@click.option("--after", default=None, help="The later checkpoint (seq or id; default latest).")
@store_options
@json_option
@click.pass_context
def continuity(ctx: click.Context, task_argument: str | None, task_option: str | None,
               before: str | None, after: str | None, project: bool, personal: bool,
               as_json: bool) -> None:
    """Score how well a restore continued from the previous checkpoint."""
    task_id = _task_of(task_argument, task_option, "continuity")
    engram = _engram(ctx, project, personal)
    scores = engram.continuity(task_id, before=before, after=after)
    if as_json:
        _print_json(scores)
        return
    echo(f"task {scores['task'][:8]}: checkpoint {scores['before']} -> {scores['after']}")
    for name in ("goal_retention", "action_consistency", "failure_recall",
                 "working_set_stability", "replanning_rate", "redundant_exploration",
                 "composite"):
        echo(f"  {name.replace('_', ' '):<22} {scores[name]:.2f}")


# -- search maintenance ---------------------------------------------------------------------------


@main.command()
@click.option("--check", is_flag=True,
              help="Only report whether the caches are current; exit 1 only when one must be "
                   "rebuilt (a cache that is behind by design catches up on its own).")
@store_options
@json_option
@click.pass_context
def reindex(ctx: click.Context, check: bool, project: bool, personal: bool,
            as_json: bool) -> None:
    """Rebuild the caches (read model, word and vector indexes) from the event files."""
    engram = _engram(ctx, project, personal)
    if check:
        states = engram.index_state()
        if as_json:
            _print_json(states)
        else:
            for state in states:
                verdict = ("current" if state["current"] else
                           "behind by design (they catch up on their own)" if state["healthy"]
                           else "not current: `engram reindex` rebuilds them")
                echo(f"{state['store']} store: caches {verdict}")
                for reason in state["stale"]:
                    echo(f"  {reason}")
                for reason in state["behind"]:
                    echo(f"  {reason}")
        if not all(state["healthy"] for state in states):
            ctx.exit(1)
        return
    if sys.stderr.isatty() and not as_json:
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            tasks: dict[str, Any] = {}

            def progress(store: str, done: int, total: int) -> None:
                if store not in tasks:
                    tasks[store] = bar.add_task(f"embedding ({store})", total=total)
                bar.update(tasks[store], completed=done)

            report = engram.reindex(progress=progress)
    else:
        report = engram.reindex()
    if as_json:
        _print_json(report)
        return
    echo(f"reindexed {report['events']} events, {report['memories']} memories: "
         f"{report['embedded']} embedded, {report['reused']} reused from the cache, "
         f"in {report['seconds']:.1f}s")


@main.command()
@store_options
@json_option
@click.pass_context
def stats(ctx: click.Context, project: bool, personal: bool, as_json: bool) -> None:
    """Counts by kind, scope and store, average strength, and index freshness."""
    engram = _engram(ctx, project, personal)
    report = engram.stats()
    if as_json:
        _print_json(report)
        return
    for entry in report:
        echo(f"{entry['store']} store  {entry['path']}")
        echo(f"  {entry['memories']} memories ({entry['forgotten']} forgotten, "
             f"{entry['superseded']} superseded), {entry['events']} events")
        kinds = ", ".join(f"{k} {n}" for k, n in entry["by_kind"].items()) or "-"
        echo(f"  by kind: {kinds}")
        scopes = ", ".join(f"{k} {n}" for k, n in entry["by_scope"].items()) or "-"
        echo(f"  by scope: {scopes}")
        if entry["average_strength"] is not None:
            echo(f"  average strength: {entry['average_strength']:.2f} "
                 f"({entry['decayed']} decayed below the floor)")
        index = entry["index"] or {}
        verdict = ("current" if index.get("current") else "behind by design"
                   if index.get("healthy") else "must be rebuilt (`engram reindex`)")
        echo(f"  indexes: {verdict} "
             f"(text {index.get('text_index')}, vectors {index.get('vector_index')}, "
             f"model {index.get('vector_model') or index.get('model')})")


@main.command()
@click.option("--apply", is_flag=True, help="Merge the clusters (otherwise only show them).")
@click.option("--similarity", type=click.FloatRange(0, 1), default=None,
              help="Merge memories at least this similar (default: consolidate.similarity).")
@store_options
@json_option
@click.pass_context
def consolidate(ctx: click.Context, apply: bool, similarity: float | None, project: bool,
                personal: bool, as_json: bool) -> None:
    """Merge clusters of near-duplicate memories into one (dry run unless --apply)."""
    engram = _engram(ctx, project, personal)
    plans = engram.consolidate(apply=apply, similarity=similarity)
    if as_json:
        _print_json(plans)
        return
    if not plans:
        echo("no near-duplicates found")
        return
    for plan in plans:
        ids = ", ".join(m["id"][:8] for m in plan["members"])
        if plan["merged_into"]:
            echo(f"merged {ids} into {plan['merged_into'][:8]}: {plan['content'][:60]}")
        else:
            echo(f"would merge {ids}: {plan['content'][:60]}")
            for member in plan["members"]:
                echo(f"  {member['id'][:8]}  {member['summary']}")
    if not apply:
        echo("dry run: nothing changed; run with --apply to merge")


# -- settings -----------------------------------------------------------------------------------


@main.group()
def config() -> None:
    """Read and change settings (config.yaml in a store; comments are kept)."""


@config.command(name="list")
@click.option("--personal", is_flag=True, help="Ignore the project store's settings.")
@json_option
@click.pass_context
def config_list(ctx: click.Context, personal: bool, as_json: bool) -> None:
    """Every setting, its effective value here, and where the value comes from."""
    engram = _engram(ctx, personal=personal)
    rows = engram.config_list()
    if as_json:
        _print_json(rows)
        return
    for row in rows:
        value = "null" if row["value"] is None else str(row["value"]).lower() \
            if isinstance(row["value"], bool) else row["value"]
        echo(f"{row['key']} = {value}    # {row['origin']}")


@config.command(name="get")
@click.argument("key")
@click.option("--personal", is_flag=True, help="Ignore the project store's settings.")
@click.pass_context
def config_get(ctx: click.Context, key: str, personal: bool) -> None:
    """Print one setting's effective value here."""
    engram = _engram(ctx, personal=personal)
    value = engram.config_get(key)
    echo("null" if value is None else str(value).lower() if isinstance(value, bool)
         else value)


@config.command(name="set")
@click.argument("key")
@click.argument("value")
@click.option("--project", is_flag=True,
              help="Change the project store's config.yaml instead of the personal one.")
@click.pass_context
def config_set(ctx: click.Context, key: str, value: str, project: bool) -> None:
    """Change a setting in a store's config.yaml (and commit it)."""
    engram = _engram(ctx, project=project)
    stored = engram.config_set(key, value)
    echo(f"{key} = {stored}")


register_mcp(main)
register_sync(main)


# -- import, export, timeline -------------------------------------------------------------------


@main.command(name="import")
@click.argument("path")
@click.option("--format", "fmt",
              type=click.Choice(["mcp-engram", "mcp-memory", "engram", "engram-go"]),
              default=None, help="What PATH holds (default: told from its layout and content).")
@click.option("--dry-run", is_flag=True, help="Show what would be added; write nothing.")
@click.option("--redact", is_flag=True,
              help="Store detected secrets as [REDACTED:type] instead of skipping their records.")
@store_options
@json_option
@click.pass_context
def import_(ctx: click.Context, path: str, fmt: str | None, dry_run: bool, redact: bool,
            project: bool, personal: bool, as_json: bool) -> None:
    """Bring in an mcp-engram data directory, an MCP memory server's memory.jsonl, a file
    written by `engram export`, or the Go engram's export or .engram/ sync folder. Every record is checked like a write; one that fails is skipped
    and reported. Importing the same source again adds nothing."""
    engram = _engram(ctx, project, personal)
    report = engram.import_from(path, format=fmt, dry_run=dry_run, redact=redact)
    if as_json:
        _print_json(report.to_dict())
        return
    if dry_run:
        for _, text in report.added:
            echo(f"would add: {text}")
    counts = ", ".join(f"{n} {kind}" for kind, n in report.counts().items())
    verb = "would import" if dry_run else "imported"
    echo(f"{verb} {len(report.added)} events from {report.format} into the "
         f"{report.store} store" + (f" ({counts})" if counts else ""))
    if report.already:
        echo(f"  {report.already} already in the store, not added again")
    for reason, count in sorted(report.ignored.items()):
        echo(f"  not imported: {count} × {reason}")
    if report.skipped_count:
        echo(f"  skipped {report.skipped_count} damaged or refused source records "
             "(the rest is imported):")
        for where, why in report.skipped:
            echo(f"    {where}: {why}")
        if report.skipped_count > len(report.skipped):
            echo(f"    and {report.skipped_count - len(report.skipped)} more")
    if dry_run:
        echo("dry run: nothing written; run again without --dry-run to import")
    elif report.commit:
        echo(f"  committed as {report.commit[:8]}")


@main.command()
@click.argument("out")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "markdown"]), default="jsonl",
              show_default=True,
              help="jsonl: the events, re-importable; markdown: a directory to read or archive.")
@click.option("--force", is_flag=True, help="Replace OUT (or write into a non-empty directory).")
@store_options
@json_option
@click.pass_context
def export(ctx: click.Context, out: str, fmt: str, force: bool, project: bool, personal: bool,
           as_json: bool) -> None:
    """Write the stores out to OUT: a .jsonl file (- for stdout) or a Markdown directory."""
    engram = _engram(ctx, project, personal)
    if out == "-" and fmt == "jsonl":
        events = engram.export_events()
        for event in events:
            sys.stdout.buffer.write(event.to_line())
        sys.stdout.flush()
        return
    report = engram.export(out, format=fmt, force=force)
    if as_json:
        _print_json(report)
    elif fmt == "jsonl":
        echo(f"exported {report['events']} events to {report['path']}")
    else:
        tasks = f"{report['tasks']} task" + ("" if report["tasks"] == 1 else "s")
        memories = f"{report['memories']} memor" + ("y" if report["memories"] == 1 else "ies")
        echo(f"exported {tasks} and {memories} as Markdown to {report['path']} "
             f"({report['files']} files)")


@main.command()
@task_choice
@click.option("--html", "html_out", default=None, metavar="OUT",
              help="Write one self-contained HTML page to OUT instead of printing text.")
@store_options
@json_option
@click.pass_context
def timeline(ctx: click.Context, task_argument: str | None, task_option: str | None,
             html_out: str | None, project: bool, personal: bool, as_json: bool) -> None:
    """A task's checkpoints, progress, failures, decisions and sessions in time order."""
    from ..domain.timeline import render_html, render_text

    task_id = _task_of(task_argument, task_option, "timeline")
    engram = _engram(ctx, project, personal)
    found = engram.timeline(task_id)
    if html_out:
        target = Path(html_out)
        if not target.is_absolute():
            target = ctx.obj["cwd"] / target
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render_html(found), encoding="utf-8")
        echo(f"wrote {target} ({len(found.items)} events, "
             f"{len(found.checkpoints)} checkpoints)")
        return
    if as_json:
        _print_json(found.to_dict())
        return
    echo(render_text(found), nl=False)


@main.command()
@click.option("--html", "html_out", required=True, metavar="OUT",
              help="The HTML page to write (one self-contained file).")
@store_options
@click.pass_context
def browse(ctx: click.Context, html_out: str, project: bool, personal: bool) -> None:
    """Write one HTML page to search, filter and read the memories (with their history), tasks
    and handoffs of the stores; it loads nothing and needs no server."""
    from ..domain.browse import render_html

    engram = _engram(ctx, project, personal)
    page = engram.browse()
    target = Path(html_out)
    if not target.is_absolute():
        target = ctx.obj["cwd"] / target
    if target.is_dir():
        raise click.UsageError(f"{target} is a directory; give the file to write")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_html(page), encoding="utf-8")
    counts = page.to_dict()
    echo(f"wrote {target} ({counts['memories']} memories, {counts['tasks']} tasks, "
         f"{counts['handoffs']} handoffs)")


if __name__ == "__main__":  # pragma: no cover
    main()
