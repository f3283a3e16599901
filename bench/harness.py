"""What every benchmark shares: where the data is, timing, the one percentile, the machine's load
and child processes (printing and result files: bench/report.py; the collections: bench/datasets/).

Run a benchmark from the repository's root as a module, so that `bench` and `hebbs` import without
any path edits:

    .venv/bin/python -m bench daemon --memories 1000      # or: -m bench.bench_daemon

- Data: `shared("data/locomo-dev")` is `$HEBBS_SHARED/data/locomo-dev`, or `../shared` beside the
  repository when the variable is unset. Caches (downloads, corpus vectors) go under
  `$HEBBS_BENCH_CACHE`, or `~/.cache/hebbs-bench`.
- Percentiles: `percentile(values, 99)` is the one definition (linear interpolation between the
  closest ranks, numpy's default), so every p50 and p99 printed by bench/ is comparable.
- Floors: a figure is printed beside a floor measured in the same run, because the machines these
  run on are shared and their load moves absolute times (`machine_note` prints the load).
"""

from __future__ import annotations

import functools
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def shared(relative: str = "") -> Path:
    """A path in the shared, read-only evaluation data (never copied into the repository)."""
    base = os.environ.get("HEBBS_SHARED")
    root = Path(base) if base else REPO.parent / "shared"
    return root / relative if relative else root


def cache(name: str) -> Path:
    """Where one benchmark keeps its downloads or computed vectors (made by whoever writes there)."""
    base = os.environ.get("HEBBS_BENCH_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "hebbs-bench") / name


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation between the closest ranks."""
    ordered = sorted(float(v) for v in values)
    if not ordered:
        raise ValueError("percentile of no values")
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary(ms: Sequence[float]) -> dict[str, float]:
    """p50, p95, p99 and mean of timings already in milliseconds."""
    return {"n": len(ms), "p50": percentile(ms, 50), "p95": percentile(ms, 95), "p99": percentile(ms, 99),
            "mean": statistics.fmean(ms)}


def timed(fn: Callable[[int], Any], runs: int) -> list[float]:
    """Wall time of each of `runs` calls fn(i), in milliseconds."""
    out = []
    for i in range(runs):
        started = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - started) * 1000)
    return out


def interleaved(calls: dict[str, Callable[[int], Any]], runs: int) -> dict[str, list[float]]:
    """Each call timed in turn, round after round, so that all of them see the same machine load."""
    out: dict[str, list[float]] = {label: [] for label in calls}
    for i in range(runs):
        for label, fn in calls.items():
            started = time.perf_counter()
            fn(i)
            out[label].append((time.perf_counter() - started) * 1000)
    return out


@contextmanager
def stopwatch() -> Iterator[Callable[[], float]]:
    """`with stopwatch() as seconds: ...`; seconds() is the time spent so far (frozen at the end)."""
    started = time.perf_counter()
    ended: list[float] = []
    yield lambda: (ended[0] if ended else time.perf_counter()) - started
    ended.append(time.perf_counter())


class Stages:
    """Wall and thread CPU seconds spent in each wrapped stage while `on`, and its calls: `spent[label]` is
    [wall, cpu, calls] (a stage nested in another counts in each)."""

    def __init__(self) -> None:
        self.on = False
        self.spent: dict[str, list[float]] = {}

    def wrap(self, owner: Any, name: str, label: str) -> None:
        """Time `owner.name` (a function recall calls through its module or class) under `label`."""
        fn = getattr(owner, name)

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if not self.on:
                return fn(*args, **kwargs)
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                row = self.spent.setdefault(label, [0.0, 0.0, 0])
                row[0] += time.perf_counter() - wall
                row[1] += time.thread_time() - cpu
                row[2] += 1

        setattr(owner, name, timed)


def machine() -> dict[str, Any]:
    """What the figures depend on: cores and the load while they were taken."""
    return {"cores": os.cpu_count(), "load_1min": round(os.getloadavg()[0], 2), "python": sys.version.split()[0]}


def machine_note() -> str:
    m = machine()
    return f"load average {m['load_1min']:.2f} on {m['cores']} cores"


def _default_signals() -> None:
    # A child inherits ignored signals (nohup, trap "" INT); a benchmark's child must stop on Ctrl-C like any
    # process (the project's rule for every process a test or a benchmark starts).
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):  # as tests/processes.py
        signal.signal(sig, signal.SIG_DFL)


def module_argv(module: str, *args: str) -> list[str]:
    """The command that runs a bench module (or any module) with this interpreter."""
    return [sys.executable, "-m", module, *map(str, args)]


def run(argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess:
    """A child process run to its end, from the repository's root unless told otherwise, with
    default signal handling."""
    kwargs.setdefault("cwd", REPO)
    return subprocess.run(list(argv), preexec_fn=_default_signals, **kwargs)


@contextmanager
def child(argv: Sequence[str], **kwargs: Any) -> Iterator[subprocess.Popen]:
    """A long-running child (a daemon, a proxy, a server) that is stopped whatever happens."""
    kwargs.setdefault("cwd", REPO)
    proc = subprocess.Popen(list(argv), preexec_fn=_default_signals, **kwargs)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def tests_importable() -> None:
    """Make the tests' helpers (tests/processes.py, tests/reliability/daemon_harness.py) importable,
    for the benchmarks that run a test's scenario at full size. Those modules import each other by
    bare name, as pytest's rootdir insertion lets them; this is the one place bench/ does the same."""
    for folder in (REPO / "tests", REPO / "tests" / "reliability"):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
