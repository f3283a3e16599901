"""Every process a test starts goes through here: it gets default signal handling, and it is stopped
whatever the test's outcome.

A shell that runs pytest under `nohup ... &` or `trap "" INT` hands SIGINT down as ignored, and an
ignored signal stays ignored across exec: a child that is sent Ctrl-C would then carry on, the test
would wait for it and time out, and the child would be left running. So each child resets the
signals a test may send to their defaults before it runs (`preexec_fn=default_signals`).
tests/test_architecture.py checks that every subprocess call in tests/ passes it.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT)

# Every child popen() started, so conftest's fixture can stop what a test left running.
_children: list[subprocess.Popen] = []


def default_signals() -> None:
    """preexec_fn for every child a test starts: the signals a test sends do what they do by default
    (a Python child then turns SIGINT into KeyboardInterrupt, as under an interactive shell)."""
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_DFL)


def popen(args: Sequence[str], **kwargs: Any) -> subprocess.Popen:
    kwargs.setdefault("preexec_fn", default_signals)
    proc = subprocess.Popen(args, **kwargs)
    _children.append(proc)
    return proc


def run(args: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess:
    kwargs.setdefault("preexec_fn", default_signals)
    return subprocess.run(args, **kwargs)


def stop(proc: subprocess.Popen, timeout: float = 30.0) -> None:
    """Make sure proc is gone: killed if it still runs, and reaped, so no test leaves one behind."""
    if proc.poll() is None:
        proc.kill()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def running() -> set[int]:
    """The pids of the children started here that still run."""
    return {proc.pid for proc in _children if proc.poll() is None}


def stop_all(keep: set[int] = frozenset()) -> list[int]:
    """Stop every child still running except those in keep; returns the pids it had to stop."""
    stopped = []
    for proc in list(_children):
        if proc.pid in keep:
            continue
        if proc.poll() is None:
            stopped.append(proc.pid)
        stop(proc)
        _children.remove(proc)
    return stopped


@contextmanager
def started(args: Sequence[str], **kwargs: Any) -> Iterator[subprocess.Popen]:
    """A child for the length of a with-block; whatever happens inside, it is stopped at the end."""
    proc = popen(args, **kwargs)
    try:
        yield proc
    finally:
        stop(proc)
