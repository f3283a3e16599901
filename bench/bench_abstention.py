"""Does recall know when it knows nothing? ROC AUC of `confidence` and abstention rates.

Two kinds of memory, each its own vault:
- LoCoMo dev conversations (../shared/data/locomo-dev), one vault per conversation, every turn a memory.
  Answerable: the conversation's own questions (categories 1-4). Unanswerable: questions of another
  conversation that shares no speaker with it and names nobody its text mentions (checked on names).
  Two harder slices are reported apart and left out of the goal: LoCoMo's adversarial category 5
  (about the wrong speaker of the same conversation), and cross-conversation questions with their
  speakers' names swapped for the vault's own (labels are noisier: the vault may hold a similar event).
- A notes folder: this repository's docs/ plus the Hugo documentation (harness.cache("notes-corpus"),
  bench/notes_corpus.md), with the hand-written cues of bench/data/docs_cues.jsonl (answerable ones,
  on-topic unanswerable ones: features hebbs does not have, and off-topic ones) and the 50 questions
  of bench/notes_questions.jsonl that the Hugo notes answer.
- A help-docs vault never used for fitting or tuning: the Jekyll documentation (docs/_docs of
  jekyll/jekyll, MIT; harness.cache("jekyll-docs")/docs/_docs), with bench/data/jekyll_cues.jsonl, written
  from its headings before any recall on it. Reported apart ("unseen vault"), never fitted on. Rebuild:
  `git --git-dir MIRROR archive 202df571314ba1d18e9fccd81d12aaad4a703c38 docs/_docs | tar -x -C
  $HEBBS_BENCH_CACHE/jekyll-docs` from a mirror of jekyll/jekyll; without it the Jekyll rows are skipped.

Fit part: conversations 26, 30, 41 and the even-numbered notes cues; report part: 42, 43 and the
odd ones. `--fit` fits the logistic calibration on the fit part, per result (an evidence turn or
a section of the answering note is relevant; every other result, and every result of an
unanswerable cue, is not: coefficients to paste into hebbs/recall/confidence.py), and picks the
threshold of the answer's confidence (its best result's) there; every run reports the report part with the
coefficients in code (what recall returns) and, with --fit, the freshly fitted ones.

    .venv/bin/python -m bench.bench_abstention [--fit] [--workdir DIR] [--json out.json] [--cue-graph float32]

The data is CC BY-NC and evaluation-only: it is read from shared/, never copied into the package.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.report import write_json
from bench.datasets.locomo import load
from bench.harness import shared
from bench.workloads.abstention import TOP_K, _relevant, auc, best, cues, fit, pick_threshold
from bench.workloads.answer_vaults import build_vaults

from hebbs import Engine
from hebbs.recall import confidence as conf
from hebbs.embedding.embed import get_embedder


def run(workdir: Path, rows: list[dict]) -> None:
    """Recall every cue through the engine; keeps each result's features and the engine's verdict."""
    by_vault: dict[str, list[dict]] = {}
    for row in rows:
        by_vault.setdefault(row["vault"], []).append(row)
    for vault, items in by_vault.items():
        with Engine.open(workdir / vault) as engine:
            for row in items:
                found = engine.recall(row["cue"], top_k=TOP_K)
                row["features"] = [[r.details["confidence_features"][f] for f in conf.FEATURES] for r in found]
                row["labels"] = [_relevant(row, r.memory) for r in found]
                row["engine_confidence"] = found.confidence
                row["engine_abstained"] = found.abstained


def result_report(title: str, rows: list[dict], coefficients: tuple[float, ...], intercept: float) -> dict:
    """Per result: of the answerable cues' results, how many that do not answer get confidence >= 0.5
    (what floods `subscribe` at its default), and how many that do."""
    wrong, right, cues_ = 0, 0, 0
    for row in rows:
        if not row["answerable"] or not row.get("labels"):
            continue
        cues_ += 1
        for features, label in zip(row["features"], row["labels"]):
            sure = conf.calibrated(dict(zip(conf.FEATURES, features)), coefficients, intercept) >= 0.5
            wrong += sure and not label
            right += sure and label
    relevant = sum(sum(r["labels"]) for r in rows if r["answerable"] and r.get("labels"))
    out = {"cues": cues_, "non_answering_at_0.5_per_cue": round(wrong / max(1, cues_), 3),
           "answering_at_0.5": round(right / max(1, relevant), 3)}
    print(f"  {title}: per answerable cue, {out['non_answering_at_0.5_per_cue']:.2f} results that do not answer "
          f"have confidence >= 0.5; {out['answering_at_0.5']:.1%} of those that answer do ({cues_} cues)")
    return out


def report(title: str, rows: list[dict], scores: list[float], threshold: float) -> dict:
    goal = [(row, s) for row, s in zip(rows, scores) if row["goal"]]
    pos = [s for row, s in goal if row["answerable"]]
    neg = [s for row, s in goal if not row["answerable"]]
    out = {"title": title, "threshold": threshold, "answerable": len(pos), "unanswerable": len(neg),
           "auc": round(auc(pos, neg), 4),
           "unanswerable_abstained": round(sum(s < threshold for s in neg) / max(1, len(neg)), 4),
           "answerable_abstained": round(sum(s < threshold for s in pos) / max(1, len(pos)), 4), "kinds": {}}
    print(f"\n{title}: {len(pos)} answerable, {len(neg)} unanswerable cues; threshold {threshold:.2f}")
    print(f"  ROC AUC {out['auc']:.3f};  abstained: unanswerable {out['unanswerable_abstained']:.1%}, "
          f"answerable {out['answerable_abstained']:.1%}")
    kinds = sorted({row["kind"] for row in rows})
    for kind in kinds:
        got = [s for row, s in zip(rows, scores) if row["kind"] == kind]
        rate = sum(s < threshold for s in got) / len(got)
        extra = "" if any(row["goal"] for row in rows if row["kind"] == kind) else "  (not in the goal set)"
        print(f"  {kind:<44} n={len(got):>4}  abstained {rate:6.1%}  median confidence {np.median(got):.3f}{extra}")
        out["kinds"][kind] = {"n": len(got), "abstained": round(rate, 4), "median_confidence": float(np.median(got))}
        if not extra:
            continue
        pos_kind = [s for row, s in goal if row["answerable"] and row["vault"].startswith(
            "locomo" if kind.startswith("locomo") else "notes")]
        out["kinds"][kind]["auc_vs_answerable"] = round(auc(pos_kind, got), 4)
        print(f"  {'':<44} AUC against the answerable cues of the same kind: {auc(pos_kind, got):.3f}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=shared("data/locomo-dev"))
    parser.add_argument("--workdir", type=Path, help="keep the vaults here between runs (default: a temp dir)")
    parser.add_argument("--fit", action="store_true", help="fit the calibration on the fit part and print it")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--rows", type=Path, help="save every cue's features here; when it exists, reuse it "
                                                  "instead of recalling again (to try fits)")
    parser.add_argument("--cue-graph", choices=("int8", "float32"), default=None,
                        help="embed cues with this graph instead of the model's own choice (docs/embedding.md)")
    args = parser.parse_args()
    if args.cue_graph:
        get_embedder().cue_graph = args.cue_graph
    tmp = None if args.workdir else tempfile.TemporaryDirectory(prefix="hebbs-abstain-")
    workdir = args.workdir or Path(tmp.name)
    workdir.mkdir(parents=True, exist_ok=True)
    conversations = load(args.data)
    raws = {p.stem: json.loads(p.read_text()) for p in sorted(args.data.glob("*.json"))}
    started = time.perf_counter()
    build_vaults(workdir, conversations, raws)
    print(f"vaults ready in {time.perf_counter() - started:.0f} s (busy shared machine)")
    if args.rows and args.rows.exists():
        rows = json.loads(args.rows.read_text())
    else:
        rows = cues(conversations, raws)
        started = time.perf_counter()
        run(workdir, rows)
        print(f"{len(rows)} recalls in {time.perf_counter() - started:.0f} s (busy shared machine)")
        if args.rows:
            args.rows.write_text(json.dumps(rows))
    fit_rows = [r for r in rows if r["part"] == "fit"]
    test_rows = [r for r in rows if r["part"] == "report"]
    results = {}
    if args.fit:
        coefficients, intercept = fit([r for r in fit_rows if r["goal"]])
        threshold = pick_threshold([r for r in fit_rows if r["goal"]],
                                   [best(r, coefficients, intercept) for r in fit_rows if r["goal"]])
        print(f"\nfitted on {sum(r['goal'] for r in fit_rows)} cues:\nCOEFFICIENTS = {coefficients}  "
              f"# {conf.FEATURES}\nINTERCEPT = {intercept}\nDEFAULT_THRESHOLD = {threshold}")
        results["fit part, fitted"] = report("fit part, fitted calibration", fit_rows,
                                             [best(r, coefficients, intercept) for r in fit_rows], threshold)
        results["report part, fitted"] = report("report part (held out), fitted calibration", test_rows,
                                                [best(r, coefficients, intercept) for r in test_rows], threshold)
        results["report part, fitted, per result"] = result_report("report part, fitted", test_rows, coefficients,
                                                                   intercept)
    in_code = (conf.COEFFICIENTS, conf.INTERCEPT)
    results["report part, in code"] = report(
        "report part (held out), the calibration in hebbs/recall/confidence.py", test_rows,
        [best(r, *in_code) for r in test_rows], conf.DEFAULT_THRESHOLD)
    results["report part, in code, per result"] = result_report("report part, in code", test_rows, *in_code)
    # What a user sees: recall's own confidence, which also caps a candidate that matches only what the
    # cue names while it asks for words no memory holds (confidence.UNSEEN_MARGIN), beyond the calibration.
    results["report part, recall's own"] = report(
        "report part (held out), recall's own confidence and abstention (what a user sees)", test_rows,
        [r["engine_confidence"] or 0.0 for r in test_rows], conf.DEFAULT_THRESHOLD)
    unseen = [r for r in rows if r["part"] == "unseen"]
    if unseen:
        results["unseen vault, in code"] = report(
            "unseen vault (Jekyll docs, never fitted on), the calibration in code", unseen,
            [best(r, *in_code) for r in unseen], conf.DEFAULT_THRESHOLD)
        results["unseen vault, recall's own"] = report(
            "unseen vault (Jekyll docs), recall's own confidence and abstention", unseen,
            [r["engine_confidence"] or 0.0 for r in unseen], conf.DEFAULT_THRESHOLD)
    agree = sum(abs((r["engine_confidence"] or 0.0) - best(r, *in_code)) < 1e-3
                and r["engine_abstained"] == (best(r, *in_code) < conf.DEFAULT_THRESHOLD) for r in rows)
    print(f"  (recall's own confidence and `abstained` match the calibration in code on {agree}/{len(rows)} cues)")
    write_json(args.json, results)
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
