"""What the daemon costs: recall and remember through the socket beside the same calls in-process.

    .venv/bin/python -m bench.bench_daemon [--memories 10000] [--calls 200] [--cli-calls 40]

One run: a vault of N memories is filled (in a process of its own) and copied, so that this process
opens one copy in-process while a daemon on a temporary HEBBS_HOME serves the other. The calls are
then interleaved, one in-process call and the same call through the socket (the SDK) in turn, so both
sides see the same machine load and their difference is the socket's cost, not the load's; a bare
ping gives the protocol's own round trip. CPU time per call is measured in passes of its own. Then
`hebbs recall` as a whole process, as an agent runs it, interleaved with the floor any Python
command line pays: the same interpreter starting and exiting (`python -c pass`). The CLI runs with
its bytecode cached (a temporary PYTHONPYCACHEPREFIX, warmed by the first call): with
PYTHONDONTWRITEBYTECODE set, as in some sandboxes, every call would compile hebbs' modules again,
which is not what an installed hebbs does.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.harness import machine_note, module_argv, percentile, summary
from bench.harness import run as run_child
from bench.report import row, write_result
from bench.workloads.facts import CUES, fill, sentences


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


def process_cpu_ns(pid: int) -> int:
    """CPU time a process has used so far, in ns, all its threads (the scheduler's exact count, not ticks)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that ended meanwhile
    return total


def interleaved(fns: dict[str, Callable[[int], object]], calls: int, daemon: int | None = None,
                cpu: dict[str, list[float]] | None = None) -> dict[str, list[float]]:
    """ms per call of each fn, one call of each in turn (the order rotating), after one warm-up round.
    With `cpu`, also the CPU ms each call cost: this process's, plus the daemon's (pid `daemon`) for
    the socket calls. Load stretches wall time (waiting for a core), hardly CPU time."""
    out: dict[str, list[float]] = {label: [] for label in fns}
    order = list(fns.items())
    for i in range(-1, calls):
        for label, fn in order:
            served = daemon is not None and label.startswith("socket")
            before = process_cpu_ns(daemon) if served and cpu is not None else 0
            cpu_start = time.process_time_ns()
            start = time.perf_counter()
            fn(max(i, 0))
            elapsed = time.perf_counter() - start
            used = time.process_time_ns() - cpu_start
            if served and cpu is not None:
                used += process_cpu_ns(daemon) - before
            if i >= 0:
                out[label].append(elapsed * 1000)
                if cpu is not None:
                    cpu.setdefault(label, []).append(used / 1e6)
        order = order[1:] + order[:1]
    return out


def print_figures(results: dict[str, list[float]], call_cpu: dict[str, list[float]], cpu: dict[str, list[float]],
                  memories: int, calls: int, cli_calls: int) -> None:
    """The wall times (also written to bench/results/bench_daemon.json), the socket's cost over in-process
    calls, and the CPU per call and per process."""
    print(f"\nvault: {memories} memories at the end; {calls} calls each ({cli_calls} for the CLI), "
          f"interleaved; {machine_note()} (shared machine)")
    for label, ms in results.items():
        print(row(label, ms))
    saved = write_result("bench_daemon", {label: summary(ms) for label, ms in results.items()}
                         | {"cpu_per_call_ms": {label: summary(ms) for label, ms in call_cpu.items()}},
                         memories=memories, calls=calls, cli_calls=cli_calls)
    print(f"figures written to {saved}")
    for op in ("recall", "remember"):
        inproc, socket = results[f"in-process {op}"], results[f"socket {op} (SDK)"]
        print(f"socket minus in-process, {op}: {percentile(socket, 50) - percentile(inproc, 50):+.2f} ms at p50, "
              f"{percentile(socket, 99) - percentile(inproc, 99):+.2f} ms at p99")
    # What a call costs in CPU, however loaded the machine: the socket side counts the SDK's
    # process and the whole daemon (its threads; what a call leaves the loop to do after the
    # reply lands in the next call's count, hence the means).
    print("CPU time per call (user + system; the socket side: this process + the daemon):")
    for label, ms in call_cpu.items():
        print(f"  {label:<38} p50 {percentile(ms, 50):8.2f} ms   mean {statistics.mean(ms):8.2f} ms")
    for op in ("recall", "remember"):
        inproc, socket = call_cpu[f"in-process {op}"], call_cpu[f"socket {op} (SDK)"]
        print(f"socket minus in-process CPU, {op}: {statistics.mean(socket) - statistics.mean(inproc):+.2f} ms "
              f"mean, {percentile(socket, 50) - percentile(inproc, 50):+.2f} ms at p50")
    cli = results["CLI `hebbs recall` wall time"]
    floor = results["process start floor (`python -c pass`)"]
    print(f"`hebbs recall` minus the process start floor: {percentile(cli, 50) - percentile(floor, 50):+.2f} ms at p50")
    # CPU time is what the process itself costs; its wall time also counts waiting for a core.
    print(f"CPU time per process (user + system, p50): `python -c pass` {percentile(cpu['floor'], 50):.1f} ms, "
          f"`hebbs recall` {percentile(cpu['cli'], 50):.1f} ms (the daemon's work not included)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--cli-calls", type=int, default=40)
    parser.add_argument("--fill", metavar="VAULT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fill:
        fill(Path(args.fill), args.memories)
        return 0

    from hebbs import Client, Engine
    from hebbs.paths import init_vault
    from hebbs.embedding.embed import limit_blas_threads

    # The daemon runs with one BLAS thread (hebbs.daemon.main); the in-process side must too, or it
    # measures OpenBLAS threads fighting the model's on two cores, not the socket.
    limit_blas_threads(1)

    work = Path(tempfile.mkdtemp(prefix="hbb", dir="/tmp"))
    home, root, twin = work / "h", work / "p", work / "q"
    root.mkdir()
    vault, _ = init_vault(root, home)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(HEBBS_HOME=str(home), PYTHONPYCACHEPREFIX=str(work / "pycache"))
    hebbs = str(Path(sys.executable).with_name("hebbs"))
    served = iter(sentences(2 * args.calls + 4, seed=1000))
    local = iter(sentences(2 * args.calls + 4, seed=1000))
    try:
        # The fill runs in a process of its own: a heap grown by 10k remembers would slow every
        # garbage collection of the in-process side.
        run_child(module_argv("bench.bench_daemon", "--fill", vault, "--memories", args.memories), check=True)
        shutil.copytree(root, twin)
        with Engine.open(twin / ".hebbs") as engine, Client(vault=root, home=home) as client:
            pid = client.ping().pid  # starts the daemon
            client.recall("warm up the model and open the vault")
            engine.recall("open the indexes")
            recalls: dict[str, Callable[[int], object]] = {
                "in-process recall": lambda i: engine.recall(CUES[i % len(CUES)], top_k=10),
                "socket recall (SDK)": lambda i: client.recall(CUES[i % len(CUES)], top_k=10),
                "socket ping (SDK)": lambda i: client.ping(),
            }
            remembers: dict[str, Callable[[int], object]] = {
                "in-process remember": lambda i: engine.remember(next(local), entity_id="bench"),
                "socket remember (SDK)": lambda i: client.remember(next(served), entity_id="bench"),
            }
            # Wall time in passes of its own: reading the daemon's CPU counters (a /proc file per
            # thread) just before each socket call added 0.7-0.9 ms to that call's wall time.
            results = interleaved(recalls, args.calls)
            results |= interleaved(remembers, args.calls)
            call_cpu: dict[str, list[float]] = {}
            interleaved(recalls, args.calls, pid, call_cpu)
            interleaved(remembers, args.calls, pid, call_cpu)
            cpu: dict[str, list[float]] = {}

            def process(label: str, argv: list[str]) -> Callable[[int], object]:
                def run(i: int) -> None:
                    before = resource.getrusage(resource.RUSAGE_CHILDREN)
                    subprocess.run([a.replace("{cue}", CUES[i % len(CUES)]) for a in argv], cwd=root, env=env,
                                   check=True, capture_output=True)
                    after = resource.getrusage(resource.RUSAGE_CHILDREN)
                    cpu.setdefault(label, []).append((after.ru_utime + after.ru_stime - before.ru_utime
                                                      - before.ru_stime) * 1000)
                return run

            results |= interleaved({
                "process start floor (`python -c pass`)": process("floor", [sys.executable, "-c", "pass"]),
                "CLI `hebbs recall` wall time": process("cli", [hebbs, "recall", "{cue}", "--format", "json"]),
            }, args.cli_calls)
            memories = client.status().vault.memories
            client.shutdown()
        _wait_gone(pid)
        print_figures(results, call_cpu, cpu, memories, args.calls, args.cli_calls)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
