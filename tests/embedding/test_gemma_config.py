"""The EmbeddingGemma graph builder reads its config and refuses what it does not implement (no weights
needed: the graph itself is checked against transformers in test_gemma.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hebbs.embedding.gemma_onnx import GemmaConfig, _rope_tables

CONFIG = {
    "hidden_activation": "gelu_pytorch_tanh", "use_bidirectional_attention": True, "rope_scaling": None,
    "attn_logit_softcapping": None, "num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"],
    "hidden_size": 8, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4, "intermediate_size": 16,
    "rms_norm_eps": 1e-6, "rope_theta": 1e6, "rope_local_base_freq": 1e4, "query_pre_attn_scalar": 4,
    "sliding_window": 16,
}


def _config(tmp_path: Path, **changes: object) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIG | changes))
    return path


def test_the_config_is_read(tmp_path: Path) -> None:
    cfg = GemmaConfig.from_json(_config(tmp_path))
    assert (cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.sliding_window) == (2, 1, 4, 16)
    assert cfg.layer_types == ("sliding_attention", "full_attention")


@pytest.mark.parametrize("changes, message", [
    ({"use_bidirectional_attention": False}, "bidirectional"),
    ({"hidden_activation": "gelu"}, "gelu_pytorch_tanh"),
    ({"rope_scaling": {"factor": 8.0}}, "rope_scaling"),
    ({"layer_types": ["sliding_attention"]}, "layer_types"),
])
def test_what_the_graph_does_not_implement_is_refused(tmp_path: Path, changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GemmaConfig.from_json(_config(tmp_path, **changes))


def test_rope_rotates_pairs_of_dimensions_half_a_head_apart() -> None:
    cos, sin_signed = _rope_tables(10_000.0, 4, 3)
    x = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
    rotated = x * cos[2] + np.concatenate([x[2:], x[:2]]) * sin_signed[2]
    angles = 2 * np.array([1.0, 10_000.0 ** -0.5])  # position 2, frequencies theta ** (-2i / head_dim)
    expected = np.concatenate([x[:2] * np.cos(angles) - x[2:] * np.sin(angles),
                               x[2:] * np.cos(angles) + x[:2] * np.sin(angles)])
    np.testing.assert_allclose(rotated, expected, rtol=1e-5)
