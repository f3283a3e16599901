"""What the daemon costs: recall and remember through the socket beside the same calls in-process.

    .venv/bin/python bench/bench_daemon.py [--memories 10000] [--calls 200] [--cli-calls 20]

One run, one vault of N memories. Each round times the engine's calls in a fresh process, closes
it, then sends the same calls through a daemon on a temporary HEBBS_HOME (the SDK over the Unix
socket, plus a bare ping for the protocol's own cost), and times `hebbs recall` as a whole process,
as an agent would run it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

NAMES = ["Alice", "Bob", "Carol", "Dana", "Erik", "Fatima", "Goro", "Hana", "Ivan", "Jun", "Kofi", "Lena"]
VERBS = ["prefers", "deployed", "reviewed", "rewrote", "documented", "benchmarked", "rejected", "approved",
         "migrated", "debugged", "planned", "archived"]
THINGS = ["the billing service", "the Postgres schema", "the CI pipeline", "the onboarding guide", "dark mode",
          "the search index", "the Kafka consumer", "the release notes", "the retry policy", "the login page",
          "the cost report", "the vector index", "the upload client", "the Terraform modules"]
WHEN = ["on Monday", "last sprint", "before the launch", "after the outage", "in March", "this morning",
        "during the offsite", "for the audit"]
CUES = ["who changed the retry policy", "what happened to the billing service", "dark mode preferences",
        "CI pipeline problems", "Postgres migrations", "what did Dana review", "release notes for the launch",
        "the outage and the search index", "who documented onboarding", "upload client bugs"]


def sentences(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.choice(NAMES)} {rng.choice(VERBS)} {rng.choice(THINGS)} {rng.choice(WHEN)} (note {i})"
            for i in range(n)]


def timed(fn: Callable[[int], object], calls: int) -> list[float]:
    fn(0)  # warm-up: first-call costs are not what this measures
    out = []
    for i in range(calls):
        start = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - start) * 1000)
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def row(label: str, ms: list[float]) -> str:
    return (f"round {label:<36} p50 {pct(ms, 0.5):8.2f} ms   p99 {pct(ms, 0.99):8.2f} ms   "
            f"mean {statistics.mean(ms):8.2f} ms")


def _wait_gone(pid: int) -> None:
    """The daemon holds the vault until it exits: the next in-process round must wait for that."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return  # exited, waiting for init to reap it
        time.sleep(0.05)
    raise RuntimeError(f"daemon {pid} did not exit")


def fill(vault: Path, memories: int) -> None:
    from hebbs import Engine

    started = time.perf_counter()
    with Engine.open(vault) as engine:
        texts = sentences(memories, seed=1)
        for at in range(0, len(texts), 2048):
            engine.remember_many([{"content": t, "entity_id": t.split()[0].lower()} for t in texts[at:at + 2048]])
        print(f"filled {engine.count()} memories in {time.perf_counter() - started:.1f}s", flush=True)


def in_process(vault: Path, calls: int, seed: int) -> None:
    """Time the engine's own calls; prints {"recall": [ms...], "remember": [ms...]} as JSON."""
    from hebbs import Engine

    writes = iter(sentences(calls + 1, seed=seed))
    with Engine.open(vault) as engine:
        engine.recall("open the indexes")
        out = {"recall": timed(lambda i: engine.recall(CUES[i % len(CUES)], top_k=10), calls),
               "remember": timed(lambda i: engine.remember(next(writes), entity_id="bench"), calls)}
    print(json.dumps(out))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--cli-calls", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--fill", metavar="VAULT", help=argparse.SUPPRESS)
    parser.add_argument("--in-process", metavar="VAULT", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fill:
        fill(Path(args.fill), args.memories)
        return 0
    if args.in_process:
        in_process(Path(args.in_process), args.calls, args.seed)
        return 0

    # This process only ever talks to the daemon (it never loads the engine); the fill and the
    # in-process timings run in fresh processes of their own, so neither side measures in a heap
    # grown by the other (a heap full of the fill's objects makes every garbage collection slower).
    from hebbs import Client
    from hebbs.paths import init_vault

    work = Path(tempfile.mkdtemp(prefix="hbb", dir="/tmp"))
    home, root = work / "h", work / "p"
    root.mkdir()
    vault, _ = init_vault(root, home)
    env = dict(os.environ, HEBBS_HOME=str(home))
    hebbs = str(Path(sys.executable).with_name("hebbs"))
    me = [sys.executable, str(Path(__file__).resolve())]
    writes = iter(sentences(args.calls * args.rounds + 4, seed=1000))
    results: dict[str, list[float]] = {}
    try:
        subprocess.run([*me, "--fill", str(vault), "--memories", str(args.memories)], check=True)
        # Rounds alternate in-process and socket on the same vault, each side opening it from disk;
        # background work left by the fill (RocksDB compaction, index merges) lands on round 1.
        for round_ in range(1, args.rounds + 1):
            timings = json.loads(subprocess.run(
                [*me, "--in-process", str(vault), "--calls", str(args.calls), "--seed", str(round_ + 10)],
                check=True, capture_output=True, text=True).stdout)
            results[f"{round_}:in-process recall"] = timings["recall"]
            results[f"{round_}:in-process remember"] = timings["remember"]
            with Client(vault=root, home=home) as client:
                pid = client.ping().pid  # starts the daemon
                client.recall("warm up the model and open the vault")
                # The protocol's own cost: a round trip that touches no vault.
                results[f"{round_}:socket ping (SDK)"] = timed(lambda i: client.ping(), args.calls)
                results[f"{round_}:socket recall (SDK)"] = timed(
                    lambda i: client.recall(CUES[i % len(CUES)], top_k=10), args.calls)
                results[f"{round_}:socket remember (SDK)"] = timed(
                    lambda i: client.remember(next(writes), entity_id="bench"), args.calls)
                results[f"{round_}:CLI `hebbs recall` wall time"] = timed(lambda i: subprocess.run(
                    [hebbs, "recall", CUES[i % len(CUES)], "--format", "json"], cwd=root, env=env, check=True,
                    capture_output=True), args.cli_calls)
                memories = client.status().vault.memories
                client.shutdown()
            _wait_gone(pid)
        print(f"vault: {memories} memories at the end; {args.calls} calls each ({args.cli_calls} for the CLI) "
              f"per round, {os.cpu_count()} CPUs")
        for label, ms in results.items():
            print(row(label, ms))
        last = args.rounds
        for op in ("recall", "remember"):
            inproc = pct(results[f"{last}:in-process {op}"], 0.5)
            socket = pct(results[f"{last}:socket {op} (SDK)"], 0.5)
            print(f"round {last}: socket minus in-process, {op}: {socket - inproc:+.2f} ms at p50")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
