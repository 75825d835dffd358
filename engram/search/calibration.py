"""The fixed half of recall's background: vectors of the ordinary sentences shipped with Engram
(`engram/background.txt`), computed once per model and kept on disk.

A query's cosine similarities are calibrated against a background of ordinary text: these
sentences and a sample of the store's memories (`StoreSearch.background`). The sentences are the
same for every store, so their vectors are kept per model, in this process and in the model cache
(`model_cache_dir()/background/`), never per store or per session: the first recall on a new store
or a new machine costs one query, not an embedding of every sentence. The file is keyed by the
model's identity and the sentences' digest; one that does not read back as exactly the expected
unit vectors is ignored and written again.
"""

from __future__ import annotations

import hashlib
import io
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ..base.files import atomic_write
from .embed import model_cache_dir

if TYPE_CHECKING:
    import numpy as np

    from .embed import Embedder

BACKGROUND_FILE = Path(__file__).resolve().parent.parent / "background.txt"

_held: dict[tuple[str, str], np.ndarray] = {}
_lock = threading.Lock()


def sentences() -> list[str]:
    """The shipped sentences, one a line, blank lines left out."""
    lines = (line.strip() for line in BACKGROUND_FILE.read_text("utf-8").splitlines())
    return [line for line in lines if line]


def fixed_vectors(embedder: Embedder) -> np.ndarray:
    """The vectors of `sentences()` under `embedder`: from this process, else from the model
    cache, else embedded (and saved there for every later process)."""
    texts = sentences()
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    key = (embedder.identity, digest)
    with _lock:
        held = _held.get(key)
        if held is not None:
            return held
        path = _path(embedder.identity, digest)
        vectors = _read(path, len(texts), embedder.dim)
        if vectors is None:
            vectors = embedder.embed(texts)
            _write(path, vectors)
        vectors.setflags(write=False)
        _held[key] = vectors
        return vectors


def _path(identity: str, digest: str) -> Path:
    name = hashlib.sha256(identity.encode()).hexdigest()[:24]
    return model_cache_dir() / "background" / f"{name}-{digest}.npy"


def _read(path: Path, rows: int, dim: int) -> np.ndarray | None:
    """The saved vectors, or None when the file is missing or not what it must be."""
    import numpy as np

    try:
        data = path.read_bytes()
        vectors = np.load(io.BytesIO(data), allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None
    if not isinstance(vectors, np.ndarray) or vectors.dtype != np.float32 or \
            vectors.shape != (rows, dim) or not np.isfinite(vectors).all() or \
            not np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3):
        return None
    return vectors


def _write(path: Path, vectors: np.ndarray) -> None:
    """Save the vectors for later processes; a cache that cannot be written is only slower."""
    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, vectors, allow_pickle=False)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, buffer.getvalue(), durable=False)
    except OSError:
        pass
