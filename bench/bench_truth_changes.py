"""Facts over time (issue 41, findings 1-4): changed values, conflicts and point-in-time recall, with and without the links.

Each case of bench/datasets/truth_changes.jsonl (in bench_truth.py's format: `kind`, `memories`
[{`text`, `at`}], `cue`, `expect`, `older`, `as_of`; plus `absent`, what a point in time must not
show, and `also_current`, for `not_a_change`: the same sentence about another subject or object,
which an automatic link must leave alone) is a vault of its own: its memories stored in order with their times, then its cue recalled with top_k 3
(the question an agent asks), in two configurations over the same memories in the same run:

    without   remember with the contradiction check off: no value is linked to a newer one, so recall
              ranks and diversifies the two values as before the links existed; a point-in-time case
              asks with `now=AS_OF` (what `--now` was taken for)
    with      the default: a newer value is linked on the older record when remembered, recall keeps
              both, the newer first and marked current; a point-in-time case asks with `as_of=AS_OF`

Printed per category: newest value at rank 1, older value reachable (in the top 3), older marked
(shown, with current false), conflict marked (both shown, each naming the other), point in time correct (the
value of then at rank 1, nothing created later shown); and the precision of the automatic link: the
links made on `change` cases over all links made on `change` and `not_a_change` cases. A conflict is marked from its verdict in both
configurations (the verdict, not the link, records it); that recall marked none before issue 41 is
what tests/recall/test_truth_values.py shows failing on the code before it.

Part 2, the automatic link on the labelled contradiction pairs of bench/data/contradiction_pairs*.jsonl
(real notes, docs and conversations; bench_contradictions.py scores the checker on them): how many
pairs the link would join (flagged above the threshold and a changed value by
contradiction_check.value_change), and how many of those are labelled contradictions. LoCoMo's
turns are read from ../shared/data/locomo-dev (evaluation only); a pair whose conversation is not
there is counted as skipped.

    .venv/bin/python -m bench.bench_truth_changes [--limit N] [--data ../shared/data/locomo-dev]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.datasets import pairs, read_jsonl
from bench.datasets.locomo import load as load_locomo
from bench.harness import shared
from hebbs import Engine
from hebbs.embedding.embed import Embedder, get_embedder
from hebbs.validate import timestamp_us
from hebbs.workflows import contradiction_check as cc

TOP_K = 3
CASES = Path(pairs.__file__).resolve().parent / "truth_changes.jsonl"


def run_case(case: dict[str, Any], linked: bool, embedder: Embedder, scratch: Path) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(dir=scratch))
    engine = Engine.open(folder / "vault", embedder=embedder)
    try:
        ids: dict[str, str] = {}
        for m in case["memories"]:
            [stored] = engine.remember_many([{"content": m["text"], "created_at": timestamp_us(m["at"], "at")}],
                                            check_contradictions=linked)
            ids[m["text"]] = stored.id
        links = sum(1 for mid in ids.values() if engine.get(mid).newer_value is not None)
        if case["kind"] == "conflict":
            pair = {ids[case["older"]], ids[case["expect"]]}
            pending = [p.id for p in engine.pending() if {p.memory_a, p.memory_b} == pair]
            if pending:
                engine.contradiction_commit([{"pending_id": pending[0], "verdict": "contradiction"}])
            else:  # the checker did not queue it: an agent's verdict is an edge it adds by hand
                a, b = sorted(pair)
                engine.add_edge(a, "CONTRADICTS", b)
        options: dict[str, Any] = {}
        if "as_of" in case:
            options = {"as_of": case["as_of"]} if linked else {"now": case["as_of"]}
        found = engine.recall(case["cue"], top_k=TOP_K, **options)
        shown = [r.memory.id for r in found]
        out: dict[str, Any] = {"links": links}
        if case["kind"] in ("change", "point_in_time"):
            current = ids[case["expect"]]
            out["newest_first"] = bool(shown) and shown[0] == current
            if case.get("older"):
                older = ids[case["older"]]
                out["older_reachable"] = older in shown
                out["older_marked"] = any(r.memory.id == older and not r.current for r in found)
            if case["kind"] == "point_in_time":
                out["nothing_later"] = not any(ids[t] in shown for t in case["absent"])
                out["point_in_time"] = out["newest_first"] and out["nothing_later"]
        elif case["kind"] == "conflict":
            a, b = ids[case["older"]], ids[case["expect"]]
            by_id = {r.memory.id: r for r in found}
            out["both_shown"] = a in by_id and b in by_id
            out["conflict_marked"] = out["both_shown"] and by_id[a].conflicts_with == [b] and by_id[b].conflicts_with == [a]
        else:
            out["both_current"] = all(r.current for r in found)
        return out
    finally:
        engine.close()
        shutil.rmtree(folder, ignore_errors=True)


def link_precision(data: Path) -> None:
    turns = {(conv["name"], t["dia_id"]): t["text"] for conv in load_locomo(data) for t in conv["turns"]}
    counts: dict[tuple[str, bool], int] = defaultdict(int)
    judged = skipped = 0
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
                source = row["source"] if row["source"] in ("locomo", "planted") else "docs"
                counts[(source, bool(row["contradiction"]))] += 1
    right = sum(n for (_, truth), n in counts.items() if truth)
    linked = sum(counts.values())
    print(f"labelled contradiction pairs: {judged} judged, {skipped} skipped (conversation not in {data})")
    for (source, truth), n in sorted(counts.items()):
        print(f"  linked, {source}, labelled {'contradiction' if truth else 'not one'}: {n}")
    print(f"  precision of the link: {right}/{linked} = {right / linked if linked else float('nan'):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench_truth_changes.py", description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="the first N cases of each category only")
    parser.add_argument("--data", type=Path, default=shared("data/locomo-dev"), help="LoCoMo's conversations")
    args = parser.parse_args()
    link_precision(args.data)
    cases = read_jsonl(CASES)
    if args.limit:
        per: dict[str, int] = defaultdict(int)
        cases = [c for c in cases if (per.__setitem__(c["kind"], per[c["kind"]] + 1) or per[c["kind"]]) <= args.limit]
    embedder = get_embedder()
    scratch = Path(tempfile.mkdtemp(prefix="hbtruth"))
    started = time.perf_counter()
    try:
        totals: dict[tuple[str, str, str], list[bool]] = defaultdict(list)
        links = {mode: {"change": 0, "not_a_change": 0} for mode in ("without", "with")}
        by_kind: dict[tuple[str, str], list[bool]] = defaultdict(list)
        for case in cases:
            for mode in ("without", "with"):
                got = run_case(case, mode == "with", embedder, scratch)
                if case["kind"] in links[mode]:
                    links[mode][case["kind"]] += got["links"]
                for name, value in got.items():
                    if name != "links":
                        totals[(case["kind"], name, mode)].append(bool(value))
                if mode == "with" and case["kind"] == "change":
                    by_kind[(case["value_kind"], "newest_first")].append(bool(got["newest_first"]))
                    by_kind[(case["value_kind"], "older_marked")].append(bool(got.get("older_marked")))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"{len(cases)} cases, top_k {TOP_K}, {time.perf_counter() - started:.0f} s")
    print(f"{'category':<14} {'measure':<16} {'n':>4} {'without':>8} {'with':>8}")
    for category, name in sorted({(c, n) for c, n, _ in totals}):
        without, with_ = totals[(category, name, "without")], totals[(category, name, "with")]
        print(f"{category:<14} {name:<16} {len(with_):>4} {sum(without) / len(without):>8.3f} "
              f"{sum(with_) / len(with_):>8.3f}")
    print("change cases with links, by value kind:")
    for (kind, name), values in sorted(by_kind.items()):
        print(f"  {kind:<10} {name:<14} {sum(values)}/{len(values)}")
    made = links["with"]
    total = made["change"] + made["not_a_change"]
    precision = made["change"] / total if total else float("nan")
    print(f"automatic links: {made['change']} on change cases, {made['not_a_change']} on not-a-change cases: "
          f"precision {precision:.3f}")


if __name__ == "__main__":
    main()
