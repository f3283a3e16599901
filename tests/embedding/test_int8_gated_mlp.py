"""The int8 cue graph keeps float32 the product that reads a gated MLP's gelu(gate) * up (EmbeddingGemma's
down projection), as it keeps those reading GELU directly (MiniLM's): those activations have a long tail."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from hebbs.embedding.embed import _build_int8_graph


def test_the_down_projection_of_a_gated_mlp_stays_float32(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    weights = {name: rng.standard_normal((16, 16)).astype(np.float32) for name in ("gate", "up", "down", "out")}
    nodes = [
        helper.make_node("MatMul", ["x", "gate"], ["g"], name="gate_proj"),
        helper.make_node("Gelu", ["g"], ["a"], name="gelu", approximate="tanh"),
        helper.make_node("MatMul", ["x", "up"], ["u"], name="up_proj"),
        helper.make_node("Mul", ["a", "u"], ["h"], name="gated"),
        helper.make_node("MatMul", ["h", "down"], ["d"], name="down_proj"),
        helper.make_node("MatMul", ["d", "out"], ["y"], name="out_proj"),
    ]
    graph = helper.make_graph(
        nodes, "gated_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 16])],
        initializer=[numpy_helper.from_array(w, name) for name, w in weights.items()])
    source = tmp_path / "gated.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), source)
    _build_int8_graph(source, tmp_path / "gated.int8.onnx")
    quantized = onnx.load(str(tmp_path / "gated.int8.onnx"))
    float_products = {n.name for n in quantized.graph.node if n.op_type == "MatMul"}
    integer_products = [n for n in quantized.graph.node if n.op_type == "MatMulInteger"]
    assert float_products == {"down_proj"}
    assert len(integer_products) == 3  # gate, up and out
