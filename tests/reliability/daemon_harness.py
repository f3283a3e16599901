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
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from hebbs.client import Client
from hebbs.paths import init_vault, log_path, socket_path

START_WAIT = 120.0
HEADER = struct.Struct(">I")


class ForegroundDaemon:
    def __init__(self, *flags: str, fd_limits: tuple[int, int] | None = None, env: dict[str, str] | None = None):
        self.home = Path(tempfile.mkdtemp(prefix="hbr", dir="/tmp"))
        self.flags = ["--idle-timeout", "0", *flags]
        self.fd_limits = fd_limits
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> "ForegroundDaemon":
        limits = self.fd_limits

        def set_limits() -> None:
            if limits is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, limits)

        self.proc = subprocess.Popen([sys.executable, "-m", "hebbs.daemon", "--home", str(self.home), *self.flags],
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
        root = Path(tempfile.mkdtemp(prefix="hbrp", dir="/tmp"))
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
        "1 MB vault_path": msgspec.json.encode({"id": 5, "command": {"type": "status"}, "vault_path": "/" + "a" * 1_000_000}),
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
