"""A store's search indexes, kept current from its read model, and the scores recall ranks
with (ranked by the pipeline in `recall.py` with `ranking`; a memory's strength: `hits`).

Per store, two disposable indexes hang off the read model:

- the tantivy index is brought up to date (one commit) by the first query after writes;
- the usearch index is a *base* that is saved only when enough memories changed
  (`search.vector_flush`); memories changed since then are compared by brute force, from the
  embedding cache, so a write never waits for an index save and a query never misses a change.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.config import Settings
from ..base.layout import (
    EMBEDDINGS_DB,
    INDEX_LOCK,
    TEXT_INDEX_DIR,
    VECTOR_INDEX,
    cache_dir,
)
from ..readmodel.projection import Projection
from ..storage.store import Store
from .backlog import INLINE, Backlog
from .embed import Embedder, EmbeddingCache, content_hash, embed_with_cache
from .folding import fill_in_memory, fold
from .hits import Hit as Hit
from .hits import embedding_text as embedding_text
from .hits import memory_embedding_text as memory_embedding_text
from .hits import search_text as search_text
from .hits import strength as strength
from .text import TextIndex, TextIndexDamaged, failed

if TYPE_CHECKING:
    import numpy as np


@dataclass
class SyncReport:
    indexed_text: int = 0
    indexed_vectors: int = 0
    embedded: int = 0
    reused: int = 0
    kept: int = 0  # vectors already in the index, the same, left where they were
    rebuilt: list[str] = field(default_factory=list)


class StoreSearch:
    """The search indexes of one store, kept current from its read model."""

    def __init__(self, store: Store, projection: Projection) -> None:
        self.store = store
        self.projection = projection
        self.cache_dir = cache_dir(store.local_dir)
        self._text: TextIndex | None = None
        self._vectors: Any = None
        self._vectors_stamp: tuple[int, int] | None = None
        self.embeddings = EmbeddingCache(store.shared_embeddings or self.cache_dir / EMBEDDINGS_DB)
        # The cache directory cannot be written (read-only, full): this process searches
        # indexes kept in memory and leaves the saved ones, and their dirty marks, as they are.
        self.read_only = False
        self._applied: set[tuple[str, int]] = set()  # dirty marks already in memory indexes
        self._vectors_filled = False
        # Vectors of memories changed since the vector index was saved: id -> (content, vector).
        self._held: dict[str, tuple[str, Any]] = {}
        self._held_identity: str | None = None
        self._held_ids: list[str] = []
        self._held_matrix: Any = None  # their vectors stacked, in the order of _held_ids
        self._background: tuple[Any, np.ndarray] | None = None
        # What a sync with nothing to do saw (the read model's generation, the vector index's
        # file): while it is unchanged, the next recall skips the lock and the reads. Only a
        # sync that found nothing to do under the lock sets it; damage seen clears it.
        self._quiet: dict[str, Any] = {}
        self._pending: tuple[Any, list[tuple[str, str | None]]] | None = None
        self._sample: tuple[Any, tuple[str, ...]] | None = None
        # Set by each vector search: memories it left out of meaning (no vector yet), if many.
        self.backlog: Backlog | None = None
        self.allow_partial = False  # whether a recall may leave a backlog (the CLI, MCP)
        self._waiting: frozenset[str] = frozenset()

    @contextmanager
    def lock(self) -> Iterator[None]:
        from ..base.locks import FileLock

        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            lock = FileLock(self.cache_dir / INDEX_LOCK, timeout=120)
            lock.acquire()
        except OSError as exc:
            if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise
            self.read_only = True  # nothing can change these files: no lock is needed
            yield
            return
        try:
            yield
        finally:
            lock.release()

    @property
    def text(self) -> TextIndex:
        if self._text is None:
            try:
                self._text = TextIndex(None if self.read_only else self.cache_dir / TEXT_INDEX_DIR)
            except BaseException as exc:
                if not _unwritable(exc):
                    raise
                self.read_only = True
                self._text = TextIndex(None)
        return self._text

    def vectors(self, embedder: Embedder) -> Any:
        from .vectors import VectorIndex

        path = self.cache_dir / VECTOR_INDEX
        stamp = _stamp(path)
        if (
            self._vectors is None
            or self._vectors.identity != embedder.identity
            or stamp != self._vectors_stamp
        ):
            self._vectors = VectorIndex(path, embedder.identity, embedder.dim)
            self._vectors_stamp = stamp
        return self._vectors

    # -- keeping up ------------------------------------------------------------------------

    def _text_batches(self, ids: Sequence[str]) -> Any:
        for start in range(0, len(ids), 2000):
            chunk = ids[start : start + 2000]
            found = self.projection.memories_by_id(chunk)
            yield (
                [(i, search_text(found[i])) for i in chunk if i in found],
                [i for i in chunk if i not in found],
            )

    def sync_text(self, report: SyncReport | None = None) -> SyncReport:
        proj = self.projection
        if (
            report is None
            and self._text is not None
            and not self.read_only
            and self._quiet.get("text") == (proj.generation(), self._text.files())
        ):
            return SyncReport()  # nothing changed since a sync that had nothing to do
        report = report or SyncReport()
        with self.lock():
            text = self.text
            if self.read_only:
                return self._sync_text_in_memory(report)
            if not text.rebuilt and not text.intact():
                text.discard()  # its files changed under this process: damage
            if text.rebuilt:
                proj.mark_all_dirty("text")
                text.rebuilt = False
                report.rebuilt.append("text")
            generation = proj.generation()
            marks = proj.dirty("text")
            if not marks:
                if not report.rebuilt:
                    # With its files as they are now: one overwritten in place under this
                    # process (damage) is checked for again at the next recall.
                    self._quiet["text"] = (generation, text.files())
                return report
            ids = [m for m, _ in marks]
            try:
                try:
                    report.indexed_text += text.update(self._text_batches(ids))
                except BaseException as exc:
                    if not failed(exc) or _unwritable(exc):
                        raise
                    # The index's files were damaged under it: start again from the read model.
                    text.discard()
                    text.rebuilt = False
                    report.rebuilt.append("text")
                    proj.mark_all_dirty("text")
                    marks = proj.dirty("text")
                    report.indexed_text += text.update(self._text_batches([m for m, _ in marks]))
            except BaseException as exc:
                if not _unwritable(exc):
                    raise
                # Disk full: the saved index stays as it was, its marks too, for a later save.
                self.read_only = True
                self._text = None
                return self._sync_text_in_memory(report)
            proj.clean("text", marks)
        return report

    def _sync_text_in_memory(self, report: SyncReport) -> SyncReport:
        text = self.text
        todo: list[str] = []
        if text.rebuilt:
            text.rebuilt = False
            todo = self.projection.all_memory_ids()
        marks = [m for m in self.projection.dirty("text") if m not in self._applied]
        todo += [m for m, _ in marks]
        if todo:
            report.indexed_text += text.update(self._text_batches(list(dict.fromkeys(todo))))
        self._applied.update(marks)
        return report

    def sync_vectors(
        self,
        embedder: Embedder,
        settings: Settings,
        *,
        force: bool = False,
        report: SyncReport | None = None,
        progress: Any = None,
        linking: Callable[[int], None] | None = None,
    ) -> SyncReport:
        """Fold changed memories into the saved vector index once enough have changed;
        `progress(count)` as texts are embedded, `linking(count)` as vectors are folded in."""
        proj = self.projection
        quiet = (
            embedder.identity,
            settings["search.vector_flush"],
            _stamp(self.cache_dir / VECTOR_INDEX),
        )
        if (
            not force
            and report is None
            and progress is None
            and not self.read_only
            and self._vectors is not None
            and self._quiet.get("vec") == (*quiet, proj.generation())
        ):
            return SyncReport()  # nothing changed since a sync that had nothing to do
        report = report or SyncReport()
        if not self.read_only and (
            force or proj.dirty_count("vec") >= settings["search.vector_flush"]
        ):
            # The model runs outside the lock, into the cache; under it, vectors are only read.
            prefilled = self.prefill(embedder, progress, wait=force)
            report.embedded += prefilled
            report.reused -= prefilled  # counted below as read from the cache
            progress = None
        with self.lock():
            index = self.vectors(embedder)
            if self.read_only:
                if index.rebuilt and not self._vectors_filled:
                    index.rebuilt = False
                    self._vectors_filled = True
                    fill_in_memory(self.projection, self.embeddings, embedder, index, report)
                return report
            if index.rebuilt:
                proj.mark_all_dirty("vec")
                index.rebuilt = False
                report.rebuilt.append("vectors")
                force = True
            generation = proj.generation()
            if not force and proj.dirty_count("vec") < settings["search.vector_flush"]:
                if quiet[2] == self._vectors_stamp:
                    self._quiet["vec"] = (*quiet, generation)
                return report
            fold(
                proj,
                self.embeddings,
                embedder,
                index,
                report,
                progress if progress is not None else linking,
                save=lambda folded: self._save_vectors(index, folded),
            )
        return report

    def _save_vectors(self, index: Any, folded: list[tuple[str, int]]) -> bool:
        """Save the vector index, then clean the marks of what it now holds."""
        try:
            index.save()
        except (OSError, RuntimeError, ValueError):
            # Not saved (disk full): the saved index and the marks of what it lacks stay as
            # they were, for a later save; this process searches its own copy, complete.
            self.read_only = True
            self._vectors_filled = True
            return False
        self._vectors_stamp = _stamp(index.path)
        self.projection.clean("vec", folded)
        return True

    def drop_vectors_except(self, embedder: Embedder, keep: set[str]) -> int:
        """Take out of the vector index every memory not in `keep` (those of a reindex killed
        half-way that are no longer memories); saved with the next fold."""
        with self.lock():
            index = self.vectors(embedder)
            gone = [m for m in index.ids() if m not in keep]
            if gone:
                index.update({}, gone)
            return len(gone)

    # -- querying --------------------------------------------------------------------------

    def text_candidates(self, query: str, limit: int) -> list[tuple[str, float]]:
        self.sync_text()
        try:
            return self.text.search(query, limit)
        except TextIndexDamaged:
            self._quiet.pop("text", None)
            self.sync_text()  # the index was emptied: fill it again, then ask once more
            return self.text.search(query, limit)

    def text_evidence(
        self,
        query: str,
        limit: int,
    ) -> tuple[list[tuple[str, float]], float, float]:
        """BM25 candidates, the query's IDF mass and its specificity in this store (see
        TextIndex.query_weight)."""
        if not query.strip():
            return [], 0.0, 0.0
        hits = self.text_candidates(query, limit)
        try:
            return (hits, *self.text.query_weight(query))
        except BaseException as exc:
            if not failed(exc):
                raise
            return hits, max((score for _, score in hits), default=0.0), 1.0

    def background(self, embedder: Embedder, sample: int = 0) -> np.ndarray:
        """Vectors that stand for ordinary text, for calibrating a query's cosine similarities:
        the fixed background of the model (`engram.search.background`), plus, when `sample`
        is set (to measure with), a sample of this store's memories."""
        import numpy as np

        from . import background

        fixed = background.vectors(embedder)
        if sample <= 0:
            return fixed
        # Kept while the sample's ids stay the same (an edit of a sampled memory hardly moves
        # the background); a new process reads it afresh.
        # A partial answer (see vector_scores) leaves out of the sample what is not embedded yet.
        waiting = self._waiting if self.backlog is not None else frozenset()
        key = (embedder.identity, self._sample_ids(sample), len(waiting))
        if self._background is not None and self._background[0] == key:
            return self._background[1]
        texts = [
            embedding_text(kind, tags, content)
            for memory_id, content, kind, tags in self.projection.sample(sample)
            if memory_id not in waiting
        ]
        vectors, _ = embed_with_cache(embedder, self.embeddings, texts)
        matrix = np.vstack([fixed, np.asarray(vectors, dtype=np.float32)])
        self._background = (key, matrix)
        return matrix

    def vector_scores(
        self,
        embedder: Embedder,
        settings: Settings,
        query_vector: np.ndarray,
        limit: int,
        extra_ids: Sequence[str] = (),
    ) -> dict[str, float]:
        """Cosine similarity of the best `limit` memories, plus any of `extra_ids`.

        When more than `backlog.INLINE` changed memories have no vector cached and
        `allow_partial` is set, none is embedded now: they are left out of meaning and
        `self.backlog` holds them. Otherwise they are embedded first."""
        waiting = self.unembedded(embedder)
        self.backlog = (
            Backlog(self.store.kind, embedder, self.embeddings, list(waiting.values()), owner=self)
            if len(waiting) > INLINE and self.allow_partial
            else None
        )
        self._waiting = frozenset(waiting)
        if self.backlog is None:
            self.sync_vectors(embedder, settings)
        return self._scores(
            embedder,
            query_vector,
            limit,
            extra_ids,
            exact_below=settings["search.exact_below"],
            skip=set(waiting) if self.backlog is not None else set(),
        )

    def unembedded(self, embedder: Embedder) -> dict[str, str]:
        """Changed memories whose vector is neither cached nor held here: id -> text."""
        texts = {memory_id: text for memory_id, text in self._pending_texts() if text is not None}
        held = self._held if self._held_identity == embedder.identity else {}
        texts = {m: t for m, t in texts.items() if m not in held or held[m][0] != t}
        if not texts:
            return {}
        hashes = {m: content_hash(t) for m, t in texts.items()}
        cached = self.embeddings.get(embedder.identity, list(set(hashes.values())))
        return {m: t for m, t in texts.items() if hashes[m] not in cached}

    def prefill(self, embedder: Embedder, progress: Any = None, *, wait: bool = True) -> int:
        """Embed the changed memories that have no cached vector into the embedding cache,
        without the index lock (searches go on meanwhile); `progress(count)` as it goes.
        Without `wait`, nothing when another is embedding them already."""
        waiting = self.unembedded(embedder)
        if not waiting:
            return 0
        backlog = Backlog(self.store.kind, embedder, self.embeddings, list(waiting.values()))
        if progress is not None:  # those already cached are done
            progress(max(0, self.projection.dirty_count("vec") - len(waiting)))
        last = 0

        def step(done: int, total: int) -> None:
            nonlocal last
            if progress is not None:
                progress(done - last)
            last = done

        return backlog.run(step, wait=wait)

    def nearest(
        self,
        embedder: Embedder,
        vector: np.ndarray,
        limit: int = 5,
        skip: frozenset[str] = frozenset(),
    ) -> list[tuple[str, float]]:
        """The most similar memories to a vector, without touching any index file (memories
        changed since the vector index was saved are compared directly, but for `skip`)."""
        scores = self._scores(embedder, vector, limit, skip=skip)
        return sorted(scores.items(), key=lambda item: item[1], reverse=True)[:limit]

    def _scores(
        self,
        embedder: Embedder,
        vector: np.ndarray,
        limit: int,
        extra_ids: Sequence[str] = (),
        *,
        exact_below: int | None = None,
        skip: set[str] | frozenset[str] = frozenset(),
    ) -> dict[str, float]:
        """Cosine similarity from the saved index, corrected for memories changed since it was
        saved (compared directly), plus any of `extra_ids`."""
        from .vectors import EXACT_BELOW

        index = self.vectors(embedder)
        scores = dict(
            index.search(vector, limit, EXACT_BELOW if exact_below is None else exact_below)
        )
        # Memories left out (no vector yet, see vector_scores) count as no longer memories here.
        pending = [
            (memory_id, None if memory_id in skip else text)
            for memory_id, text in self._pending_texts()
        ]
        for memory_id, similarity in self._pending_scores(embedder, pending, vector).items():
            scores[memory_id] = similarity
        stale = {memory_id for memory_id, _ in pending}
        for memory_id, content in pending:
            if content is None:
                scores.pop(memory_id, None)  # changed since the save and no longer a memory
        # Candidates found by words only: their stored vectors, straight from the index.
        others = [i for i in extra_ids if i not in scores and i not in stale]
        for memory_id, stored in index.vectors_for(others).items():
            scores[memory_id] = float(stored @ vector)
        wanted = [i for i in dict.fromkeys(extra_ids) if i not in scores and i not in stale]
        found = self.projection.memories_by_id(wanted) if wanted else {}
        live = [found[i] for i in wanted if i in found]
        if live:
            vectors, _ = embed_with_cache(
                embedder, self.embeddings, [memory_embedding_text(m) for m in live]
            )
            for row, memory in enumerate(live):
                scores[memory.id] = float(vectors[row] @ vector)
        return scores

    def _pending_texts(self) -> list[tuple[str, str | None]]:
        """(memory id, embedding text or None) of the memories changed since the vector index
        was saved, read again only when the read model has changed."""
        generation = self.projection.generation()
        if self._pending is None or self._pending[0] != generation:
            self._pending = (
                generation,
                [
                    (
                        memory_id,
                        None
                        if content is None or kind is None
                        else embedding_text(kind, tags, content),
                    )
                    for memory_id, content, kind, tags in self.projection.dirty_contents()
                ],
            )
        return self._pending[1]

    def _sample_ids(self, sample: int) -> tuple[str, ...]:
        """The ids of the background's sample, read again only when the read model changed."""
        key = (self.projection.generation(), sample)
        if self._sample is None or self._sample[0] != key:
            self._sample = (key, tuple(self.projection.sample_ids(sample)))
        return self._sample[1]

    def stored_vectors(
        self, embedder: Embedder, memory_ids: Sequence[str]
    ) -> dict[str, np.ndarray]:
        """The vectors of these memories: changed since the index was saved (held in this
        process), else from the index, else from the embedding cache (or the model)."""
        out: dict[str, np.ndarray] = {}
        if self._held_identity == embedder.identity:
            out = {m: self._held[m][1] for m in memory_ids if m in self._held}
        rest = [m for m in memory_ids if m not in out]
        if rest:
            out |= self.vectors(embedder).vectors_for(rest)
        wanted = [m for m in memory_ids if m not in out]
        if wanted:
            found = self.projection.memories_by_id(wanted)
            live = [found[m] for m in wanted if m in found]
            vectors, _ = embed_with_cache(
                embedder, self.embeddings, [memory_embedding_text(m) for m in live]
            )
            out |= {m.id: vectors[row] for row, m in enumerate(live)}
        return out

    def nearness(
        self, embedder: Embedder, memory_ids: Sequence[str], background: np.ndarray
    ) -> dict[str, float]:
        """`VectorIndex.nearness` of these memories, those changed since its save included."""
        from .ranking import nearness

        held = self._held if self._held_identity == embedder.identity else {}
        saved = [m for m in memory_ids if m not in held]
        out: dict[str, float] = self.vectors(embedder).nearness(saved, background)
        rest = self.stored_vectors(embedder, [m for m in memory_ids if m not in out])
        return out | nearness(rest, background)

    def _pending_scores(
        self, embedder: Embedder, pending: Sequence[tuple[str, str | None]], vector: np.ndarray
    ) -> dict[str, float]:
        """Similarity of the memories changed since the vector index was saved.

        `pending` holds (memory id, embedding text, None once it is no longer a memory). Their
        vectors are kept in this process, keyed by their exact text, so that a run of
        writes (each checking for near-duplicates) embeds or reads from the cache only what is
        new rather than every change since the last save.
        """
        import numpy as np

        if self._held_identity != embedder.identity:
            self._held, self._held_ids, self._held_matrix = {}, [], None
            self._held_identity = embedder.identity
        held = self._held
        contents = {memory_id: text for memory_id, text in pending if text is not None}
        fresh = [m for m, text in contents.items() if m not in held or held[m][0] != text]
        if fresh:
            vectors, _ = embed_with_cache(embedder, self.embeddings, [contents[m] for m in fresh])
            for row, memory_id in enumerate(fresh):
                held[memory_id] = (contents[memory_id], vectors[row])
        if fresh or len(held) != len(contents) or len(self._held_ids) != len(contents):
            self._held = {m: held[m] for m in contents}  # only what is still pending
            self._held_ids = list(self._held)
            self._held_matrix = (
                np.stack([self._held[m][1] for m in self._held_ids]) if self._held else None
            )
        if self._held_matrix is None:
            return {}
        return dict(zip(self._held_ids, (self._held_matrix @ vector).tolist(), strict=True))

    def close(self) -> None:
        self.embeddings.close()


def _unwritable(exc: BaseException) -> bool:
    """Did an index fail because its directory cannot be written (full, read-only)?"""
    codes = (errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EFBIG)
    if isinstance(exc, OSError):
        return exc.errno in codes
    text = str(exc)
    return "os error" in text and any(f"(os error {code})" in text for code in codes)


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_mtime_ns, st.st_size)
