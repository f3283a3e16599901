"""The daemon's fault and abuse runs at the sizes of issue 12, with their figures.

    .venv/bin/python -m bench.bench_reliability [--frames 10000] [--clients 8] [--ops 1000]

Starts a real daemon (foreground, temporary home), then: the malformed-frame storm (seeded random
and the five known-bad shapes from 4 raw connections) beside a well-behaved client, and the mixed
soak (each client remembers, batches, revises, forgets, recalls and gets, then every acknowledged
write is checked). Prints RSS before, at the peak of and after the storm, the log's growth, reply
codes, throughput and latency. The same runs, shorter, are tests/reliability/test_daemon_storm.py;
`pytest -m slow tests/reliability` runs these sizes as tests.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from bench.harness import tests_importable

tests_importable()
from daemon_harness import ForegroundDaemon, soak, storm  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--ops", type=int, default=1000, help="operations per client")
    args = parser.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="hbbench-models"))
    daemon = ForegroundDaemon(env={"HEBBS_MODEL_CACHE": str(cache)}).start()
    try:
        project = daemon.project()
        daemon.client(project).remember_many([f"warm-up memory {n} about the deploy pipeline" for n in range(20)])
        print("storm:", json.dumps(storm(daemon, project, frames=args.frames)), flush=True)
        print("soak: ", json.dumps(soak(daemon, project, clients=args.clients, ops=args.ops)), flush=True)
        print(f"log: {daemon.log_bytes()} bytes in {len(list(daemon.home.glob('daemon.log*')))} file(s)")
        shutil.rmtree(project, ignore_errors=True)
    finally:
        daemon.stop()
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
