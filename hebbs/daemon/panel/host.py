"""What the panel needs of the daemon and of its own service, as Protocols: no module of the panel
imports the daemon's server (or the service that starts the panel), so neither imports in a circle."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from hebbs.protocol import Request


class DaemonHost(Protocol):
    """hebbs.daemon.server.Daemon, as far as the panel uses it."""

    home: Path
    pool: Any  # hebbs.daemon.vaults.VaultPool
    handlers: Any  # hebbs.daemon.handlers.Handlers
    change_listeners: list[Callable[[Request], None]]


class PanelHost(Protocol):
    """hebbs.daemon.panel.service.PanelService, as far as the routes use it."""

    home: Path
    token: str
    codes: Any  # hebbs.daemon.panel.security.OneTimeCodes
    sessions: Any  # hebbs.daemon.panel.sessions.Sessions
    port: int | None
    inflight: int
    data: Any  # hebbs.daemon.panel.data.PanelData
    vaults: Any  # hebbs.daemon.panel.service.KnownVaults
    feed: Any  # hebbs.daemon.panel.changes.ChangeFeed
