"""The Memory Palace: a web panel, served by the daemon on 127.0.0.1, where a person sees and steers memory.

It runs as a uvicorn server inside the daemon's own asyncio loop (docs/palace.md says why) and reads
and writes only through the daemon's Handlers, the code the socket protocol runs: the panel adds no
second path to the data. Public API: PanelService (started by the daemon) and autostart_port.
"""

from __future__ import annotations

from .service import PanelService, autostart_port

__all__ = ["PanelService", "autostart_port"]
