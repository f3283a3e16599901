"""The daemon's fault and abuse runs, with their counts: acknowledged writes lost, INTERNAL answers,
unanswered requests, peak memory (issue 12, then issue 26).

    .venv/bin/python -m bench.bench_reliability [--frames 2000] [--kills 8] [--clients 4 --ops 30]
                                               [--skip storm,soak,kills,damage,fuzz,disk,disk-open,hugenote]

Each run starts a real daemon (foreground, temporary home):

- storm: malformed frames (seeded random and the known-bad shapes) from 4 raw connections beside a
  well-behaved client (daemon_harness.storm);
- soak: clients x ops mixed operations on one vault, every acknowledged write checked (daemon_harness.soak);
- kills: a writer remembers batches while the daemon is killed with SIGKILL `--kills` times and
  started again; every batch acknowledged before a kill must be there afterwards;
- damage: every file kind the vault owns (storage_faults: RocksDB's, the HNSW checkpoint and its meta,
  the catalog, the lexical segments and meta, the kept originals and their index, the notes manifest,
  config, the marker) truncated, deleted and bit-flipped in a copy of one vault; the daemon is asked
  count, recall (lexical and similarity) and get, and `hebbs doctor` must exit 1 where damage was made
  to something it checks;
- fuzz: hostile values in every field of every command (tests/reliability/hostile.py);
- disk: a 20 MiB tmpfs filled during writes (root only): DISK_FULL, reads while full, the next write;
- disk-open: the daemon killed, the tmpfs filled, the daemon started again (root only): time to the
  DISK_FULL answer of the first write (the vault's open included), reads while full, time of the first
  write after space returns; the peer is the same first request after another kill with space free;
- hugenote: the daemon's peak RSS growth indexing a folder of ordinary notes, then the same folder with
  a 15 MB note and 3 MB of random bytes named .md beside them (issue 39), and the seconds from SIGTERM
  to the daemon's exit while it embeds.

Bounded by its arguments (the defaults take a few minutes on a loaded 2-core machine). The same
scenarios, shorter, are tests under tests/reliability/.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.harness import tests_importable

tests_importable()
from daemon_harness import ForegroundDaemon, soak, storm  # noqa: E402
from hostile import requests, send_each  # noqa: E402
from storage_faults import DAMAGES, DERIVED_KINDS, FILE_KINDS, copy_vault, damage, find_file  # noqa: E402

from hebbs.errors import DaemonUnavailable, HebbsError, ProtocolError  # noqa: E402

HEBBS = str(Path(sys.executable).with_name("hebbs"))
# Damage doctor does not look for: RocksDB's OPTIONS file and the vault marker are rewritten at the
# next open; a log cut short is a crash as RocksDB sees it (docs/reliability.md).
DOCTOR_BLIND = {("options", "truncate"), ("options", "delete"), ("options", "bitflip"), ("wal", "truncate"),
                ("wal", "delete"), ("vault_marker", "delete"), ("vault_marker", "truncate"),
                ("vault_marker", "bitflip"), ("config", "delete"), ("lexical_meta", "delete"),
                ("hnsw", "delete"), ("hnsw_meta", "delete"), ("catalog", "delete"), ("catalog", "bitflip"),
                ("catalog", "truncate"), ("notes_manifest", "delete")}


def peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def outcome(call: Any) -> str:
    """OK, or the error's status code; UNANSWERED when the daemon gave no reply."""
    try:
        call()
        return "OK"
    except (ProtocolError, DaemonUnavailable, ConnectionError, OSError):
        return "UNANSWERED"
    except HebbsError as exc:
        return exc.status_code


# Kills ------------------------------------------------------------------------------------------

def kill_matrix(kills: int, seed: int = 11) -> dict[str, Any]:
    rng = random.Random(seed)
    daemon = ForegroundDaemon().start()
    project = daemon.project()
    acknowledged: set[str] = set()
    errors: Counter = Counter()
    peaks = []
    try:
        for k in range(kills):
            stop = threading.Event()

            def write(round_: int = k) -> None:
                client = daemon.client(project)
                n = 0
                while not stop.is_set():
                    batch = [{"content": f"round {round_} batch {n} item {i}: the crane lifts {i} tonnes"}
                             for i in range(20)]
                    try:
                        acknowledged.update(m.id for m in client.remember_many(batch))
                    except HebbsError as exc:
                        errors[exc.status_code] += 1
                        return
                    except (ConnectionError, OSError):
                        return
                    n += 1

            writer = threading.Thread(target=write)
            writer.start()
            time.sleep(rng.uniform(1.0, 4.0))
            assert daemon.proc is not None
            peaks.append(peak_mb(daemon.proc.pid))
            os.kill(daemon.proc.pid, signal.SIGKILL)
            daemon.proc.wait()
            stop.set()
            writer.join(120)
            daemon.start()
        stored = {m.id for m in daemon.client(project, timeout=300).export()}
        internal = errors.get("INTERNAL", 0)
        return {"kills": kills, "acknowledged": len(acknowledged), "lost": len(acknowledged - stored),
                "stored": len(stored), "internal": internal, "errors": dict(errors),
                "peak_mb": round(max(peaks + [peak_mb(daemon.pid)]))}
    finally:
        daemon.stop()
        shutil.rmtree(project, ignore_errors=True)


# Damage -----------------------------------------------------------------------------------------

def damage_base(daemon: ForegroundDaemon) -> Path:
    """A notes folder indexed into its vault (kept originals), 300 remembered memories, closed cleanly
    by a daemon of its own."""
    root = Path(tempfile.mkdtemp(prefix="hbdm", dir="/tmp"))
    for i in range(3):
        (root / f"note{i}.md").write_text(f"# Note {i}\n\nThe harbour crane {i} lifts {i * 10} tonnes.\n")
    builder = ForegroundDaemon().start()
    try:
        env = {**os.environ, "HEBBS_HOME": str(builder.home)}
        subprocess.run([HEBBS, "index", str(root)], env=env, check=True, capture_output=True, timeout=600)
        builder.client(root).remember_many([{"content": f"memory {i} on subject {i % 13}: " + "detail " * 30}
                                            for i in range(300)])
    finally:
        builder.stop()  # a clean close: every family in table files, the checkpoints written
    return root


def damage_matrix(daemon: ForegroundDaemon) -> dict[str, Any]:
    base = damage_base(daemon)
    cases: dict[str, dict[str, str]] = {}
    codes: Counter = Counter()
    unreported = []
    try:
        for kind in (*FILE_KINDS, *DERIVED_KINDS):
            for how in DAMAGES:
                work = Path(tempfile.mkdtemp(prefix="hbdc", dir="/tmp"))
                root = copy_vault(base, work / "notes")
                vault = root / ".hebbs"
                try:
                    target = find_file(vault, kind)
                except (ValueError, StopIteration, OSError):
                    cases[f"{kind}/{how}"] = {"file": "absent"}
                    shutil.rmtree(work, ignore_errors=True)
                    continue
                damage(target, how)
                # Doctor first: the daemon's open repairs derived files, after which there is nothing to find.
                doctor = subprocess.run([HEBBS, "doctor", "--vault", str(vault), "--format", "json"],
                                        capture_output=True, text=True, timeout=600)
                if doctor.returncode == 0 and (kind, how) not in DOCTOR_BLIND:
                    unreported.append(f"{kind}/{how}")
                client = daemon.client(root, timeout=120)
                got = {
                    "count": outcome(client.count),
                    "lexical": outcome(lambda: client.recall("harbour crane 2 tonnes", strategies=["lexical"], top_k=3)),
                    "similarity": outcome(lambda: client.recall("memory on subject 5", strategies=["similarity"],
                                                                top_k=3)),
                    "get": outcome(lambda: [client.get(m.memory.id) for m in
                                            client.recall("memory 7 on subject 7", top_k=2).results]),
                }
                client.close()
                got["doctor_exit"] = str(doctor.returncode)
                codes.update(v for k, v in got.items() if k != "doctor_exit")
                cases[f"{kind}/{how}"] = got
                shutil.rmtree(work, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return {"cases": len(cases), "codes": dict(codes), "internal": codes.get("INTERNAL", 0),
            "unanswered": codes.get("UNANSWERED", 0), "doctor_missed": unreported, "by_case": cases}


# Fuzz -------------------------------------------------------------------------------------------

def fuzz(daemon: ForegroundDaemon) -> dict[str, Any]:
    project = daemon.project()
    try:
        bodies = list(requests(str(project)))
        codes, bad = send_each(daemon.socket, bodies)
    finally:
        shutil.rmtree(project, ignore_errors=True)
    return {"requests": len(bodies), "codes": dict(codes), "internal": codes.get("INTERNAL", 0),
            "unanswered": codes.get("UNANSWERED", 0), "bad": bad[:20]}


# Full disk --------------------------------------------------------------------------------------

def full_disk() -> dict[str, Any]:
    from test_full_disk import filled_vault

    if os.geteuid() != 0:
        return {"skipped": "needs root to mount a tmpfs"}
    daemon = ForegroundDaemon().start()
    try:
        codes: Counter = Counter()
        with filled_vault(daemon) as (client, filler, acknowledged):
            for i in range(400):
                try:
                    acknowledged.append(client.remember(f"while full {i}: " + "padding " * 400).id)
                except HebbsError as exc:
                    codes[exc.status_code] += 1
                    break
            reads = Counter(outcome(call) for call in
                            [lambda: client.recall("which crane lifts 70 tonnes", top_k=3)] * 5
                            + [lambda: client.get(acknowledged[0]), client.count])
            still = outcome(lambda: client.remember("still no room"))
            filler.unlink()
            after = outcome(lambda: acknowledged.append(client.remember("after the space came back").id))
            stored = {m.id for m in client.export()}
            peak = peak_mb(daemon.pid)
        return {"refused_with": dict(codes), "reads_while_full": dict(reads), "write_while_still_full": still,
                "first_write_after_space": after, "acknowledged": len(acknowledged),
                "lost": len(set(acknowledged) - stored), "peak_mb": round(peak)}
    finally:
        daemon.stop()


def full_disk_at_open() -> dict[str, Any]:
    from test_full_disk import crash, cranes, reopened_on_a_full_disk

    if os.geteuid() != 0:
        return {"skipped": "needs root to mount a tmpfs"}
    daemon = ForegroundDaemon().start()
    try:
        with reopened_on_a_full_disk(daemon, cranes(200)) as (notes, filler, acknowledged):
            with daemon.client(vault=notes, timeout=300) as client:
                started = time.perf_counter()
                refused = outcome(lambda: client.remember("written while the disk is full"))
                to_refusal = time.perf_counter() - started
                reads = Counter(outcome(call) for call in
                                [lambda: client.recall("which crane lifts 70 tonnes", top_k=3)] * 5
                                + [lambda: client.get(acknowledged[0]), client.count])
                still = outcome(lambda: client.remember("still no room"))
                filler.unlink()
                started = time.perf_counter()
                after = outcome(lambda: acknowledged.append(client.remember("after the space came back").id))
                to_recovery = time.perf_counter() - started
                started = time.perf_counter()
                outcome(lambda: client.remember("the second write after the space came back"))
                next_write = time.perf_counter() - started
                stored = {m.id for m in client.export()}
            # The peer: the same first request after a crash, with space free.
            crash(daemon)
            daemon.start()
            with daemon.client(vault=notes, timeout=300) as client:
                started = time.perf_counter()
                peer = outcome(lambda: client.remember("written after a crash with space free"))
                peer_s = time.perf_counter() - started
            log = daemon.log()
        return {"first_write_while_full": refused, "to_disk_full_s": round(to_refusal, 3),
                "reads_while_full": dict(reads), "write_while_still_full": still,
                "first_write_after_space": after, "first_write_after_space_s": round(to_recovery, 3),
                "next_write_s": round(next_write, 3), "peer_first_write_after_crash_with_space": peer,
                "peer_s": round(peer_s, 3), "acknowledged": len(acknowledged),
                "lost": len(set(acknowledged) - stored), "opened_read_only": "opened read-only" in log,
                "internal": [refused, still, after].count("INTERNAL") + reads.get("INTERNAL", 0)}
    finally:
        daemon.stop()


def _reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM back to the current RSS


def _ordinary_notes(root: Path, notes: int, rng: random.Random) -> None:
    words = "apple river stone quiet market lantern orbit garden signal copper thunder violet harbor".split()
    for n in range(notes):
        parts = [f"# Note {n}\n"] + [f"## Part {s}\n\n" + " ".join(
            " ".join(rng.choice(words) for _ in range(14)).capitalize() + "." for _ in range(8)) + "\n"
            for s in range(10)]
        (root / f"note{n:03d}.md").write_text("\n".join(parts))


def huge_note() -> dict[str, Any]:
    """Peak RSS growth of `hebbs index` on a folder, without and with a huge note and random bytes."""
    rng = random.Random(39)
    daemon = ForegroundDaemon().start()
    figures: dict[str, Any] = {}
    try:
        warm, plain, huge = daemon.project(), daemon.project(), daemon.project()
        # The daemon's first index allocates the model's buffers and the vault's caches: not what is compared.
        _ordinary_notes(warm, 30, random.Random(5))
        daemon.client(warm / ".hebbs", timeout=3600).index(str(warm))
        _ordinary_notes(plain, 30, random.Random(5))
        _ordinary_notes(huge, 30, random.Random(5))
        words = "apple river stone quiet market lantern orbit garden signal copper thunder violet harbor".split()
        (huge / "huge.md").write_text("# Huge\n\n" + " ".join(rng.choice(words) for _ in range(2_250_000)))
        (huge / "noise.md").write_bytes(os.urandom(3_000_000).replace(b"\0", b"\1"))
        figures["huge_note_mb"] = round((huge / "huge.md").stat().st_size / 1e6, 1)
        for name, root in (("without", plain), ("with", huge)):
            client = daemon.client(root / ".hebbs", timeout=3600)
            _reset_peak(daemon.pid)
            before = peak_mb(daemon.pid)
            started = time.monotonic()
            summary = client.index(str(root))
            figures[f"{name}_peak_growth_mb"] = round(peak_mb(daemon.pid) - before)
            figures[f"{name}_seconds"] = round(time.monotonic() - started, 1)
            figures[f"{name}_sections"] = summary.sections_total
            if summary.skipped or summary.warnings:
                figures[f"{name}_skipped"] = summary.skipped + [w.split(":")[0] for w in summary.warnings
                                                                if "not look like text" in w]
        # SIGTERM while embedding: seconds until the daemon is gone.
        again = daemon.project()
        _ordinary_notes(again, 30, random.Random(5))
        client = daemon.client(again / ".hebbs", timeout=3600)
        embedding = threading.Event()
        worker = threading.Thread(target=lambda: outcome(lambda: client.index(
            str(again), progress=lambda p: p.stage == "embed" and p.done and embedding.set())))
        worker.start()
        if embedding.wait(600):
            sent = time.monotonic()
            daemon.proc.send_signal(signal.SIGTERM)
            daemon.proc.wait(600)
            figures["sigterm_to_exit_seconds"] = round(time.monotonic() - sent, 1)
        worker.join(600)
        for root in (warm, plain, huge, again):
            shutil.rmtree(root, ignore_errors=True)
    finally:
        daemon.stop()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--ops", type=int, default=30, help="operations per client")
    parser.add_argument("--kills", type=int, default=8)
    parser.add_argument("--skip", default="", help="comma-separated runs to leave out")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    print(f"machine load {open('/proc/loadavg').read().split()[0]} (2 cores, shared)", flush=True)
    totals = {"lost": 0, "internal": 0, "unanswered": 0, "peak_mb": 0.0}
    daemon = ForegroundDaemon("--vault-idle-timeout", "2").start()
    try:
        project = daemon.project()
        daemon.client(project).remember_many([f"warm-up memory {n} about the deploy pipeline" for n in range(20)])
        runs: list[tuple[str, Any]] = [
            ("storm", lambda: storm(daemon, project, frames=args.frames)),
            ("soak", lambda: soak(daemon, project, clients=args.clients, ops=args.ops)),
            ("fuzz", lambda: fuzz(daemon)),
            ("damage", lambda: damage_matrix(daemon)),
            ("kills", lambda: kill_matrix(args.kills)),
            ("disk", full_disk),
            ("disk-open", full_disk_at_open),
            ("hugenote", huge_note),
        ]
        for name, run in runs:
            if name in skip:
                continue
            started = time.monotonic()
            try:
                figures = run()
            except AssertionError as exc:  # storm and soak assert their own guarantees: a failure is a figure
                figures = {"failed": str(exc)[:2000]}
            figures["seconds"] = round(time.monotonic() - started, 1)
            shown = {k: v for k, v in figures.items() if k != "by_case"}
            print(f"{name}: {json.dumps(shown)}", flush=True)
            if "by_case" in figures:
                for case, got in figures["by_case"].items():
                    print(f"    {case:<28} {json.dumps(got)}")
            totals["lost"] += figures.get("lost", 0) + figures.get("missing_writes", 0)
            totals["internal"] += figures.get("internal", 0) + figures.get("codes", {}).get("INTERNAL", 0) * (name == "storm")
            totals["unanswered"] += figures.get("unanswered", 0)
            totals["peak_mb"] = max(totals["peak_mb"], figures.get("peak_mb", 0), figures.get("rss_peak_mb", 0))
        totals["peak_mb"] = round(max(totals["peak_mb"], peak_mb(daemon.pid)))
        print("totals: " + json.dumps({"acknowledged writes lost": totals["lost"], "INTERNAL answers": totals["internal"],
                                       "unanswered requests": totals["unanswered"], "peak daemon RSS MB": totals["peak_mb"]}))
        shutil.rmtree(project, ignore_errors=True)
    finally:
        daemon.stop()


if __name__ == "__main__":
    main()
