"""Does recall know what is true now? Scripted fact timelines: changes, conflicts, point in time, never-stored attributes, paraphrases.

Issue 41's categories (LongMemEval's knowledge update, temporal reasoning and abstention are the model),
one run, each printed against a peer measured in the same run on the same memories:

    newest value at rank 1     change cases: the newer value is the first result
    older value reachable      the same cases: the older value is among the results
    older marked               the same cases: the older value is shown and marked not current
    conflict marked            conflict cases, after a confirmed contradiction: both shown, each naming the other
    point-in-time correct      cases with `as_of`: the value true then first, nothing created later shown
    never-stored abstained     an attribute no memory holds is asked: the recall abstains
    paraphrase answered        a stored fact asked in other words: it is the first result, no abstention

and two guards without a goal: "answerable, not abstained" (paraphrase cases not abstained) and
"unrelated values left current" (`not_a_change` cases: the same sentence about another subject or
object, which the automatic link must leave alone); then the link's precision (links on change cases
over all links on change and not-a-change cases) and, when LoCoMo's turns are at --data, on the
labelled contradiction pairs of bench/data/contradiction_pairs*.jsonl (bench_contradictions' pairs).

Peers ("peer" column, which one is named per row):
    no link     the timeline categories: the same memories remembered with the contradiction check off
                (no value linked to a newer one: recall ranks and diversifies the two values as before the
                links existed); a point in time asked with `now=AS_OF`, what `--now` was taken for
    plain       the abstention categories: plain fusion (relevance-only weights, no MMR) judged by the
                calibrated confidence alone
and for the abstention categories a third column, "no check": the default recall judged by the
calibrated confidence of the results shown, without the answer check (confidence.answer_check).

Cases: bench/datasets/truth_*.jsonl (bench/datasets/truth.py), one JSON object a line:

    {"kind": "change" | "conflict" | "point_in_time" | "not_a_change" | "never_stored" | "paraphrase",
     "memories": [{"text": "...", "at": "2026-03-01T09:00:00Z"}, ...],   # remembered in this order, one
                                                                         # write each; "at" optional
     "cue": "...",
     "expect": "...",        # the memory text that must come first (not for never_stored)
     "older": "...",         # change / conflict: the other value's memory text
     "as_of": "...",         # point_in_time: the time the cue asks about (ISO 8601)
     "absent": [...],        # point_in_time: memories created after as_of, which must not be shown
     "also_current": [...],  # not_a_change: the other subject's memory, which must stay current
     "answerable": true,     # false: the recall must abstain
     "entity_kind": "...", "value_kind": "..."}   # optional, printed per kind

Each distinct list of memories is a vault (two for timelines: with and without the link). Abstention
worlds get BACKGROUND's unrelated memories (800 days old) beside theirs; timelines carry their own.
A conflict gets the verdict a reviewer would give: `contradiction_commit` on the queued pair, or a
CONTRADICTS edge when the checker queued none. Timelines are asked with top_k 3 (issue 41's finding 1
asked so), the abstention cases with top_k 5.

    .venv/bin/python -m bench truth [--files ...] [--data ../shared/data/locomo-dev] [--model ID] [--show-misses]
                                    [--json out.json]

--model: the vaults' embedding model (a registry id; default: the default model). The peers then judge
with that model's own calibration and threshold (hebbs.models.calibration), as recall does.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.datasets import pairs, truth
from bench.datasets.locomo import load as load_locomo
from bench.harness import shared
from bench.report import write_json
from hebbs import Engine
from hebbs.embedding.embed import ModelError, get_embedder
from hebbs.models import calibration
from hebbs.recall import confidence as conf
from hebbs.schema import ScoringWeights
from hebbs.validate import timestamp_us
from hebbs.workflows import contradiction_check as cc

TOP_K = 5
TOP_K_TIMELINE = 3
DAY_US = 86_400 * 1_000_000
BACKGROUND = ["The office wifi password is rotated by IT every quarter",
              "Customer support answers tickets within four business hours",
              "Feature flags are cleaned up after each release",
              "The data warehouse is loaded nightly by Airflow",
              "Carol wants pull requests to stay under 400 changed lines",
              "The mobile app release train leaves every second Thursday"]
PLAIN = ScoringWeights(relevance=1.0, recency=0.0, importance=0.0, reinforcement=0.0)
TIMELINE = ("change", "conflict", "point_in_time", "not_a_change")
CATEGORIES = ("newest value at rank 1", "older value reachable", "older marked", "conflict marked",
              "point-in-time correct", "never-stored abstained", "paraphrase answered")
GUARDS = ("answerable, not abstained", "unrelated values left current")
PEER = {"never-stored abstained": "plain", "paraphrase answered": "plain", "answerable, not abstained": "plain"}
GOAL = 0.95


def build(engine: Engine, memories: list[dict[str, Any]], linked: bool, background: bool) -> dict[str, str]:
    """The world's memories, one write each in order (a user's writes); their ids by text."""
    if background:
        old = time.time_ns() // 1000 - 800 * DAY_US
        engine.remember_many([{"content": t, "created_at": old} for t in BACKGROUND], check_contradictions=False)
    ids = {}
    for memory in memories:
        item: dict[str, Any] = {"content": memory["text"]}
        if memory.get("at"):
            item["created_at"] = timestamp_us(memory["at"], "at")
        [stored] = engine.remember_many([item], check_contradictions=linked)
        ids[memory["text"]] = stored.id
    return ids


def confirm(engine: Engine, ids: dict[str, str], row: dict[str, Any]) -> None:
    """A conflict case's verdict: the queued pair committed as a contradiction, or the edge an agent adds."""
    pair = {ids[row["older"]], ids[row["expect"]]}
    pending = [p.id for p in engine.pending() if {p.memory_a, p.memory_b} == pair]
    if pending:
        engine.contradiction_commit([{"pending_id": pending[0], "verdict": "contradiction"}])
    else:
        a, b = sorted(pair)
        engine.add_edge(a, "CONTRADICTS", b)


def timeline(engine: Engine, ids: dict[str, str], row: dict[str, Any], linked: bool) -> dict[str, bool]:
    """One timeline case on one vault: each category it counts in, true when right."""
    options: dict[str, Any] = {}
    if row.get("as_of"):
        options = {"as_of": row["as_of"]} if linked else {"now": row["as_of"]}
    found = engine.recall(row["cue"], top_k=TOP_K_TIMELINE, **options)
    shown = [r.memory.id for r in found]
    by_id = {r.memory.id: r for r in found}
    out: dict[str, bool] = {}
    if row["kind"] == "change":
        out["newest value at rank 1"] = shown[:1] == [ids[row["expect"]]]
        older = ids[row["older"]]
        out["older value reachable"] = older in by_id
        out["older marked"] = older in by_id and not by_id[older].current
    elif row["kind"] == "point_in_time":
        out["point-in-time correct"] = (shown[:1] == [ids[row["expect"]]]
                                        and not any(ids[t] in by_id for t in row.get("absent", ())))
    elif row["kind"] == "conflict":
        a, b = ids[row["older"]], ids[row["expect"]]
        out["conflict marked"] = (a in by_id and b in by_id and by_id[a].conflicts_with == [b]
                                  and by_id[b].conflicts_with == [a])
    elif row["kind"] == "not_a_change":
        out["unrelated values left current"] = all(r.current for r in found) and all(
            engine.get(ids[t]).newer_value is None for t in (row["expect"], *row.get("also_current", ())))
    return out


def peer_calibration(model_id: str) -> tuple[tuple[float, ...], float, float]:
    """The peers' calibration: the model's own coefficients, intercept and threshold (confidence.py's for MiniLM)."""
    own = calibration(model_id)
    fitted = own.confidence_for(conf.FEATURES)
    if fitted is None:
        return conf.COEFFICIENTS, conf.INTERCEPT, conf.DEFAULT_THRESHOLD
    return (*fitted, own.abstain_threshold if own.abstain_threshold is not None else conf.DEFAULT_THRESHOLD)


def shown_confidence(found: Any, fitted: tuple[tuple[float, ...], float, float]) -> float:
    """The peers' answer confidence: the calibration alone over the results shown."""
    return max((conf.calibrated(r.details["confidence_features"], fitted[0], fitted[1]) for r in found), default=0.0)


def abstention(engine: Engine, row: dict[str, Any], fitted: tuple[tuple[float, ...], float, float]
               ) -> dict[str, tuple[bool, bool, bool]]:
    """One abstention case: (hebbs, plain, no check) for each category it counts in."""
    cue = row["cue"]
    threshold = fitted[2]
    found = engine.recall(cue, top_k=TOP_K)
    plain = engine.recall(cue, top_k=TOP_K, weights=PLAIN, mmr_lambda=1.0)
    first, plain_first = [r.memory.content for r in found][:1], [r.memory.content for r in plain][:1]
    sure = shown_confidence(found, fitted) >= threshold
    if row["kind"] == "never_stored":
        return {"never-stored abstained": (found.abstained, shown_confidence(plain, fitted) < threshold, not sure)}
    expect = [row["expect"]]
    return {"paraphrase answered": (first == expect and not found.abstained,
                                    plain_first == expect and shown_confidence(plain, fitted) >= threshold,
                                    first == expect and sure),
            "answerable, not abstained": (not found.abstained, shown_confidence(plain, fitted) >= threshold, sure)}


def link_precision(data: Path) -> str:
    """The automatic link on the labelled contradiction pairs: how many it would join, how many rightly."""
    turns = {(c["name"], t["dia_id"]): t["text"] for c in load_locomo(data) for t in c["turns"]} if data.exists() else {}
    right = linked = judged = skipped = 0
    for path in (pairs.CONTRADICTIONS, *pairs.CONTRADICTIONS_HELD_OUT):
        for row in pairs.rows(path):
            if row["source"] == "locomo":
                keys = (row["conversation"], row["a"]), (row["conversation"], row["b"])
                if not all(k in turns for k in keys):
                    skipped += 1
                    continue
                a, b = (turns[k] for k in keys)
            else:
                a, b = row["a"], row["b"]
            judged += 1
            verdict = cc.classify(a, b, tuple(row.get("subjects") or (None, None)))
            if verdict.confidence > cc.THRESHOLD and cc.value_change(verdict.reasons) is not None:
                linked += 1
                right += bool(row["contradiction"])
    share = f"{right / linked:.3f}" if linked else "n/a"
    return (f"link precision, labelled contradiction pairs: {right}/{linked} = {share} "
            f"({judged} pairs judged, {skipped} skipped: conversation not in {data})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=Path, nargs="*", default=truth.FILES)
    parser.add_argument("--data", type=Path, default=shared("data/locomo-dev"), help="LoCoMo's conversations")
    parser.add_argument("--model", help="the vaults' embedding model (registry id; default: the default model)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--show-misses", action="store_true", help="print every case the code gets wrong")
    args = parser.parse_args()
    rows = truth.load(args.files)
    print(f"{len(rows)} cases from {', '.join(p.name for p in args.files)}")
    worlds: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        worlds[json.dumps(row["memories"], sort_keys=True)].append(row)
    tallies: dict[str, list[tuple[bool, ...]]] = defaultdict(list)
    by_kind: dict[tuple[str, str], list[bool]] = defaultdict(list)
    links = {"change": 0, "not_a_change": 0}
    misses = []
    try:
        embedder = get_embedder(args.model)
    except ModelError as exc:
        parser.error(str(exc))
    fitted = peer_calibration(embedder.model_id)
    print(f"model: {embedder.model_id}")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hebbs-truth-") as tmp:
        for n, cases in enumerate(worlds.values()):
            memories = cases[0]["memories"]
            judged: list[tuple[dict[str, Any], dict[str, tuple[bool, ...]]]] = []
            if all(r["kind"] in TIMELINE for r in cases):
                got: dict[bool, list[dict[str, bool]]] = {}
                for linked in (True, False):
                    with Engine.open(Path(tmp) / f"v{n}-{linked}", embedder=embedder) as engine:
                        ids = build(engine, memories, linked, background=False)
                        if linked:
                            made = sum(engine.get(i).newer_value is not None for i in ids.values())
                            for r in cases:
                                if r["kind"] in links:
                                    links[r["kind"]] += made
                        for r in cases:
                            if r["kind"] == "conflict":
                                confirm(engine, ids, r)
                        got[linked] = [timeline(engine, ids, r, linked) for r in cases]
                for r, with_, without in zip(cases, got[True], got[False]):
                    judged.append((r, {c: (v, without[c]) for c, v in with_.items()}))
            else:
                with Engine.open(Path(tmp) / f"v{n}", embedder=embedder) as engine:
                    build(engine, memories, linked=True, background=True)
                    judged = [(r, dict(abstention(engine, r, fitted))) for r in cases]
            for row, categories in judged:
                for category, measured in categories.items():
                    tallies[category].append(measured)
                    by_kind[(category, row.get("value_kind") or row.get("entity_kind", "-"))].append(measured[0])
                    if not measured[0]:
                        misses.append((category, row["where"], row["cue"]))
    print(f"{len(worlds)} worlds, {len(rows)} cases in {time.perf_counter() - started:.0f} s (busy shared machine)\n")
    figures: dict[str, Any] = {}
    print(f"{'category':<30} {'cases':>5}  {'hebbs':>7}  {'peer':>7}  {'':<7}  {'no check':>8}  goal {GOAL:.0%}")
    for category in (*CATEGORIES, *GUARDS):
        got_ = tallies.get(category, [])
        if not got_:
            print(f"{category:<30} {'':>5}  n/a (no cases)")
            figures[category] = "n/a (no cases)"
            continue
        rate = sum(g[0] for g in got_) / len(got_)
        peer = sum(g[1] for g in got_) / len(got_)
        unchecked = sum(g[2] for g in got_) / len(got_) if len(got_[0]) > 2 else None
        goal = "" if category in GUARDS else ("met" if rate >= GOAL else "not met")
        print(f"{category:<30} {len(got_):>5}  {rate:>7.1%}  {peer:>7.1%}  {PEER.get(category, 'no link'):<7}  "
              f"{'-' if unchecked is None else format(unchecked, '.1%'):>8}  {goal}")
        figures[category] = {"cases": len(got_), "hebbs": round(rate, 4), "peer": PEER.get(category, "no link"),
                             "peer figure": round(peer, 4),
                             "without the answer check": None if unchecked is None else round(unchecked, 4)}
    total = links["change"] + links["not_a_change"]
    print(f"\nautomatic links: {links['change']} on change cases, {links['not_a_change']} on not-a-change cases"
          + (f": precision {links['change'] / total:.3f}" if total else ""))
    print(link_precision(args.data))
    print("\nper value / entity kind (hebbs):")
    for (category, kind), values in sorted(by_kind.items()):
        print(f"  {category:<30} {kind:<10} {sum(values)}/{len(values)}")
    if args.show_misses:
        print("\nmisses:")
        for category, where, cue in misses:
            print(f"  {category:<30} {where:<26} {cue}")
    write_json(args.json, figures)


if __name__ == "__main__":
    main()
