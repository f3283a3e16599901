"""What bench_abstention.py and bench_models.py share: bench_abstention's cues (LoCoMo dev conversations
and the notes cues, with their fit / report split), whether a result answers its cue, and the fit of the
confidence calibration and its threshold (bench/bench_abstention.py's docstring says how each was chosen)."""

from __future__ import annotations

import math
import random
import re

import numpy as np

from bench.datasets import jekyll, notes, pairs
from hebbs.recall import confidence as conf

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


def pick_threshold(rows: list[dict], scores: list[float], max_false_abstain: float = 0.03) -> float:
    """The highest threshold (to 0.01) at which at most 3% of the fit part's answerable cues abstain.

    The goal is 4% on cues never fitted on; with ~400 answerable cues a rate's standard error is about
    one point, so a threshold set at exactly the goal on the fit part misses it on new cues about half
    the time (it did twice: 5.3% and 5.6% on the report part with 4% on the fit part). One standard
    error of margin."""
    answerable = sorted(s for row, s in zip(rows, scores) if row["answerable"])
    allowed = math.floor(max_false_abstain * len(answerable))
    return math.floor(answerable[allowed] * 100) / 100 if answerable else conf.DEFAULT_THRESHOLD
