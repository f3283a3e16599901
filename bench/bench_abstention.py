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
import math
import random
import re
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.report import write_json
from bench.datasets import jekyll, notes, pairs
from bench.datasets.locomo import load
from bench.harness import shared
from bench.workloads.answer_vaults import build_vaults

from hebbs import Engine
from hebbs.recall import confidence as conf
from hebbs.embedding.embed import get_embedder

FIT_CONVERSATIONS = {"26", "30", "41"}
CROSS_PER_VAULT = 80
TOP_K = 10
QUESTION_WORDS = {"What", "When", "Where", "Who", "Why", "How", "Which", "Did", "Does", "Do", "Is", "Are", "Was",
                  "Were", "Would", "Has", "Have", "Can", "Could", "In", "On", "At", "After", "Before", "According"}


def names_in(text: str) -> set[str]:
    words = re.findall(r"\b[A-Z][a-zA-Z]+\b", text)
    return {w for w in words[1:] if w not in QUESTION_WORDS} | ({words[0]} - QUESTION_WORDS if words else set())


def speakers(raw: dict) -> set[str]:
    return {raw["speaker_a"], raw["speaker_b"]}


def cues(conversations: list[dict], raws: dict[str, dict]) -> list[dict]:
    out: list[dict] = []
    text_of = {c["name"]: " ".join(t["text"] for t in c["turns"]) for c in conversations}
    for conv in conversations:
        name = conv["name"]
        part = "fit" if name in FIT_CONVERSATIONS else "report"
        for q in conv["questions"]:
            evidence = {t["text"] for t in conv["turns"] if t["dia_id"] in set(q["evidence"])}
            out.append({"vault": f"locomo-{name}", "cue": q["question"], "answerable": True,
                        "kind": "locomo answerable", "part": part, "goal": True, "relevant": sorted(evidence)})
        for q in raws[name]["qa"]:
            if q.get("category") == 5:
                out.append({"vault": f"locomo-{name}", "cue": q["question"], "answerable": False,
                            "kind": "locomo adversarial (cat 5)", "part": part, "goal": False})
        crossing: list[dict] = []
        swapped: list[dict] = []
        for other in conversations:
            if other["name"] == name or speakers(raws[other["name"]]) & speakers(raws[name]):
                continue
            theirs = sorted(speakers(raws[other["name"]]))
            ours = sorted(speakers(raws[name]))
            for q in other["questions"]:
                mentioned = names_in(q["question"])
                if not mentioned & set(theirs):
                    continue  # a question that names nobody might be about anyone
                if any(re.search(rf"\b{re.escape(n)}\b", text_of[name]) for n in mentioned):
                    continue  # a name this conversation knows: not clearly about strangers
                crossing.append({"vault": f"locomo-{name}", "cue": q["question"], "answerable": False,
                                 "kind": "locomo other conversation", "part": part, "goal": True})
                text = q["question"]
                for mine, yours in zip(theirs, ours):
                    text = re.sub(rf"\b{re.escape(mine)}\b", yours, text)
                swapped.append({"vault": f"locomo-{name}", "cue": text, "answerable": False,
                                "kind": "locomo other conversation, names swapped", "part": part, "goal": False})
        rng = random.Random(int(name))
        picked = sorted(rng.sample(range(len(crossing)), min(CROSS_PER_VAULT, len(crossing))))
        out += [crossing[i] for i in picked] + [swapped[i] for i in picked]
    for n, row in enumerate(pairs.rows(pairs.DOCS_CUES)):
        out.append({"vault": "notes/.hebbs", "cue": row["cue"], "answerable": row["answerable"],
                    "kind": f"notes {row['kind']}", "part": "fit" if n % 2 == 0 else "report", "goal": True,
                    "files": [_file_of(row["where"])] if row["answerable"] and row.get("where") else []})
    for n, row in enumerate(notes.load_questions()):
        out.append({"vault": "notes/.hebbs", "cue": row["question"], "answerable": True,
                    "kind": "notes answerable (Hugo)", "part": "fit" if n % 2 == 0 else "report", "goal": True,
                    "files": row["answers"]})
    if jekyll.available():
        for row in jekyll.load_cues():
            out.append({"vault": "jekyll/.hebbs", "cue": row["cue"], "answerable": row["answerable"],
                        "kind": f"jekyll {row['kind']}", "part": "unseen", "goal": True,
                        "files": [_file_of(row["where"])] if row["answerable"] and row.get("where") else []})
    return out


def _file_of(where: str) -> str:
    """The note a cue's `where` names ("decay.md#Half-lives by type", "decay.md (pinned)")."""
    return where.split("#")[0].split(" (")[0].strip()


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


def _relevant(row: dict, memory: object) -> bool:
    """Whether a result answers the cue: an evidence turn of a LoCoMo question, a section of the
    note that answers a notes cue; nothing answers an unanswerable cue."""
    if not row["answerable"]:
        return False
    if "relevant" in row:
        return memory.content in set(row["relevant"])
    source = memory.source.file_path if memory.source is not None else ""
    return any(source == f or source.endswith("/" + f) for f in row.get("files", []))


def best(row: dict, coefficients: tuple[float, ...], intercept: float) -> float:
    return max((conf.calibrated(dict(zip(conf.FEATURES, f)), coefficients, intercept) for f in row["features"]),
               default=0.0)


def auc(positive: list[float], negative: list[float]) -> float:
    """Probability that a random answerable cue outranks a random unanswerable one (ties count half)."""
    scores = np.array(positive + negative)
    ranks = _ranks(scores)
    n_pos, n_neg = len(positive), len(negative)
    return float((ranks[:n_pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _ranks(values: np.ndarray) -> np.ndarray:
    order = values.argsort(kind="mergesort")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(1, len(values) + 1)
    for v in np.unique(values):  # average ranks for ties
        tie = values == v
        ranks[tie] = ranks[tie].mean()
    return ranks


# The features that put a result beside the best candidate: 0 for the best, so an answer-level fit
# cannot weigh them; they are fitted per result, after it.
GAPS = ("best_gap", "coverage_gap")


def _newton(x: np.ndarray, y: np.ndarray, weight: np.ndarray, offset: np.ndarray, l2: float) -> np.ndarray:
    """Weighted, L2-regularized logistic regression (first column the intercept, not regularized)."""
    w = np.zeros(x.shape[1])
    for _ in range(100):
        p = 1 / (1 + np.exp(-(x @ w + offset)))
        grad = x.T @ (weight * (p - y)) + l2 * np.r_[0, w[1:]] * len(y)
        hess = (x * (weight * p * (1 - p))[:, None]).T @ x + l2 * np.diag(np.r_[0, np.ones(len(w) - 1)]) * len(y)
        hess += 1e-9 * np.eye(len(w))  # an all-zero column (no intercept wanted) stays at 0
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    return w


def fit(rows: list[dict], l2: float = 1e-2, rounds: int = 4) -> tuple[tuple[float, ...], float]:
    """Two stages. The answer: logistic regression of "the cue is answerable" on the features of one
    result per cue (first the most similar, then for a few rounds the one the fit trusts most, which
    is the one the answer's confidence is read from), the gap features left out (0 for the best).
    Then each result: the gap features' weights, by logistic regression of "this result answers"
    (an evidence turn, a section of the answering note) over every result of the answerable cues,
    with the answer's part as a fixed offset: a result below the best candidate is less likely the
    one that answers. Each kind of memory, and within it each class, weighs the same."""
    own = [i for i, name in enumerate(conf.FEATURES) if name not in GAPS]
    gaps = [conf.FEATURES.index(name) for name in GAPS]
    picks = [max(row["features"], key=lambda f: f[0]) if row["features"] else [0.0] * len(conf.FEATURES)
             for row in rows]
    y = np.array([1.0 if row["answerable"] else 0.0 for row in rows])
    groups = [(row["vault"].startswith("locomo"), row["answerable"]) for row in rows]
    sizes = {g: groups.count(g) for g in set(groups)}
    weight = np.array([len(rows) / (len(sizes) * sizes[g]) for g in groups])
    full = np.zeros(len(conf.FEATURES))
    for _ in range(rounds):
        x = np.hstack([np.ones((len(picks), 1)), np.array(picks)[:, own]])
        w = _newton(x, y, weight, np.zeros(len(y)), l2)
        intercept = float(w[0])
        full[own] = w[1:]
        picks = [max(row["features"], key=lambda f: conf.calibrated(dict(zip(conf.FEATURES, f)), tuple(full),
                                                                    intercept))
                 if row["features"] else [0.0] * len(conf.FEATURES) for row in rows]
    xs, ys, groups = [], [], []
    for row in rows:
        if not row["answerable"] or not row.get("labels"):
            continue
        for features, label in zip(row["features"], row["labels"]):
            xs.append(features)
            ys.append(1.0 if label else 0.0)
            groups.append((row["vault"].startswith("locomo"), bool(label)))
    sizes = {g: groups.count(g) for g in set(groups)}
    weight = np.array([len(xs) / (len(sizes) * sizes[g]) for g in groups])
    x = np.array(xs)
    offset = intercept + x[:, own] @ full[own]
    # No intercept of its own: a result with gaps of 0 (the best) keeps the answer's confidence.
    w = _newton(np.hstack([np.zeros((len(xs), 1)), x[:, gaps]]), np.array(ys), weight, offset, l2)
    full[gaps] = w[1:]
    return tuple(round(float(v), 4) for v in full), round(intercept, 4)


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


def pick_threshold(rows: list[dict], scores: list[float], max_false_abstain: float = 0.03) -> float:
    """The highest threshold (to 0.01) at which at most 3% of the fit part's answerable cues abstain.

    The goal is 4% on cues never fitted on; with ~400 answerable cues a rate's standard error is about
    one point, so a threshold set at exactly the goal on the fit part misses it on new cues about half
    the time (it did twice: 5.3% and 5.6% on the report part with 4% on the fit part). One standard
    error of margin."""
    answerable = sorted(s for row, s in zip(rows, scores) if row["answerable"])
    allowed = math.floor(max_false_abstain * len(answerable))
    return math.floor(answerable[allowed] * 100) / 100 if answerable else conf.DEFAULT_THRESHOLD


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
