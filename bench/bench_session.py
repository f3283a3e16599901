"""The onnxruntime session that embeds a cue, decided by measurement: the latency of one cue and the
CPU a mostly idle daemon burns, for each thread and spin setting.

    .venv/bin/python -m bench.bench_session [--cues 200] [--block 10] [--seconds 30]

Latency: real cues (LoCoMo questions, and paragraph cues made of three LoCoMo turns), each setting a
warmed block of --block cues, blocks interleaved so every setting sees the same load; p50/p99 ms
and the ratio to the fastest setting of the same run.

Idle CPU: each setting in a child process of its own (so no other session's workers are counted),
measured as CPU seconds over --seconds of wall time in two phases: one cue a second (a daemon that
mostly waits), then no request at all. onnxruntime's workers spin after a run for as long as the
setting lets them; that spinning is what a daemon pays while it waits.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from bench import harness, report
from bench.workloads.e2e import session
from bench.datasets.locomo import load as load_locomo

# name -> onnxruntime options (None: onnxruntime's defaults, which spin their workers after each run)
SETTINGS: dict[str, dict[str, Any] | None] = {
    "onnxruntime default (2 threads, spinning)": None,
    "2 threads, spinning 100 us": {"threads": 2, "spin": 100},
    "2 threads, spinning 100 us, stopped after the run (hebbs' cue session)": {"threads": 2, "spin": 100, "stop": True},
    "2 threads, spinning off (hebbs' batch session)": {"threads": 2, "spin": 0},
    "1 thread": {"threads": 1, "spin": 0},
}


def cues(n: int) -> tuple[list[str], list[str]]:
    """n short cues (questions) and n paragraph cues (three consecutive turns of a conversation)."""
    conversations = load_locomo(harness.shared("data/locomo-dev"))
    questions = [q["question"] for conv in conversations for q in conv["questions"]]
    turns = [turn["text"] for conv in conversations for turn in conv["turns"]]
    step = max(1, len(questions) // n)
    paragraphs = [" ".join(turns[i:i + 3]) for i in range(0, len(turns) - 3, max(1, (len(turns) - 3) // n))]
    return questions[::step][:n], paragraphs[:n]


def child(label: str, seconds: float) -> None:
    """One setting alone in this process: CPU seconds over `seconds` serving one cue a second, then idle."""
    from hebbs.embedding.embed import get_embedder
    emb = session(get_embedder(), SETTINGS[label])
    short, _ = cues(50)
    for cue in short[:5]:
        emb.embed_query(cue)
    time.sleep(1.0)
    cpu0, wall0, served = time.process_time(), time.monotonic(), 0
    while time.monotonic() - wall0 < seconds:
        emb.embed_query(short[served % len(short)])
        served += 1
        time.sleep(max(0.0, wall0 + served - time.monotonic()))
    busy = time.process_time() - cpu0
    cpu0 = time.process_time()
    time.sleep(seconds)
    idle = time.process_time() - cpu0
    print(json.dumps({"served": served, "cpu_one_a_second": busy, "cpu_idle": idle}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cues", type=int, default=200)
    parser.add_argument("--block", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.seconds)
        return
    from hebbs.embedding.embed import get_embedder

    load_before = harness.machine_note()
    batch = get_embedder()
    short, long = cues(args.cues)
    embedders = {label: session(batch, options) for label, options in SETTINGS.items()}
    kinds = {"short cue": short, "paragraph cue": long}
    print(f"{len(short)} short cues (median {sorted(len(c.split()) for c in short)[len(short) // 2]} words), "
          f"{len(long)} paragraph cues (median {sorted(len(c.split()) for c in long)[len(long) // 2]} words); "
          f"{load_before}")
    timings: dict[tuple[str, str], list[float]] = {(k, s): [] for k in kinds for s in embedders}
    for start in range(0, args.cues, args.block):
        for kind, texts in kinds.items():
            for label, emb in embedders.items():
                for i in range(3):
                    emb.embed_query(texts[(start + i) % len(texts)])
                for i in range(start, min(start + args.block, args.cues)):
                    began = time.perf_counter()
                    emb.embed_query(texts[i % len(texts)])
                    timings[(kind, label)].append((time.perf_counter() - began) * 1000)
    print(f"\none cue embedded, ms (blocks of {args.block} interleaved); load at the end: {harness.machine_note()}")
    report.markdown_header("cue", "session", "p50 ms", "p99 ms", "p50 / fastest")
    figures: dict[str, Any] = {"latency": {}, "cpu": {}}
    for kind in kinds:
        fastest = min(harness.percentile(timings[(kind, s)], 50) for s in embedders)
        for label in embedders:
            p50, p99 = harness.percentile(timings[(kind, label)], 50), harness.percentile(timings[(kind, label)], 99)
            figures["latency"][f"{kind}: {label}"] = {"p50": p50, "p99": p99}
            print(f"| {kind} | {label} | {p50:.2f} | {p99:.2f} | {p50 / fastest:.2f}x |")
    del embedders

    print(f"\nCPU seconds of a process holding one session, over {args.seconds:.0f} s of wall time each phase")
    report.markdown_header("session", "one cue a second", "no request")
    for label in SETTINGS:
        done = harness.run(harness.module_argv("bench.bench_session", "--child", label, "--seconds", str(args.seconds)),
                           capture_output=True, text=True, check=True)
        got = json.loads(done.stdout.strip().splitlines()[-1])
        figures["cpu"][label] = got
        print(f"| {label} | {got['cpu_one_a_second']:.2f} s ({got['served']} cues) | {got['cpu_idle']:.2f} s |")
    print(f"\n{harness.machine_note()} at the end (shared 2-core machine)")
    report.write_result("bench_session", figures)


if __name__ == "__main__":
    sys.exit(main())
