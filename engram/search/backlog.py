"""Memories waiting for their embedding, and recall that does not wait for them.

After a bulk write (an import, many memories at once) thousands of memories can lack a vector.
Embedding them takes tens of seconds on a laptop's CPU; a recall must not sit silent that long.
So when more than `INLINE` changed memories have no cached vector, recall answers at once from
words and from the vectors it has, says the answer is partial, and hands back a `Backlog`: the
texts still to embed, which the caller embeds in a worker thread (the MCP server: a later call
sees more), with a progress bar (a terminal), or in a detached process (a script).

Embedding the backlog only fills the embedding cache (SQLite, safe to share between processes
and threads), in small batches and without the index lock: no other search waits for it. The
next recall finds every vector cached and folds them into the vector index in a second.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .embed import Embedder, EmbeddingCache, content_hash

if TYPE_CHECKING:
    from .retrieval import Hit

INLINE = 64  # at most this many texts are embedded while a recall waits (about a second)
EMBED_LOCK = "embedding.lock"  # in the cache directory: held while a backlog is embedded
BATCH = 16  # texts per model call in the background: another query waits at most one batch


class Backlog:
    """Texts of one store's memories that have no vector yet, to embed into its cache."""

    def __init__(
        self,
        store: str,
        embedder: Embedder,
        cache: EmbeddingCache,
        texts: Sequence[str],
        owner: object | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.cache = cache
        self.texts = list(dict.fromkeys(texts))
        self.owner = owner  # the StoreSearch it belongs to: one worker thread each
        self.done = 0

    def __len__(self) -> int:
        return len(self.texts)

    def run(self, progress: Callable[[int, int], None] | None = None, *, wait: bool = True) -> int:
        """Embed every text the cache still lacks; `progress(done, total)` after each batch.
        Returns how many were embedded; without `wait`, none when another process or thread is
        embedding for this store already."""
        from ..base.locks import FileLock, LockTimeout

        cache = self.cache
        own = EmbeddingCache(cache.path) if cache.path.exists() else cache
        # One embedder per store at a time: a second one waits, then finds the texts cached.
        lock: Any = contextlib.nullcontext()
        if cache.path.parent.is_dir() and os.access(cache.path.parent, os.W_OK):
            lock = FileLock(cache.path.parent / EMBED_LOCK, timeout=math.inf if wait else 0)
        try:
            with lock:
                embedded = self._embed(own, progress)
        except LockTimeout:
            embedded = 0
        finally:
            if own is not cache:
                own.close()
        return embedded

    def _embed(self, own: EmbeddingCache, progress: Callable[[int, int], None] | None) -> int:
        embedded = 0
        total = len(self.texts)
        for start in range(0, total, BATCH):
            chunk = self.texts[start : start + BATCH]
            hashes = [content_hash(t) for t in chunk]
            have = own.get(self.embedder.identity, hashes)
            todo = [(h, t) for h, t in zip(hashes, chunk, strict=True) if h not in have]
            if todo:
                vectors = self.embedder.embed([t for _, t in todo])
                own.put(
                    self.embedder.identity, {h: vectors[row] for row, (h, _) in enumerate(todo)}
                )
                embedded += len(todo)
            self.done = min(total, start + len(chunk))
            if progress is not None:
                progress(self.done, total)
        return embedded

    def start(self) -> threading.Thread | None:
        """Embed in a worker thread of this process (one per store at a time)."""
        with _threads_lock:
            running = _threads.get(id(self.owner))
            if running is not None and running.is_alive():
                return None
            thread = threading.Thread(
                target=self._run_quietly, name=f"embed-{self.store}", daemon=True
            )
            _threads[id(self.owner)] = thread
            thread.start()
            return thread

    def _run_quietly(self) -> None:
        try:
            self.run()
        except Exception:  # noqa: BLE001 (what is not embedded now is embedded next time)
            pass


_threads: dict[int, threading.Thread] = {}
_threads_lock = threading.Lock()


def embedding_now(owner: object) -> bool:
    """Is a worker thread of this process embedding for that StoreSearch?"""
    running = _threads.get(id(owner))
    return running is not None and running.is_alive()


class Recalled(list["Hit"]):
    """Recall's hits, best first, and the backlog of memories that had no vector yet (so were
    matched by words only): empty when the answer is complete."""

    def __init__(self, hits: Iterable[Hit] = (), backlog: Sequence[Backlog] = ()) -> None:
        super().__init__(hits)
        self.backlog = tuple(backlog)

    @property
    def partial(self) -> bool:
        return bool(self.backlog)

    @property
    def unembedded(self) -> int:
        return sum(len(b) for b in self.backlog)

    def partial_note(self, how: str) -> str:
        """One line saying the answer is partial, and how the rest gets embedded."""
        count = self.unembedded
        return (
            f"partial answer: {count:,} {'memory is' if count == 1 else 'memories are'} not "
            f"embedded yet, so matched by words only; {how}"
        )
