"""`hebbs mcp` answers every request line (issue 26, item 10): the real server process over stdio,
a real daemon. Before the fix a `remember` whose context nests 200 levels and a line holding
`\\ud800` got no answer at all (the client waited 120 s): the SDK's parser refused them and the
transport dropped them."""

from __future__ import annotations

import json
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import processes

pytest_plugins = ["daemon_fixtures"]


def test_every_request_line_gets_a_json_rpc_answer(shared_daemon):
    proc = processes.popen([str(Path(sys.executable).with_name("hebbs")), "mcp", "--global"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           env=shared_daemon.env())

    def send(line: str) -> None:
        assert proc.stdin is not None
        proc.stdin.write(line.encode() + b"\n")
        proc.stdin.flush()

    def answer() -> dict[str, Any]:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready, "no answer"
        return json.loads(proc.stdout.readline())

    try:
        send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
        assert answer()["id"] == 1
        send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        deep: dict[str, Any] = {}
        level = deep
        for _ in range(200):
            level["a"] = {}
            level = level["a"]
        lines = [
            json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "remember", "arguments": {"content": "deep", "context": deep}}}),
            '{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "remember", '
            '"arguments": {"content": "bad \\ud800 text"}}}',
            '{"jsonrpc": "2.0", "id": "\\udfff", "method": "tools/list"}',
            '{"jsonrpc": "2.0", "id": 5, "method": ' + "[" * 100_000 + "]" * 100_000 + "}",
            "this is not JSON",
        ]
        for n, line in enumerate(lines):
            send(line)
            got = answer()
            assert "error" in got and got["error"]["code"] in (-32600, -32700), got
            if n < 2:
                assert got["id"] == n + 2
        send(json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}))
        assert answer()["id"] == 9  # the server carries on
    finally:
        processes.stop(proc)
