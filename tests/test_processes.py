"""The children tests start: default signal handling whatever the launching shell ignored, and none
left running after its test (tests/processes.py, conftest.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import processes


def _ignored_signals(pid: int) -> int:
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("SigIgn:"))
    return int(line.split()[1], 16)


def test_a_child_gets_default_signals_when_the_runner_ignores_them() -> None:
    """Tried: this process ignores SIGINT and SIGTERM, as pytest does under `trap "" INT` or `nohup`,
    and starts a child through processes.popen: the child ignores neither; SIGINT stops it."""
    before = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with processes.started([sys.executable, "-c", "import sys, time; print(flush=True); time.sleep(120)"],
                               stdout=subprocess.PIPE, text=True) as child:
            child.stdout.readline()  # the interpreter is up and its handlers are set
            mask = _ignored_signals(child.pid)
            assert not mask & (1 << (signal.SIGINT - 1)) and not mask & (1 << (signal.SIGTERM - 1))
            child.send_signal(signal.SIGINT)
            assert child.wait(timeout=60) != 0
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def test_a_child_left_running_is_stopped_with_its_test() -> None:
    """Tried: a child started and forgotten; conftest's fixture stops every child not started before
    the test (checked here on the helper it uses)."""
    before = processes.running()
    child = processes.popen([sys.executable, "-c", "import time; time.sleep(120)"])
    assert child.pid in processes.running()
    assert processes.stop_all(keep=before) == [child.pid]
    assert child.poll() is not None
