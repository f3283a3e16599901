"""`hebbs daemon start|stop|logs` (`hebbs daemon status`: statuscmds.py)."""

from __future__ import annotations

import argparse
import os
import signal
import time
from collections import deque
from pathlib import Path

from hebbs.client import Client, start_daemon
from hebbs.daemon.limits import check_seconds
from hebbs.errors import InvalidInput
from hebbs.paths import hebbs_home, log_path
from hebbs.protocol import DaemonUnavailable

from . import output
from .declared import run_named
from .declared_actions import ACTIONS

STOP_WAIT = 15.0


def run(args: argparse.Namespace) -> int:
    home = hebbs_home(args.home)
    json_mode = args.format == "json"
    action = args.action
    if action == "logs":
        if args.lines < 1:
            raise InvalidInput(f"--lines must be 1 or more, got {args.lines}")
        return _logs(home, args.lines, json_mode)
    if action in ACTIONS["daemon"]:  # declared (`cli="daemon status"`): sent as its declaration says
        return run_named(args, f"daemon {action}")
    probe = Client(global_=True, home=home, autostart=False)
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

