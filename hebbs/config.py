"""Vault configuration: `<vault>/config.toml`, every key optional, defaults below.

Read once when the vault opens. An unknown key or a wrong type is an error that names it, so a typo
in the config never silently falls back to a default.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from .errors import InvalidInput
from .index import IndexParams

CONFIG_FILE = "config.toml"


class FusionParams(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """How the lexical and similarity channels combine into one relevance (see recall.py).

    Each channel's scores are normalized against its own best hit in this query; a channel whose
    best hit is weak, or whose scores do not stand out from the rest, gets less say.
    """

    lexical_weight: float = 0.6
    similarity_weight: float = 0.4
    # Extra relevance when both channels rank a memory in their top `agreement_depth`.
    agreement_bonus: float = 0.1
    agreement_depth: int = 20
    # How many candidates each channel contributes, as a multiple of top_k.
    candidate_factor: int = 5


class RecallConfig(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    fusion: FusionParams = FusionParams()
    # Maximal marginal relevance trade-off: 1.0 = pure relevance, lower = more diverse, 0 = off.
    mmr_lambda: float = 0.0
    # Analogical recall: weight of embedding similarity against structural similarity.
    analogical_alpha: float = 0.5


DEFAULT_HALF_LIVES = {
    "rule": 730.0, "decision": 730.0, "architecture": 730.0,
    "preference": 180.0, "fact": 180.0,
    "task": 7.0, "status": 3.0,
}


class DecayConfig(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    default_half_life_days: float = 30.0
    # By the memory's context "type". Why these values: docs/decay.md.
    half_life_days: dict[str, float] = msgspec.field(default_factory=lambda: dict(DEFAULT_HALF_LIVES))
    sweep_interval_seconds: float = 3600.0
    sweep_batch: int = 10_000
    forget_threshold: float = 0.01
    auto_forget: bool = False


class VaultConfig(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    model: str | None = None
    index: IndexParams = IndexParams()
    recall: RecallConfig = RecallConfig()
    decay: DecayConfig = DecayConfig()


def load_config(vault_dir: Path) -> VaultConfig:
    path = vault_dir / CONFIG_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return VaultConfig()
    try:
        return msgspec.toml.decode(raw, type=VaultConfig)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise InvalidInput(f"{path}: {exc}") from None


DEFAULT_CONFIG_TEXT = """\
# hebbs vault configuration. Every key is optional; these are the defaults.
# model = "all-MiniLM-L6-v2"      # or a directory with an ONNX model and tokenizer.json

[index]
m = 16
ef_construction = 200
ef_search = 50

[recall]
mmr_lambda = 0.0
analogical_alpha = 0.5

[recall.fusion]
lexical_weight = 0.6
similarity_weight = 0.4
agreement_bonus = 0.1
agreement_depth = 20
candidate_factor = 5

[decay]
default_half_life_days = 30.0
sweep_interval_seconds = 3600.0
auto_forget = false

[decay.half_life_days]
rule = 730.0
decision = 730.0
architecture = 730.0
preference = 180.0
fact = 180.0
task = 7.0
status = 3.0
"""
