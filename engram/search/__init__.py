"""Search indexes: disposable caches over a store's memories, rebuilt from the event files.

- `text.py`: tantivy (BM25) over each memory's words.
- `vectors.py`: usearch (cosine) over each memory's embedding.
- `reachability.py`: the vectors that usearch's graph cannot reach, found and linked again.
- `embed.py`: fastembed (ONNX Runtime) embeddings, and a cache keyed by (model identity, content
  hash) so that no text is embedded twice.

All of them live in `<git-dir>/engram/cache/`; deleting them costs only a rebuild.
"""

from __future__ import annotations

from types import ModuleType


def usearch_index() -> ModuleType:
    """`usearch.index`, imported the only safe way.

    Importing usearch before onnxruntime crashes the process (a segfault, every time, with the
    native libraries these wheels ship); the other order works. Every import of usearch in Engram
    goes through here.
    """
    import onnxruntime  # noqa: F401  (must come first)
    import usearch.index

    return usearch.index
