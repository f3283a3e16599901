"""Build an ONNX graph for a BERT-style sentence-transformer straight from its safetensors weights.

No torch and no model hub: the graph is written node by node with ``onnx.helper`` and the weights
are copied in as initializers. The output is the sentence embedding itself (mean-pooled over the
attention mask, then L2-normalized), so callers run one session and get rows ready for cosine search.

Two graph flavours are available:

* ``fused=True`` (default) emits onnxruntime's ``com.microsoft`` contrib ops directly
  (EmbedLayerNormalization, Attention, SkipLayerNormalization, BiasGelu). Emitting them ourselves
  is more reliable than hoping the runtime's pattern matcher recognises every subgraph, and it was
  the faster of the two on the 2-core machines this was measured on (see bench/bench_embed.py).
* ``fused=False`` uses only standard ONNX ops; it runs on any ONNX runtime and serves as a
  cross-check of the fused graph.

Both flavours assume right padding (what the tokenizer produces): the fused Attention op receives
per-row key lengths rather than a full mask.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["BertConfig", "build_bert_onnx", "save_bert_onnx"]

OPSET = 17  # first opset with LayerNormalization, needed by the unfused flavour
MS_DOMAIN = "com.microsoft"
OUTPUT_NAME = "sentence_embedding"
HIDDEN_NAME = "last_hidden_state"
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")


@dataclass(frozen=True)
class BertConfig:
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    layer_norm_eps: float
    vocab_size: int
    max_positions: int
    type_vocab_size: int

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> "BertConfig":
        cfg = json.loads(Path(path).read_text(encoding="utf-8"))
        act = cfg.get("hidden_act", "gelu")
        if act != "gelu":  # the graph hard-wires the exact (erf) GELU
            raise ValueError(f"unsupported hidden_act {act!r}: only 'gelu' (erf) is implemented")
        return cls(
            hidden_size=int(cfg["hidden_size"]),
            num_layers=int(cfg["num_hidden_layers"]),
            num_heads=int(cfg["num_attention_heads"]),
            intermediate_size=int(cfg["intermediate_size"]),
            layer_norm_eps=float(cfg.get("layer_norm_eps", 1e-12)),
            vocab_size=int(cfg["vocab_size"]),
            max_positions=int(cfg.get("max_position_embeddings", 512)),
            type_vocab_size=int(cfg.get("type_vocab_size", 2)),
        )

    @classmethod
    def infer(cls, weights: dict[str, np.ndarray], num_heads: int, eps: float = 1e-12) -> "BertConfig":
        """Dimensions from the tensors alone (the head count cannot be inferred, so it is given)."""
        word = weights["embeddings.word_embeddings.weight"]
        layers = {int(k.split(".")[2]) for k in weights if k.startswith("encoder.layer.")}
        return cls(
            hidden_size=word.shape[1],
            num_layers=max(layers) + 1,
            num_heads=num_heads,
            intermediate_size=weights["encoder.layer.0.intermediate.dense.weight"].shape[0],
            layer_norm_eps=eps,
            vocab_size=word.shape[0],
            max_positions=weights["embeddings.position_embeddings.weight"].shape[0],
            type_vocab_size=weights["embeddings.token_type_embeddings.weight"].shape[0],
        )


def _strip_prefix(weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Some checkpoints store BertModel tensors under ``bert.``; normalise to bare names."""
    if any(k.startswith("embeddings.") for k in weights):
        return weights
    return {k[len("bert."):]: v for k, v in weights.items() if k.startswith("bert.")}


class _GraphBuilder:
    """Collects nodes and initializers; names every intermediate uniquely."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.weights = weights
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0

    def init(self, name: str, array: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def w(self, key: str, transpose: bool = False) -> str:
        """Register a checkpoint tensor (float32); Linear weights are transposed to [in, out] for MatMul."""
        arr = self.weights[key].astype(np.float32, copy=False)
        return self.init(key + (".T" if transpose else ""), arr.T if transpose else arr)

    def const(self, name: str, value: np.ndarray | list | float | int, dtype=np.int64) -> str:
        return self.init(name, np.asarray(value, dtype=dtype))

    def op(self, op_type: str, inputs: list[str], n_out: int = 1, domain: str = "", **attrs) -> list[str]:
        self._n += 1
        outs = [f"{op_type}_{self._n}_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=f"{op_type}_{self._n}", domain=domain, **attrs))
        return outs

    def op1(self, op_type: str, inputs: list[str], domain: str = "", **attrs) -> str:
        return self.op(op_type, inputs, 1, domain, **attrs)[0]


# ---------------------------------------------------------------------------------------------
# Fused flavour (onnxruntime contrib ops)
# ---------------------------------------------------------------------------------------------


def _fused_encoder(g: _GraphBuilder, cfg: BertConfig) -> str:
    ids32 = g.op1("Cast", ["input_ids"], to=TensorProto.INT32)
    types32 = g.op1("Cast", ["token_type_ids"], to=TensorProto.INT32)
    mask32 = g.op1("Cast", ["attention_mask"], to=TensorProto.INT32)
    # mask_index = number of real tokens per row; Attention uses it as right-padded key lengths.
    hidden, mask_index = g.op(
        "EmbedLayerNormalization",
        [
            ids32,
            types32,
            g.w("embeddings.word_embeddings.weight"),
            g.w("embeddings.position_embeddings.weight"),
            g.w("embeddings.token_type_embeddings.weight"),
            g.w("embeddings.LayerNorm.weight"),
            g.w("embeddings.LayerNorm.bias"),
            mask32,
        ],
        n_out=2,
        domain=MS_DOMAIN,
        epsilon=cfg.layer_norm_eps,
    )
    for i in range(cfg.num_layers):
        hidden = _fused_layer(g, cfg, f"encoder.layer.{i}", hidden, mask_index)
    return hidden


def _fused_layer(g: _GraphBuilder, cfg: BertConfig, p: str, x: str, mask_index: str) -> str:
    W = g.weights
    # Attention wants one packed [hidden, 3*hidden] projection for Q, K and V.
    qkv_w = np.concatenate([W[f"{p}.attention.self.{n}.weight"].T for n in ("query", "key", "value")], axis=1)
    qkv_b = np.concatenate([W[f"{p}.attention.self.{n}.bias"] for n in ("query", "key", "value")])
    qkv_w_name = g.init(f"{p}.attention.qkv.weight", qkv_w.astype(np.float32))
    qkv_b_name = g.init(f"{p}.attention.qkv.bias", qkv_b.astype(np.float32))
    ctx = g.op1(
        "Attention",
        [x, qkv_w_name, qkv_b_name, mask_index],
        domain=MS_DOMAIN,
        num_heads=cfg.num_heads,
    )
    proj = g.op1("MatMul", [ctx, g.w(f"{p}.attention.output.dense.weight", transpose=True)])
    x = g.op(
        "SkipLayerNormalization",
        [
            proj,
            x,
            g.w(f"{p}.attention.output.LayerNorm.weight"),
            g.w(f"{p}.attention.output.LayerNorm.bias"),
            g.w(f"{p}.attention.output.dense.bias"),
        ],
        domain=MS_DOMAIN,
        epsilon=cfg.layer_norm_eps,
    )[0]
    inter = g.op1("MatMul", [x, g.w(f"{p}.intermediate.dense.weight", transpose=True)])
    inter = g.op1("BiasGelu", [inter, g.w(f"{p}.intermediate.dense.bias")], domain=MS_DOMAIN)
    out = g.op1("MatMul", [inter, g.w(f"{p}.output.dense.weight", transpose=True)])
    return g.op(
        "SkipLayerNormalization",
        [out, x, g.w(f"{p}.output.LayerNorm.weight"), g.w(f"{p}.output.LayerNorm.bias"), g.w(f"{p}.output.dense.bias")],
        domain=MS_DOMAIN,
        epsilon=cfg.layer_norm_eps,
    )[0]


# ---------------------------------------------------------------------------------------------
# Standard-op flavour
# ---------------------------------------------------------------------------------------------


def _plain_encoder(g: _GraphBuilder, cfg: BertConfig) -> str:
    # Position embeddings are the first seq_len rows of the table (absolute positions 0..seq-1).
    seq_len = g.op1("Shape", ["input_ids"], start=1, end=2)
    table = g.w("embeddings.position_embeddings.weight")
    positions = g.op1("Slice", [table, g.const("zero_1d", [0]), seq_len, g.const("axes_0", [0])])
    emb = g.op1("Gather", [g.w("embeddings.word_embeddings.weight"), "input_ids"])
    emb = g.op1("Add", [emb, positions])
    emb = g.op1("Add", [emb, g.op1("Gather", [g.w("embeddings.token_type_embeddings.weight"), "token_type_ids"])])
    hidden = _layer_norm(g, cfg, emb, "embeddings.LayerNorm")

    # Additive mask [batch, 1, 1, seq]: 0 for real tokens, -10000 for padding (as BERT does).
    g.const("one_f", 1.0, np.float32)  # shared scalar referenced by name below
    maskf = g.op1("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    maskf = g.op1("Unsqueeze", [maskf, g.const("axes_1_2", [1, 2])])
    bias = g.op1("Mul", [g.op1("Sub", ["one_f", maskf]), g.const("neg_f", -10000.0, np.float32)])
    for i in range(cfg.num_layers):
        hidden = _plain_layer(g, cfg, f"encoder.layer.{i}", hidden, bias)
    return hidden


def _layer_norm(g: _GraphBuilder, cfg: BertConfig, x: str, key: str) -> str:
    return g.op1("LayerNormalization", [x, g.w(f"{key}.weight"), g.w(f"{key}.bias")], axis=-1, epsilon=cfg.layer_norm_eps)


def _linear(g: _GraphBuilder, x: str, key: str) -> str:
    return g.op1("Add", [g.op1("MatMul", [x, g.w(f"{key}.weight", transpose=True)]), g.w(f"{key}.bias")])


def _plain_layer(g: _GraphBuilder, cfg: BertConfig, p: str, x: str, mask_bias: str) -> str:
    head_dim = cfg.hidden_size // cfg.num_heads
    split = g.const("split_heads", [0, 0, cfg.num_heads, head_dim])
    merge = g.const("merge_heads", [0, 0, cfg.hidden_size])

    def heads(name: str, perm: list[int]) -> str:
        t = g.op1("Reshape", [_linear(g, x, f"{p}.attention.self.{name}"), split])
        return g.op1("Transpose", [t], perm=perm)

    q, k, v = heads("query", [0, 2, 1, 3]), heads("key", [0, 2, 3, 1]), heads("value", [0, 2, 1, 3])
    scores = g.op1("Mul", [g.op1("MatMul", [q, k]), g.const("attn_scale", 1.0 / np.sqrt(head_dim), np.float32)])
    probs = g.op1("Softmax", [g.op1("Add", [scores, mask_bias])], axis=-1)
    ctx = g.op1("Transpose", [g.op1("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    ctx = g.op1("Reshape", [ctx, merge])
    x = _layer_norm(g, cfg, g.op1("Add", [_linear(g, ctx, f"{p}.attention.output.dense"), x]), f"{p}.attention.output.LayerNorm")
    inter = _linear(g, x, f"{p}.intermediate.dense")
    # Exact GELU: 0.5 * x * (1 + erf(x / sqrt(2)))
    erf = g.op1("Erf", [g.op1("Div", [inter, g.const("sqrt2", np.sqrt(2.0), np.float32)])])
    inter = g.op1("Mul", [g.op1("Mul", [inter, g.op1("Add", [erf, "one_f"])]), g.const("half_f", 0.5, np.float32)])
    return _layer_norm(g, cfg, g.op1("Add", [_linear(g, inter, f"{p}.output.dense"), x]), f"{p}.output.LayerNorm")


# ---------------------------------------------------------------------------------------------
# Pooling and assembly
# ---------------------------------------------------------------------------------------------


def _mean_pool_normalize(g: _GraphBuilder, hidden: str) -> str:
    maskf = g.op1("Unsqueeze", [g.op1("Cast", ["attention_mask"], to=TensorProto.FLOAT), g.const("axes_m1", [-1])])
    summed = g.op1("ReduceSum", [g.op1("Mul", [hidden, maskf]), "axes_1"], keepdims=0)
    # Clamps match sentence-transformers: count >= 1e-9, norm >= 1e-12.
    count = g.op1("Max", [g.op1("ReduceSum", [maskf, "axes_1"], keepdims=0), g.const("min_count", 1e-9, np.float32)])
    mean = g.op1("Div", [summed, count])
    norm = g.op1("Sqrt", [g.op1("ReduceSum", [g.op1("Mul", [mean, mean]), "axes_m1"], keepdims=1)])
    norm = g.op1("Max", [norm, g.const("min_norm", 1e-12, np.float32)])
    return g.op1("Div", [mean, norm])


def build_bert_onnx(
    weights_path: str | os.PathLike,
    config_path: str | os.PathLike | None = None,
    *,
    fused: bool = True,
    pool: bool = True,
    num_heads: int = 12,
) -> onnx.ModelProto:
    """Return the sentence-embedding graph for the BERT checkpoint at ``weights_path``.

    ``config_path`` defaults to ``config.json`` next to the weights; without one the dimensions
    are read off the tensors and ``num_heads`` must be right. ``pool=False`` outputs the token
    states (``last_hidden_state`` [batch, seq, hidden]) instead of the pooled, normalized vector.
    """
    from safetensors.numpy import load_file  # local: only needed when (re)building

    weights_path = Path(weights_path)
    weights = _strip_prefix(load_file(str(weights_path)))
    config_path = Path(config_path) if config_path else weights_path.with_name("config.json")
    cfg = BertConfig.from_json(config_path) if config_path.is_file() else BertConfig.infer(weights, num_heads)
    if cfg.hidden_size % cfg.num_heads:
        raise ValueError(f"hidden_size {cfg.hidden_size} is not divisible by num_heads {cfg.num_heads}")

    g = _GraphBuilder(weights)
    g.const("axes_1", [1])  # shared constant referenced by name below
    hidden = _fused_encoder(g, cfg) if fused else _plain_encoder(g, cfg)
    if pool:
        result, shape = _mean_pool_normalize(g, hidden), ["batch", cfg.hidden_size]
    else:
        result, shape = hidden, ["batch", "seq", cfg.hidden_size]
    out_name = OUTPUT_NAME if pool else HIDDEN_NAME
    g.nodes.append(helper.make_node("Identity", [result], [out_name], name="output"))

    dims = ["batch", "seq"]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, dims) for n in INPUT_NAMES]
    outputs = [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, shape)]
    graph = helper.make_graph(g.nodes, "sentence_bert", inputs, outputs, initializer=_dedupe(g.inits))
    opsets = [helper.make_opsetid("", OPSET)] + ([helper.make_opsetid(MS_DOMAIN, 1)] if fused else [])
    model = helper.make_model(graph, opset_imports=opsets, producer_name="hebbs.onnx_bert")
    model.ir_version = 8  # readable by every onnxruntime >= 1.14
    return model


def _dedupe(inits: list[onnx.TensorProto]) -> list[onnx.TensorProto]:
    seen: dict[str, onnx.TensorProto] = {}
    for t in inits:
        seen.setdefault(t.name, t)
    return list(seen.values())


def save_bert_onnx(
    weights_path: str | os.PathLike,
    out_path: str | os.PathLike,
    config_path: str | os.PathLike | None = None,
    *,
    fused: bool = True,
    pool: bool = True,
) -> Path:
    """Build and write the graph to ``out_path`` (not atomically: callers own temp+rename)."""
    model = build_bert_onnx(weights_path, config_path, fused=fused, pool=pool)
    out_path = Path(out_path)
    with open(out_path, "wb") as f:
        f.write(model.SerializeToString())
    return out_path


if __name__ == "__main__":  # pragma: no cover - manual use: python -m hebbs.embedding.onnx_bert weights out [--plain]
    import sys

    t0 = time.perf_counter()
    save_bert_onnx(sys.argv[1], sys.argv[2], fused="--plain" not in sys.argv)
    print(f"built {sys.argv[2]} in {time.perf_counter() - t0:.2f}s")
