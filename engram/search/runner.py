"""One ONNX text-embedding model run with onnxruntime and tokenizers directly (no torch, no
fastembed): the built-in model and any local model folder use it.

Memory and speed come from how texts are batched, not from the model:

- Every text is tokenized first and cut at the model's window (`max_tokens`).
- Texts are sorted by token count, so that a batch pads its short texts only up to the length of
  the others in it, never up to the one long text of the call; results come back in the caller's
  order.
- A batch holds at most `token_budget` tokens once padded (rows x padded length), so that a call
  costs about the same memory whatever the input: many short texts or a few long ones.

For a sentence-transformers model with mean pooling this computes what fastembed computes for it
(its tokenizer set-up, inputs, pooling over the attention mask in float64, L2 normalisation; a
test compares the two for texts within the window).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

from ..base.models import POOLINGS, Pooling  # noqa: F401 (POOLINGS: the poolings it runs)

# Tokens per batch, padded (rows x longest). On CPU the model runs at about the same tokens per
# second from a thousand tokens a batch on (measured on 2 cores: no gain from 1,024 to 8,192),
# while activation memory grows with the batch, and the attention maps with the square of its
# length: at 2,048 tokens a batch of the built-in model adds about 0.1 GB (8 texts of 256
# tokens), against 4.9 GB for 64 texts padded to 512 before. The budget is for
# all-MiniLM-L6-v2's width (384, 12 heads) and shrinks for wider models.
TOKEN_BUDGET = 2048
BUDGET_WIDTH = 384
BUDGET_HEADS = 12
MAX_ROWS = 128
# Texts tokenized at a time: a reindex may hand over thousands; their token ids are kept only
# for the chunk being run.
CHUNK_TEXTS = 2048


class OnnxRunner:
    """Text to vectors: tokenize, cut at the window, batch by length, run, pool, normalise."""

    def __init__(
        self,
        model_file: Path,
        tokenizer_dir: Path,
        *,
        max_tokens: int | None = None,
        pooling: Pooling = "mean",
        normalize: bool = True,
    ) -> None:
        import onnxruntime as ort
        from tokenizers import AddedToken, Tokenizer

        config = _read_json(tokenizer_dir / "tokenizer_config.json")
        specials = _read_json(tokenizer_dir / "special_tokens_map.json")
        model_config = _read_json(tokenizer_dir / "config.json")
        tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
        # tokenizer.json's own truncation is left out, as fastembed does (all-MiniLM-L6-v2's
        # says 128, the length it was trained at, not the one it is used with).
        truncation = tokenizer.truncation or {}
        limits = [
            v
            for v in (
                config.get("model_max_length"),
                config.get("max_length"),
                model_config.get("max_position_embeddings"),
                max_tokens,
            )
            if isinstance(v, int) and not isinstance(v, bool) and 0 < v < 10**6
        ]
        self.max_tokens = min(limits) if limits else 512
        tokenizer.enable_truncation(
            max_length=self.max_tokens,
            direction=config.get("truncation_side") or truncation.get("direction", "right"),
        )
        for value in specials.values():
            for token in value if isinstance(value, list) else [value]:
                tokenizer.add_special_tokens(
                    [AddedToken(**token) if isinstance(token, dict) else token]
                )
        padding = tokenizer.padding or {}
        pad_token = padding.get("pad_token") or config.get("pad_token")
        pad_id = padding.get("pad_id")
        if pad_id is None and pad_token is not None:
            pad_id = tokenizer.token_to_id(pad_token)
        self._pad_id = int(pad_id or 0)
        self._pad_left = (config.get("padding_side") or padding.get("direction")) == "left"
        tokenizer.no_padding()  # each batch is padded here, to its own longest text
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Memory patterns plan allocations per input shape; every batch here has its own shape,
        # and with them on the arena kept growing (+0.5 GB instead of +0.3 at 4,096 tokens).
        options.enable_mem_pattern = False
        self._session = ort.InferenceSession(
            str(model_file), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = tokenizer
        self.pooling = pooling
        self.normalize = normalize
        scale = 1.0
        for key, reference in (
            ("hidden_size", BUDGET_WIDTH),
            ("num_attention_heads", BUDGET_HEADS),
        ):
            value = model_config.get(key)
            if isinstance(value, int) and value > reference:
                scale = min(scale, reference / value)
        self.token_budget = max(self.max_tokens, int(TOKEN_BUDGET * scale))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One row per text, in the order given (float32)."""
        import numpy as np

        parts = []
        for start in range(0, len(texts), CHUNK_TEXTS):
            parts.append(self._embed_chunk(list(texts[start : start + CHUNK_TEXTS])))
        if not parts:
            return np.zeros((0, 0), dtype=np.float32)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _embed_chunk(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        ids = [np.asarray(e.ids, dtype=np.int64) for e in self._tokenizer.encode_batch(texts)]
        out: np.ndarray | None = None
        for batch in length_batches([len(row) for row in ids], self.token_budget):
            vectors = self._run([ids[i] for i in batch])
            if out is None:
                out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
            out[batch] = vectors
        assert out is not None
        return out

    def _run(self, rows: list[np.ndarray]) -> np.ndarray:
        import numpy as np

        width = max(len(row) for row in rows)
        ids = np.full((len(rows), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for n, row in enumerate(rows):
            if self._pad_left:
                ids[n, width - len(row) :] = row
                mask[n, width - len(row) :] = 1
            else:
                ids[n, : len(row)] = row
                mask[n, : len(row)] = 1
        feed: dict[str, Any] = {"input_ids": ids}
        if "attention_mask" in self._inputs:
            feed["attention_mask"] = mask
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feed)[0]
        if hidden.ndim == 2:  # the model pools by itself
            pooled = hidden.astype(np.float64)
        elif self.pooling == "cls":
            pooled = hidden[:, 0].astype(np.float64)
        else:
            summed = np.sum(
                hidden, axis=1, where=mask[:, :, np.newaxis].astype(bool), dtype=np.float64
            )
            pooled = summed / np.maximum(np.sum(mask, axis=1, keepdims=True), 1e-9)
        if self.normalize:
            pooled = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        vectors: np.ndarray = pooled.astype(np.float32)
        return vectors


def length_batches(
    lengths: Sequence[int], budget: int, max_rows: int = MAX_ROWS
) -> list[list[int]]:
    """Positions grouped into batches, shortest texts first, so that rows x the longest length
    in a batch stays within `budget` (a text longer than the budget gets a batch of its own)."""
    out: list[list[int]] = []
    batch: list[int] = []
    for position in sorted(range(len(lengths)), key=lengths.__getitem__):
        # Ascending: this text is the longest in the batch so far, so it sets the padded length.
        if batch and (len(batch) >= max_rows or (len(batch) + 1) * lengths[position] > budget):
            out.append(batch)
            batch = []
        batch.append(position)
    if batch:
        out.append(batch)
    return out


def _read_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    value = json.loads(path.read_text("utf-8"))
    return value if isinstance(value, dict) else {}
