"""The search caches of a workspace's stores: rebuilt from the event files (`engram reindex`),
brought up to date with only what changed (after a pull, a merge, a checkout), and how current
each one is (`engram reindex --check`, `stats`), without changing anything.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..base import layout
from ..base.errors import EngramError
from ..base.files import atomic_write
from ..readmodel.projection import Projection
from ..storage.reindexing import reindexing, stopped_reindex
from ..storage.store import Store
from .workspace import Workspace

if TYPE_CHECKING:
    from .doctor.cache_checks import DamagedCache


@dataclass(frozen=True)
class StoreReindex:
    """What `reindex` rebuilt in one store."""

    store: str
    events: int
    memories: int
    embedded: int
    reused: int
    vectors: bool
    resumed: int = 0  # vectors kept from a reindex killed half-way


@dataclass(frozen=True)
class ReindexReport:
    """What `reindex` rebuilt: totals over the stores, each store, and how long it took."""

    events: int
    memories: int
    embedded: int
    reused: int
    stores: tuple[StoreReindex, ...]
    seconds: float
    resumed: int = 0  # vectors kept from a reindex killed half-way


@dataclass(frozen=True)
class IndexRefresh:
    """What `refresh_indexes` caught up: events read and dropped, texts indexed and embedded."""

    events_added: int
    events_removed: int
    indexed_text: int
    embedded: int
    reused: int
    seconds: float


@dataclass(frozen=True)
class MissingReadModel:
    """`index_state` of a store whose read model is missing: everything must be rebuilt."""

    store: str
    path: str
    projection: str
    current: bool
    healthy: bool
    behind: tuple[str, ...]
    stale: tuple[str, ...]


@dataclass(frozen=True)
class IndexState:
    """`index_state` of a store with a read model: each cache current, behind or missing."""

    store: str
    path: str
    projection: str  # current | behind | damaged (found only by a thorough check)
    text_index: str  # current | behind | missing | damaged
    text_pending: int
    vector_index: str  # off | unused | current | behind | missing | damaged
    vector_pending: int
    vector_model: str | None
    model: str
    behind: tuple[str, ...]  # why a cache is behind (it catches up on its own)
    stale: tuple[str, ...]  # why a cache must be rebuilt
    current: bool
    healthy: bool
    reindex_stopped: bool = False  # an `engram reindex` began and did not finish
    # Why `model` names no model this Engram can run (recall then goes by words only; the
    # vector index is unused): `engram.search.models.choice`.
    model_problem: str | None = None


StoreIndexState = IndexState | MissingReadModel


class Indexes:
    """Rebuilding, refreshing and checking the caches of a workspace's stores."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def reindex(
        self,
        *,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> ReindexReport:
        """Rebuild every cache of the selected stores from the event files.

        Embeddings come from the embedding cache where the same text was embedded before by the
        same model, so a second reindex embeds nothing. `progress(stage, done, total)` is called
        as work advances, `stage` saying what and in which store: "embedding (personal)", then
        "linking (personal)" as vectors are linked into the vector index's graph.
        """
        started = time.perf_counter()
        stores: list[StoreReindex] = []
        for store in self.workspace.stores():
            with reindexing(store):  # a second reindex of the store waits for the first
                stores.append(self._reindex_one(store, progress))
        return ReindexReport(
            events=sum(s.events for s in stores),
            memories=sum(s.memories for s in stores),
            embedded=sum(s.embedded for s in stores),
            reused=sum(s.reused for s in stores),
            stores=tuple(stores),
            seconds=round(time.perf_counter() - started, 3),
            resumed=sum(s.resumed for s in stores),
        )

    def _reindex_one(
        self, store: Store, progress: Callable[[str, int, int], None] | None
    ) -> StoreReindex:
        self.workspace.drop_search(store)
        proj = self.workspace.cached_projection(store) or Projection(store)
        try:
            proj.refresh()  # first, so that events whose files vanished are noted as such
        except (OSError, EngramError):
            pass
        cache = layout.cache_dir(store.local_dir)
        mark = cache / layout.REINDEX_MARK
        # A reindex killed half-way left its mark, and the vector index as last saved: linking
        # vectors into the graph is nearly all of a large store's reindex, so that much is
        # kept (each vector checked against the embedding cache, and what is no longer a
        # memory taken out) rather than done again.
        resuming = mark.exists() and (cache / layout.VECTOR_META).exists()
        with store.lock():
            proj.reset()
            shutil.rmtree(cache / layout.TEXT_INDEX_DIR, ignore_errors=True)
            if not resuming:
                for name in (layout.VECTOR_INDEX, layout.VECTOR_META):
                    (cache / name).unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # a read-only store's caches are in memory
                atomic_write(mark, json.dumps({"started": round(time.time())}), durable=False)
        self.workspace.drop_projection(store)
        proj = self.workspace.projection(store)
        counts = proj.counts()
        ids = proj.all_memory_ids()
        total = len(ids)
        search = self.workspace.search(store)
        search.sync_text()
        report = None
        embedder = self.workspace.embedder(store)
        if embedder is not None:
            done = {"embedding": 0, "linking": 0}

            def step(stage: str) -> Callable[[int], None]:
                def advance(count: int) -> None:
                    done[stage] += count
                    if progress is not None:
                        progress(f"{stage} ({store.kind})", done[stage], total)

                return advance

            if resuming:
                search.drop_vectors_except(embedder, set(ids))
            report = search.sync_vectors(
                embedder,
                self.workspace.settings(store),
                force=True,
                progress=step("embedding"),
                linking=step("linking"),
            )
        with contextlib.suppress(OSError):
            mark.unlink(missing_ok=True)
        return StoreReindex(
            store.kind,
            counts["events"],
            total,
            report.embedded if report else 0,
            report.reused if report else 0,
            embedder is not None,
            report.kept if report and resuming else 0,
        )

    def refresh_indexes(
        self,
        *,
        stores: Sequence[Store] | None = None,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> IndexRefresh:
        """Bring every cache up to date with the event files, doing only what changed.

        What `reindex` does from scratch, this does incrementally: after a pull, a merge or a
        branch switch it reads the changed files, indexes the changed memories' words, and folds
        their vectors (embedding only texts the embedding cache has not seen) into the index.
        """
        started = time.perf_counter()
        totals = dict.fromkeys(
            ("events_added", "events_removed", "indexed_text", "embedded", "reused"), 0
        )
        for store in stores if stores is not None else self.workspace.stores():
            proj = self.workspace.open_projection(store)
            refreshed = proj.refresh()
            totals["events_added"] += refreshed.events_added
            totals["events_removed"] += refreshed.events_removed
            search = self.workspace.search(store)
            totals["indexed_text"] += search.sync_text().indexed_text
            if (
                proj.dirty_count("vec") == 0
                and (layout.cache_dir(store.local_dir) / layout.VECTOR_META).exists()
            ):
                continue  # nothing to embed: do not load the model or the index for nothing
            embedder = self.workspace.embedder(store)
            if embedder is None:
                continue
            total = proj.dirty_count("vec")
            done = 0

            def step(count: int, total: int = total, kind: str = store.kind) -> None:
                nonlocal done
                done += count
                if progress is not None:
                    progress(kind, done, total)

            report = search.sync_vectors(
                embedder, self.workspace.settings(store), force=True, progress=step
            )
            totals["embedded"] += report.embedded
            totals["reused"] += report.reused
        return IndexRefresh(**totals, seconds=round(time.perf_counter() - started, 3))

    def index_state(self, *, thorough: bool = False) -> list[StoreIndexState]:
        """Whether each store's caches are current, without changing anything.

        `current`: every cache has caught up with the files. `healthy`: nothing needs a rebuild.
        A cache that is merely behind is so by design and catches up on its own: the read model
        reads changed files on the next command, the word index takes changes on the next
        search, and the vector index saves changes in batches (`search.vector_flush`) while
        searches score the unsaved ones. Only a missing or damaged cache, which must be rebuilt
        from scratch, makes a store unhealthy: damaged as `engram doctor` finds it, by the same
        check (`damaged_caches`). That check costs a stat of each index file; with `thorough`
        (`reindex --check`) it also reads the SQLite databases through (`PRAGMA quick_check`:
        damage inside a page shows only to a read of that page), and vectors the graph cannot
        reach make a store unhealthy too (`engram.search.reachability`).
        """
        import json

        from ..search.models.choice import model_problem
        from ..search.reachability import unreachable_note

        out: list[StoreIndexState] = []
        for store in self.workspace.stores():
            cache = layout.cache_dir(store.local_dir)
            proj_path = cache / layout.PROJECTION_DB
            if not proj_path.exists():
                out.append(
                    MissingReadModel(
                        store.kind,
                        str(store.root),
                        projection="missing",
                        current=False,
                        healthy=False,
                        behind=(),
                        stale=("read model missing",),
                    )
                )
                continue
            proj = self.workspace.cached_projection(store) or Projection(store)
            stale = proj.stale()
            dirty_text = proj.dirty_count("text")
            dirty_vec = proj.dirty_count("vec")
            text_ok = (cache / layout.TEXT_INDEX_DIR / "meta.json").exists()
            damaged = {d.path.name: d for d in _damaged(store, thorough)}
            identity = None
            try:
                identity = json.loads((cache / layout.VECTOR_META).read_text()).get("identity")
            except (OSError, ValueError, AttributeError):
                pass
            settings = self.workspace.settings(store)
            model = settings["search.model"]
            unusable = None if model == "off" else model_problem(model)
            behind: list[str] = []
            broken: list[str] = []
            if stale:
                behind.append(
                    "event files changed since the read model read them (the next "
                    "command reads them)"
                )
            broken.extend(f"{d.what} {d.why}" for d in damaged.values())
            if not text_ok:
                broken.append("word index missing")
            elif dirty_text:
                behind.append(
                    f"{dirty_text} change(s) not yet in the word index (the next search adds them)"
                )
            stopped = stopped_reindex(store)
            if stopped:
                behind.append(
                    "an `engram reindex` stopped before it finished (running it again goes on "
                    "from where it stopped)"
                )
            if model != "off":
                if identity is None:
                    broken.append("vector index missing")
                elif thorough and (
                    note := unreachable_note(cache, settings["search.exact_below"], store.kind)
                ):
                    broken.append(note)
                if identity is not None and dirty_vec:
                    behind.append(
                        f"{dirty_vec} change(s) not yet saved in the vector index "
                        f"(searches score them; saved every "
                        f"{settings['search.vector_flush']})"
                    )
            entry = IndexState(
                store=store.kind,
                path=str(store.root),
                projection="damaged"
                if layout.PROJECTION_DB in damaged
                else "behind"
                if stale
                else "current",
                text_index="missing"
                if not text_ok
                else "damaged"
                if layout.TEXT_INDEX_DIR in damaged
                else "behind"
                if dirty_text or stale
                else "current",
                text_pending=dirty_text,
                vector_index=(
                    "off"
                    if model == "off"
                    else "unused"
                    if unusable
                    else "missing"
                    if identity is None or not (cache / layout.VECTOR_INDEX).exists()
                    else "damaged"
                    if layout.VECTOR_INDEX in damaged
                    else "behind"
                    if dirty_vec or stale
                    else "current"
                ),
                vector_pending=dirty_vec,
                vector_model=identity,
                model=model,
                behind=tuple(behind),
                stale=tuple(broken),
                current=not behind and not broken,
                healthy=not broken,
                reindex_stopped=stopped,
                model_problem=unusable,
            )
            if self.workspace.cached_projection(store) is None:
                proj.close()
            out.append(entry)
        return out


def _damaged(store: Store, thorough: bool) -> list[DamagedCache]:
    """`damaged_caches` of a store (doctor's check), confirmed under the index lock: what is
    found without it may be an index caught between writing its file and its record. Imported
    here, not at the top: the doctor's modules are only needed to check."""
    from .doctor.cache_checks import cache_lock, damaged_caches

    if not damaged_caches(store, deep=thorough):
        return []
    with cache_lock(store):
        return damaged_caches(store, deep=thorough)
