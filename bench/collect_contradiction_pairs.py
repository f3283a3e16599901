"""Collect unlabelled contradiction candidate pairs from a notes folder and LoCoMo conversations, blind.

Writes the pairs to label (text only for notes, references only for LoCoMo) in a shuffled order,
and the ids of the pairs the current check raises to a separate file, so that the labels are
written without knowing which pairs the check flags. How bench/data/contradiction_pairs_heldout2.jsonl
was built:

    .venv/bin/python -m bench.collect_contradiction_pairs NOTES_DIR --conversations 30 --out DIR

The pool is every neighbour pair (k=10, cosine >= 0.5, two different sections) that holds two
sentences sharing content words (Jaccard >= 0.4) with a surface cue (one negates, an antonym,
numbers on both sides): a superset of what the check can flag. Kept: every pair the check raises
while the vault is indexed, and a seeded sample of the rest of the pool.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from bench.datasets import pairs
from bench.datasets.locomo import load
from bench.harness import shared

from hebbs import Engine
from hebbs.notes import index_notes
from hebbs.workflows import contradiction_check as cc

LOOSE_OVERLAP = 0.4
PREVIOUS = [path for path in (pairs.CONTRADICTIONS, *pairs.CONTRADICTIONS_HELD_OUT[:3]) if path.exists()]


def surface_cue(a: str, b: str) -> bool:
    for x in cc._analyze(a):
        for y in cc._analyze(b):
            shared = len(x.words & y.words)
            if shared < 2 or shared / len(x.words | y.words) < LOOSE_OVERLAP:
                continue
            antonym = any(q in y.tokens for p in x.tokens for q in cc.ANTONYMS.get(p, ()))
            numbers = bool(x.numbers - y.numbers and y.numbers - x.numbers)
            if antonym or numbers or x.negated != y.negated:
                return True
    return False


def pool(engine: Engine, same: callable) -> list[tuple[str, str, float]]:
    memories = {m.id: m for m in engine.memories()}
    seen: set[frozenset[str]] = set()
    out = []
    for mid, m in memories.items():
        for other, sim in engine.neighbors(mid, cc.NEIGHBORS):
            pair = frozenset((mid, other))
            if sim < cc.MIN_SIMILARITY or pair in seen or other not in memories:
                continue
            seen.add(pair)
            if same(m, memories[other]) or not surface_cue(m.content, memories[other].content):
                continue
            out.append((mid, other, round(float(sim), 3)))
    return out


def changed_sections(engine: Engine, old: str, new: str, known: set) -> list[tuple[str, str, float]]:
    """Pairs chosen without the check: the same section in two versions of the docs, text changed."""
    by_place: dict[tuple, dict[str, object]] = {}
    for m in engine.memories():
        if m.source is None:
            continue
        top, _, rest = m.source.file_path.partition("/")
        if top in (old, new):
            by_place.setdefault((rest, tuple(m.source.heading_path)), {})[top] = m
    out = []
    for versions in by_place.values():
        if len(versions) == 2 and versions[old].content != versions[new].content:
            pair = (versions[old].id, versions[new].id)
            if frozenset(pair) not in known:
                out.append((*pair, 0.0))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notes", type=Path)
    parser.add_argument("--data", type=Path, default=shared("data/locomo-dev"))
    parser.add_argument("--conversations", nargs="*", default=[])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--sample", type=int, default=70, help="pool pairs kept besides the flagged ones")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--versions", nargs=2, metavar=("OLD", "NEW"),
                        help="two folders of the notes holding two versions of the same docs: every section "
                             "present in both under the same file and heading whose text changed is kept too")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    rows: list[dict] = []
    flagged: list[str] = []

    def same_section(a, b) -> bool:
        return (a.source is not None and b.source is not None and a.source.file_path == b.source.file_path
                and a.source.heading_path == b.source.heading_path)

    with Engine.open(args.notes / ".hebbs") as engine:
        index_notes(engine, args.notes)
        raised = {frozenset((p.memory_a, p.memory_b)) for p in engine.pending()}
        candidates = pool(engine, same_section)
        keys = {frozenset(c[:2]) for c in candidates}
        for p in engine.pending():  # a raised pair is kept even if the loose pool missed it
            if frozenset((p.memory_a, p.memory_b)) not in keys:
                candidates.append((p.memory_a, p.memory_b, p.similarity))
        changed = changed_sections(engine, *args.versions, {frozenset(c[:2]) for c in candidates}) \
            if args.versions else []
        rest = [c for c in candidates if frozenset(c[:2]) not in raised]
        kept = [c for c in candidates if frozenset(c[:2]) in raised] + rng.sample(rest, min(args.sample, len(rest))) \
            + rng.sample(changed, min(args.sample // 2, len(changed)))
        for a_id, b_id, sim in kept:
            a, b = engine.get(a_id), engine.get(b_id)
            rows.append({"source": "docs", "a": a.content, "b": b.content,
                         "subjects": [cc.subject_of(a), cc.subject_of(b)],
                         "where": [x.source.file_path if x.source else "" for x in (a, b)], "similarity": sim or None,
                         "picked": "changed between versions" if not sim else "neighbours with a cue",
                         "key": f"{a_id}/{b_id}"})
            if frozenset((a_id, b_id)) in raised:
                flagged.append(rows[-1]["key"])
    labelled = {(r["conversation"], *sorted((r["a"], r["b"]))) for path in PREVIOUS for line in path.open()
                if (r := json.loads(line))["source"] == "locomo"}
    for conv in load(args.data):
        if conv["name"] not in args.conversations:
            continue
        with Engine.open(args.out / f"locomo-{conv['name']}") as engine:
            ids = {}
            for turn in conv["turns"]:
                m = engine.remember(turn["text"], consolidate=False)
                ids[m.id] = turn["dia_id"]
            raised = {frozenset((p.memory_a, p.memory_b)) for p in engine.pending()}
            turns = pool(engine, lambda a, b: False)
            rest = [c for c in turns if frozenset(c[:2]) not in raised
                    and (conv["name"], *sorted((ids[c[0]], ids[c[1]]))) not in labelled]
            kept = [c for c in turns if frozenset(c[:2]) in raised] + rng.sample(rest, min(args.sample // 4, len(rest)))
            for a_id, b_id, sim in kept:
                key = f"{conv['name']}:{ids[a_id]}/{ids[b_id]}"
                rows.append({"source": "locomo", "conversation": conv["name"], "a": ids[a_id], "b": ids[b_id],
                             "similarity": sim, "key": key})
                if frozenset((a_id, b_id)) in raised:
                    flagged.append(key)
    rng.shuffle(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "to_label.jsonl").open("w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    (args.out / "flagged_sealed.json").write_text(json.dumps(flagged))
    print(f"{len(rows)} pairs to label in {args.out / 'to_label.jsonl'}")


if __name__ == "__main__":
    main()
