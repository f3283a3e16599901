"""Does recall know what is true now? Scripted fact timelines: changes, conflicts, point in time, never-stored attributes, paraphrases.

Issue 41's categories (LongMemEval's knowledge update, temporal reasoning and abstention are the model),
each printed against a baseline measured in the same run, on the same vaults:

    newest value at rank 1     change / correction cases: the newer value is the first result
    older value reachable      the same cases: the older value is still among the top TOP_K
    conflict marked            conflict cases, after a confirmed contradiction: both shown, each marked
    point-in-time correct      cases with `as_of`: the value true then is the first result
    never-stored abstained     an attribute no memory holds is asked: the recall abstains
    paraphrase answered        a stored fact asked in other words: it is the first result, no abstention

Baselines: plain fusion (relevance-only weights, no MMR) for the ranking categories, the recall's `--now`
for point in time (what a user had before `as_of`); for the abstention categories plain fusion judged by
the calibrated confidence alone, and a second peer ("no check"): the default recall judged by the
calibrated confidence of the results shown, without the answer check (confidence.answer_check) that
decides whether a memory answers the cue rather than names what it names. A category whose feature is not in
this code (no `as_of` recall option, no `conflicts_with` on results) prints "n/a (feature missing)".

The cases are read from bench/datasets/truth_*.jsonl, one JSON object a line:

    {"kind": "change" | "correction" | "conflict" | "point_in_time" | "never_stored" | "paraphrase",
     "memories": [{"text": "...", "at": "2026-03-01T09:00:00Z"}, ...],   # remembered in this order;
                                                                         # "at" optional (then: now, in order)
     "cue": "...",
     "expect": "...",        # the memory text that must come first (not for never_stored)
     "older": "...",         # change / correction / conflict: the other value's memory text
     "as_of": "...",         # point_in_time: the time the cue asks about (ISO 8601)
     "answerable": true,     # false: the recall must abstain
     "entity_kind": "..."}   # optional: company, person, service, user, home, ... (printed per kind)

Each distinct list of memories is its own vault, with BACKGROUND's unrelated memories (800 days old)
beside it. A conflict case gets the verdict a reviewer would give: a CONTRADICTS edge from `expect`
to `older`, as `contradiction_commit` records it.

    .venv/bin/python -m bench truth [--files bench/datasets/truth_*.jsonl] [--json out.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.datasets import truth
from bench.report import write_json
from hebbs import Engine
from hebbs.recall import confidence as conf
from hebbs.recall.options import RecallOptions
from hebbs.schema import RecallResult, ScoringWeights

TOP_K = 5
DAY_US = 86_400 * 1_000_000
BACKGROUND = ["The office wifi password is rotated by IT every quarter",
              "Customer support answers tickets within four business hours",
              "Feature flags are cleaned up after each release",
              "The data warehouse is loaded nightly by Airflow",
              "Carol wants pull requests to stay under 400 changed lines",
              "The mobile app release train leaves every second Thursday"]
PLAIN = ScoringWeights(relevance=1.0, recency=0.0, importance=0.0, reinforcement=0.0)
CATEGORIES = ("newest value at rank 1", "older value reachable", "conflict marked", "point-in-time correct",
              "never-stored abstained", "paraphrase answered")
GOAL = 0.95


def features() -> dict[str, bool]:
    """Which truth features this code has: read from its types, so the bench runs on any branch."""
    results = set(getattr(RecallResult, "__struct_fields__", ()))
    return {"as_of": "as_of" in {f.name for f in dataclasses.fields(RecallOptions)},
            "conflicts": "conflicts_with" in results}


def build(engine: Engine, memories: list[dict[str, Any]], conflict: tuple[str, str] | None) -> dict[str, str]:
    """The case's memories, one remember each in order (a user's writes), after the background; their ids by text."""
    old = time.time_ns() // 1000 - 800 * DAY_US
    engine.remember_many([{"content": t, "created_at": old} for t in BACKGROUND], check_contradictions=False)
    ids = {}
    for memory in memories:
        extra = {"created_at": memory["at"]} if memory.get("at") else {}
        ids[memory["text"]] = engine.remember(memory["text"], **extra).id
    if conflict is not None and all(t in ids for t in conflict):
        engine.add_edge(ids[conflict[0]], "CONTRADICTS", ids[conflict[1]])
    return ids


def shown_confidence(found: Any) -> float:
    """The baseline's answer confidence: the calibration alone over the results shown."""
    return max((conf.calibrated(r.details["confidence_features"]) for r in found), default=0.0)


def judge(engine: Engine, row: dict[str, Any], have: dict[str, bool], threshold: float) -> dict[str, Any]:
    """Each category this case counts in: (measured, baseline), None for a feature that is missing."""
    kind, cue = row["kind"], row["cue"]
    found = engine.recall(cue, top_k=TOP_K)
    plain = engine.recall(cue, top_k=TOP_K, weights=PLAIN, mmr_lambda=1.0)
    texts = [r.memory.content for r in found]
    plain_texts = [r.memory.content for r in plain]
    out: dict[str, Any] = {}
    if kind in ("change", "correction", "conflict") and row.get("expect"):
        out["newest value at rank 1"] = (texts[:1] == [row["expect"]], plain_texts[:1] == [row["expect"]])
        if row.get("older"):
            out["older value reachable"] = (row["older"] in texts, row["older"] in plain_texts)
    if kind == "conflict":
        if have["conflicts"]:
            marked = [r for r in found if r.memory.content in (row.get("expect"), row.get("older"))]
            out["conflict marked"] = (len(marked) == 2 and all(getattr(r, "conflicts_with", None) for r in marked),
                                      False)
        else:
            out["conflict marked"] = None
    if kind == "point_in_time" or (row.get("as_of") and kind != "never_stored"):
        if have["as_of"]:
            then = engine.recall(cue, top_k=TOP_K, as_of=row["as_of"])
            before = engine.recall(cue, top_k=TOP_K, now=row["as_of"])
            out["point-in-time correct"] = ([r.memory.content for r in then][:1] == [row["expect"]],
                                            [r.memory.content for r in before][:1] == [row["expect"]])
        else:
            out["point-in-time correct"] = None
    # The abstention categories have a second peer: the same recall without the answer check.
    sure = shown_confidence(found) >= threshold
    if kind == "never_stored":
        out["never-stored abstained"] = (found.abstained, shown_confidence(plain) < threshold, not sure)
    if kind == "paraphrase":
        out["paraphrase answered"] = (texts[:1] == [row["expect"]] and not found.abstained,
                                      plain_texts[:1] == [row["expect"]] and shown_confidence(plain) >= threshold,
                                      texts[:1] == [row["expect"]] and sure)
    if row.get("answerable", True) and kind != "never_stored":
        out["answerable, not abstained"] = (not found.abstained, shown_confidence(plain) >= threshold, sure)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=Path, nargs="*", default=truth.FILES)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--show-misses", action="store_true", help="print every case the code gets wrong")
    args = parser.parse_args()
    rows = truth.load(args.files)
    have = features()
    print(f"{len(rows)} cases from {', '.join(p.name for p in args.files)}; features here: "
          + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in have.items()))
    worlds: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        worlds[json.dumps(row["memories"], sort_keys=True)].append(row)
    tallies: dict[str, list[tuple[bool, ...]]] = defaultdict(list)
    by_kind: dict[tuple[str, str], list[bool]] = defaultdict(list)
    missing: set[str] = set()
    misses = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hebbs-truth-") as tmp:
        for n, cases in enumerate(worlds.values()):
            conflict = next(((r["expect"], r["older"]) for r in cases if r["kind"] == "conflict"
                             and r.get("expect") and r.get("older")), None)
            with Engine.open(Path(tmp) / f"v{n}") as engine:
                build(engine, cases[0]["memories"], conflict)
                threshold = engine.config.recall.abstain_threshold
                for row in cases:
                    for category, got in judge(engine, row, have, threshold).items():
                        if got is None:
                            missing.add(category)
                            continue
                        tallies[category].append(got)
                        by_kind[(category, row.get("entity_kind", "-"))].append(got[0])
                        if not got[0]:
                            misses.append((category, row["where"], row["cue"]))
    print(f"{len(worlds)} vaults, {sum(len(c) for c in worlds.values())} cases in {time.perf_counter() - started:.0f} s "
          f"(busy shared machine)\n")
    figures: dict[str, Any] = {}
    print(f"{'category':<28} {'cases':>5}  {'hebbs':>7}  {'baseline':>8}  {'no check':>8}  goal {GOAL:.0%}")
    for category in (*CATEGORIES, "answerable, not abstained"):
        got = tallies.get(category, [])
        if not got:
            reason = "n/a (feature missing)" if category in missing else "n/a (no cases)"
            print(f"{category:<28} {'':>5}  {reason}")
            figures[category] = reason
            continue
        rate = sum(g[0] for g in got) / len(got)
        base = sum(g[1] for g in got) / len(got)
        unchecked = sum(g[2] for g in got) / len(got) if len(got[0]) > 2 else None
        goal = "" if category.startswith("answerable") else ("met" if rate >= GOAL else "not met")
        print(f"{category:<28} {len(got):>5}  {rate:>7.1%}  {base:>8.1%}  "
              f"{'-' if unchecked is None else format(unchecked, '.1%'):>8}  {goal}")
        figures[category] = {"cases": len(got), "hebbs": round(rate, 4), "baseline": round(base, 4),
                             "without the answer check": None if unchecked is None else round(unchecked, 4)}
    print("\nper entity kind (hebbs):")
    for (category, kind), got in sorted(by_kind.items()):
        print(f"  {category:<28} {kind:<10} {sum(got)}/{len(got)}")
    if args.show_misses:
        print("\nmisses:")
        for category, where, cue in misses:
            print(f"  {category:<28} {where:<26} {cue}")
    write_json(args.json, figures)


if __name__ == "__main__":
    main()
