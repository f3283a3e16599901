"""The daemon's change notifications, as the panel's pages hear them (server-sent events)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hebbs.paths import VAULT_DIR
from hebbs.protocol import COMMAND_TYPES, Request

# Requests after which a page should show fresh data (memories, edges or contradictions changed), as
# their declarations say (hebbs.protocol, Spec.refreshes_panel).
CHANGE_COMMANDS = frozenset(tag for tag, cls in COMMAND_TYPES.items() if cls.spec.refreshes_panel)
# Requests after which a cached view may be stale: those, and every other write.
STALE_COMMANDS = CHANGE_COMMANDS | {tag for tag, cls in COMMAND_TYPES.items() if cls.spec.writes}


class ChangeFeed:
    """Fans the daemon's change notifications out to each open page (one queue per event stream)."""

    def __init__(self) -> None:
        self._queues: set[asyncio.Queue[dict[str, Any] | None]] = set()

    @property
    def clients(self) -> int:
        return len(self._queues)

    def on_request(self, request: Request) -> None:
        kind = request.command.tag()
        if not request.command.spec.refreshes_panel:
            return
        vault = request.vault_path
        notes = getattr(request.command, "path", None)  # index names its notes folder instead
        if notes:
            vault = str(Path(notes) / VAULT_DIR)
        # Pages name vaults by resolved path, as the daemon's pool does.
        self.publish({"vault": str(Path(vault).resolve()) if vault else None, "command": kind})

    def publish(self, event: dict[str, Any]) -> None:
        for queue in self._queues:
            if queue.qsize() < 100:  # a stalled page misses updates rather than growing a queue forever
                queue.put_nowait(event)

    @contextlib.contextmanager
    def listen(self) -> Iterator[asyncio.Queue[dict[str, Any] | None]]:
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._queues.add(queue)
        try:
            yield queue
        finally:
            self._queues.discard(queue)

    def close(self) -> None:
        for queue in self._queues:
            queue.put_nowait(None)
