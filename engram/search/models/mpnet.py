"""An MPNet encoder (all-mpnet-base-v2) as an ONNX graph, built from its safetensors weights with
the `onnx` package alone (no torch), and quantised weight-only to 8 bits.

The graph computes what Hugging Face's `MPNetModel` computes for sentence-transformers, up to the
last hidden state (pooling and normalisation are the runner's, as for every model folder):

- embeddings: word plus absolute position (positions count the non-padding tokens from
  `padding_idx + 1`, as `create_position_ids_from_input_ids` does), then LayerNorm;
- every layer: self-attention whose scores get a relative position bias shared by all layers
  (32 buckets, T5-style, bidirectional, `max_distance` 128) and the padding mask, a residual and
  LayerNorm, then the GELU (erf) feed-forward, a residual and LayerNorm.

The relative bias depends only on `key - query`, so it is looked up in a table of one row per
distance, computed here once with the same float32 arithmetic as the reference.

Quantisation: every MatMul's weight becomes a MatMulNBits of 8 bits in symmetric blocks of
`BLOCK` values (onnxruntime's weight-only quantiser). Activations are quantised only inside the
product, per token row and block, so a text's vector does not depend on the texts it is batched
with; dynamic int8 quantisation (one scale taken from the whole batch's activations) changes it
by up to 0.06 in cosine.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

OPSET = 17  # LayerNormalization
BLOCK = 32
BITS = 8
# MatMulNBits computes in int8 (its activations quantised per row and block, so each row's
# result is its own): onnxruntime has fast kernels for that. With float32 compute it expands the
# weights again at every call, which made one query 4 times slower than this.
ACCURACY_LEVEL = 4
MASKED = -1.0e9  # added to the score of a padding key: exp() of it is 0 in float32


class WeightsError(ValueError):
    """The weights file is not the MPNet checkpoint the graph is built for."""


def relative_buckets(
    max_positions: int, num_buckets: int = 32, max_distance: int = 128
) -> np.ndarray:
    """The bucket of each distance `key - query` from `-(max_positions - 1)` to
    `max_positions - 1` (index 0 is the most negative), as `MPNetEncoder.relative_position_bucket`
    computes it (float32 logarithms, truncated)."""
    import numpy as np

    relative = np.arange(-(max_positions - 1), max_positions, dtype=np.int64)
    n = -relative
    half = num_buckets // 2
    bucket = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    max_exact = half // 2
    with np.errstate(divide="ignore"):
        scaled = (
            np.log(n.astype(np.float32) / np.float32(max_exact))
            / np.float32(math.log(max_distance / max_exact))
            * np.float32(half - max_exact)
        )
    large = max_exact + np.where(n < max_exact, 0, scaled).astype(np.int64)
    large = np.minimum(large, half - 1)
    return bucket + np.where(n < max_exact, n, large)


class _Graph:
    """Nodes and initializers, named in order."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def name(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def const(self, hint: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        name = self.name(hint)
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def op(
        self, op_type: str, inputs: list[str], hint: str | None = None, **attributes: Any
    ) -> str:
        from onnx import helper

        out = self.name(hint or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=f"n_{out}", **attributes))
        return out


def build_mpnet(
    weights: Path,
    config: dict[str, Any],
    out: Path,
    *,
    quantize: bool = True,
    step: Callable[[str], None] | None = None,
) -> None:
    """Write the ONNX model of the MPNet encoder in `weights` (a safetensors file) to `out`,
    quantised weight-only unless `quantize` is false. Raises WeightsError."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper
    from safetensors import safe_open

    hidden = _positive(config, "hidden_size")
    heads = _positive(config, "num_attention_heads")
    layers = _positive(config, "num_hidden_layers")
    intermediate = _positive(config, "intermediate_size")
    positions = _positive(config, "max_position_embeddings")
    buckets = _positive(config, "relative_attention_num_buckets")
    eps = float(config.get("layer_norm_eps", 1e-5))
    pad = int(config.get("pad_token_id", 1))
    if hidden % heads:
        raise WeightsError(f"hidden_size {hidden} is not a multiple of {heads} heads")
    head = hidden // heads
    g = _Graph()
    with safe_open(str(weights), framework="np") as tensors:
        names = set(tensors.keys())

        def tensor(key: str, shape: tuple[int, ...]) -> np.ndarray:
            if key not in names:
                raise WeightsError(f"{weights.name} has no tensor {key!r}")
            value: np.ndarray = tensors.get_tensor(key)  # safetensors is untyped
            if tuple(value.shape) != shape or value.dtype != np.float32:
                raise WeightsError(
                    f"{weights.name}: {key} is {value.dtype}{list(value.shape)}, "
                    f"not float32{list(shape)}"
                )
            if not np.isfinite(value).all():
                raise WeightsError(f"{weights.name}: {key} holds values that are not finite")
            return value

        def linear(x: str, prefix: str, n_in: int, n_out: int) -> str:
            w = tensor(f"{prefix}.weight", (n_out, n_in))
            b = tensor(f"{prefix}.bias", (n_out,))
            y = g.op("MatMul", [x, g.const(f"{prefix}.w", np.ascontiguousarray(w.T))])
            return g.op("Add", [y, g.const(f"{prefix}.b", b)])

        def layer_norm(x: str, prefix: str) -> str:
            return g.op(
                "LayerNormalization",
                [
                    x,
                    g.const(f"{prefix}.g", tensor(f"{prefix}.weight", (hidden,))),
                    g.const(f"{prefix}.b", tensor(f"{prefix}.bias", (hidden,))),
                ],
                axis=-1,
                epsilon=eps,
            )

        def i64(*values: int) -> str:
            return g.const("shape", np.asarray(values, dtype=np.int64))

        def f32(value: float) -> str:
            return g.const("scalar", np.asarray(value, dtype=np.float32))

        # Embeddings.
        vocab = (
            tensors.get_slice("embeddings.word_embeddings.weight").get_shape()[0]
            if "embeddings.word_embeddings.weight" in names
            else 0
        )
        word = g.op(
            "Gather",
            [
                g.const("word", tensor("embeddings.word_embeddings.weight", (vocab, hidden))),
                "input_ids",
            ],
        )
        real = g.op(
            "Cast", [g.op("Not", [g.op("Equal", ["input_ids", i64(pad)])])], to=TensorProto.INT64
        )
        position_ids = g.op("Add", [g.op("Mul", [g.op("CumSum", [real, i64(1)]), real]), i64(pad)])
        position = g.op(
            "Gather",
            [
                g.const(
                    "position", tensor("embeddings.position_embeddings.weight", (positions, hidden))
                ),
                position_ids,
            ],
        )
        x = layer_norm(g.op("Add", [word, position]), "embeddings.LayerNorm")
        if step:
            step("embeddings")

        # The relative position bias, [1, heads, T, T], plus the padding mask, [B, 1, 1, T].
        bias = tensor("encoder.relative_attention_bias.weight", (buckets, heads))
        table = bias[relative_buckets(positions, buckets)]  # [2 * positions - 1, heads]
        length = g.op("Gather", [g.op("Shape", ["input_ids"]), i64(1)], axis=0)
        steps = g.op(
            "Range",
            [
                g.const("zero", np.asarray(0, dtype=np.int64)),
                length,
                g.const("one", np.asarray(1, dtype=np.int64)),
            ],
        )
        distance = g.op(
            "Sub", [g.op("Unsqueeze", [steps, i64(0)]), g.op("Unsqueeze", [steps, i64(1)])]
        )  # key - query
        looked_up = g.op(
            "Gather",
            [g.const("relative_bias", table), g.op("Add", [distance, i64(positions - 1)])],
            axis=0,
        )
        position_bias = g.op("Unsqueeze", [g.op("Transpose", [looked_up], perm=[2, 0, 1]), i64(0)])
        mask = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
        padding = g.op("Mul", [g.op("Sub", [f32(1.0), mask]), f32(MASKED)])
        padding = g.op("Unsqueeze", [padding, i64(1, 2)])
        score_bias = g.op("Add", [position_bias, padding])
        split = i64(0, 0, heads, head)
        joined = i64(0, 0, hidden)
        scale = f32(1.0 / math.sqrt(head))

        for n in range(layers):
            p = f"encoder.layer.{n}"
            q = g.op(
                "Transpose",
                [g.op("Reshape", [linear(x, f"{p}.attention.attn.q", hidden, hidden), split])],
                perm=[0, 2, 1, 3],
            )
            k = g.op(
                "Transpose",
                [g.op("Reshape", [linear(x, f"{p}.attention.attn.k", hidden, hidden), split])],
                perm=[0, 2, 3, 1],
            )
            v = g.op(
                "Transpose",
                [g.op("Reshape", [linear(x, f"{p}.attention.attn.v", hidden, hidden), split])],
                perm=[0, 2, 1, 3],
            )
            scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), scale]), score_bias])
            context = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
            context = g.op("Reshape", [g.op("Transpose", [context], perm=[0, 2, 1, 3]), joined])
            attended = linear(context, f"{p}.attention.attn.o", hidden, hidden)
            x = layer_norm(g.op("Add", [attended, x]), f"{p}.attention.LayerNorm")
            inner = linear(x, f"{p}.intermediate.dense", hidden, intermediate)
            inner = g.op(
                "Mul",
                [
                    g.op("Mul", [inner, f32(0.5)]),
                    g.op(
                        "Add",
                        [f32(1.0), g.op("Erf", [g.op("Mul", [inner, f32(1.0 / math.sqrt(2.0))])])],
                    ),
                ],
            )
            x = layer_norm(
                g.op("Add", [linear(inner, f"{p}.output.dense", intermediate, hidden), x]),
                f"{p}.output.LayerNorm",
            )
            if step:
                step(f"layer {n + 1} of {layers}")

    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))
    graph = helper.make_graph(
        g.nodes,
        "mpnet",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"]),
        ],
        [
            helper.make_tensor_value_info(
                "last_hidden_state", TensorProto.FLOAT, ["batch", "tokens", hidden]
            )
        ],
        initializer=g.initializers,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="engram"
    )
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=False)
    if quantize:
        model = quantize_weights(model)
        if step:
            step("quantised")
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(out))


def quantize_weights(model: Any) -> Any:
    """The model with every MatMul by a constant weight as an 8-bit MatMulNBits (symmetric,
    blocks of `BLOCK` along the input dimension), computing in int8 per token row."""
    import logging

    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    # The quantiser logs every node it quantises at INFO through the root logger's handlers.
    quiet = logging.getLogger("onnxruntime.quantization")
    level = quiet.level
    quiet.setLevel(logging.WARNING)
    try:
        quantizer = MatMulNBitsQuantizer(
            model, bits=BITS, block_size=BLOCK, is_symmetric=True, accuracy_level=ACCURACY_LEVEL
        )
        quantizer.process()
    finally:
        quiet.setLevel(level)
    return quantizer.model.model


def _positive(config: dict[str, Any], key: str) -> int:
    value = config.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= 100_000:
        raise WeightsError(f"config.json: {key} must be a positive whole number, not {value!r}")
    return value
