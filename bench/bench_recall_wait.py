"""Where recall's wall time goes without computing: per stage wall time beside the calling thread's
CPU, the embedding's run inside a recall against back to back, and the cue session's spin setting.

    .venv/bin/python -m bench.bench_e2e --workdir /tmp/hebbs-e2e --cues 20   # once: builds the vault
    .venv/bin/python -m bench.bench_recall_wait --workdir /tmp/hebbs-e2e [--cues 200] [--block 10]

On bench_e2e's vault (its --workdir, reused), in process, BLAS at one thread and what is loaded
frozen out of the collector's sight as in bench_e2e, the cue session pinned (the setting hebbs picks
on a machine with an idle core; docs/embedding.md):

1. Each stage's wall time beside the calling thread's CPU (`time.thread_time`): a stage whose wall
   passes its CPU waits (a lock, a thread, the disk). onnxruntime's run counts as CPU while it waits
   for its worker: the calling thread spins then.
2. The embedding's run back to back (cue after cue, as bench_e2e's raw hnswlib rows embed them)
   against inside similarity-only and default recall, where recall's own work separates two runs:
   the onnxruntime worker sleeps once a run returns (session.force_spinning_stop), and on a virtual
   machine a core left idle for a millisecond takes long to wake.
3. The cue session as hebbs builds it (100 us spin, stopped after the run) against spinning 1 and 3
   ms after each run: latency, CPU per recall, and the CPU burned in the 20 ms after each block (what
   an idle daemon would burn per request).
4. What lands on a recall's tail: cues whose rest is embedded too (the cue less a word no memory
   holds, in the same run since it is known up front), cues with a second, time-word pass, and the
   garbage collector's passes during the blocks.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

import hebbs.offline  # noqa: F401 - before onnxruntime: keeps its telemetry off
from bench import harness, report
from bench.workloads.e2e import RELEVANCE_ONLY, TOP_K, e2e_arguments, open_built, ort_session
from hebbs.recall import background, pipeline
from hebbs.recall.options import RecallOptions
from hebbs.embedding import embed as embed_module
from hebbs.core.open_vault import OpenVault
from hebbs.workflows import reinforce

# (owner, attribute, label): the stages timed, each a function recall calls through its module or class.
STAGES = [
    (pipeline, "plan", "plan (options, time words)"),
    (embed_module.Embedder, "_run", "embedding: onnxruntime run"),
    (background, "nearest", "similarity-only search"),
    (OpenVault, "similar", "vector search (fused)"),
    (OpenVault, "lexical_hits_weighted", "lexical search"),
    (OpenVault, "vectors_or_zeros", "stored vectors read"),
    (pipeline, "rank", "ranking, MMR, records"),
    (pipeline, "judge_confidence", "confidence"),
    (reinforce, "record_recall", "query log write"),
]


def main() -> None:
    args = e2e_arguments(__doc__.splitlines()[0], cues=200, block=10)
    engine, cues = open_built(args)
    embedder = engine.embedder
    embedder.cue_session_policy = "always"
    embedder.embed_query("warm up")
    stages = harness.Stages()
    for owner, name, label in STAGES:
        stages.wrap(owner, name, label)
    print(f"{len(cues)} cues on {args.workdir / 'vault'} ({engine.count():,} memories); {harness.machine_note()}")

    calls: dict[str, Callable[[str], Any]] = {
        "embedding back to back": embedder.embed_query,
        "similarity-only recall": lambda cue: engine.recall(cue, strategies=["similarity"], weights=RELEVANCE_ONLY,
                                                            top_k=TOP_K),
        "default recall": lambda cue: engine.recall(cue, top_k=TOP_K),
    }
    for fn in calls.values():
        for cue in cues[:3]:
            fn(cue)
    gc.freeze()
    collections = [0]
    gc.callbacks.append(lambda phase, info: collections.__setitem__(0, collections[0] + (phase == "start")))

    # 1 and 2: stages, one system's block at a time, blocks interleaved.
    spent: dict[str, dict[str, list[float]]] = {label: {} for label in calls}
    wall: dict[str, list[float]] = {label: [] for label in calls}
    gcs: dict[str, int] = dict.fromkeys(calls, 0)
    for start in range(0, len(cues), args.block):
        for label, fn in calls.items():
            time.sleep(0.02)
            stages.spent, stages.on = {}, True
            before = collections[0]
            for cue in cues[start:start + args.block]:
                began = time.perf_counter()
                fn(cue)
                wall[label].append((time.perf_counter() - began) * 1000)
            stages.on = False
            gcs[label] += collections[0] - before
            for stage, (w, c, n) in stages.spent.items():
                row = spent[label].setdefault(stage, [0.0, 0.0, 0])
                row[0] += w
                row[1] += c
                row[2] += n
    n = len(cues)
    print("\n1. per recall: wall ms / calling thread's CPU ms / wall past CPU (a wait), by stage")
    print("| stage | " + " | ".join(calls) + " |")
    print("|---|" + "---|" * len(calls))
    for _, _, stage in STAGES:
        cells = []
        for label in calls:
            w, c, _ = spent[label].get(stage, (0.0, 0.0, 0))
            cells.append(f"{w / n * 1000:.3f} / {c / n * 1000:.3f} / {(w - c) / n * 1000:+.3f}" if w else "")
        print(f"| {stage} | " + " | ".join(cells) + " |")
    print("| whole call, p50 ms | " + " | ".join(f"{harness.percentile(wall[label], 50):.2f}" for label in calls) + " |")

    print("\n2. one onnxruntime run of the cue, mean wall ms per run (runs per call):")
    runs = {label: spent[label].get("embedding: onnxruntime run", (0.0, 0.0, 0)) for label in calls}
    base = runs["embedding back to back"][0] / max(1, runs["embedding back to back"][2]) * 1000
    for label, (w, _, count) in runs.items():
        per = w / max(1, count) * 1000
        print(f"  {label:<28} {per:6.3f} ms ({count / n:.2f} per call), {per - base:+.3f} ms against back to back")

    # 3: the cue session's spin, alternated in blocks on the same cues.
    options = {"hebbs' cue session (100 us, stopped after the run)": None,
               "spinning 1 ms after each run": {"threads": 2, "spin": 1000},
               "spinning 3 ms after each run": {"threads": 2, "spin": 3000}}
    cue_graph = embedder._cues()
    sessions = {label: cue_graph._cue if opt is None else ort_session(cue_graph.path, opt)
                for label, opt in options.items()}
    print("\n3. the cue session's spin (p50 / p99 wall ms, CPU ms per call, CPU ms burned in the 20 ms after a block):")
    for kind in ("similarity-only recall", "default recall"):
        fn = calls[kind]
        ms: dict[str, list[float]] = {label: [] for label in sessions}
        cpu: dict[str, list[float]] = {label: [] for label in sessions}
        idle: dict[str, list[float]] = {label: [] for label in sessions}
        for start in range(0, len(cues), args.block):
            for label, chosen in sessions.items():
                cue_graph._cue = chosen
                time.sleep(0.02)
                for cue in cues[start:start + 3]:
                    fn(cue)
                for cue in cues[start:start + args.block]:
                    began, used = time.perf_counter(), time.process_time()
                    fn(cue)
                    ms[label].append((time.perf_counter() - began) * 1000)
                    cpu[label].append((time.process_time() - used) * 1000)
                used = time.process_time()
                time.sleep(0.02)
                idle[label].append((time.process_time() - used) * 1000)
        cue_graph._cue = sessions["hebbs' cue session (100 us, stopped after the run)"]
        for label in sessions:
            print(f"  {kind}, {label:<52} {harness.percentile(ms[label], 50):6.2f} / "
                  f"{harness.percentile(ms[label], 99):6.2f}   CPU {harness.percentile(cpu[label], 50):6.2f}   "
                  f"idle {sum(idle[label]) / len(idle[label]):5.2f}")

    # 4: what makes tails.
    from hebbs.recall import confidence
    paired = sum(1 for cue in cues if confidence.read_cue(cue, embedder.word_ranks(),
                                                          engine.vault.lexical_index.doc_freqs).rest_to_embed)
    passes = sum(1 for cue in cues if pipeline.plan(engine.vault, RecallOptions(cue=cue)).understood is not None)
    print(f"\n4. tails: {paired} of {n} cues embed their rest too (in the cue's run), {passes} have a time-word "
          f"pass; collector passes during the blocks of part 1: "
          + ", ".join(f"{label} {count}" for label, count in gcs.items()))
    report.write_result("bench_recall_wait", {
        "stages_ms_per_call": {label: {stage: {"wall": w / n * 1000, "cpu": c / n * 1000}
                                       for stage, (w, c, _) in rows.items()} for label, rows in spent.items()},
        "p50_ms": {label: harness.percentile(v, 50) for label, v in wall.items()},
        "paired": paired, "time_word_passes": passes, "collections": gcs})
    engine.close()
    print(f"\n{harness.machine_note()} at the end")


if __name__ == "__main__":
    main()
