"""A real daemon in the foreground with the limits a test chooses, and raw frames to throw at it.

Used by the test_daemon_*.py files here and by bench/bench_reliability.py (the long runs). The
daemon runs as `python -m hebbs.daemon` on its own short /tmp home, so its pid (for RSS and
/proc/PID/limits) and its log are the test's to read.
"""

from __future__ import annotations

import os
import random
import re
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from hebbs.client import Client
from hebbs.paths import init_vault, log_path, socket_path

import processes
from scratch import short_tmp

START_WAIT = 120.0
# How long the storm's connections wait for one reply: a guard against a hang, not a timing
# assertion. At 30 s, a loaded machine (load 23 on 2 cores) timed the abusers out: their threads
# died unseen and the storm shrank to a third of its frames while the test still passed.
HANG_GUARD = 300.0
HEADER = struct.Struct(">I")


class ForegroundDaemon:
    def __init__(self, *flags: str, fd_limits: tuple[int, int] | None = None, env: dict[str, str] | None = None):
        self.home = short_tmp("hbr")
        self.flags = ["--idle-timeout", "0", *flags]
        self.fd_limits = fd_limits
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> "ForegroundDaemon":
        limits = self.fd_limits

        def set_limits() -> None:
            processes.default_signals()
            if limits is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, limits)

        self.proc = processes.popen([sys.executable, "-m", "hebbs.daemon", "--home", str(self.home), *self.flags],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env=self.env, preexec_fn=set_limits)
        deadline = time.monotonic() + START_WAIT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the daemon exited {self.proc.returncode}:\n{self.log()[-3000:]}")
            try:
                if self.client().status(vault=False).model:  # listening, and the model is warm
                    return self
            except Exception:  # noqa: BLE001 - not up yet
                pass
            time.sleep(0.1)
        raise AssertionError(f"the daemon did not start:\n{self.log()[-3000:]}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def socket(self) -> Path:
        return socket_path(self.home)

    def client(self, vault: Path | None = None, **kwargs: Any) -> Client:
        return Client(vault=vault, global_=vault is None, home=self.home, autostart=False, **kwargs)

    def project(self) -> Path:
        root = short_tmp("hbrp")
        init_vault(root, self.home)
        return root

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmRSS")

    def soft_fd_limit(self) -> int:
        for line in Path(f"/proc/{self.pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                return int(line.split()[3])
        raise AssertionError("no fd limit")

    def log(self) -> str:
        try:
            return log_path(self.home).read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.home.glob("daemon.log*"))

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.home, ignore_errors=True)


# Raw frames ------------------------------------------------------------------------------------

def raw_connect(path: Path, timeout: float = 30.0) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.connect(str(path))
    return sock


def frame(body: bytes | Any) -> bytes:
    data = body if isinstance(body, bytes) else msgspec.json.encode(body)
    return HEADER.pack(len(data)) + data


def read_reply(sock: socket.socket) -> dict[str, Any] | None:
    """The next frame as a dict; None when the daemon closed the connection."""
    header = _exactly(sock, HEADER.size)
    if header is None:
        return None
    body = _exactly(sock, HEADER.unpack(header)[0])
    return None if body is None else msgspec.json.decode(body)


def final_reply(sock: socket.socket) -> dict[str, Any] | None:
    while True:
        reply = read_reply(sock)
        if reply is None or reply.get("status") != "progress":
            return reply


def _exactly(sock: socket.socket, n: int) -> bytes | None:
    chunks = b""
    while len(chunks) < n:
        try:
            chunk = sock.recv(n - len(chunks))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        chunks += chunk
    return chunks


# Malformed requests ------------------------------------------------------------------------------

def five_shapes(vault_path: str) -> dict[str, bytes]:
    """The five request shapes that got INTERNAL in the fault run (issue 12, defect 4)."""
    deep = b"[" * 10_000 + b"]" * 10_000
    return {
        "arrays nested 10,000 deep": b'{"id": 1, "command": {"type": "remember", "content": "x", "context": {"a": '
                                     + deep + b"}}, \"vault_path\": " + msgspec.json.encode(vault_path) + b"}",
        "invalid UTF-8": b'{"id": 2, "command": {"type": "remember", "content": "caf\xc3\x28 \xff\xfe"}, "vault_path": '
                         + msgspec.json.encode(vault_path) + b"}",
        "NUL byte in vault_path": msgspec.json.encode(
            {"id": 3, "command": {"type": "recall", "cue": "x"}, "vault_path": vault_path + "\x00/etc"}),
        "created_at at 2^64": b'{"id": 4, "command": {"type": "remember", "content": "x", "created_at": '
                              b'18446744073709551616}, "vault_path": ' + msgspec.json.encode(vault_path) + b"}",
        "1 MB vault_path": msgspec.json.encode({"id": 5, "command": {"type": "status"},
                                                "vault_path": "/" + "a" * 1_000_000}),
    }


NASTY: list[Callable[[random.Random], Any]] = [
    lambda r: None, lambda r: True, lambda r: -1, lambda r: 0, lambda r: 2**63, lambda r: 2**64 + r.randrange(99),
    lambda r: -(2**70), lambda r: 1e308, lambda r: -0.0, lambda r: "", lambda r: "x" * r.choice([300, 5000, 70_000]),
    lambda r: "a\x00b", lambda r: "/tmp/\x00", lambda r: "\ud7ff\uffff", lambda r: [], lambda r: {},
    lambda r: [1] * 1000, lambda r: {"k" * 10: [None, {"x": []}]}, lambda r: _nest(r.choice([30, 70, 300, 3000])),
    lambda r: "01ARZ3NDEKTSV4RRFFQ69G5FAV", lambda r: "../../etc/passwd", lambda r: r.random(),
    lambda r: [2**64], lambda r: {"type": "ping"}, lambda r: [None, None],
]


def _nest(depth: int) -> str:
    """A placeholder random_frame swaps for `depth` nested arrays (msgspec will not encode them)."""
    return f"__nest_{depth}__"


def _expand_nesting(body: bytes) -> bytes:
    return re.sub(rb'"__nest_(\d+)__"', lambda m: b"[" * int(m[1]) + b"]" * int(m[1]), body)


def templates(vault_path: str) -> list[dict[str, Any]]:
    """Valid requests to mutate: every command that cannot stop the daemon or walk a real folder."""
    v = vault_path
    return [
        {"id": 1, "command": {"type": "ping"}},
        {"id": 2, "command": {"type": "status"}, "vault_path": v},
        {"id": 3, "command": {"type": "remember", "content": "fuzz memory", "importance": 0.3,
                              "context": {"a": 1}, "entity_id": "fz"}, "vault_path": v},
        {"id": 4, "command": {"type": "remember", "items": [{"content": "one"}, {"content": "two"}]}, "vault_path": v},
        {"id": 5, "command": {"type": "recall", "cue": "fuzz", "top_k": 3, "time_range": [0, None]}, "vault_path": v},
        {"id": 6, "command": {"type": "get", "id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, "vault_path": v},
        {"id": 7, "command": {"type": "revise", "id": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "content": "x"}, "vault_path": v},
        {"id": 8, "command": {"type": "prime", "entity_id": "fz", "max_memories": 5}, "vault_path": v},
        {"id": 9, "command": {"type": "queries", "limit": 5}, "vault_path": v},
        {"id": 10, "command": {"type": "inspect", "id": "ZZZZZZ"}, "vault_path": v},
        {"id": 11, "command": {"type": "insights", "max_results": 5}, "vault_path": v},
        {"id": 12, "command": {"type": "reflect_prepare", "max_memories": 10}, "vault_path": v},
        {"id": 13, "command": {"type": "reflect_commit", "session_id": "01ARZ3NDEKTSV4RRFFQ69G5FAV",
                               "insights": [{"content": "x", "confidence": 0.5, "source_memory_ids": []}]},
         "vault_path": v},
        {"id": 14, "command": {"type": "contradiction_prepare", "max_results": 5}, "vault_path": v},
        {"id": 15, "command": {"type": "contradiction_commit", "verdicts": [
            {"pending_id": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "verdict": "neutral"}]}, "vault_path": v},
        {"id": 16, "command": {"type": "forget_candidates"}, "vault_path": v},
        {"id": 17, "command": {"type": "subscribe", "confidence_threshold": 0.5}, "vault_path": v},
        {"id": 18, "command": {"type": "feed", "text": "fuzz"}, "vault_path": v},
        {"id": 19, "command": {"type": "close"}},
        {"id": 20, "command": {"type": "forget", "ids": ["01ARZ3NDEKTSV4RRFFQ69G5FAV"]}, "vault_path": v},
        {"id": 21, "command": {"type": "recall", "strategies": ["temporal", "causal", "analogical"],
                               "weights": {"relevance": 0.5}}, "vault_path": v},
    ]


def random_frame(rng: random.Random, vault_path: str) -> bytes:
    """One malformed (or occasionally valid) request body: a template with 1-3 mutations, or bytes."""
    roll = rng.random()
    if roll < 0.1:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
    request = msgspec.json.decode(msgspec.json.encode(rng.choice(templates(vault_path))))
    for _ in range(rng.randrange(1, 4)):
        command = request.get("command")
        target = command if isinstance(command, dict) and rng.random() < 0.7 else request
        keys = [k for k in target if k != "type"] + ["extra_" + str(rng.randrange(3))]
        key = rng.choice(keys + (["type"] if rng.random() < 0.05 else []))
        target[key] = rng.choice(NASTY)(rng)
        if key == "vault_path" and rng.random() < 0.5:
            target[key] = "/tmp/hebbs-fuzz-" + str(rng.randrange(1000))  # a vault that does not exist
    body = _expand_nesting(msgspec.json.encode(request))
    if roll > 0.9 and body:  # damage the bytes: a cut, or a byte that is not UTF-8
        cut = rng.randrange(len(body))
        body = body[:cut] if rng.random() < 0.5 else body[:cut] + b"\xff" + body[cut + 1:]
    return body


# The storm and the soak (tests here run them short; bench/bench_reliability.py runs them long) ----

def storm(daemon: ForegroundDaemon, project: Path, *, frames: int, abusers: int = 4, seed: int = 7) -> dict[str, Any]:
    """`frames` malformed frames from `abusers` raw connections while one well-behaved client
    remembers, recalls and gets in a loop. Returns figures; raises AssertionError on a failure the
    well-behaved client saw, a frame answered INTERNAL, or an acknowledged write that is missing."""
    import threading

    vault_path = str(project / ".hebbs")
    shapes = list(five_shapes(vault_path).values())
    stop = threading.Event()
    codes: dict[str, int] = {}
    problems: list[str] = []
    lock = threading.Lock()

    def abuse(n: int, count: int) -> None:
        rng = random.Random(seed * 1000 + n)
        sock = raw_connect(daemon.socket, timeout=HANG_GUARD)
        try:
            for i in range(count):
                body = shapes[(i // 50) % len(shapes)] if i % 50 == 0 else random_frame(rng, vault_path)
                if rng.random() < 0.01:  # a frame cut short, then the connection dropped
                    sock.sendall(frame(body)[: rng.randrange(1, 4 + len(body))])
                    sock.close()
                    sock = raw_connect(daemon.socket, timeout=HANG_GUARD)
                    continue
                sock.sendall(frame(body))
                reply = final_reply(sock)
                code = "CLOSED" if reply is None else reply["status_code"]
                with lock:
                    codes[code] = codes.get(code, 0) + 1
                if code in ("INTERNAL", "CLOSED"):
                    problems.append(f"{code} for {body[:200]!r}")
                    if reply is None:
                        sock = raw_connect(daemon.socket, timeout=HANG_GUARD)
        except Exception as exc:  # noqa: BLE001 - a storm cut short must fail, not shrink unseen
            problems.append(f"abuser {n} stopped: {type(exc).__name__}: {exc}")
        finally:
            sock.close()

    acknowledged: dict[str, str] = {}
    good_calls = 0

    def behave() -> None:
        nonlocal good_calls
        client = daemon.client(project, timeout=HANG_GUARD)
        n = 0
        while not stop.is_set() or n < 5:
            text = f"well-behaved memory {n}: the storm did not stop me"
            try:
                memory = client.remember(text, entity_id="calm")
                acknowledged[memory.id] = text
                hits = client.recall(f"well-behaved memory {n}", top_k=3)
                assert hits.results, "recall found nothing"
                assert client.get(memory.id).content == text
                good_calls += 3
            except Exception as exc:  # noqa: BLE001 - any failure of the calm client is the finding
                problems.append(f"the well-behaved client failed: {type(exc).__name__}: {exc}")
                return
            n += 1
        client.close()

    rss_before = daemon.rss_mb()
    log_before = daemon.log_bytes()
    started = time.monotonic()
    calm = threading.Thread(target=behave)
    calm.start()
    per = frames // abusers
    threads = [threading.Thread(target=abuse, args=(n, per)) for n in range(abusers)]
    for t in threads:
        t.start()
    samples = [rss_before]
    while any(t.is_alive() for t in threads):
        samples.append(daemon.rss_mb())
        time.sleep(0.2)
    stop.set()
    calm.join(300)
    seconds = time.monotonic() - started
    missing = [mid for mid, text in acknowledged.items() if daemon.client(project).get(mid).content != text]
    figures = {"frames": per * abusers, "seconds": round(seconds, 1), "codes": codes, "good_calls": good_calls,
               "acknowledged_writes": len(acknowledged), "missing_writes": len(missing),
               "rss_before_mb": round(rss_before), "rss_peak_mb": round(max(samples)),
               "rss_halfway_mb": round(samples[len(samples) // 2]), "rss_after_mb": round(daemon.rss_mb()),
               "log_growth_bytes": daemon.log_bytes() - log_before, "problems": problems[:5]}
    assert not problems, figures
    assert not missing, figures
    assert daemon.alive(), figures
    return figures


def soak(daemon: ForegroundDaemon, project: Path, *, clients: int = 8, ops: int = 40, seed: int = 3) -> dict[str, Any]:
    """`clients` threads, each with its own SDK client, run `ops` mixed operations on one vault
    (remember, batches, revise, forget, recall, get, status); then every write each of them saw
    acknowledged must be there, as last written, and every acknowledged forget must have held."""
    import threading

    results: list[dict[str, Any]] = [{} for _ in range(clients)]
    errors: list[str] = []
    latencies: list[float] = []

    def worker(n: int) -> None:
        rng = random.Random(seed * 100 + n)
        client = daemon.client(project, timeout=300)
        live: dict[str, str] = {}
        forgotten: set[str] = set()
        try:
            for i in range(ops):
                roll = rng.random()
                t0 = time.monotonic()
                if roll < 0.3 or not live:
                    text = f"client {n} note {i}: {rng.choice(['alpha', 'beta', 'gamma', 'delta'])} {rng.random():.6f}"
                    live[client.remember(text, entity_id=f"c{n}", importance=rng.random()).id] = text
                elif roll < 0.4:
                    texts = [f"client {n} batch {i}.{k} {rng.random():.6f}" for k in range(rng.randrange(2, 8))]
                    for m, text in zip(client.remember_many([{"content": t, "entity_id": f"c{n}"} for t in texts]),
                                       texts):
                        live[m.id] = text
                elif roll < 0.5:
                    mid = rng.choice(sorted(live))
                    text = f"client {n} revised {i} {rng.random():.6f}"
                    client.revise(mid, content=text)
                    live[mid] = text
                elif roll < 0.58:
                    mid = rng.choice(sorted(live))
                    assert client.forget([mid]) == 1
                    live.pop(mid)
                    forgotten.add(mid)
                elif roll < 0.85:
                    client.recall(f"client {n} note {rng.randrange(ops)}", top_k=5, entity_id=f"c{n}")
                elif roll < 0.95:
                    mid = rng.choice(sorted(live))
                    got = client.get(mid).content
                    assert got == live[mid], f"get {mid}: {got!r} != {live[mid]!r}"
                else:
                    client.status()
                latencies.append(time.monotonic() - t0)
        except Exception as exc:  # noqa: BLE001 - every failure is the finding
            errors.append(f"client {n}: {type(exc).__name__}: {exc}")
        finally:
            client.close()
        results[n] = {"live": live, "forgotten": forgotten}

    started = time.monotonic()
    threads = [threading.Thread(target=worker, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(3600)
    seconds = time.monotonic() - started
    checker = daemon.client(project, timeout=300)
    stored = {m.id: m.content for m in checker.export()}
    lost = [(mid, text) for r in results for mid, text in r.get("live", {}).items() if stored.get(mid) != text]
    resurrected = [mid for r in results for mid in r.get("forgotten", set()) if mid in stored]
    latencies.sort()
    figures = {"clients": clients, "ops": clients * ops, "seconds": round(seconds, 1),
               "ops_per_s": round(len(latencies) / seconds, 1) if seconds else None,
               "p50_ms": round(1000 * latencies[len(latencies) // 2], 1) if latencies else None,
               "p99_ms": round(1000 * latencies[int(len(latencies) * 0.99)], 1) if latencies else None,
               "acknowledged_live": sum(len(r.get("live", {})) for r in results), "lost": len(lost),
               "resurrected": len(resurrected), "errors": errors[:5], "rss_mb": round(daemon.rss_mb())}
    assert not errors, figures
    assert not lost and not resurrected, figures
    return figures
