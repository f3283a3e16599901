"""`hebbs daemon status|start|stop|logs`."""

from __future__ import annotations

import argparse
import os
import signal
import time
from collections import deque
from pathlib import Path
from typing import Any

import msgspec

from hebbs.client import Client, start_daemon
from hebbs.daemon.limits import check_seconds
from hebbs.errors import InvalidInput
from hebbs.paths import hebbs_home, log_path
from hebbs.protocol import DaemonBusy, DaemonUnavailable

from . import output

STOP_WAIT = 15.0


def run(args: argparse.Namespace) -> int:
    home = hebbs_home(args.home)
    json_mode = args.format == "json"
    action = args.action
    if action == "logs":
        if args.lines < 1:
            raise InvalidInput(f"--lines must be 1 or more, got {args.lines}")
        return _logs(home, args.lines, json_mode)
    probe = Client(global_=True, home=home, autostart=False)
    if action == "status":
        try:
            status = probe.status(vault=False)
        except DaemonBusy as exc:
            if json_mode:
                output.emit_json({"running": True, "busy": True})
            else:
                print(f"running, but refusing new connections: {exc}")
            return 0
        except DaemonUnavailable:
            if json_mode:
                output.emit_json({"running": False})
            else:
                print(f"no daemon running for {home}")
            return output.EXIT_NO_DAEMON
        if json_mode:
            output.emit_json({"running": True, **_builtins(status)})
        else:
            print(f"running: pid {status.pid}, up {status.uptime_s:.0f}s, {status.requests} requests, "
                  f"model {status.model or '(loading)'}")
            print(f"socket {status.socket}; stops after {status.idle_timeout_s:.0f}s idle, "
                  f"closes vaults after {status.vault_idle_timeout_s:.0f}s")
            print(f"connections {status.connections} of at most {status.max_connections}"
                  f" ({status.refused_busy} refused as busy since the start)")
            if status.panel is not None:
                print(f"panel {status.panel.url}  (Memory Palace; the address carries this daemon's token)")
            for vault in status.open_vaults:
                print(f"  open  {vault.path}  (idle {vault.idle_s:.0f}s{', indexing' if vault.indexing else ''})")
        return 0
    if action == "start":
        for flag, value in (("--idle-timeout", args.idle_timeout), ("--vault-idle-timeout", args.vault_idle_timeout)):
            try:
                if value is not None:
                    check_seconds(value, flag)
            except ValueError as exc:
                raise InvalidInput(str(exc)) from None
        started = start_daemon(home, idle_timeout=args.idle_timeout, vault_idle_timeout=args.vault_idle_timeout)
        pid = probe.ping().pid
        if json_mode:
            output.emit_json({"started": started, "pid": pid})
        else:
            print(f"{'started' if started else 'already running'}: pid {pid}")
        return 0
    # stop
    try:
        pid = probe.shutdown().pid
    except DaemonUnavailable:
        if json_mode:
            output.emit_json({"stopped": False, "pid": None})
        else:
            print("no daemon running")
        return 0
    finally:
        probe.close()
    stopped = _wait_gone(pid)
    if json_mode:
        output.emit_json({"stopped": stopped, "pid": pid})
    else:
        print(f"stopped pid {pid}" if stopped else f"pid {pid} did not stop within {STOP_WAIT:.0f}s")
    return 0 if stopped else 1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # The daemon is detached, so init reaps it: until then an exited daemon lingers as a zombie.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def _wait_gone(pid: int) -> bool:
    deadline = time.monotonic() + STOP_WAIT
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    if _alive(pid):
        os.kill(pid, signal.SIGTERM)  # asked politely and it did not go: it is ours, so insist
        time.sleep(1.0)
    return not _alive(pid)


def _logs(home: Path, lines: int, json_mode: bool) -> int:
    path = log_path(home)
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            tail = list(deque(f, maxlen=lines))
    except FileNotFoundError:
        tail = []
    if json_mode:
        output.emit_json({"log": str(path), "lines": [line.rstrip("\n") for line in tail]})
    else:
        print("".join(tail), end="")
    return 0


def _builtins(status: object) -> dict[str, Any]:
    return msgspec.to_builtins(status)
