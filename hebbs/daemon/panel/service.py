"""The panel's life inside the daemon: its port, its uvicorn server task, its live-update feed."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hebbs.fsutil import atomic_write
from hebbs.paths import is_vault_dir
from hebbs.protocol import PanelState

from .changes import ChangeFeed
from .data import PanelData
from .host import DaemonHost
from .ports import bind_local
from .security import CODE_FIELD, OneTimeCodes, new_token, remove_token
from .sessions import Sessions


log = logging.getLogger("hebbs.daemon.panel")
KNOWN_VAULTS_FILE = "panel-vaults.json"
STOP_SECONDS = 3.0
# How often open pages are told of an index run that started (see PanelService._watch_index).
INDEX_WATCH_SECONDS = 1.0


def autostart_port(home: Path) -> int | None:
    """The port to serve the panel on when the daemon starts, or None when it should not be.

    $HEBBS_PANEL=off turns it off (the test suite does, so its many daemons leave 6381 alone);
    $HEBBS_PANEL_PORT picks the port; otherwise [panel] in $HEBBS_HOME/config.toml decides.
    """
    if os.environ.get("HEBBS_PANEL", "").strip().lower() in ("off", "0", "false", "no"):
        return None
    from hebbs.config import load_config

    panel = load_config(home).panel
    if not panel.enabled:
        return None
    return configured_port(home, panel.port)


def configured_port(home: Path, default: int | None = None) -> int:
    raw = os.environ.get("HEBBS_PANEL_PORT")
    if raw:
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"HEBBS_PANEL_PORT must be a port number, got {raw!r}") from None
    if default is not None:
        return default
    from hebbs.config import load_config

    return load_config(home).panel.port


class KnownVaults:
    """The vaults the panel shows: the global brain, and every project vault the daemon has been asked
    about (remembered across restarts in $HEBBS_HOME/panel-vaults.json, dropped once they are gone)."""

    def __init__(self, home: Path, daemon: DaemonHost) -> None:
        self.home = home.resolve()
        self.daemon = daemon
        self._file = home / KNOWN_VAULTS_FILE
        self._saved: list[str] = self._load()

    def _load(self) -> list[str]:
        try:
            data = json.loads(self._file.read_text())
            return [p for p in data if isinstance(p, str)] if isinstance(data, list) else []
        except (OSError, ValueError):
            return []

    def paths(self) -> list[str]:
        seen = [str(self.home)] + self._saved + [str(slot.path) for slot in self.daemon.pool.known()]
        current = [p for p in dict.fromkeys(seen) if is_vault_dir(Path(p), self.home)]
        projects = current[1:]
        if projects != self._saved:
            self._saved = projects
            try:
                atomic_write(self._file, json.dumps(projects, indent=1).encode(), mode=0o600)
            except OSError:
                log.exception("could not save the panel's list of vaults")
        return current

    def check(self, vault: str | None) -> str:
        """The vault a page asks for, if the daemon knows it; the global brain when none is named."""
        from hebbs.errors import NotFound

        if not vault:
            return str(self.home)
        if vault not in self.paths():
            raise NotFound(f"the daemon knows no vault at {vault}")
        return vault


def _sessions(home: Path) -> Sessions:
    from hebbs.config import load_config

    panel = load_config(home).panel
    return Sessions(idle_seconds=panel.session_idle_seconds, max_seconds=panel.session_max_seconds)


class _Server:
    """uvicorn's Server without its signal handling: the daemon's loop owns SIGTERM/SIGINT."""

    @staticmethod
    def make(app: Any) -> Any:
        import uvicorn

        class Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:
                yield

        config = uvicorn.Config(app, lifespan="off", log_config=None, access_log=False, server_header=False,
                                proxy_headers=False, timeout_graceful_shutdown=STOP_SECONDS, ws="none")
        return Server(config)


class PanelService:
    def __init__(self, daemon: DaemonHost) -> None:
        self.daemon = daemon
        self.home = daemon.home
        self.token = new_token(daemon.home)
        self.codes = OneTimeCodes()
        self.sessions = _sessions(daemon.home)
        self.port: int | None = None
        self.feed = ChangeFeed()
        self.vaults = KnownVaults(daemon.home, daemon)
        # One for the daemon's life, whichever port the pages are served on: its cache follows changes.
        self.data = PanelData(daemon)
        self.inflight = 0
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        daemon.change_listeners.append(self.feed.on_request)

    def active(self) -> bool:
        return self.inflight > 0 or self.feed.clients > 0

    def serving(self) -> PanelState | None:
        """Where the panel is served now, or None when it is not."""
        if self._task is None or self._task.done() or self.port is None:
            return None
        return self.state()

    def state(self, opener: bool = False) -> PanelState:
        """Where the panel is; with `opener`, also a one-time address for a browser's command line."""
        assert self.port is not None
        base = f"http://127.0.0.1:{self.port}/"
        return PanelState(port=self.port, url=f"{base}?token={self.token}", pid=os.getpid(),
                          opener=f"{base}?{CODE_FIELD}={self.codes.issue()}" if opener else None)

    async def ensure(self, port: int | None) -> PanelState:
        async with self._lock:
            if self._task is not None and not self._task.done() and port in (None, self.port):
                return self.state(opener=True)
            # Bind first: a taken port leaves the panel served where it was.
            wanted = port if port is not None else configured_port(self.home)
            sock = bind_local(wanted)
            await self._stop_server()
            await self._serve(sock, wanted)
            return self.state(opener=True)

    async def serve(self, port: int) -> None:
        async with self._lock:
            await self._serve(bind_local(port), port)

    async def _serve(self, sock: Any, port: int) -> None:
        # Starlette and uvicorn take a few hundred ms to import: not on the loop that answers the socket.
        await asyncio.to_thread(importlib.import_module, f"{__package__}.app")
        from .app import build_app

        self.port = port
        self._server = _Server.make(build_app(self))
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started and not self._task.done():
            await asyncio.sleep(0.01)
        if self._task.done():
            self._task.result()  # raises what stopped it
        self._watch = asyncio.create_task(self._watch_index())
        log.info("panel on http://127.0.0.1:%d/", port)

    async def _watch_index(self) -> None:
        """The change listeners hear an index run only once it is answered, at its end: an open page
        learns that one started (and then follows its progress) from this watch over the pool."""
        running: set[str] = set()
        while True:
            await asyncio.sleep(INDEX_WATCH_SECONDS)
            if not self.feed.clients:
                continue
            now = {str(slot.path) for slot in self.daemon.pool.known() if slot.indexing}
            for vault in now - running:
                self.feed.publish({"vault": vault, "command": "index_started"})
            running = now

    async def _stop_server(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        if self._task is None:
            return
        self.feed.close()  # event streams end, so the server's graceful stop does not wait on them
        self._server.should_exit = True
        try:
            await asyncio.wait_for(self._task, STOP_SECONDS * 2)
        except Exception:
            log.exception("stopping the panel server")
        self._task = None
        self._server = None

    async def stop(self) -> None:
        async with self._lock:
            await self._stop_server()
        remove_token(self.home)
