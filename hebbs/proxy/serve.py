"""Running the proxy: the brains it asks, the app, uvicorn on 127.0.0.1."""

from __future__ import annotations

import os
from pathlib import Path

import uvicorn

from ..client import AsyncClient
from ..paths import VAULT_DIR, hebbs_home, kept_token
from .app import ProxyConfig, build_app
from .memory import Brains, ensure_exchanges, exchanges_root


def brains_for(vault: str | None, global_only: bool, home: str | None, cwd: Path | None = None, *,
               remember: bool = False, exchange_place: str = "after") -> Brains:
    """The project vault (the named one, or the one found from the working directory), the global brain,
    and the vault of remembered exchanges beside the first (made now when exchanges are remembered)."""
    global_brain = AsyncClient(global_=True, home=home)
    project = None if global_only else AsyncClient(vault=vault, home=home, cwd=cwd)
    if project is not None and project.vault_path is None:
        project = None  # no project vault here: the global brain alone
    beside = (project or global_brain).vault_path
    assert beside is not None
    exchanges = None
    if remember:
        exchanges = AsyncClient(vault=ensure_exchanges(beside, hebbs_home(home)), home=home)
    elif (exchanges_root(beside) / VAULT_DIR).is_dir():
        exchanges = AsyncClient(vault=exchanges_root(beside), home=home)
    return Brains(project, global_brain, exchanges, exchange_place)


TOKEN_FILE = "proxy.token"


def client_token(home: str | None) -> tuple[str, Path, bool]:
    """The key clients give the proxy, its file ($HEBBS_HOME/proxy.token, mode 0600) and whether it
    was made now. It lasts until the file is removed, so a client configured once keeps working."""
    return kept_token(hebbs_home(home), TOKEN_FILE)


def serve(config: ProxyConfig, brains: Brains) -> None:
    app = build_app(config, brains)
    # Access lines name method, path and status only; headers (and so the key) are never logged.
    uvicorn.run(app, host="127.0.0.1", port=config.port, log_level=os.environ.get("HEBBS_PROXY_LOG", "info"),
                loop="asyncio", lifespan="on")

