"""Real daemons for the daemon, client, CLI and skill tests (a pytest plugin: `pytest_plugins = [...]`).

Homes live directly under /tmp with short names: a Unix socket path must stay under ~107 bytes,
which pytest's tmp_path does not promise. One daemon is shared by every test that does not need
a daemon of its own; tests of the daemon's life cycle start their own homes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from hebbs.client import Client, start_daemon
from hebbs.paths import init_vault, pid_path, socket_path
from hebbs.protocol import DaemonUnavailable

import processes
from scratch import short_tmp  # noqa: F401 - the tests' way to a folder, through this plugin too

# conftest.py sets this for the whole session; the fallback keeps this module usable on its own
# (not made when it is set: every test process left an empty folder in /tmp).
if "HEBBS_MODEL_CACHE" not in os.environ:
    os.environ["HEBBS_MODEL_CACHE"] = tempfile.mkdtemp(prefix="hbmodels")

WAIT = 60.0


def wait_until(predicate: Any, timeout: float = WAIT, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def free_port() -> int:
    """A local TCP port nothing listens on now: free only when chosen, another process may bind it first."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive(pid: int) -> bool:
    """Running, not merely waiting to be reaped (a detached daemon's zombie lingers until init reaps it)."""
    try:
        os.kill(pid, 0)
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (ProcessLookupError, FileNotFoundError):
        return False
    return state != "Z"


class DaemonHome:
    """A HEBBS_HOME of its own, and the daemon serving it."""

    # Reachable from the fixtures, so test modules need not import this plugin module themselves.
    alive = staticmethod(alive)
    wait_until = staticmethod(wait_until)

    def __init__(self, idle_timeout: float = 0, vault_idle_timeout: float = 300) -> None:
        self.home = short_tmp()
        self.idle_timeout = idle_timeout
        self.vault_idle_timeout = vault_idle_timeout
        self.pids: set[int] = set()

    def start(self) -> int:
        start_daemon(self.home, idle_timeout=self.idle_timeout, vault_idle_timeout=self.vault_idle_timeout)
        return self.pid()

    def pid(self) -> int:
        pid = self.client(global_=True).ping().pid
        self.pids.add(pid)
        return pid

    def client(self, vault: os.PathLike | str | None = None, global_: bool = False, **kwargs: Any) -> Client:
        return Client(vault=vault, global_=global_ and vault is None, home=self.home, **kwargs)

    def project(self) -> Path:
        """A fresh notes folder with an initialized .hebbs vault."""
        root = short_tmp("hbp")
        init_vault(root, self.home)
        return root

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env["HEBBS_HOME"] = str(self.home)
        env.update(extra)
        return env

    def hebbs(self, *args: str, cwd: os.PathLike | str | None = None, stdin: str | None = None,
              check: bool = True, timeout: float = WAIT) -> subprocess.CompletedProcess[str]:
        """Run the real `hebbs` console script against this home (a guard against a hang, not a
        timing assertion: a command that embeds many sections gives itself longer on a loaded machine)."""
        done = processes.run([str(Path(sys.executable).with_name("hebbs")), *args], cwd=cwd, env=self.env(),
                              input=stdin, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"hebbs {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done

    def palace(self, *args: str) -> dict[str, Any]:
        """`hebbs palace --port P --no-browser --format json` on a port nothing listens on, and its answer.
        A port found free is free only then: when another process binds it first, another is tried."""
        for _ in range(5):
            done = self.hebbs("palace", "--port", str(free_port()), "--no-browser", "--format", "json", *args, check=False)
            if done.returncode == 0:
                return json.loads(done.stdout)
            if "already in use" not in done.stdout + done.stderr:
                break
        raise AssertionError(f"hebbs palace exited {done.returncode}:\n{done.stdout}\n{done.stderr}")

    def stop(self) -> None:
        try:
            Client(global_=True, home=self.home, autostart=False).shutdown()
        except (DaemonUnavailable, OSError):
            pass
        if pid_path(self.home).exists():
            try:
                self.pids.add(int(pid_path(self.home).read_text()))
            except ValueError:
                pass
        for pid in self.pids:
            deadline = time.monotonic() + 20
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if alive(pid):
                os.kill(pid, signal.SIGKILL)  # a daemon this test started and that would not stop

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.home, ignore_errors=True)

    @property
    def socket(self) -> Path:
        return socket_path(self.home)


@pytest.fixture(scope="session")
def shared_daemon() -> Iterator[DaemonHome]:
    """One daemon for every test that only needs a daemon, not a fresh one (it never idles out)."""
    daemon = DaemonHome(idle_timeout=0)
    daemon.start()
    yield daemon
    daemon.cleanup()


@pytest.fixture
def own_home() -> Iterator[DaemonHome]:
    """A home with no daemon yet, for life-cycle tests; whatever daemon it gets is stopped afterwards."""
    daemon = DaemonHome()
    yield daemon
    daemon.cleanup()


@pytest.fixture
def make_daemon() -> Iterator[Callable[..., DaemonHome]]:
    """DaemonHome(idle_timeout=..., vault_idle_timeout=...) for tests that need their own timeouts."""
    made: list[DaemonHome] = []

    def make(**kwargs: Any) -> DaemonHome:
        made.append(DaemonHome(**kwargs))
        return made[-1]

    yield make
    for daemon in made:
        daemon.cleanup()


@pytest.fixture
def project(shared_daemon: DaemonHome) -> Iterator[Path]:
    root = shared_daemon.project()
    yield root
    shutil.rmtree(root, ignore_errors=True)


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@contextmanager
def chromium(*extra_args: str) -> Iterator[Any]:
    """Debian's Chromium, driven by Playwright (never a browser Playwright downloads), closed afterwards."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium); "
                    "the browser tests never skip")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, *extra_args])
        try:
            yield browser
        finally:
            browser.close()
