"""Package data for hebbs' known embedding models (registry.toml), and each model's calibration."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

REGISTRY_PATH = Path(__file__).with_name("registry.toml")


@lru_cache(maxsize=1)
def _load() -> dict[str, Any]:
    with open(REGISTRY_PATH, "rb") as f:
        return tomllib.load(f)


def load_registry() -> dict[str, Any]:
    """The parsed registry: ``{"default": id, "models": {id: entry}}`` (a fresh copy each call)."""
    import copy

    return copy.deepcopy(_load())


@dataclass(frozen=True)
class Calibration:
    """What was fitted on one model's cosines: a cosine of 0.6 means more under one model than under
    another, so every cut-off on a cosine, and the confidence calibration that weighs cosines, is the
    model's own (registry.toml ``[models.X.calibration]``, written by scripts/fit_calibration.py)."""

    model: str
    # recall/confidence.py: the logistic calibration over confidence.FEATURES (the feature names it was
    # fitted on are kept with it: a calibration fitted on other features is not used), and the threshold
    # below which a recall abstains (config recall.abstain_threshold overrides it). Empty and None for
    # the model whose calibration confidence.py holds itself (MiniLM: bench_abstention.py --fit writes it there).
    confidence_features: tuple[str, ...]
    confidence_coefficients: tuple[float, ...]
    confidence_intercept: float
    abstain_threshold: float | None
    # workflows/consolidate.py: a restatement's and a paraphrase's least cosine to the memory it folds into,
    # and a paraphrase's that only adds light words.
    restatement_cosine: float
    paraphrase_cosine: float
    paraphrase_added_cosine: float
    # workflows/contradiction_check.py: the least cosine of a neighbour worth checking for a contradiction
    # (config contradictions.min_similarity overrides it).
    contradiction_similarity: float
    # recall/fusion.py's MMR: a candidate this similar to one already picked is a duplicate (config
    # recall.duplicate_similarity overrides it).
    duplicate_similarity: float
    # recall/fusion.py: the fusion weights fitted on this model (config.FusionParams.MODEL_KEYS, by
    # scripts/fit_fusion.py); a weight it does not name is MiniLM's (config.MINILM_FUSION). Config
    # [recall.fusion] overrides each.
    fusion: tuple[tuple[str, float], ...] = ()

    def confidence_for(self, features: tuple[str, ...]) -> tuple[tuple[float, ...], float] | None:
        """(coefficients, intercept) in the order of `features`, or None when fitted on other features."""
        if not self.confidence_features or tuple(features) != self.confidence_features:
            return None
        return self.confidence_coefficients, self.confidence_intercept


@lru_cache(maxsize=None)
def calibration(model_id: str | None) -> Calibration:
    """The calibration of a registry model by id; a model the registry does not know (a folder of the
    user's) gets the default model's, the nearest thing to a guess that was measured."""
    reg = _load()
    models = reg["models"]
    mid = model_id if model_id in models and "calibration" in models[model_id] else reg["default"]
    table = models[mid]["calibration"]
    confidence = table.get("confidence", {})
    return Calibration(
        model=mid,
        confidence_features=tuple(confidence.get("features", ())),
        confidence_coefficients=tuple(float(v) for v in confidence.get("coefficients", ())),
        confidence_intercept=float(confidence.get("intercept", 0.0)),
        abstain_threshold=float(table["abstain_threshold"]) if "abstain_threshold" in table else None,
        restatement_cosine=float(table["restatement_cosine"]),
        paraphrase_cosine=float(table["paraphrase_cosine"]),
        paraphrase_added_cosine=float(table["paraphrase_added_cosine"]),
        contradiction_similarity=float(table["contradiction_similarity"]),
        duplicate_similarity=float(table["duplicate_similarity"]),
        fusion=tuple((key, float(value)) for key, value in table.get("fusion", {}).items()),
    )
