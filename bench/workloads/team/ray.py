"""Indexing the notes corpus with embedding batches sent to a local two-node Ray cluster, and the CPU every
process involved spent."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


from hebbs.client import Client
from hebbs.paths import init_vault

from bench.datasets import notes as notes_data
from bench.workloads.team.common import daemons_on


@contextmanager
def ray_cluster() -> Iterator[tuple[str, list[int]]]:
    """A head node and a worker node on localhost, one CPU each (as tests/store/test_ray_index.py), each in a
    session of its own that every process of the node stays in; yields the address and those process
    groups, and stops exactly them."""
    temp = Path(f"/tmp/hbray{os.getpid()}")
    temp.mkdir(exist_ok=True)
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    common = ["--num-cpus", "1", "--object-store-memory", str(100 * 1024 * 1024), "--disable-usage-stats",
              "--dashboard-agent-listen-port", "0"]
    groups: list[int] = []
    ray = str(Path(sys.executable).with_name("ray"))
    try:
        for args in (["--head", "--port", str(port), "--include-dashboard=false", "--temp-dir", str(temp)],
                     ["--address", f"127.0.0.1:{port}"]):
            proc = subprocess.Popen([ray, "start", *args, *common], env=env, start_new_session=True,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
            groups.append(proc.pid)
            if proc.wait(timeout=300) != 0:
                raise RuntimeError("ray start failed")
        yield f"127.0.0.1:{port}", groups
    finally:
        for pgid in reversed(groups):
            for sig in (signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pgid, sig)
                time.sleep(1)
        shutil.rmtree(temp, ignore_errors=True)


class CpuOfTree:
    """CPU seconds used by a set of processes (the descendants of some pids, and every process in some
    process groups), sampled twice a second so processes that end during the run are counted too."""

    def __init__(self, roots: list[int], groups: list[int]) -> None:
        self.roots, self.groups = set(roots), set(groups)
        self.used: dict[int, float] = {}
        self.start: dict[int, float] = {}
        self._stop = threading.Event()
        self._sample()
        self.start = dict(self.used)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        stats = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                    stats[int(entry)] = (int(fields[1]), int(fields[2]), (int(fields[11]) + int(fields[12])) / tick)
        members = {pid for pid, (_, pgrp, _) in stats.items() if pgrp in self.groups} | (self.roots & set(stats))
        grew = True
        while grew:
            more = {pid for pid, (ppid, _, _) in stats.items() if ppid in members} - members
            members |= more
            grew = bool(more)
        for pid in members:
            self.used[pid] = stats[pid][2]  # its own threads only: children are members of their own

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            self._sample()

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        self._sample()
        return sum(v - self.start.get(pid, 0.0) for pid, v in self.used.items())


def ray_throughput(work: Path, url: str, notes: int | None = None) -> dict:
    """The notes corpus into a PostgreSQL vault: one daemon on its own model (no cluster running), then
    a daemon sending its embedding batches to the two-node cluster."""
    out = {}
    for label in ("1 indexer, local model", "1 indexer, --ray (2 nodes, 1 CPU each)"):
        with contextlib.ExitStack() as stack:
            address, groups = stack.enter_context(ray_cluster()) if "ray" in label else (None, [])
            root = work / f"ray-{len(out)}"
            shutil.copytree(notes_data.DEFAULT_VAULT, root, ignore=shutil.ignore_patterns(".hebbs"))
            for extra in sorted(root.rglob("*.md"))[notes:] if notes else []:
                extra.unlink()
            init_vault(root, work, store=url, name=f"ray{len(out)}-{work.name}")
            daemons, clients = stack.enter_context(daemons_on([root]))
            pid = Client(global_=True, home=daemons[0].home).ping().pid
            cpu = CpuOfTree([pid], groups)
            started = time.perf_counter()
            summary = clients[0].index(root, ray=address)
            wall = time.perf_counter() - started
            used = cpu.stop()
        out[label] = {"sections": summary.sections_total, "wall_s": wall, "per_s": summary.sections_total / wall,
                      "cpu_s": used, "per_cpu_s": summary.sections_total / used,
                      "on_ray": getattr(summary, "embedded_on_ray", 0)}
    return out
