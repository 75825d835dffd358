"""`engram remote|sync|pull|push|clone|hooks`: a store across machines, as click commands.

`register(main)` adds them to the `engram` group (see `engram.git.sync` and `engram.githooks`).
"""

from __future__ import annotations

import sys
from typing import Any

import click

from ..base.display import echo
from ..base.wording import count
from .common import json_option, open_engram, print_json, store_options


def _progress_bar() -> Any:
    """A progress callback for embedding, drawn only on a terminal; (context, callback)."""
    if not sys.stderr.isatty():
        return None, None
    from rich.progress import Progress

    bar = Progress(transient=True)
    tasks: dict[str, Any] = {}

    def progress(store: str, done: int, total: int) -> None:
        if store not in tasks:
            tasks[store] = bar.add_task(f"indexing ({store} store)", total=total)
        bar.update(tasks[store], completed=done)

    return bar, progress


def _sync_line(result: Any) -> str:
    if result.skipped:
        return f"{result.store} store: skipped; {result.skipped}"
    where = f"{result.remote}/{result.branch}"
    parts = []
    if result.committed:
        parts.append(f"committed {count(result.committed, 'event')}")
    merge = {
        "up-to-date": f"up to date with {where}",
        "fast-forward": f"fast-forwarded to {where}",
        "merged": f"merged {where}",
        "no-remote-branch": f"created {where}",
        "none": None,
    }[result.merge]
    if merge:
        parts.append(merge)
    if result.received:
        parts.append(f"received {count(result.received, 'event')}")
    if result.pushed:
        parts.append(f"pushed {result.pushed} commit{'s' if result.pushed != 1 else ''} to {where}")
    elif result.merge == "none":
        parts.append(f"{where} already has everything")
    return f"{result.store} store: " + ", ".join(parts or ["nothing to do"])


def register(main: click.Group) -> None:
    """Add the sync, remote and hooks commands to the `engram` command group."""

    def run_sync(
        ctx: click.Context,
        project: bool,
        personal: bool,
        remote: str | None,
        as_json: bool,
        *,
        pull: bool,
        push: bool,
    ) -> None:
        from ..domain.syncing import sync

        engram = open_engram(ctx, project, personal)
        results = sync(engram, pull=pull, push=push, remote=remote, explicit=project or personal)
        if as_json:
            print_json([r.to_dict() for r in results])
            return
        for result in results:
            echo(_sync_line(result))

    remote_option = click.option(
        "--remote",
        default=None,
        help="The remote to use (default: the branch's upstream, "
        "then origin, then the only remote).",
    )

    @main.command()
    @remote_option
    @store_options
    @json_option
    @click.pass_context
    def sync(
        ctx: click.Context, remote: str | None, project: bool, personal: bool, as_json: bool
    ) -> None:
        """Commit pending events, fetch, merge, push, then bring the indexes up to date.

        Uses git itself for the network (your ssh keys, credential helpers and proxies). For a
        project store this syncs the project's current branch, as `git pull` + `git push` would.
        """
        run_sync(ctx, project, personal, remote, as_json, pull=True, push=True)

    @main.command()
    @remote_option
    @store_options
    @json_option
    @click.pass_context
    def pull(
        ctx: click.Context, remote: str | None, project: bool, personal: bool, as_json: bool
    ) -> None:
        """Commit pending events, fetch and merge, then bring the indexes up to date."""
        run_sync(ctx, project, personal, remote, as_json, pull=True, push=False)

    @main.command()
    @remote_option
    @store_options
    @json_option
    @click.pass_context
    def push(
        ctx: click.Context, remote: str | None, project: bool, personal: bool, as_json: bool
    ) -> None:
        """Commit pending events and push them (run `engram sync` when the remote moved on)."""
        run_sync(ctx, project, personal, remote, as_json, pull=False, push=True)

    @main.command()
    @click.argument("url")
    @click.option(
        "--no-index",
        is_flag=True,
        help="Do not build the indexes now (the first recall builds them).",
    )
    @click.pass_context
    def clone(ctx: click.Context, url: str, no_index: bool) -> None:
        """Clone a personal store from URL (any git URL or path) onto this machine.

        The store goes to ~/.engram (or ENGRAM_HOME), which must not hold a store yet; then its
        indexes are built, with a progress bar on a terminal.
        """
        from ..base.config import engram_home
        from ..git.sync import clone as clone_store

        destination = engram_home()
        clone_store(url, destination, progress=sys.stderr.isatty())
        echo(f"cloned {url} into {destination}")
        if no_index:
            return
        engram = open_engram(ctx, personal=True)
        bar, progress = _progress_bar()
        if bar is not None:
            with bar:
                report = engram.refresh_indexes(progress=progress)
        else:
            report = engram.refresh_indexes()
        n = report.embedded
        echo(
            f"indexed {report.events_added} events: {n} text{'' if n == 1 else 's'} "
            f"embedded, in {report.seconds:.1f}s"
        )

    @main.group()
    def remote() -> None:
        """The personal store's git remotes (a project store uses its repository's remotes)."""

    @remote.command(name="add")
    @click.argument("name")
    @click.argument("url")
    @click.pass_context
    def remote_add(ctx: click.Context, name: str, url: str) -> None:
        """Add a remote to the personal store; `engram sync` then pushes to it."""
        from ..git.sync import remote_add as add

        engram = open_engram(ctx, personal=True)
        [store] = engram.stores()
        add(store, name, url)
        echo(f"added remote {name} ({url}); run `engram sync` to send and receive events")

    @remote.command(name="list")
    @store_options
    @json_option
    @click.pass_context
    def remote_list(ctx: click.Context, project: bool, personal: bool, as_json: bool) -> None:
        """List the remotes of each store."""
        from ..git.sync import remote_list as listing

        engram = open_engram(ctx, project, personal)
        out = [{"store": s.kind, "remotes": listing(s)} for s in engram.stores()]
        if as_json:
            print_json(out)
            return
        for entry in out:
            if not entry["remotes"]:
                echo(f"{entry['store']} store: no remotes")
            for r in entry["remotes"]:
                echo(f"{entry['store']} store: {r['name']}\t{r['url']}")

    @remote.command(name="remove")
    @click.argument("name")
    @click.pass_context
    def remote_remove(ctx: click.Context, name: str) -> None:
        """Remove a remote from the personal store (nothing is deleted at the remote)."""
        from ..git.sync import remote_remove as remove

        engram = open_engram(ctx, personal=True)
        [store] = engram.stores()
        remove(store, name)
        echo(f"removed remote {name}")

    @main.group()
    def hooks() -> None:
        """Git hooks: keep caches current after merge/checkout/rebase; verify before commit."""

    def _hook_store(ctx: click.Context, project: bool, personal: bool) -> Any:
        engram = open_engram(ctx, project, personal)
        return engram.stores()[0]  # the project store when there is one

    @hooks.command(name="install")
    @store_options
    @click.pass_context
    def hooks_install(ctx: click.Context, project: bool, personal: bool) -> None:
        """Install the hooks in the store's repository (the project's, when in one)."""
        from ..git.hooks import install

        for line in install(_hook_store(ctx, project, personal)):
            echo(line)

    @hooks.command(name="uninstall")
    @store_options
    @click.pass_context
    def hooks_uninstall(ctx: click.Context, project: bool, personal: bool) -> None:
        """Remove Engram's lines from the hooks, keeping everything else in them."""
        from ..git.hooks import uninstall

        lines = uninstall(_hook_store(ctx, project, personal))
        for line in lines or ["no Engram hooks installed"]:
            echo(line)
