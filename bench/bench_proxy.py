"""What `hebbs proxy` adds to a chat completion's latency, against a direct call to the same upstream.

A local OpenAI-compatible stand-in upstream answers at once (so everything measured is the proxy's:
one recall over both brains through the daemon, the system message, one more HTTP hop). A real daemon serves a
project vault of 200 memories; `hebbs proxy` runs as the CLI starts it. Direct and proxied calls
alternate in the same run (the machine is shared and busy): related questions (recall finds
memories and adds them) and unrelated ones (recall abstains, nothing added).

    .venv/bin/python -m bench.bench_proxy [--requests 200]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from bench.harness import percentile
from hebbs.client import Client, start_daemon
from hebbs.paths import init_vault

ANSWER = json.dumps({"id": "x", "object": "chat.completion", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}).encode()
TEAMS = ["billing", "search", "payments", "mobile", "infra", "data", "identity", "growth", "support", "docs"]


class _Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(ANSWER)))
        self.end_headers()
        self.wfile.write(ANSWER)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=200, help="per kind of call (default 200)")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="hbbp", dir="/tmp"))
    project = Path(tempfile.mkdtemp(prefix="hbbpp", dir="/tmp"))
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{upstream.server_address[1]}/v1"
    proxy = None
    try:
        start_daemon(home)
        init_vault(project, home)
        with Client(vault=project, home=home) as client:
            client.remember_many([{"content": f"The {team} team's on-call rotation week {n} is led by engineer "
                                              f"{team[:3].upper()}-{n}; escalations go to the {team} lead"}
                                  for team in TEAMS for n in range(20)])
        port = free_port()
        env = dict(os.environ, HEBBS_HOME=str(home), HEBBS_PROXY_LOG="warning", BENCH_KEY="sk-bench")
        proxy = subprocess.Popen([str(Path(sys.executable).with_name("hebbs")), "proxy", "--upstream", base,
                                  "--port", str(port), "--api-key-env", "BENCH_KEY", "--vault", str(project)],
                                 env=env, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("the proxy did not start") from None
                time.sleep(0.1)
        cues = {"related": [f"who leads the {t} on-call rotation in week {n}?" for t in TEAMS for n in range(20)],
                "unrelated": [f"what is the boiling point of element number {n}?" for n in range(200)]}
        direct = httpx.Client(base_url=base)
        # The client token the proxy made at its start, given as the API key as an OpenAI client would.
        token = (home / "proxy.token").read_text().strip()
        proxied = httpx.Client(base_url=f"http://127.0.0.1:{port}/v1", timeout=60,
                               headers={"authorization": f"Bearer {token}"})
        times: dict[str, list[float]] = {"direct": [], "related": [], "unrelated": []}
        added = {"related": 0, "unrelated": 0}

        def call(client: httpx.Client, cue: str) -> tuple[float, httpx.Response]:
            body = {"model": "m", "messages": [{"role": "user", "content": cue}]}
            started = time.perf_counter()
            reply = client.post("/chat/completions", json=body)
            elapsed = time.perf_counter() - started
            reply.raise_for_status()
            return elapsed, reply

        for kind in ("related", "unrelated"):  # warm-up: connections, vault open, model warm
            call(proxied, cues[kind][0])
        call(direct, "warm")
        for n in range(args.requests):
            for kind in ("related", "unrelated"):
                times["direct"].append(call(direct, cues[kind][n % len(cues[kind])])[0])
                elapsed, reply = call(proxied, cues[kind][n % len(cues[kind])])
                times[kind].append(elapsed)
                added[kind] += bool(reply.headers.get("x-hebbs-memories"))
        load = open("/proc/loadavg").read().split()[0]
        print(f"{args.requests} requests of each kind, direct and proxied alternating; busy shared machine (load {load})")
        d50, d99 = percentile(times["direct"], 50) * 1000, percentile(times["direct"], 99) * 1000
        print(f"  direct to the upstream      p50 {d50:7.2f} ms  p99 {d99:7.2f} ms")
        for kind in ("related", "unrelated"):
            p50, p99 = percentile(times[kind], 50) * 1000, percentile(times[kind], 99) * 1000
            print(f"  through the proxy, {kind:<9} p50 {p50:7.2f} ms  p99 {p99:7.2f} ms  adds p50 {p50 - d50:6.2f} ms "
                  f"(x{p50 / d50:.1f} of direct); memories added to {added[kind]}/{args.requests}")
        print(f"  mean direct {statistics.mean(times['direct']) * 1000:.2f} ms")
    finally:
        if proxy is not None:
            proxy.terminate()
            proxy.wait(timeout=20)
        upstream.shutdown()
        try:
            Client(global_=True, home=home, autostart=False).shutdown()
        except Exception:
            pass
        time.sleep(1)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(project, ignore_errors=True)


if __name__ == "__main__":
    main()
