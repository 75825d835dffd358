"""`engram remember|get|update|forget|list|recall|consolidate`: memories, as click commands.

`register(main)` adds them to the `engram` group.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from ..base.display import echo, local_time
from ..base.results import as_json as as_json_value
from .backlog import embed_backlog
from .common import at_option, json_option, open_engram, print_json, read_text, store_options
from .memory_lines import memory_text, place, status_text, with_freshness
from .receipts import echo_receipt, with_receipts

if TYPE_CHECKING:
    pass

# -- memories -----------------------------------------------------------------------------------


def memory_options(func: Callable[..., Any]) -> Callable[..., Any]:
    from ..base.kinds import MEMORY_KINDS, SOURCES

    options = [
        click.option(
            "--kind",
            "kind",
            type=click.Choice(list(MEMORY_KINDS)),
            default=None,
            help="What sort of memory this is (default: fact).",
        ),
        click.option(
            "--tag", "tags", multiple=True, help="A tag; repeat, or separate with commas."
        ),
        click.option(
            "--scope",
            default=None,
            help="Where it applies, e.g. a component or path: backend, src/api.",
        ),
        click.option(
            "--source",
            type=click.Choice(list(SOURCES)),
            default=None,
            help="Who said it (default: agent-inferred).",
        ),
        click.option(
            "--importance", type=click.FloatRange(0, 1), default=None, help="0 to 1 (default 0.5)."
        ),
        click.option(
            "--valid-from",
            default=None,
            help="Not valid before this date (2026-12-01, 2026-12-01T09:00, or 3d).",
        ),
        click.option(
            "--valid-until",
            default=None,
            help="Not valid from this date on (same forms; an age counts forward).",
        ),
        click.option(
            "--redact",
            is_flag=True,
            help="Store detected secrets as [REDACTED:type] instead of refusing.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@click.command()
@click.argument("text")
@memory_options
@click.option(
    "--at",
    default=None,
    help="When it happened or was said, if not now (a date, or an age like 3d).",
)
@click.option("--task", default=None, help="The task id it belongs to.")
@click.option(
    "--supersedes",
    multiple=True,
    metavar="ID",
    help="A memory this one replaces (it leaves recall; its history stays).",
)
@click.option(
    "--cite",
    "cite",
    multiple=True,
    metavar="PATH",
    help="A tracked file it is about (PATH, PATH:LINE or PATH::SYMBOL), relative to the "
    "current directory or absolute inside the repository; repeat. Paths its text names "
    "(from the repository's top) are found as well.",
)
@click.option(
    "--global",
    "everywhere",
    is_flag=True,
    help="For every project: a personal memory written inside a git repository "
    "otherwise belongs to that project (its root commit) and is recalled only "
    "there.",
)
@store_options
@json_option
@click.pass_context
def remember(
    ctx: click.Context,
    text: str,
    kind: str | None,
    tags: tuple[str, ...],
    scope: str | None,
    source: str | None,
    importance: float | None,
    valid_from: str | None,
    valid_until: str | None,
    redact: bool,
    at: str | None,
    task: str | None,
    supersedes: tuple[str, ...],
    cite: tuple[str, ...],
    everywhere: bool,
    project: bool,
    personal: bool,
    as_json: bool,
) -> None:
    """Store a memory (TEXT, or - to read it from stdin). Durable when this returns."""
    from ..base.kinds import DEFAULT_IMPORTANCE, DEFAULT_KIND, DEFAULT_SOURCE

    engram = open_engram(ctx, project, personal)
    result = engram.remember(
        read_text(text),
        kind=kind or DEFAULT_KIND,
        tags=tags,
        scope=scope,
        source=source or DEFAULT_SOURCE,
        importance=DEFAULT_IMPORTANCE if importance is None else importance,
        valid_from=valid_from,
        valid_until=valid_until,
        at=at,
        task=task,
        supersedes=supersedes,
        redact=redact,
        everywhere=everywhere,
        cite=cite,
        relative_to=ctx.obj["cwd"],
    )
    if as_json:
        print_json(with_receipts(engram, result.to_dict()))
        return
    memory = result.memory
    if result.duplicate:
        similarity = result.related[0][1]
        echo(
            f"reinforced {memory.id[:8]} instead of adding a near-duplicate "
            f"(similarity {similarity:.2f}): {memory.summary(60)}"
        )
        echo(f"  your text is kept in its history: engram get --history {memory.id[:8]}")
        echo_receipt(engram)
        return
    belongs = (
        f", project {memory.project[:8]}"
        if memory.project
        else ", this project"
        if memory.project_remote
        else ""
    )
    echo(f"remembered {memory.id[:8]} ({memory.kind}, {memory.store} store{belongs})")
    echo_receipt(engram)
    if memory.citations:
        files = dict.fromkeys(c["path"] for c in memory.citations)  # a file once, in order
        echo("  cites " + ", ".join(files) + " (as at HEAD)")
    for other, similarity in result.related:
        short = other.id[:8]
        echo(f"  possible contradiction: {short} (similarity {similarity:.2f}) {other.summary(50)}")
        found = result.differs_from(other.id)
        if found:
            from ..search.neardup import describe as describe_differences

            echo(f"    the new text differs from {short} in {describe_differences(found)}")
        elif (other.kind, other.scope) != (memory.kind, memory.scope):
            echo(f"    {short} is {place(other)}; the new memory is {place(memory)}")
        echo(f"    if {short} is now wrong, replace it: engram remember ... --supersedes {short}")
    if result.uncompared:
        echo(
            f"  not compared with {result.uncompared:,} memories that have no vector yet "
            "(a bulk write being embedded; `engram reindex` embeds them now)"
        )


@click.command()
@click.argument("ident", metavar="ID")
@click.option("--history", is_flag=True, help="Show every version, oldest first.")
@store_options
@json_option
@click.pass_context
def get(
    ctx: click.Context, ident: str, history: bool, project: bool, personal: bool, as_json: bool
) -> None:
    """Show one memory by id (a unique prefix of at least 4 characters is enough); `engram show`
    shows a task, a session or an event."""
    engram = open_engram(ctx, project, personal)
    _not_a_memory(engram, ident)
    if history:
        versions = engram.history(ident)
        if as_json:
            print_json([{"event": e.to_dict(), "memory": m.to_dict()} for e, m in versions])
            return
        for number, (event, memory) in enumerate(versions, start=1):
            echo(f"version {number}  {event.kind}  {local_time(event.time)}  by {event.actor}")
            if memory.status == "forgotten":
                echo(f"  forgotten: {memory.forgotten_reason}")
            elif event.kind == "memory.reinforced":
                similarity = event.data.get("similarity")
                echo(
                    "  confirmed by a near-duplicate"
                    + (f" (similarity {similarity:.2f})" if similarity is not None else "")
                    + (", which said:" if "content" in event.data else "")
                )
                for line in str(event.data.get("content", "")).splitlines():
                    echo(f"  {line}")
            else:
                echo(f"  [{memory.kind}] {' '.join('#' + t for t in memory.tags)}".rstrip())
                for line in memory.content.splitlines():
                    echo(f"  {line}")
            echo()
        return
    memory = engram.get(ident)
    fresh = engram.freshness([memory], explain=True).get(memory.id)
    if as_json:
        print_json(with_freshness(memory, fresh))
        return
    rows = [
        ("id", memory.id),
        ("kind", memory.kind),
        ("store", memory.store),
        ("status", status_text(memory)),
        ("tags", ", ".join(memory.tags) or "-"),
        ("scope", memory.scope or "-"),
        ("source", memory.source),
        ("importance", f"{memory.importance:g}"),
        (
            "valid",
            f"{local_time(memory.valid_from) or '…'} → {local_time(memory.valid_until) or '…'}"
            if memory.valid_from or memory.valid_until
            else "always",
        ),
        ("created", f"{local_time(memory.created_at)} by {memory.created_by}"),
        ("updated", f"{local_time(memory.updated_at)} (version {memory.version})"),
    ]
    for name, value in rows:
        echo(f"{name + ':':<12}{value}")
    for file in fresh.files if fresh is not None else ():
        echo(f"{'cites:':<12}{file.describe()}")
    echo()
    echo(memory.content)


@click.command()
@click.argument("ident", metavar="ID")
@click.argument("text", required=False)
@memory_options
@store_options
@json_option
@click.pass_context
def update(
    ctx: click.Context,
    ident: str,
    text: str | None,
    kind: str | None,
    tags: tuple[str, ...],
    scope: str | None,
    source: str | None,
    importance: float | None,
    valid_from: str | None,
    valid_until: str | None,
    redact: bool,
    project: bool,
    personal: bool,
    as_json: bool,
) -> None:
    """Change a memory's TEXT or fields. The old version stays in its history."""
    engram = open_engram(ctx, project, personal)
    memory = engram.update(
        ident,
        None if text is None else read_text(text),
        kind=kind,
        tags=tags if tags else None,
        scope=scope,
        source=source,
        importance=importance,
        valid_from=valid_from,
        valid_until=valid_until,
        redact=redact,
    )
    if as_json:
        print_json(with_receipts(engram, memory.to_dict()))
    else:
        echo(f"updated {memory.id[:8]} (version {memory.version})")
        echo_receipt(engram)


@click.command()
@click.argument("ident", metavar="ID")
@click.option("--reason", required=True, help="Why it no longer holds (kept in its history).")
@store_options
@json_option
@click.pass_context
def forget(
    ctx: click.Context, ident: str, reason: str, project: bool, personal: bool, as_json: bool
) -> None:
    """Retire a memory. Nothing is deleted: `engram get --history ID` still shows it."""
    engram = open_engram(ctx, project, personal)
    memory = engram.forget(ident, reason=reason)
    if as_json:
        print_json(with_receipts(engram, memory.to_dict()))
    else:
        echo(f"forgot {memory.id[:8]}")
        echo_receipt(engram)


def filter_options(func: Callable[..., Any]) -> Callable[..., Any]:
    from ..base.kinds import MEMORY_KINDS

    options = [
        click.option(
            "--kind",
            "kinds",
            multiple=True,
            type=click.Choice(list(MEMORY_KINDS)),
            help="Only this kind; repeat for several.",
        ),
        click.option(
            "--tag", "tags", multiple=True, help="Only memories with this tag (all given)."
        ),
        click.option("--scope", default=None, help="Only this scope."),
        click.option(
            "--all",
            "include_all",
            is_flag=True,
            help="Include forgotten and superseded memories (marked so) and those outside "
            "their validity window.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@click.command(name="list")
@click.option(
    "-n",
    "--limit",
    default=20,
    show_default=True,
    type=click.IntRange(1),
    help="At most this many.",
)
@filter_options
@store_options
@json_option
@click.pass_context
def list_(
    ctx: click.Context,
    limit: int,
    kinds: tuple[str, ...],
    tags: tuple[str, ...],
    scope: str | None,
    include_all: bool,
    project: bool,
    personal: bool,
    as_json: bool,
) -> None:
    """Memories, most recently changed first."""
    engram = open_engram(ctx, project, personal)
    found = engram.memories(
        kinds=kinds,
        tags=tags,
        scope=scope,
        limit=limit,
        include_forgotten=include_all,
        include_expired=include_all,
    )
    fresh = engram.freshness(found)
    if as_json:
        print_json([with_freshness(m, fresh.get(m.id)) for m in found])
        return
    many = len(engram.stores()) > 1
    for memory in found:
        echo(memory_text(memory, many_stores=many, fresh=fresh.get(memory.id)))
    if not found:
        echo("no memories" + (" match" if kinds or tags or scope else " yet"))


def _not_a_memory(engram: Any, ident: str) -> None:
    """Point to the command that shows `ident` when it names a task or a session, not a memory."""
    from ..api import EntityRecord
    from ..base.errors import EngramError, UsageError

    try:
        engram.get(ident)
        return
    except EngramError:
        pass
    try:
        record = engram.show(ident)
    except EngramError:
        return  # get says what is wrong
    if isinstance(record, EntityRecord):
        task = f" or `engram task show {ident}`" if record.type == "task" else ""
        raise UsageError(
            f"{ident} is a {record.type}, not a memory: see it with `engram show {ident}`{task}"
        )


@click.command()
@click.argument("query")
@click.option(
    "-k",
    "--k",
    "--limit",
    "k",
    default=10,
    show_default=True,
    type=click.IntRange(1),
    help="At most this many results.",
)
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
def recall(
    ctx: click.Context,
    query: str,
    k: int,
    kinds: tuple[str, ...],
    tags: tuple[str, ...],
    scope: str | None,
    include_all: bool,
    task: str | None,
    since: str | None,
    until: str | None,
    full: bool,
    explain: bool,
    at: str | None,
    project: bool,
    personal: bool,
    as_json: bool,
) -> None:
    """Find memories by meaning and by words (hybrid BM25 + vector ranking)."""
    engram = open_engram(ctx, project, personal, at)
    hits = engram.recall(
        query,
        k=k,
        kinds=kinds,
        tags=tags,
        scope=scope,
        task=task,
        since=since,
        until=until,
        include_forgotten=include_all,
        include_expired=include_all,
        include_decayed=include_all,
        partial=True,  # answered at once; what is not embedded yet is embedded after
    )
    if as_json:
        # A partial answer says so in each hit (the list stays the answer's shape).
        print_json(
            [
                {
                    **hit.to_dict(full=full or explain),
                    **({"partial": True, "unembedded": hits.unembedded} if hits.partial else {}),
                }
                for hit in hits
            ]
        )
        embed_backlog(engram, hits, as_json=True)
        return
    many = len(engram.stores()) > 1
    detail = (
        engram.freshness(
            [h.memory for h in hits if h.freshness and h.freshness.stale], explain=True
        )
        if explain
        else {}
    )
    for hit in hits:
        echo(memory_text(hit.memory, many_stores=many, fresh=hit.freshness))
        if hit.memory.id in detail:
            echo(f"          (cited files: {detail[hit.memory.id].describe()})")
        if explain:
            explained = hit.explain()
            parts = "  ".join(f"{k}={v:.3f}" for k, v in explained.items() if isinstance(v, float))
            echo(f"          {parts}  model={explained['model']}")
            for note in explained.get("notes", []):
                echo(f"          ({note})")
        if full:
            for line in hit.memory.content.splitlines():
                echo(f"          {line}")
    if not hits:
        echo("nothing found")
    embed_backlog(engram, hits)


@click.command()
@click.option("--apply", is_flag=True, help="Merge the clusters (otherwise only show them).")
@click.option(
    "--similarity",
    type=click.FloatRange(0, 1),
    default=None,
    help="Merge memories at least this similar (default: consolidate.similarity).",
)
@store_options
@json_option
@click.pass_context
def consolidate(
    ctx: click.Context,
    apply: bool,
    similarity: float | None,
    project: bool,
    personal: bool,
    as_json: bool,
) -> None:
    """Merge clusters of near-duplicate memories into one (dry run unless --apply)."""
    engram = open_engram(ctx, project, personal)
    plans = engram.consolidate(apply=apply, similarity=similarity)
    if as_json:
        print_json(as_json_value(plans))
        return
    if not plans:
        echo("no near-duplicates found")
        return
    for plan in plans:
        ids = ", ".join(m.id[:8] for m in plan.members)
        if plan.merged_into:
            echo(f"merged {ids} into {plan.merged_into[:8]}: {plan.content[:60]}")
        else:
            echo(f"would merge {ids}: {plan.content[:60]}")
            for member in plan.members:
                echo(f"  {member.id[:8]}  {member.summary}")
    if not apply:
        echo("dry run: nothing changed; run with --apply to merge")


def register(main: click.Group) -> None:
    """Add the memory commands to the `engram` command group."""
    for command in (remember, get, update, forget, list_, recall, consolidate):
        main.add_command(command)
