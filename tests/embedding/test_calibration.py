"""Each model's calibration (hebbs.models.calibration, registry.toml): what was fitted on MiniLM's cosines
is the model's own, and a vault reads its model's; real models, real RocksDB vaults."""

from __future__ import annotations

import contextlib
import math
import processes
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from hebbs import Engine
from hebbs.config import DEFAULT_ABSTAIN_THRESHOLD, MINILM_FUSION, FusionParams, RecallConfig, VaultConfig
from hebbs.models import calibration, load_registry
from hebbs.recall import confidence
from hebbs.recall.pipeline import recall_settings
from scripts.fit_calibration import mapped_cutoff

FACTS = ["Dana prefers green tea in the morning.", "The staging server restarts every Sunday at 03:00.",
         "Acme moved its office to Lisbon in 2021."]
CUE = "when does the staging server restart"


def test_every_registry_model_has_a_calibration_of_its_own() -> None:
    for model in load_registry()["models"]:
        assert calibration(model).model == model


def test_a_model_the_registry_does_not_know_gets_the_default_models() -> None:
    assert calibration("/some/folder/of/mine").model == load_registry()["default"]


def test_minilm_keeps_the_cut_offs_its_rules_were_written_against() -> None:
    ref = calibration("all-MiniLM-L6-v2")
    assert (ref.restatement_cosine, ref.paraphrase_cosine, ref.paraphrase_added_cosine,
            ref.contradiction_similarity, ref.duplicate_similarity) == (0.9, 0.9, 0.95, 0.5, 0.95)
    assert ref.confidence_for(confidence.FEATURES) is None  # confidence.py's own calibration


@contextlib.contextmanager
def _recalled(vault: Path, model: str, config: str) -> Iterator[tuple[Engine, Any]]:
    """A fresh vault of `model` (with `config`) holding FACTS, and its recall of CUE."""
    vault.mkdir()
    if config:
        (vault / "config.toml").write_text(config)
    with Engine.open(vault, model=model) as engine:
        engine.remember_many([{"content": f} for f in FACTS])
        yield engine, engine.recall(CUE, top_k=3, reinforce=False)


def _recall(tmp_path: Path, model: str, config: str = "") -> tuple[float, float, list[float]]:
    with _recalled(tmp_path / model, model, config) as (_, found):
        best = found.results[0]
        features = [best.details["confidence_features"][f] for f in confidence.FEATURES]
        return found.threshold, best.confidence, features


def test_a_vault_judges_confidence_with_its_models_calibration(tmp_path: Path) -> None:
    bge = calibration("bge-small-en-v1.5")
    fitted = bge.confidence_for(confidence.FEATURES)
    assert fitted is not None and bge.abstain_threshold is not None
    threshold, got, features = _recall(tmp_path, "bge-small-en-v1.5")
    assert threshold == bge.abstain_threshold
    assert math.isclose(got, confidence.calibrated(dict(zip(confidence.FEATURES, features)), *fitted), abs_tol=1e-4)
    threshold, got, features = _recall(tmp_path, "all-MiniLM-L6-v2")
    assert threshold == DEFAULT_ABSTAIN_THRESHOLD
    assert math.isclose(got, confidence.calibrated(dict(zip(confidence.FEATURES, features))), abs_tol=1e-4)


def test_a_configured_threshold_wins_over_the_models(tmp_path: Path) -> None:
    threshold, _, _ = _recall(tmp_path, "bge-small-en-v1.5", "[recall]\nabstain_threshold = 0.5\n")
    assert threshold == 0.5


def test_a_cut_off_maps_to_the_one_that_lets_the_same_pairs_through() -> None:
    reference = np.linspace(0.0, 1.0, 101)
    other = 0.5 + reference / 2  # a model whose cosines are squeezed into 0.5..1
    assert math.isclose(mapped_cutoff(reference, 0.9, other), 0.9475, abs_tol=0.003)


def _fusion(tmp_path: Path, model: str, config: str = "") -> tuple[float, FusionParams]:
    """The lexical weight a recall of short facts fused with (its details), and the vault's resolved fusion."""
    with _recalled(tmp_path / f"fusion-{model}", model, config) as (engine, found):
        return found.results[0].details["lexical_weight"], recall_settings(engine.vault).fusion


def test_a_vault_fuses_with_its_models_weights(tmp_path: Path) -> None:
    bge = dict(calibration("bge-small-en-v1.5").fusion)
    assert set(bge) == set(FusionParams.MODEL_KEYS) and bge != MINILM_FUSION  # fitted: scripts/fit_fusion.py
    weight, fusion = _fusion(tmp_path, "bge-small-en-v1.5")
    assert weight == bge["lexical_weight"]
    assert {key: fusion.value(key) for key in FusionParams.MODEL_KEYS} == bge
    weight, fusion = _fusion(tmp_path, "all-MiniLM-L6-v2")
    assert weight == MINILM_FUSION["lexical_weight"]
    assert {key: fusion.value(key) for key in FusionParams.MODEL_KEYS} == MINILM_FUSION


def test_a_configured_fusion_weight_wins_over_the_models(tmp_path: Path) -> None:
    weight, fusion = _fusion(tmp_path, "bge-small-en-v1.5", "[recall.fusion]\nlexical_weight = 0.45\n")
    assert weight == 0.45
    assert fusion.value("neighbor_weight") == dict(calibration("bge-small-en-v1.5").fusion)["neighbor_weight"]


def test_a_new_vaults_config_leaves_the_fusion_weights_to_its_model(tmp_path: Path) -> None:
    from hebbs.config import DEFAULT_CONFIG_TEXT
    import msgspec

    written = msgspec.toml.decode(DEFAULT_CONFIG_TEXT.encode(), type=VaultConfig)
    assert written.recall == RecallConfig()
    assert all(getattr(written.recall.fusion, key) is None for key in FusionParams.MODEL_KEYS)


def test_the_fitting_scripts_refuse_a_model_the_registry_lacks() -> None:
    """`scripts.fit_fusion --model nope` and `scripts.fit_calibration --models nope` ended in a ModelError
    traceback after loading the data; a model without a registry table is now a usage error at once."""
    repo = Path(__file__).resolve().parents[2]
    for argv in (["scripts.fit_fusion", "--model", "nope"], ["scripts.fit_calibration", "--models", "nope"]):
        ran = processes.run([sys.executable, "-m", *argv], cwd=repo, capture_output=True, text=True)
        assert ran.returncode == 2 and "invalid choice: 'nope'" in ran.stderr, ran.stderr
        assert "Traceback" not in ran.stderr
