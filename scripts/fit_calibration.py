"""Fit each embedding model's calibration (hebbs.models.Calibration) and write it into
hebbs/models/registry.toml as its [models."ID".calibration] tables.

    .venv/bin/python -m bench models --rows-dir DIR        # the recall rows of each model (slow)
    .venv/bin/python -m scripts.fit_calibration --rows-dir DIR [--models bge-small-en-v1.5 ...] [--write]

Two procedures, both the ones MiniLM's figures came from:
- Confidence and abstention: bench_abstention.fit and pick_threshold (the logistic calibration fitted
  per result on the fit part, the highest threshold that abstains on at most 3% of its answerable
  cues), on the rows `python -m bench models --rows-dir` kept for the model: its default recall over
  LoCoMo dev conversations and the notes vault, bench_abstention's cues and split.
- The cosine cut-offs (restatement, paraphrase, contradiction neighbour, MMR duplicate): MiniLM's were
  set by hand on the labelled pairs of bench/data. Another model gets the cut-off under which it lets
  through the same pairs as MiniLM's does (the most pairs decided alike; ties: the middle of the
  range), over those pairs and every pair of 200 LoCoMo turns (conversation 26: the range between,
  where the contradiction neighbour cut-off sits). The rules that read the words after the gate are
  the same under every model.

Nothing is keyed to a dataset: the figures are one model's, whatever vault it serves.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

import numpy as np

from bench.workloads import abstention as ab
from bench import bench_consolidation as bc
from bench.datasets import pairs as pair_sets
from bench.datasets.locomo import load as load_locomo
from bench.harness import shared
from hebbs.embedding.embed import get_embedder
from hebbs.models import REGISTRY_PATH, calibration, load_registry

REFERENCE = "all-MiniLM-L6-v2"  # the model the hand-set cut-offs were written against
# bench_models' setting names for the models whose rows it keeps.
SETTING_OF = {"all-MiniLM-L6-v2": "minilm", "bge-small-en-v1.5": "bge", "embeddinggemma-300m": "gemma"}
CUTOFFS = ("restatement_cosine", "paraphrase_cosine", "paraphrase_added_cosine", "contradiction_similarity",
           "duplicate_similarity")
TURNS = 200


def pair_texts() -> list[tuple[str, str]]:
    """The labelled pairs of bench/data (consolidation, paraphrases, contradictions) and every pair of
    TURNS turns of LoCoMo conversation 26."""
    data = shared("data/locomo-dev")
    out = [(a, b) for a, b, _, _ in bc.labelled_pairs(data)]
    out += [(r["a"], r["b"]) for r in pair_sets.paraphrase_rows("dev")]
    convs = {c["name"]: c for c in load_locomo(data)}
    by_dia = {(name, t["dia_id"]): t["text"] for name, c in convs.items() for t in c["turns"]}
    for row in pair_sets.rows(pair_sets.CONTRADICTIONS):
        if row.get("source") == "locomo":
            a, b = by_dia.get((row["conversation"], row["a"])), by_dia.get((row["conversation"], row["b"]))
            if a and b:
                out.append((a, b))
    turns = [t["text"] for t in convs["26"]["turns"]]
    picked = random.Random(26).sample(turns, min(TURNS, len(turns)))
    out += [(a, b) for i, a in enumerate(picked) for b in picked[i + 1:]]
    return out


def cosines(model: str, texts: list[tuple[str, str]]) -> np.ndarray:
    embedder = get_embedder(model)
    unique = sorted({t for pair in texts for t in pair})
    vectors = embedder.embed_documents(unique)  # memories are embedded as documents
    index = {t: i for i, t in enumerate(unique)}
    a = vectors[[index[x] for x, _ in texts]]
    b = vectors[[index[y] for _, y in texts]]
    return np.sum(a * b, axis=1)


def mapped_cutoff(reference: np.ndarray, cut: float, other: np.ndarray) -> float:
    """The cut-off on `other` that decides the most pairs as `reference >= cut` does (the middle of the
    best range)."""
    passes = reference >= cut
    order = np.argsort(-other)
    ranked, ranked_pass = other[order], passes[order]
    # Cutting after the k-th highest: pairs 0..k-1 pass. Agreement = passes among them + fails after.
    agree = np.concatenate([[0], np.cumsum(ranked_pass)]) + (np.sum(~ranked_pass) - np.concatenate(
        [[0], np.cumsum(~ranked_pass)]))
    best = np.flatnonzero(agree == agree.max())
    k = int(best[len(best) // 2])
    if k == 0:
        return round(float(ranked[0]) + 1e-4, 4)
    if k == len(ranked):
        return round(float(ranked[-1]), 4)
    return round(float(ranked[k - 1] + ranked[k]) / 2, 4)


def fit_model(model: str, rows_dir: Path | None, texts: list[tuple[str, str]], base: np.ndarray) -> dict:
    out: dict = {}
    own = cosines(model, texts)
    ref = calibration(REFERENCE)
    for name in CUTOFFS:
        out[name] = mapped_cutoff(base, getattr(ref, name), own)
    rows_path = rows_dir / f"{SETTING_OF[model]}.json" if rows_dir else None
    rows = ([r for r in json.loads(rows_path.read_text()) if r["part"] == "fit" and r["goal"]]
            if rows_path is not None and rows_path.exists() else [])
    if {r["answerable"] for r in rows} != {True, False}:
        # A fit needs cues of both kinds (one LoCoMo conversation alone has no unanswerable goal cue:
        # those come from the other conversations); without them the model keeps confidence.py's own.
        print(f"{model}: no answerable and unanswerable fit rows in {rows_path}: cut-offs only", file=sys.stderr)
    else:
        coefficients, intercept = ab.fit(rows)
        out["abstain_threshold"] = ab.pick_threshold(rows, [ab.best(r, coefficients, intercept) for r in rows])
        out["confidence"] = {"features": list(ab.conf.FEATURES), "coefficients": list(coefficients),
                             "intercept": intercept}
    return out


MARK = "# ---- Fitted by scripts/fit_calibration.py: each model's calibration, rewritten by --write ----\n"


def toml_block(model: str, fitted: dict) -> str:
    lines = [f"# calibration of {model}", f'[models."{model}".calibration]']
    if "abstain_threshold" in fitted:
        lines.append(f"abstain_threshold = {fitted['abstain_threshold']}")
    lines += [f"{name} = {fitted[name]}" for name in CUTOFFS]
    if "confidence" in fitted:
        c = fitted["confidence"]
        lines += [f'[models."{model}".calibration.confidence]',
                  "features = [" + ", ".join(f'"{f}"' for f in c["features"]) + "]",
                  "coefficients = [" + ", ".join(str(v) for v in c["coefficients"]) + "]",
                  f"intercept = {c['intercept']}"]
    return "\n".join(lines) + "\n"


def write(blocks: dict[str, str]) -> None:
    """Rewrite the fitted section at the end of registry.toml: the given models' blocks replace theirs,
    the others' stay."""
    head, _, tail = REGISTRY_PATH.read_text().partition(MARK)
    kept = {m.group(1): m.group(0) for m in re.finditer(r"^# calibration of (\S+)\n(?:(?!# calibration of )[^\n]*\n)*",
                                                          tail, re.M)}
    kept.update(blocks)
    body = "\n".join(block.rstrip("\n") + "\n" for _, block in sorted(kept.items()))
    REGISTRY_PATH.write_text(head.rstrip("\n") + "\n\n" + MARK + body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows-dir", type=Path, help="bench_models' --rows-dir (the confidence calibration)")
    fitted = [m for m in load_registry()["models"] if m != REFERENCE]
    # Only a registry model has a calibration table to write: a folder of the user's gets the default's.
    parser.add_argument("--models", nargs="+", default=fitted, choices=fitted)
    parser.add_argument("--write", action="store_true", help="write the tables into hebbs/models/registry.toml")
    args = parser.parse_args()
    texts = pair_texts()
    base = cosines(REFERENCE, texts)
    print(f"{len(texts)} pairs; MiniLM's cosines: median {np.median(base):.3f}", file=sys.stderr)
    blocks = {}
    for model in args.models:
        blocks[model] = toml_block(model, fit_model(model, args.rows_dir, texts, base))
        print(blocks[model])
    if args.write:
        write(blocks)


if __name__ == "__main__":
    main()
