"""Automatic failover of a PostgreSQL primary by pg_auto_failover (Debian's `postgresql-15-auto-failover`):
from a `kill -9` of the primary's machine (its keeper and its server, one process group) until a writer
on a multi-host URL (`target_session_attrs=read-write`) has its first write acknowledged again, and
how many acknowledged writes the promoted standby lacks. Once with the monitor's default timeouts,
once with them cut to seconds.

    apt-get install postgresql-15-auto-failover
    .venv/bin/python -m bench.bench_autofailover       # as root: the nodes run as Debian's `postgres` user

Debian's PostgreSQL 15 has no pgvector, so the writer is plain SQL, not a hebbs daemon: what is
measured is the database's failover, which a daemon waits through (it retries for 30 s, docs/scale.md).
Everything listens on 127.0.0.1 only, with trust authentication, in a temporary directory; every
process is stopped by its process group at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import psycopg

from bench.harness import machine_note

USER = "postgres"
BIN = "/usr/lib/postgresql/15/bin"
PORTS = {"monitor": 6100, "node1": 6101, "node2": 6102}
URL = "postgresql://postgres@127.0.0.1:6101,127.0.0.1:6102/postgres?target_session_attrs=read-write&connect_timeout=2"
# The monitor's settings (milliseconds) for the fast run; their defaults are 5000, 5000, 2, 2000, 20000, 30000.
FAST = {"health_check_period": 1000, "health_check_timeout": 1000, "health_check_max_retries": 1,
        "health_check_retry_delay": 500, "node_considered_unhealthy_timeout": 3000, "primary_demote_timeout": 3000}


class Formation:
    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="hbpaf", dir="/tmp"))
        (self.root / "run").mkdir(mode=0o700)
        shutil.chown(self.root, USER)
        shutil.chown(self.root / "run", USER)
        self.env = {"HOME": str(self.root), "XDG_CONFIG_HOME": str(self.root / "config"),
                    "XDG_DATA_HOME": str(self.root / "data"), "XDG_RUNTIME_DIR": str(self.root / "run"),
                    "PATH": f"{BIN}:/usr/bin:/bin"}
        self.groups: dict[str, int] = {}

    def _as_user(self, args: list[str], log: str | None = None) -> subprocess.Popen:
        out = open(self.root / log, "ab") if log else subprocess.DEVNULL
        # A session of its own: the node is one process group, killed as a machine dies.
        return subprocess.Popen(["runuser", "-u", USER, "--", "env", *(f"{k}={v}" for k, v in self.env.items()),
                                 *args], stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def autoctl(self, *args: str) -> str:
        done = subprocess.run(["runuser", "-u", USER, "--", "env", *(f"{k}={v}" for k, v in self.env.items()),
                               "pg_autoctl", *args], capture_output=True, text=True)
        return done.stdout.strip()

    def start(self, name: str, monitor: str | None = None) -> None:
        what = ["create", "monitor"] if monitor is None else ["create", "postgres", "--monitor", monitor]
        proc = self._as_user(["pg_autoctl", *what, "--pgdata", str(self.root / name), "--pgport", str(PORTS[name]),
                              "--auth", "trust", "--no-ssl", "--hostname", "127.0.0.1", "--listen", "127.0.0.1",
                              "--run"], f"{name}.log")
        self.groups[name] = proc.pid

    def rerun(self, name: str) -> None:
        self.groups[name] = self._as_user(["pg_autoctl", "run", "--pgdata", str(self.root / name)], f"{name}.log").pid

    def monitor_uri(self) -> str:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            uri = self.autoctl("show", "uri", "--pgdata", str(self.root / "monitor"), "--formation", "monitor")
            if uri.startswith("postgres"):
                return uri
            time.sleep(1)
        raise RuntimeError("the monitor did not come up")

    def states(self) -> dict[str, str]:
        raw = self.autoctl("show", "state", "--pgdata", str(self.root / "monitor"), "--json")
        try:
            return {f"node{n['node_id']}": n["current_group_state"] for n in json.loads(raw)}
        except (ValueError, KeyError, TypeError):
            return {}

    def wait_healthy(self) -> str:
        """Waits for one primary and one secondary; returns the primary's name."""
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            states = self.states()
            if sorted(states.values()) == ["primary", "secondary"]:
                return next(name for name, state in states.items() if state == "primary")
            time.sleep(1)
        raise RuntimeError(f"no primary and secondary after 300 s: {self.states()}")

    def monitor_settings(self, settings: dict[str, int]) -> None:
        with psycopg.connect(f"postgresql://{USER}@127.0.0.1:{PORTS['monitor']}/pg_auto_failover", autocommit=True) as c:
            for key, value in settings.items():
                c.execute(f"ALTER SYSTEM SET pgautofailover.{key} = {int(value)}")
            c.execute("SELECT pg_reload_conf()")

    def kill(self, name: str) -> None:
        os.killpg(self.groups.pop(name), signal.SIGKILL)

    def stop(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pgid in self.groups.values():
                try:
                    os.killpg(pgid, sig)
                except ProcessLookupError:
                    pass
            time.sleep(3)
        shutil.rmtree(self.root, ignore_errors=True)


def failover(formation: Formation, primary: str) -> dict:
    with psycopg.connect(URL, autocommit=True) as c:
        c.execute("CREATE TABLE IF NOT EXISTS w (n int PRIMARY KEY)")
        c.execute("TRUNCATE w")
        sync = c.execute("SHOW synchronous_standby_names").fetchone()[0]
    acked: list[tuple[int, float]] = []
    stop = threading.Event()

    def writer() -> None:
        n, conn = 0, None
        while not stop.is_set():
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(URL, autocommit=True)
                conn.execute("INSERT INTO w VALUES (%s)", (n,))
                acked.append((n, time.perf_counter()))
                time.sleep(0.01)
            except psycopg.Error:
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.1)
            n += 1

    thread = threading.Thread(target=writer)
    thread.start()
    while len(acked) < 50:
        time.sleep(0.05)
    killed = time.perf_counter()
    formation.kill(primary)
    while time.perf_counter() < killed + 300 and not any(t > killed for _, t in acked):
        time.sleep(0.05)
    stop.set()
    thread.join()
    after = [t for _, t in acked if t > killed]
    with psycopg.connect(URL, autocommit=True) as c:
        have = {row[0] for row in c.execute("SELECT n FROM w")}
    return {"first_write_after_kill_s": (min(after) - killed) if after else None, "acknowledged": len(acked),
            "lost": sum(1 for n, _ in acked if n not in have), "synchronous_standby_names": sync}


def main() -> None:
    print(f"machine: {machine_note()}")
    formation = Formation()
    try:
        formation.start("monitor")
        monitor = formation.monitor_uri()
        formation.start("node1", monitor)
        time.sleep(10)  # the first node becomes the primary before the second asks to join
        formation.start("node2", monitor)
        results = {}
        for label, settings in (("default timeouts", {}), ("timeouts in seconds", FAST)):
            if settings:
                formation.monitor_settings(settings)
            primary = formation.wait_healthy()
            results[label] = failover(formation, primary)
            formation.rerun(primary)  # the old primary rejoins as the standby
        for label, r in results.items():
            print(f"  {label:<22} first acknowledged write {r['first_write_after_kill_s']:.1f} s after the kill; "
                  f"{r['acknowledged']} acknowledged, {r['lost']} lost ({r['synchronous_standby_names']})")
    finally:
        formation.stop()


if __name__ == "__main__":
    main()
