"""Fit one embedding model's fusion weights (config [recall.fusion], FusionParams.MODEL_KEYS) by the
procedure that chose MiniLM's: one setting at a time, every benchmark set at once (notes, CISI,
MEDLINE, LoCoMo; bench/results/history.md), a value kept only when no set loses by it.

    .venv/bin/python -m scripts.fit_fusion --model bge-small-en-v1.5 [--conversations 30 42] [--docs 300]

The vaults are bench_models' (the same subsets and seeds): LoCoMo dev conversations, the notes sample,
seeded CISI and MEDLINE samples, each built once with the model; every setting is then a recall pass
over them with the vault's config changed in memory. Prints each setting's figures and the values
kept, as the registry table [models."ID".calibration.fusion] (written by hand: the figures go to
bench/results/).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import msgspec

from bench import baselines as bl
from bench.bench_models import notes_sample, sub_collection
from bench.harness import shared
from hebbs.config import MINILM_FUSION, FusionParams
from hebbs.models import load_registry

# Each weight's candidates around MiniLM's value, tried in this order (the one-at-a-time sweep).
CANDIDATES: dict[str, tuple[float, ...]] = {
    "lexical_weight": (0.4, 0.5, 0.7),
    "long_lexical_weight": (0.3, 0.5),
    "neighbor_weight": (0.1, 0.3),
}
# A set "loses" when its figure falls by more than this: the run-to-run noise of one recall pass is
# nil (recall is deterministic), so this is the smallest change worth a setting.
LOSS = 0.005
PARTS = ("notes MRR@10", "LoCoMo R@10", "CISI nDCG@10", "MEDLINE nDCG@10")


def build(model: str, work: Path, conversations: list[str], docs: int, notes_files: int) -> dict:
    """Open vaults of every set, built with `model`; returns the engines and what scoring needs."""
    from bench.datasets import cisi, locomo, medline
    from bench.datasets import notes as notes_data
    from bench.workloads import abstention as ab
    from bench.workloads import documents
    from hebbs import Engine
    from hebbs.notes import index_notes

    data = shared("data/locomo-dev")
    every = locomo.load(data)
    convs = [c for c in every if c["name"] in set(conversations)]
    raws = {c["name"]: json.loads((data / f"{c['name']}.json").read_text()) for c in every}
    out: dict = {"engines": {}, "docs": {}}
    for conv in convs:
        engine = Engine.open(work / f"locomo-{conv['name']}", model=model)
        engine.remember_many([{"content": x["text"], "created_at": x["created_at"]} for x in conv["turns"]],
                             check_contradictions=False)
        out["engines"][f"locomo-{conv['name']}"] = engine
    notes = work / "notes"
    for rel in notes_sample(notes_data.DEFAULT_VAULT, notes_files):
        (notes / "corpus" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(notes_data.DEFAULT_VAULT / rel, notes / "corpus" / rel)
    engine = Engine.open(notes / ".hebbs", model=model)
    index_notes(engine, notes, contradictions=False)
    out["engines"]["notes/.hebbs"] = engine  # the vault name bench_abstention's cues give
    out["rows"] = [r for r in ab.cues(convs, raws)
                   if r["kind"] in ("locomo answerable", "notes answerable (Hugo)")]
    for name, module in (("cisi", cisi), ("medline", medline)):
        texts, queries = sub_collection(*module.load(module.DEFAULT_DATA), docs)
        engine = Engine.open(work / name, model=model)
        out["docs"][name] = (engine, documents.build(engine, texts), queries)
    return out


def evaluate(built: dict, fusion: FusionParams) -> dict[str, float]:
    """The four figures with `fusion` as every vault's [recall.fusion]."""
    from bench.workloads import abstention as ab
    from bench.workloads import documents

    engines = [*built["engines"].values(), *(e for e, _, _ in built["docs"].values())]
    for engine in engines:
        engine.config = msgspec.structs.replace(
            engine.config, recall=msgspec.structs.replace(engine.config.recall, fusion=fusion))
    mrrs, recalls = [], []
    for row in built["rows"]:
        found = built["engines"][row["vault"]].recall(row["cue"], top_k=ab.TOP_K, reinforce=False)
        if row["kind"] == "locomo answerable" and row["relevant"]:
            recalls.append(min(1.0, sum(ab._relevant(row, r.memory) for r in found) / len(row["relevant"])))
        elif row["kind"] == "notes answerable (Hugo)":
            files = bl.dedupe((r.memory.source.file_path if r.memory.source is not None else "")
                              .removeprefix("corpus/") for r in found)
            mrrs.append(bl.mrr_at(files, set(row["files"]), 10))
    out = {"notes MRR@10": statistics.fmean(mrrs), "LoCoMo R@10": statistics.fmean(recalls)}
    for name, (engine, doc_of, queries) in built["docs"].items():
        s = documents.score(name, documents.hebbs_rankings(engine, doc_of, queries), queries)
        out[f"{name.upper() if name == 'cisi' else 'MEDLINE'} nDCG@10"] = s["ndcg@10"]
    return out


def line(label: str, figures: dict[str, float]) -> str:
    return (f"| {label} | " + " | ".join(f"{figures[p]:.3f}" for p in PARTS)
            + f" | {statistics.fmean(figures.values()):.4f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # A registry model: its fusion table goes into hebbs/models/registry.toml.
    parser.add_argument("--model", required=True, choices=list(load_registry()["models"]))
    parser.add_argument("--conversations", nargs="+", default=["30", "42"])
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--notes-files", type=int, default=30)
    parser.add_argument("--start", nargs="*", default=[], metavar="KEY=VALUE",
                        help="start from these weights (a second pass from a first pass's), not MiniLM's")
    parser.add_argument("--try", dest="tries", nargs="*", default=[], metavar="KEY=V1,V2",
                        help="these candidates instead of CANDIDATES (a second pass past the edge of the first's)")
    args = parser.parse_args()
    start = {k: float(v) for k, v in (item.split("=") for item in args.start)}
    candidates = ({k: tuple(float(x) for x in v.split(",")) for k, v in (item.split("=") for item in args.tries)}
                  or CANDIDATES)
    work = Path(tempfile.mkdtemp(prefix="hebbs-fit-fusion-"))
    t = time.perf_counter()
    built: dict = {"engines": {}, "docs": {}}
    try:
        built = build(args.model, work, args.conversations, args.docs, args.notes_files)
        print(f"built in {time.perf_counter() - t:.0f} s; {len(built['rows'])} cues", file=sys.stderr)
        kept = {**MINILM_FUSION, **start}
        best = evaluate(built, FusionParams(**kept))
        print("| setting | " + " | ".join(PARTS) + " | mean |\n|---|---|---|---|---|---|")
        print(line(("from " if start else "MiniLM's ") + ", ".join(f"{k} {v}" for k, v in kept.items()), best), flush=True)
        for key, values in candidates.items():
            choice = None
            for value in values:
                figures = evaluate(built, FusionParams(**{**kept, key: value}))
                ok = (all(figures[p] >= best[p] - LOSS for p in PARTS)
                      and statistics.fmean(figures.values()) > statistics.fmean(best.values()))
                print(line(f"{key} {value}" + (" (no set loses, mean up)" if ok else ""), figures), flush=True)
                if ok and (choice is None or statistics.fmean(figures.values()) > statistics.fmean(choice[1].values())):
                    choice = (value, figures)
            if choice is not None:
                kept[key], best = choice[0], choice[1]
        print(line("kept: " + ", ".join(f"{k} {v}" for k, v in kept.items()), best))
        print("\n[models.\"%s\".calibration.fusion]" % args.model)
        for key, value in kept.items():
            print(f"{key} = {value}")
        print(f"(total {time.perf_counter() - t:.0f} s)", file=sys.stderr)
    finally:
        for engine in [*built["engines"].values(), *(e for e, _, _ in built["docs"].values())]:
            engine.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
