"""Running the proxy: the brains it asks, the app, uvicorn on 127.0.0.1."""

from __future__ import annotations

import os
from pathlib import Path

import uvicorn

from ..client import AsyncClient
from .app import ProxyConfig, build_app
from .memory import Brains


def brains_for(vault: str | None, global_only: bool, home: str | None, cwd: Path | None = None) -> Brains:
    """The project vault (the named one, or the one found from the working directory) and the global brain."""
    global_brain = AsyncClient(global_=True, home=home)
    if global_only:
        return Brains(None, global_brain)
    project = AsyncClient(vault=vault, home=home, cwd=cwd)
    # No project vault here: the global brain alone.
    return Brains(project if project.vault_path is not None else None, global_brain)


def serve(config: ProxyConfig, brains: Brains) -> None:
    app = build_app(config, brains)
    # Access lines name method, path and status only; headers (and so the key) are never logged.
    uvicorn.run(app, host="127.0.0.1", port=config.port, log_level=os.environ.get("HEBBS_PROXY_LOG", "info"),
                loop="asyncio", lifespan="on")

