"""Dense-only retrieval of one embedding model, with its prompts, and what its settings cost: CISI
nDCG@10 and recall@100, LoCoMo dev recall@10 (each question within its conversation), at the full
dimension and Matryoshka truncations (the first d dimensions, re-normalized on both sides); and the
int8 cue graph (7-bit weights, as hebbs' cue graph) against float32: the cosine of each cue to its
float32 vector, the quality figures with int8 cues, and one cue's time (short and paragraph, p50 of
interleaved runs in the cue session).

Passages go through the float32 graph (embed_documents) and are cached per model in bench/data/cache.

    .venv/bin/python -m bench.bench_model_dense --model embeddinggemma-300m --dims 768 512 256 --int8
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from bench import baselines as bl
from bench.datasets import cisi as cisi_data
from bench.datasets import locomo as locomo_data
from bench.workloads.documents import score
from bench.harness import percentile, shared
from hebbs.embedding.embed import Embedder

SHORT_CUE = "Who is Acme's CEO?"
PARAGRAPH_CUE = " ".join(["The committee met on Tuesday to review the budget for the new library wing,"
                          " and approved the plan with two changes to the reading room."] * 3)


def _cached_documents(embedder: Embedder, texts: list[str]) -> np.ndarray:
    prompted = [embedder.document_prompt + t for t in texts]
    return bl.embed_cached(embedder, prompted)  # embed_cached embeds as given: the prompt is in the text


def _truncate(v: np.ndarray, d: int) -> np.ndarray:
    v = v[..., :d]
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def cisi(embedder: Embedder, cues: dict[str, np.ndarray], dims: list[int]) -> dict[str, dict[str, float]]:
    texts, queries = cisi_data.load(shared("data/cisi"))
    ids = [i for i, _ in texts]
    docs = _cached_documents(embedder, [t for _, t in texts])
    out = {}
    for graph, q in cues.items():
        for d in dims:
            D, Q = _truncate(docs, d), _truncate(q, d)
            ranked = [[ids[i] for i in bl.ranking(D @ Q[n], 100)] for n in range(len(queries))]
            s = score("dense", ranked, queries)
            out[f"{graph} {d}"] = {"ndcg@10": s["ndcg@10"], "recall@100": s["recall@100"]}
    return out


def locomo(embedder: Embedder, cues: dict[str, np.ndarray], dims: list[int], questions: list) -> dict[str, float]:
    conversations = list({id(c): c for c, _ in questions}.values())
    out = {}
    docs = {c["name"]: _cached_documents(embedder, [t["text"] for t in c["turns"]]) for c in conversations}
    for graph, q in cues.items():
        for d in dims:
            recalls = []
            for n, (conv, question) in enumerate(questions):
                turns = conv["turns"]
                D = _truncate(docs[conv["name"]], d)
                top = bl.ranking(D @ _truncate(q[n], d), 10)
                evidence = set(question["evidence"])
                recalls.append(len(evidence & {turns[i]["dia_id"] for i in top}) / len(evidence))
            out[f"{graph} {d}"] = statistics.fmean(recalls)
    return out


def cue_times(embedder: Embedder, graphs: list[str], rounds: int) -> dict[str, dict[str, float]]:
    embedder.cue_session_policy = "always"
    times: dict[str, list[float]] = {f"{g} {k}": [] for g in graphs for k in ("short", "paragraph")}
    for g in graphs:  # warm both graphs' cue sessions
        embedder.cue_graph = g
        for _ in range(3):
            embedder.embed_query(SHORT_CUE)
    for _ in range(rounds):
        for g in graphs:
            embedder.cue_graph = g
            for kind, cue in (("short", SHORT_CUE), ("paragraph", PARAGRAPH_CUE)):
                t = time.perf_counter()
                embedder.embed_query(cue)
                times[f"{g} {kind}"].append((time.perf_counter() - t) * 1000)
    return {k: {"p50": percentile(v, 50), "p90": percentile(v, 90)} for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--dims", type=int, nargs="*", default=[])
    ap.add_argument("--int8", action="store_true", help="also the int8 (7-bit) cue graph")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--no-cisi", action="store_true", help="skip CISI's 1,460 passages (their cues still count for the int8 cosine)")
    ap.add_argument("--conversations", type=int, default=None, help="only the first N LoCoMo conversations")
    args = ap.parse_args()
    started = time.perf_counter()
    embedder = Embedder.load(args.model)
    print(f"{args.model}: loaded in {time.perf_counter() - started:.1f} s")
    dims = [embedder.dim, *[d for d in args.dims if d < embedder.dim]]
    graphs = ["float32", "int8"] if args.int8 else ["float32"]

    _, cisi_queries = cisi_data.load(shared("data/cisi"))
    conversations = locomo_data.load(shared("data/locomo-dev"))[: args.conversations]
    lq = [(c, q) for c in conversations for q in c["questions"]]
    cues: dict[str, dict[str, np.ndarray]] = {"cisi": {}, "locomo": {}}
    for g in graphs:
        embedder.cue_graph = g
        t = time.perf_counter()
        cues["cisi"][g] = embedder.embed_queries([q for _, q, _ in cisi_queries])
        cues["locomo"][g] = embedder.embed_queries([q["question"] for _, q in lq])
        print(f"{g} cues: {len(cisi_queries) + len(lq)} in {time.perf_counter() - t:.1f} s")
    if args.int8:
        cos = np.concatenate([np.sum(cues[s]["int8"] * cues[s]["float32"], axis=1) for s in ("cisi", "locomo")])
        print(f"int8 cue vs float32 cue cosine: mean {cos.mean():.4f} min {cos.min():.4f} (n={len(cos)})")
    t = time.perf_counter()
    none = {"ndcg@10": float("nan"), "recall@100": float("nan")}
    c = {f"{g} {d}": none for g in graphs for d in dims} if args.no_cisi else cisi(embedder, cues["cisi"], dims)
    print(f"CISI passages (cached or embedded) and scoring: {time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    lo = locomo(embedder, cues["locomo"], dims, lq)
    print(f"LoCoMo turns (cached or embedded) and scoring: {time.perf_counter() - t:.1f} s")
    print(f"{len(lq)} LoCoMo questions over {len(conversations)} conversations, "
          f"{sum(len(c['turns']) for c in conversations)} turns")
    print(f"{'cues / dims':<16} {'CISI nDCG@10':>13} {'CISI R@100':>11} {'LoCoMo R@10':>12}")
    for key in c:
        print(f"{key:<16} {c[key]['ndcg@10']:>13.3f} {c[key]['recall@100']:>11.3f} {lo[key]:>12.3f}")
    for key, v in cue_times(embedder, graphs, args.rounds).items():
        print(f"one cue, {key}: p50 {v['p50']:.1f} ms, p90 {v['p90']:.1f} ms")


if __name__ == "__main__":
    main()
