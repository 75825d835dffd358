"""`engram init|log|show|status|verify|doctor|recover|commit|compact|reindex|stats`: the stores.

Their history, state and upkeep, as click commands; `register(main)` adds them to the `engram`
group.
"""

from __future__ import annotations

import sys
from typing import Any

import click
import orjson

from ..base.display import echo, local_time, visible_json
from ..base.results import as_json as as_json_value
from ..base.wording import count
from .common import json_option, open_engram, print_json, store_options

# An event file whose uncommitted part holds a line readers skip: git would be given it as is.
UNREADABLE = (
    "holds an uncommitted line readers skip, so none of its new events are committed; "
    "`engram doctor` says how to repair it"
)


@click.command()
@click.option(
    "--project",
    is_flag=True,
    help="Create .engram/ in the current git repository instead of the personal store.",
)
@click.pass_context
def init(ctx: click.Context, project: bool) -> None:
    """Create the personal store (~/.engram), or a project store with --project."""
    engram = open_engram(ctx)
    before = engram.project if project else engram.personal
    existed = before is not None and before.exists()
    store, created = engram.init(project=project)
    if created and not existed:
        echo(f"initialized {store.kind} store in {store.root}")
    elif created:
        echo(
            f"{store.kind} store already initialized in {store.root}; its set-up files "
            "(config.yaml, README.md, .gitattributes) are brought up to date and committed"
        )
    else:
        echo(f"{store.kind} store already initialized in {store.root}")


# -- history and state --------------------------------------------------------------------------


@click.command()
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    help="Only events of this kind or family (memory, memory.created); repeatable.",
)
@click.option("--task", default=None, help="Only events about this task id.")
@click.option("--actor", default=None, help="Only events whose actor contains this text.")
@click.option("--since", default=None, help="Only events since a date (2026-11-01) or age (3d).")
@click.option("-n", "--limit", default=50, show_default=True, type=click.IntRange(1))
@store_options
@json_option
@click.pass_context
def log(
    ctx: click.Context,
    kinds: tuple[str, ...],
    task: str | None,
    actor: str | None,
    since: str | None,
    limit: int,
    project: bool,
    personal: bool,
    as_json: bool,
) -> None:
    """Events, newest first, one per line (like git log --oneline)."""
    from ..api import describe, written_by

    engram = open_engram(ctx, project, personal)
    entries = engram.log(kinds=kinds, task=task, actor=actor, since=since, limit=limit)
    if as_json:
        print_json([{"store": store, **event.to_dict()} for store, event in entries])
        return
    many = len(engram.stores()) > 1
    for store, event in entries:
        where = f"  ({store})" if many else ""
        echo(
            f"{event.id[-8:].lower()}  {local_time(event.time)}  {describe(event)}  "
            f"— {written_by(event.actor, event.data.get('origin'))}{where}"
        )
    if not entries:
        echo("no events")


@click.command()
@click.argument("ident", metavar="ID")
@store_options
@json_option
@click.pass_context
def show(ctx: click.Context, ident: str, project: bool, personal: bool, as_json: bool) -> None:
    """Show any record by id: a memory, task or session with all its events, or one event."""
    from ..api import EntityRecord, MemoryRecord

    engram = open_engram(ctx, project, personal)
    record = engram.show(ident)
    if as_json:
        print_json(record.to_dict())
        return
    if isinstance(record, MemoryRecord):
        memory = record.memory
        echo(f"memory {memory.id} ({record.store} store, {memory.status})")
        echo(memory.content)
        echo()
        events = record.events
    elif isinstance(record, EntityRecord):
        more = f"`engram task show {record.id}`" if record.type == "task" else "`engram sessions`"
        echo(f"{record.type} {record.id} ({record.store} store; {more} shows its state)")
        events = record.events
    else:
        events = (record.event,)
    for event in events:
        echo(visible_json(orjson.dumps(event.to_dict(), option=orjson.OPT_SORT_KEYS).decode()))


@click.command()
@click.argument("ident", metavar="[ID]", required=False)
@store_options
@json_option
@click.pass_context
def status(
    ctx: click.Context, ident: str | None, project: bool, personal: bool, as_json: bool
) -> None:
    """Where the stores are, what they hold, what is not committed, how remotes stand.

    With an event ID (as `engram log` or a write's receipt shows it): where that event is
    (file:line), its commit, whether the commit is pushed, and whether the search indexes hold
    it."""
    engram = open_engram(ctx, project, personal)
    if ident is not None:
        from .receipts import echo_status

        receipt = engram.event_status(ident)
        if as_json:
            print_json(as_json_value(receipt))
        else:
            echo_status(receipt)
        return
    report = engram.status()
    if as_json:
        print_json(as_json_value(report))
        return
    for entry in report:
        echo(f"{entry.store} store  {entry.path}")
        head = entry.head[:8] if entry.head else "no commits"
        echo(
            f"  branch {entry.branch or '(detached)'} at {head}; "
            f"{count(entry.memories, 'memory')} ({entry.forgotten} forgotten), "
            f"{count(entry.events, 'event')} in {count(entry.files, 'file')}"
        )
        if entry.uncommitted:
            echo(
                f"  uncommitted: {count(entry.uncommitted, 'event')}; "
                "`engram commit` commits them now"
            )
        else:
            echo("  uncommitted: none")
        upstream = entry.upstream
        if upstream:
            echo(
                f"  remote: {upstream.upstream} ahead {upstream.ahead}, "
                f"behind {upstream.behind} (as of the last fetch)"
            )
        elif entry.remotes:
            names = ", ".join(r.name for r in entry.remotes)
            echo(f"  remote: {names} (no upstream set for this branch)")
        else:
            echo("  remote: none")
        if entry.busy:
            echo(f"  note: {entry.busy}; commits wait until it is finished")
        for rel in entry.refused:
            echo(f"  damaged: {rel} changed in its committed part; run `engram verify`")
        for rel in entry.unreadable:
            echo(f"  not committable: {rel} {UNREADABLE}")
        for rel in entry.missing:
            echo(f"  missing: {rel} is committed but gone from the work tree")
        if entry.missing:
            echo(f"    restore: `{entry.restore}`")
        gone = entry.lost
        if gone.events:
            where = ", ".join(f"{rel} ({n})" for rel, n in gone.files.items())
            them = "them" if gone.events != 1 else "it"
            echo(
                f"  lost: {count(gone.events, 'event')} git took away, from {where}; "
                f"`engram recover --{entry.store}` brings {them} back"
            )


@click.command()
@store_options
@json_option
@click.pass_context
def verify(ctx: click.Context, project: bool, personal: bool, as_json: bool) -> None:
    """Re-read every event file and report damage. Exit status 1 if anything is wrong."""
    engram = open_engram(ctx, project, personal)
    report = engram.verify()
    if as_json:
        print_json(as_json_value(report))
    else:
        for entry in report.stores:
            verdict = "ok" if entry.ok else count(len(entry.problems), "problem")
            echo(
                f"{entry.store} store  {entry.path}: {count(entry.events, 'event')} in "
                f"{count(entry.files, 'file')}, {count(entry.duplicates, 'duplicate line')}; "
                f"{verdict}"
            )
            for problem in entry.problems:
                echo(f"  {problem.severity}: {problem.path}:{problem.line}: {problem.message}")
    if not report.ok:
        ctx.exit(1)


@click.command()
@click.option(
    "--fix",
    is_flag=True,
    help="Apply the repairs that lose nothing (backups are kept), then check again.",
)
@store_options
@json_option
@click.pass_context
def doctor(ctx: click.Context, fix: bool, project: bool, personal: bool, as_json: bool) -> None:
    """Find what is wrong with the stores and the command that fixes each. Exit 1 if anything."""
    from ..base.errors import LinkedStoreError

    try:
        engram = open_engram(ctx, project, personal)
    except LinkedStoreError as exc:  # no store opens: the link is the one finding
        from ..domain.doctor import refused

        report = refused(exc)
    else:
        report = engram.doctor(fix=fix)
    if as_json:
        print_json(as_json_value(report))
    else:
        for entry in report.stores:
            problems = [f for f in entry.findings if f.level != "note"]
            verdict = count(len(problems), "problem") if problems else "healthy"
            echo(f"{entry.store} store  {entry.path}: {verdict}")
            for line in entry.fixed:
                echo(f"  fixed: {line}")
            for finding in entry.findings:
                where = (
                    f"{finding.path}:{finding.line}: "
                    if finding.line
                    else f"{finding.path}: "
                    if finding.path
                    else ""
                )
                echo(f"  {finding.level}: {where}{finding.message}")
                echo(f"    fix: {finding.fix}")
    if not report.ok:
        ctx.exit(1)


@click.command()
@click.option(
    "--all",
    "everything",
    is_flag=True,
    help="Also every event git still holds that is in no branch, not only those seen here.",
)
@store_options
@json_option
@click.pass_context
def recover(
    ctx: click.Context, everything: bool, project: bool, personal: bool, as_json: bool
) -> None:
    """Bring back the events git deleted (clean, stash drop, reset, revert, rebase).

    They are read from the reflogs, `git stash list`, unreachable objects and Engram's own
    ledger, written back unchanged to new event files and committed. History is never
    rewritten; an event already in the store is never written twice.
    """
    engram = open_engram(ctx, project, personal)
    results = engram.recover(everything=everything)
    if as_json:
        print_json([r.to_dict() for r in results])
        return
    for result in results:
        if not result.events:
            echo(f"{result.store} store: nothing to recover")
        else:
            where = ", ".join(result.files)
            echo(
                f"{result.store} store: recovered {count(result.events, 'event')} "
                f"({result.from_git} from git, {result.events - result.from_git} from "
                f"the ledger) into {where}"
                + (f"; committed as {result.commit[:8]}" if result.commit else "")
            )
        for note in result.notes:
            echo(f"  note: {note}")


@click.command()
@click.option("-m", "--message", default=None, help="Subject line instead of the generated one.")
@store_options
@click.pass_context
def commit(ctx: click.Context, message: str | None, project: bool, personal: bool) -> None:
    """Commit pending events now (they are also committed in batches automatically)."""
    engram = open_engram(ctx, project, personal)
    for result in engram.commit(subject=message):
        if result.commit:
            echo(
                f"{result.store} store: committed {count(result.events, 'event')} as "
                f"{result.commit[:8]}"
            )
        else:
            echo(f"{result.store} store: nothing to commit")
        for rel in result.refused:
            echo(
                f"  not committed: {rel} changed in its committed part; run `engram verify`",
                err=True,
            )
        for rel in result.unreadable:
            echo(f"  not committed: {rel} {UNREADABLE}", err=True)


@click.command()
@click.option("--dry-run", is_flag=True, help="Say what would be folded; change nothing.")
@store_options
@json_option
@click.pass_context
def compact(
    ctx: click.Context, dry_run: bool, project: bool, personal: bool, as_json: bool
) -> None:
    """Fold each month's closed event files into one file, in one commit.

    Every line is kept byte for byte (exact duplicates once), ordered by (clock, id). Runs by
    itself at commit and sync time once a month has `compact.files` files (default 64). A month
    with a damaged line is left alone until `engram doctor` has set the line aside.
    """
    engram = open_engram(ctx, project, personal)
    results = engram.compact(dry_run=dry_run)
    if as_json:
        print_json([r.to_dict() for r in results])
        return
    for result in results:
        verb = "would fold" if dry_run else "folded"
        if result.months:
            folded = sum(m["files"] for m in result.months)
            made = sum(len(m["into"]) for m in result.months)
            echo(
                f"{result.store} store: {verb} {folded} event files into {made} "
                f"({result.events:,} events; {result.files_before} files before, "
                f"{result.files_after} after)"
                + (f" in commit {result.commit[:8]}" if result.commit else "")
            )
        else:
            echo(f"{result.store} store: nothing to compact ({result.files_before} event files)")
        for why in result.skipped:
            echo(f"  {why}", err=True)


# -- search maintenance ---------------------------------------------------------------------------


@click.command()
@click.option(
    "--check",
    is_flag=True,
    help="Only report whether the caches are current; exit 1 only when one must be "
    "rebuilt (a cache that is behind by design catches up on its own) or the "
    "vector index's graph cannot reach a memory.",
)
@store_options
@json_option
@click.pass_context
def reindex(ctx: click.Context, check: bool, project: bool, personal: bool, as_json: bool) -> None:
    """Rebuild the caches (read model, word and vector indexes) from the event files."""
    engram = open_engram(ctx, project, personal)
    if check:
        from ..api import IndexState

        states = engram.index_state(thorough=True)
        if as_json:
            print_json(as_json_value(states))
        else:
            for state in states:
                verdict = (
                    "current"
                    if state.current
                    else "behind (they work, and catch up on their own)"
                    if isinstance(state, IndexState) and state.reindex_stopped and state.healthy
                    else "behind by design (they catch up on their own)"
                    if state.healthy
                    else "not current: `engram reindex` rebuilds them"
                )
                echo(f"{state.store} store: caches {verdict}")
                for reason in state.stale:
                    echo(f"  {reason}")
                for reason in state.behind:
                    echo(f"  {reason}")
                if isinstance(state, IndexState) and state.model_problem:
                    echo(
                        f"  search.model {state.model!r} cannot be used, so recall goes by "
                        f"words only: {state.model_problem}"
                    )
        if not all(state.healthy for state in states):
            ctx.exit(1)
        return
    try:
        report = _reindex_with_progress(engram, as_json)
    except KeyboardInterrupt:
        echo("stopped: the next `engram reindex` goes on from what this one saved", err=True)
        ctx.exit(130)
    if as_json:
        print_json(as_json_value(report))
        return
    echo(
        f"reindexed {report.events} events, {report.memories} memories: "
        f"{report.embedded} embedded, {report.reused} reused from the cache, "
        f"in {report.seconds:.1f}s"
    )
    if report.resumed:
        echo(
            f"went on from a reindex that was stopped: {report.resumed} vectors were already "
            "in the vector index"
        )


def _reindex_with_progress(engram: Any, as_json: bool) -> Any:
    """`engram.reindex()`, with its bar on a terminal."""
    if sys.stderr.isatty() and not as_json:
        from rich.console import Console
        from rich.progress import Progress

        with Progress(console=Console(stderr=True), transient=True) as bar:
            # Shown from the start: reading the event files comes before the first embedding.
            reading: Any = bar.add_task("reading the event files", total=None)
            tasks: dict[str, Any] = {}

            def progress(stage: str, done: int, total: int) -> None:
                nonlocal reading
                if reading is not None:
                    bar.remove_task(reading)
                    reading = None
                if stage not in tasks:
                    tasks[stage] = bar.add_task(stage, total=total)
                bar.update(tasks[stage], completed=done)

            return engram.reindex(progress=progress)
    return engram.reindex()


@click.command()
@store_options
@json_option
@click.pass_context
def stats(ctx: click.Context, project: bool, personal: bool, as_json: bool) -> None:
    """Counts by kind, scope and store, average strength, and index freshness."""
    from ..api import IndexState

    engram = open_engram(ctx, project, personal)
    report = engram.stats()
    if as_json:
        print_json(as_json_value(report))
        return
    for entry in report:
        echo(f"{entry.store} store  {entry.path}")
        echo(
            f"  {entry.memories} memories ({entry.forgotten} forgotten, "
            f"{entry.superseded} superseded), {entry.events} events"
        )
        kinds = ", ".join(f"{k} {n}" for k, n in entry.by_kind.items()) or "-"
        echo(f"  by kind: {kinds}")
        scopes = ", ".join(f"{k} {n}" for k, n in entry.by_scope.items()) or "-"
        echo(f"  by scope: {scopes}")
        if entry.average_strength is not None:
            echo(
                f"  average strength: {entry.average_strength:.2f} "
                f"({entry.decayed} decayed below the floor)"
            )
        index = entry.index
        full = index if isinstance(index, IndexState) else None
        verdict = (
            "current"
            if index and index.current
            else "behind: an `engram reindex` stopped before it finished (running it again "
            "goes on from where it stopped)"
            if full and full.reindex_stopped
            else "behind by design"
            if index and index.healthy
            else "must be rebuilt (`engram reindex`)"
        )
        model = (
            None
            if full is None
            else "none: recall by words only"
            if full.model_problem
            else full.vector_model or full.model
        )
        if full is None:  # no read model yet: nothing has read the store
            echo("  indexes: not built yet (the first read builds them; or `engram reindex`)")
        else:
            echo(
                f"  indexes: {verdict} (text {full.text_index}, "
                f"vectors {full.vector_index}, model {model})"
            )
        if full and full.model_problem:
            echo(f"  search.model {full.model!r} cannot be used: {full.model_problem}")


def register(main: click.Group) -> None:
    """Add the store commands to the `engram` command group."""
    for command in (
        init,
        log,
        show,
        status,
        verify,
        doctor,
        recover,
        commit,
        compact,
        reindex,
        stats,
    ):
        main.add_command(command)
