"""What `engram recall` does with a partial answer (memories not embedded yet, matched by words
only, see `engram.search.backlog`): on a terminal it embeds them with a progress bar after the
answer (Ctrl-C stops; the next recall goes on from there); otherwise it leaves them to a
detached process, so a script gets its answer at once and its next recall sees more."""

from __future__ import annotations

import sys
from typing import Any

from ..base.display import echo


def embed_backlog(engram: Any, hits: Any, *, as_json: bool = False) -> None:
    if not getattr(hits, "partial", False):
        return
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import Progress

        echo(
            hits.partial_note("embedding them now (Ctrl-C stops; the next recall goes on)"),
            err=as_json,
        )
        try:
            with Progress(console=Console(stderr=True), transient=True) as bar:
                for backlog in hits.backlog:
                    task = bar.add_task(f"embedding ({backlog.store})", total=len(backlog))
                    backlog.run(lambda done, _total, task=task: bar.update(task, completed=done))
        except KeyboardInterrupt:
            echo("stopped: the next recall embeds the rest", err=True)
        return
    from .githooks import refresh_in_background

    echo(
        hits.partial_note("embedding them in the background; the next recall sees more"),
        err=as_json,
    )
    kinds = {backlog.store for backlog in hits.backlog}
    for store in engram.stores():
        if store.kind in kinds:
            refresh_in_background(store)


def embed_imported(engram: Any, report: Any, *, as_json: bool) -> None:
    """After a bulk import: embed the new memories with a progress bar on a terminal;
    otherwise start that in a detached process and say so (recall meanwhile answers from words
    and what is embedded, and says it is partial)."""
    from ..search.backlog import INLINE

    created = report.counts().get("memory.created", 0)
    if report.dry_run or created <= INLINE:
        return
    stores = [s for s in engram.stores() if s.kind == report.store]
    if sys.stderr.isatty() and not as_json:
        from rich.console import Console
        from rich.progress import Progress

        try:
            with Progress(console=Console(stderr=True), transient=True) as bar:
                task = bar.add_task(f"embedding {created:,} memories ({report.store})", total=None)

                def progress(_store: str, done: int, total: int) -> None:
                    bar.update(task, completed=done, total=total)

                engram.refresh_indexes(stores=stores, progress=progress)
        except KeyboardInterrupt:
            echo("stopped: the rest is embedded by the next recall", err=True)
        return
    from .githooks import refresh_in_background

    for store in stores:
        refresh_in_background(store)
    echo(
        f"embedding {created:,} memories in the background; until that is done recall "
        "answers from words and says it is partial (`engram reindex` embeds them now)",
        err=True,
    )
