"""The fixed background a query's cosine similarities are read against, and its vectors.

The background is ordinary text of the kinds a store holds (`engram/background.txt`): notes a
coding agent keeps, documentation prose, chat-like personal turns and notes. It never depends on
what a store holds, so a memory and a query score the same in a store of 80 memories and of
30,000. Its vectors belong to the model: for the built-in model they ship with Engram
(`background.npz`, checked against the model's identity and the text's digest); for any other
model they are embedded once and kept in the model cache (`~/.cache/engram/models/background/`),
never per store. Regenerate the shipped ones after editing the text:
`python -m engram.search.background`.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from .embed import Embedder

BACKGROUND_FILE = Path(__file__).resolve().parent.parent / "background.txt"
SHIPPED_FILE = Path(__file__).resolve().parent.parent / "background.npz"

_memo: dict[str, np.ndarray] = {}
_lock = threading.Lock()


def sentences() -> list[str]:
    return [
        line.strip() for line in BACKGROUND_FILE.read_text("utf-8").splitlines() if line.strip()
    ]


def digest(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()[:16]


def _cache_file(identity: str, text_digest: str) -> Path:
    from .embed import model_cache_dir

    key = hashlib.sha256(identity.encode("utf-8")).hexdigest()[:16]
    return model_cache_dir() / "background" / f"{key}-{text_digest}.npy"


def _shipped(identity: str, text_digest: str) -> np.ndarray | None:
    import numpy as np

    try:
        with np.load(SHIPPED_FILE, allow_pickle=False) as data:
            if str(data["identity"]) != identity or str(data["digest"]) != text_digest:
                return None
            vectors = np.asarray(data["vectors"], dtype=np.float32)
    except (OSError, KeyError, ValueError):
        return None
    return vectors


def _cached(path: Path, rows: int, dim: int) -> np.ndarray | None:
    import numpy as np

    try:
        vectors = np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None
    if vectors.shape != (rows, dim) or not np.isfinite(vectors).all():
        return None  # a damaged or foreign file: embed again
    return np.asarray(vectors, dtype=np.float32)


def _save(path: Path, vectors: np.ndarray) -> None:
    import io

    import numpy as np

    from ..base.files import atomic_write

    buffer = io.BytesIO()
    np.save(buffer, vectors)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, buffer.getvalue(), durable=False)
    except OSError:
        pass  # a cache that cannot be written: embedded again next process


def vectors(embedder: Embedder) -> np.ndarray:
    """The background's vectors for this model, unit length, one row per sentence."""
    with _lock:
        if embedder.identity in _memo:
            return _memo[embedder.identity]
        lines = sentences()
        text_digest = digest(lines)
        found = _shipped(embedder.identity, text_digest)
        if found is None or found.shape != (len(lines), embedder.dim):
            path = _cache_file(embedder.identity, text_digest)
            found = _cached(path, len(lines), embedder.dim)
            if found is None:
                found = embedder.embed(lines)
                _save(path, found)
        _memo[embedder.identity] = found
        return found


def write_shipped() -> Path:
    """Embed the background with the built-in model into `background.npz`."""
    import numpy as np

    from ..base.models import BUILTIN
    from .embed import load_embedder

    embedder = load_embedder(BUILTIN)
    lines = sentences()
    found = embedder.embed(lines)
    with SHIPPED_FILE.open("wb") as out:
        np.savez_compressed(
            out,
            identity=np.array(embedder.identity),
            digest=np.array(digest(lines)),
            vectors=found.astype(np.float16),
        )
    return SHIPPED_FILE


if __name__ == "__main__":
    print(write_shipped())
