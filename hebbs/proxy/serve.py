"""Running the proxy: the brains it asks, the app, uvicorn on 127.0.0.1."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import uvicorn

from ..client import AsyncClient
from ..fsutil import atomic_write
from ..paths import ensure_home, hebbs_home
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


TOKEN_FILE = "proxy.token"


def client_token(home: str | None) -> tuple[str, Path, bool]:
    """The key clients give the proxy, its file ($HEBBS_HOME/proxy.token, mode 0600) and whether it
    was made now. It lasts until the file is removed, so a client configured once keeps working."""
    path = ensure_home(hebbs_home(home)) / TOKEN_FILE
    try:
        token = path.read_text(encoding="utf-8").strip()
        if token:
            if path.stat().st_mode & 0o077:
                os.chmod(path, 0o600)
            return token, path, False
    except FileNotFoundError:
        pass
    token = "hebbs-" + secrets.token_urlsafe(32)
    atomic_write(path, token.encode() + b"\n", mode=0o600)
    return token, path, True


def serve(config: ProxyConfig, brains: Brains) -> None:
    app = build_app(config, brains)
    # Access lines name method, path and status only; headers (and so the key) are never logged.
    uvicorn.run(app, host="127.0.0.1", port=config.port, log_level=os.environ.get("HEBBS_PROXY_LOG", "info"),
                loop="asyncio", lifespan="on")

