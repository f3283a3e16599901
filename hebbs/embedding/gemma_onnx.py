"""Build the ONNX graph of EmbeddingGemma-300m straight from its safetensors, without torch.

The model is a sentence-transformers stack (the folder's modules.json): a Gemma 3 text encoder whose
attention is bidirectional (config.json ``use_bidirectional_attention``), mean pooling over the
attention mask, two bias-free linear layers (2_Dense 768 -> 3072, 3_Dense 3072 -> 768, identity
activations) and L2 normalization. The graph is written node by node with ``onnx.helper`` (standard
ops only, opset 20 for the tanh GELU) and outputs the normalized sentence embedding.

The encoder, as transformers' Gemma3TextModel computes it in float32:

* token embeddings times sqrt(hidden_size) (folded into the table);
* per layer: RMSNorm -> attention -> RMSNorm, added to the residual; RMSNorm -> MLP
  (down(gelu_tanh(gate(x)) * up(x))) -> RMSNorm, added to the residual; a final RMSNorm. Every RMSNorm
  scales by (1 + weight) (folded into the weights);
* attention: 3 query heads share 1 key/value head (grouped-query), head_dim 256; queries and keys are
  RMS-normalized per head, then rotated (RoPE: theta 1e6 on the full-attention layers, 1e4 on the
  sliding ones); scores are scaled by query_pre_attn_scalar ** -0.5 (folded into the query norm).

The sliding window: a sliding layer of the bidirectional model lets a token see the tokens less than
``sliding_window`` (512) positions away on either side. The graph embeds at most that many tokens
(``max_positions``), so every layer sees the whole text and the sliding and full layers differ only by
their rope theta; a longer input fails in the graph instead of being embedded differently.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["GemmaConfig", "build_gemma_onnx", "OUTPUT_NAME"]

OPSET = 20  # Gelu with approximate="tanh"
OUTPUT_NAME = "sentence_embedding"
INPUT_NAMES = ("input_ids", "attention_mask")


@dataclass(frozen=True)
class GemmaConfig:
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    rms_norm_eps: float
    rope_theta: float
    rope_local_theta: float
    layer_types: tuple[str, ...]
    query_pre_attn_scalar: float
    sliding_window: int

    @classmethod
    def from_json(cls, path: Path) -> "GemmaConfig":
        cfg = json.loads(path.read_text(encoding="utf-8"))
        if cfg.get("hidden_activation") != "gelu_pytorch_tanh":
            raise ValueError(f"unsupported hidden_activation {cfg.get('hidden_activation')!r}: expected gelu_pytorch_tanh")
        if not cfg.get("use_bidirectional_attention"):
            raise ValueError("the graph is a bidirectional encoder: config.json must set use_bidirectional_attention")
        if cfg.get("rope_scaling") or cfg.get("attn_logit_softcapping"):
            raise ValueError("rope_scaling and attn_logit_softcapping are not implemented")
        layers = int(cfg["num_hidden_layers"])
        types = tuple(cfg.get("layer_types") or ())
        if len(types) != layers or set(types) - {"sliding_attention", "full_attention"}:
            raise ValueError(f"layer_types must name {layers} sliding_attention/full_attention layers")
        return cls(
            hidden_size=int(cfg["hidden_size"]),
            num_layers=layers,
            num_heads=int(cfg["num_attention_heads"]),
            num_kv_heads=int(cfg["num_key_value_heads"]),
            head_dim=int(cfg["head_dim"]),
            intermediate_size=int(cfg["intermediate_size"]),
            rms_norm_eps=float(cfg["rms_norm_eps"]),
            rope_theta=float(cfg["rope_theta"]),
            rope_local_theta=float(cfg["rope_local_base_freq"]),
            layer_types=types,
            query_pre_attn_scalar=float(cfg["query_pre_attn_scalar"]),
            sliding_window=int(cfg["sliding_window"]),
        )


class _Graph:
    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._names: set[str] = set()
        self._n = 0

    def init(self, name: str, array: np.ndarray) -> str:
        if name not in self._names:
            self._names.add(name)
            self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def const(self, name: str, value: Any, dtype: Any = np.int64) -> str:
        return self.init(name, np.asarray(value, dtype=dtype))

    def op(self, op_type: str, inputs: list[str], n_out: int = 1, **attrs: Any) -> list[str]:
        self._n += 1
        outs = [f"{op_type}_{self._n}_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=f"{op_type}_{self._n}", **attrs))
        return outs

    def op1(self, op_type: str, inputs: list[str], **attrs: Any) -> str:
        return self.op(op_type, inputs, **attrs)[0]


def _f32(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float32)


def _rope_tables(theta: float, head_dim: int, positions: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sign-folded sin, [positions, head_dim], in float32 as transformers computes them: the
    rotation is x*cos + swap_halves(x)*sin_signed, swap_halves(x) = [x2, x1], sin_signed = [-sin, sin]."""
    exponents = np.arange(0, head_dim, 2, dtype=np.int64).astype(np.float32) / np.float32(head_dim)
    inv_freq = np.float32(1.0) / (np.float32(theta) ** exponents)
    freqs = np.arange(positions, dtype=np.float32)[:, None] * inv_freq[None, :]
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos, sin = np.cos(emb).astype(np.float32), np.sin(emb).astype(np.float32)
    half = head_dim // 2
    return cos, np.concatenate([-sin[:, :half], sin[:, half:]], axis=-1)


def _rms_norm(g: _Graph, x: str, weight_name: str, eps: float) -> str:
    # x / sqrt(mean(x^2) + eps) * w, in the shape onnxruntime fuses into SimplifiedLayerNormalization
    mean_sq = g.op1("ReduceMean", [g.op1("Pow", [x, g.const("two_f", 2.0, np.float32)]), g.const("axes_m1", [-1])])
    denom = g.op1("Sqrt", [g.op1("Add", [mean_sq, g.const(f"eps_{eps}", eps, np.float32)])])
    return g.op1("Mul", [g.op1("Div", [x, denom]), weight_name])


def _linear(g: _Graph, x: str, name: str, weight: np.ndarray) -> str:
    """x @ weight.T for a torch Linear weight [out, in] (no bias anywhere in this model)."""
    return g.op1("MatMul", [x, g.init(name + ".T", _f32(weight).T)])


def _rotate(g: _Graph, x: str, cos: str, sin_signed: str, half: int) -> str:
    first, second = g.op("Split", [x, g.const(f"split_{half}", [half, half])], n_out=2, axis=-1)
    swapped = g.op1("Concat", [second, first], axis=-1)
    return g.op1("Add", [g.op1("Mul", [x, cos]), g.op1("Mul", [swapped, sin_signed])])


def _layer(g: _Graph, cfg: GemmaConfig, w: dict[str, np.ndarray], i: int, h: str, mask_bias: str,
           rope: dict[str, tuple[str, str]]) -> str:
    p = f"layers.{i}"
    eps = cfg.rms_norm_eps

    def norm_weight(key: str, scale: float = 1.0) -> str:
        return g.init(key, _f32((1.0 + w[key].astype(np.float32)) * np.float32(scale)))

    x = _rms_norm(g, h, norm_weight(f"{p}.input_layernorm.weight"), eps)
    d = cfg.head_dim
    q = g.op1("Reshape", [_linear(g, x, f"{p}.self_attn.q_proj", w[f"{p}.self_attn.q_proj.weight"]),
                          g.const("q_heads", [0, 0, cfg.num_heads, d])])
    k = g.op1("Reshape", [_linear(g, x, f"{p}.self_attn.k_proj", w[f"{p}.self_attn.k_proj.weight"]),
                          g.const("kv_heads", [0, 0, cfg.num_kv_heads, d])])
    v = g.op1("Reshape", [_linear(g, x, f"{p}.self_attn.v_proj", w[f"{p}.self_attn.v_proj.weight"]),
                          g.const("kv_heads", [0, 0, cfg.num_kv_heads, d])])
    # The score scale is a power of two (256 ** -0.5): folded into the query norm, it changes no rounding.
    scale = cfg.query_pre_attn_scalar ** -0.5
    q = _rms_norm(g, q, norm_weight(f"{p}.self_attn.q_norm.weight", scale), eps)
    k = _rms_norm(g, k, norm_weight(f"{p}.self_attn.k_norm.weight"), eps)
    q = g.op1("Transpose", [q], perm=[0, 2, 1, 3])  # [b, heads, s, d]
    k = g.op1("Transpose", [k], perm=[0, 2, 1, 3])  # [b, kv_heads, s, d]
    v = g.op1("Transpose", [v], perm=[0, 2, 1, 3])
    cos, sin = rope[cfg.layer_types[i]]
    q, k = _rotate(g, q, cos, sin, d // 2), _rotate(g, k, cos, sin, d // 2)
    if cfg.num_kv_heads != 1:  # one shared key/value head broadcasts over the query heads by itself
        reps = cfg.num_heads // cfg.num_kv_heads
        k = _repeat_kv(g, k, reps, cfg.num_kv_heads, d)
        v = _repeat_kv(g, v, reps, cfg.num_kv_heads, d)
    scores = g.op1("MatMul", [q, g.op1("Transpose", [k], perm=[0, 1, 3, 2])])
    probs = g.op1("Softmax", [g.op1("Add", [scores, mask_bias])], axis=-1)
    ctx = g.op1("Transpose", [g.op1("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    ctx = g.op1("Reshape", [ctx, g.const("merge_heads", [0, 0, cfg.num_heads * d])])
    attn = _linear(g, ctx, f"{p}.self_attn.o_proj", w[f"{p}.self_attn.o_proj.weight"])
    h = g.op1("Add", [h, _rms_norm(g, attn, norm_weight(f"{p}.post_attention_layernorm.weight"), eps)])

    x = _rms_norm(g, h, norm_weight(f"{p}.pre_feedforward_layernorm.weight"), eps)
    gate = g.op1("Gelu", [_linear(g, x, f"{p}.mlp.gate_proj", w[f"{p}.mlp.gate_proj.weight"])], approximate="tanh")
    up = _linear(g, x, f"{p}.mlp.up_proj", w[f"{p}.mlp.up_proj.weight"])
    down = _linear(g, g.op1("Mul", [gate, up]), f"{p}.mlp.down_proj", w[f"{p}.mlp.down_proj.weight"])
    return g.op1("Add", [h, _rms_norm(g, down, norm_weight(f"{p}.post_feedforward_layernorm.weight"), eps)])


def _repeat_kv(g: _Graph, x: str, reps: int, kv_heads: int, d: int) -> str:
    x = g.op1("Unsqueeze", [x, g.const("axes_2", [2])])  # [b, kv, 1, s, d]
    x = g.op1("Expand", [x, g.const(f"expand_kv_{reps}", [1, 1, reps, 1, 1])])
    return g.op1("Reshape", [x, g.const(f"merge_kv_{kv_heads * reps}", [0, kv_heads * reps, -1, d])])


def build_gemma_onnx(model_dir: Path) -> onnx.ModelProto:
    """The sentence-embedding graph of the EmbeddingGemma folder ``model_dir`` (the model repository's
    layout: config.json, model.safetensors, 2_Dense/ and 3_Dense/)."""
    from safetensors.numpy import load_file  # local: only needed when (re)building

    model_dir = Path(model_dir)
    cfg = GemmaConfig.from_json(model_dir / "config.json")
    w = load_file(str(model_dir / "model.safetensors"))
    dense = [load_file(str(model_dir / f"{n}_Dense" / "model.safetensors"))["linear.weight"] for n in (2, 3)]
    positions = cfg.sliding_window

    g = _Graph()
    # sqrt(hidden) is applied to the float32 rows as transformers does (a float32 multiply either way)
    table = _f32(w["embed_tokens.weight"]) * np.float32(cfg.hidden_size ** 0.5)
    h = g.op1("Gather", [g.init("embed_tokens.scaled", table), "input_ids"])
    del table

    seq_len = g.op1("Shape", ["input_ids"], start=1, end=2)
    rope: dict[str, tuple[str, str]] = {}
    for kind, theta in (("full_attention", cfg.rope_theta), ("sliding_attention", cfg.rope_local_theta)):
        cos, sin = _rope_tables(theta, cfg.head_dim, positions)
        rope[kind] = tuple(
            g.op1("Slice", [g.init(f"rope.{kind}.{name}", table), g.const("zero_1d", [0]), seq_len, g.const("axes_0", [0])])
            for name, table in (("cos", cos), ("sin", sin))
        )

    mask = g.op1("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    # Additive key mask [b, 1, 1, s]: 0 for the text's tokens, -1e9 for padding (exp underflows to 0).
    mask_bias = g.op1("Mul", [g.op1("Sub", [g.const("one_f", 1.0, np.float32), mask]), g.const("neg_f", -1e9, np.float32)])
    mask_bias = g.op1("Unsqueeze", [mask_bias, g.const("axes_1_2", [1, 2])])
    for i in range(cfg.num_layers):
        h = _layer(g, cfg, w, i, h, mask_bias, rope)
    h = _rms_norm(g, h, g.init("norm.weight", _f32(1.0 + w["norm.weight"].astype(np.float32))), cfg.rms_norm_eps)

    maskf = g.op1("Unsqueeze", [mask, g.const("axes_m1", [-1])])
    summed = g.op1("ReduceSum", [g.op1("Mul", [h, maskf]), g.const("axes_1", [1])], keepdims=0)
    count = g.op1("Max", [g.op1("ReduceSum", [maskf, "axes_1"], keepdims=0), g.const("min_count", 1e-9, np.float32)])
    pooled = g.op1("Div", [summed, count])
    out = _linear(g, _linear(g, pooled, "2_Dense.linear", dense[0]), "3_Dense.linear", dense[1])
    norm = g.op1("Sqrt", [g.op1("ReduceSum", [g.op1("Mul", [out, out]), "axes_m1"], keepdims=1)])
    out = g.op1("Div", [out, g.op1("Max", [norm, g.const("min_norm", 1e-12, np.float32)])])
    g.nodes.append(helper.make_node("Identity", [out], [OUTPUT_NAME], name="output"))

    dims = ["batch", "seq"]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, dims) for n in INPUT_NAMES]
    outputs = [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["batch", int(dense[1].shape[0])])]
    graph = helper.make_graph(g.nodes, "embeddinggemma", inputs, outputs, initializer=g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="hebbs.gemma_onnx")
    model.ir_version = 9
    return model
