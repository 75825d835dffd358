"""A sync of every store: commit what is pending, fetch and merge, push, then catch the read
model and the indexes up.

The git work (remotes, fetch, merge, push) is `engram.git.sync`'s; this module runs it for each
store of whatever holds the stores (`Syncable`: the Engram facade), whose commits, compaction,
read model and actor it uses along the way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Protocol

from ..git import sync as git_sync
from ..git.repo import StoreRepo
from ..git.sync import SyncError, SyncResult
from ..storage.store import Store

if TYPE_CHECKING:
    import pygit2

    from .indexing import IndexRefresh

PUSH_ATTEMPTS = 3


class Committed(Protocol):
    """A commit's result: how many pending events it took."""

    @property
    def events(self) -> int: ...


class Counted(Protocol):
    """A read model: how many events (and more) it holds."""

    def counts(self) -> dict[str, int]: ...


class Syncable(Protocol):
    """What a sync needs of the object holding the stores."""

    def stores(self) -> list[Store]: ...

    def projection(self, store: Store) -> Counted: ...

    def actor(self, store: Store) -> str: ...

    def commit_store(self, store: Store, *, repo: StoreRepo | None = ...) -> Committed: ...

    def compact_if_due(self, store: Store, repo: StoreRepo) -> None: ...

    def refresh_indexes(self, *, stores: Sequence[Store] | None = ...) -> IndexRefresh: ...


def sync(
    engram: Syncable,
    *,
    pull: bool = True,
    push: bool = True,
    remote: str | None = None,
    explicit: bool = False,
) -> list[SyncResult]:
    """Commit pending events, then fetch + merge (pull) and/or push, then catch the indexes up.

    `explicit`: the caller named the store(s); a store without a remote is then an error rather
    than skipped.
    """
    results = []
    for store in engram.stores():
        result = SyncResult(store=store.kind)
        store_repo = StoreRepo(store)  # one repository object for the whole sync of a store
        repo = store_repo.repo
        target = git_sync.target(store, repo, remote)
        if target is None:
            if explicit or len(engram.stores()) == 1:
                raise SyncError(git_sync.no_remote_hint(store))
            result.skipped = git_sync.no_remote_hint(store)
            results.append(result)
            continue
        result.remote, result.branch = target.remote, target.remote_branch
        git_sync.check_not_busy(store, store_repo)
        result.committed = engram.commit_store(store, repo=store_repo).events
        received = 0
        if pull:
            git_sync.fetch(store, target)
            result.merge, received = _merge(engram, store, repo, target)
            if result.merge in ("merged", "fast-forward"):
                with store.lock():
                    engram.compact_if_due(store, store_repo)
        if push:
            for attempt in range(PUSH_ATTEMPTS):
                try:
                    result.pushed = git_sync.push(store, repo, target)
                    break
                except git_sync.Rejected:
                    if not pull or attempt == PUSH_ATTEMPTS - 1:
                        raise SyncError(
                            f"{target.remote} has commits on {target.remote_branch} that this "
                            "clone lacks; run `engram sync` to merge them first"
                        ) from None
                    git_sync.fetch(store, target)
                    result.merge, more = _merge(engram, store, repo, target)
                    received += more
        result.received = received
        if pull:
            result.indexes = asdict(engram.refresh_indexes(stores=[store]))
        results.append(result)
    if results and all(r.skipped for r in results):
        raise SyncError(results[0].skipped or "nothing to sync")
    return results


def _merge(
    engram: Syncable, store: Store, repo: pygit2.Repository, target: git_sync.Target
) -> tuple[str, int]:
    """Merge what the last fetch brought; counts the events it brought in the read model."""
    return git_sync.merge(
        store,
        repo,
        target,
        count_events=lambda: engram.projection(store).counts()["events"],
        actor=lambda: engram.actor(store),
    )
