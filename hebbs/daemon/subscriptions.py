"""Subscriptions: a connection subscribes, then feeds text; matches not sent before go out as progress
frames under the subscribe request's id. A mixin of handlers.Handlers, which gives it the pool.

The texts a subscription was fed are its cues: after each write to its vault, a memory stored since
the subscription opened that one of them finds (as a feed would) is pushed on the open stream too.
The check runs on the loop after the write was answered, never in the writer's way; what waits to
be sent is bounded per subscription (the oldest go, and the next push says how many).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Iterable
from typing import Any, Protocol

from hebbs import validate
from hebbs.errors import HebbsError, InvalidInput, NotFound
from hebbs.protocol import Close, Closed, Feed, Fed, Request, Subscribe, Subscribed, SubscriptionPush
from hebbs.schema import RecallResult

from .vaults import VaultPool, VaultSlot

log = logging.getLogger("hebbs.daemon")
FEED_TOP_K = 20
# The latest texts a subscription was fed, each a cue a later memory is matched against.
CUES_KEPT = 8
# Matches held for a client that is not reading its pushes; beyond it the oldest are dropped.
PUSH_QUEUE = 100


class Subscription:
    """What one subscribe asked for, and which memories it has already been sent."""

    def __init__(self, subscription_id: str, request_id: Any, slot: VaultSlot, entity_id: str | None,
                 threshold: float, origin: dict[str, str | None]) -> None:
        self.id = subscription_id
        self.request_id = request_id
        self.slot = slot
        self.entity_id = entity_id
        self.threshold = threshold
        self.origin = origin  # recall's author / agent / session filters
        self.pushed: set[str] = set()
        self.opened_at = time.time_ns() // 1000  # memories created since are "stored later"
        self.cues: deque[str] = deque(maxlen=CUES_KEPT)
        # Matches waiting for the connection's thread to send them (filled on the loop).
        self._waiting: deque[RecallResult] = deque()
        self._dropped = 0
        self._lock = threading.Lock()
        # Whether a check after a write runs, and whether another write came meanwhile.
        self.checking = False
        self.dirty = False

    def hold(self, matches: Iterable[RecallResult]) -> None:
        with self._lock:
            for match in matches:
                if len(self._waiting) >= PUSH_QUEUE:
                    self._waiting.popleft()
                    self._dropped += 1
                self._waiting.append(match)

    def take(self) -> SubscriptionPush | None:
        """What waits to be pushed, as one push; None when nothing does."""
        with self._lock:
            if not self._waiting:
                return None
            push = SubscriptionPush(subscription_id=self.id, matches=list(self._waiting), dropped=self._dropped)
            self._waiting.clear()
            self._dropped = 0
        return push


class Connection(Protocol):
    """The client a request came from (server.Connection): where progress frames and pushes go."""

    subscriptions: dict[str, Subscription]

    async def progress(self, request_id: Any, data: Any) -> None: ...

    def open_pushes(self) -> None: ...

    def wake(self) -> None: ...


class SubscriptionHandlers:
    pool: VaultPool
    # The checks after a write that run (held so that none is collected half-way).
    _push_checks: set["asyncio.Task[None]"]

    async def _subscribe(self, conn: Connection, request: Request, command: Subscribe) -> Subscribed:
        slot = self.pool.slot(request.vault_path)
        threshold = validate.unit_float(command.confidence_threshold, "confidence_threshold")
        entity_id = validate.entity(command.entity_id)
        origin = {"author": command.author, "agent": command.agent, "session": command.session}
        subscription = Subscription(secrets.token_hex(6), request.id, slot, entity_id, threshold, origin)
        conn.open_pushes()
        conn.subscriptions[subscription.id] = subscription
        return Subscribed(subscription_id=subscription.id, entity_id=entity_id, confidence_threshold=threshold)

    async def _feed(self, conn: Connection, request: Request, command: Feed) -> Fed:
        text = validate.content(command.text, "text")
        if command.subscription_id is not None:
            if command.subscription_id not in conn.subscriptions:
                raise NotFound(f"no subscription {command.subscription_id} on this connection")
            subscriptions = [conn.subscriptions[command.subscription_id]]
        else:
            subscriptions = list(conn.subscriptions.values())
        if not subscriptions:
            raise InvalidInput("feed needs a subscription on this connection: send subscribe first")
        pushed = 0
        for sub in subscriptions:
            sub.cues.append(text)
            fresh = await self._matches(sub, text)
            if fresh:
                sub.pushed.update(r.memory.id for r in fresh)
                await conn.progress(sub.request_id, SubscriptionPush(subscription_id=sub.id, matches=fresh))
                pushed += len(fresh)
        return Fed(pushed=pushed)

    async def _matches(self, sub: Subscription, text: str, since: int = 0) -> list[RecallResult]:
        """What a feed of text finds for sub that reaches its threshold and was not pushed to it before
        (created at `since` or later)."""
        async with self.pool.use(sub.slot) as engine:
            if engine.vault.store.shared:
                # A vault other daemons write to: what they acknowledged before this feed is matched
                # too, not only once this daemon's listener has caught up (within a second).
                await self.pool.run(engine.vault.catch_up)
            found = await self.pool.run(engine.recall, text, strategies=["similarity"], top_k=FEED_TOP_K,
                                        entity_id=sub.entity_id, reinforce=False, **sub.origin)
        return [r for r in found.results if (r.confidence or 0.0) >= sub.threshold
                and r.memory.id not in sub.pushed and r.memory.created_at >= since]

    def push_after_write(self, request: Request, connections: Iterable[Any]) -> None:
        """A change listener (on the loop): each open subscription on the written vault checks its cues
        again, one check at a time per subscription (a write during a check makes it run once more)."""
        if not request.command.spec.writes or not request.vault_path:
            return
        try:
            slot = self.pool.slot(request.vault_path)
        except HebbsError:
            return
        for conn in list(connections):
            for sub in list(conn.subscriptions.values()):
                if sub.slot is not slot or not sub.cues:
                    continue
                if sub.checking:
                    sub.dirty = True
                    continue
                sub.checking = True
                task = asyncio.get_running_loop().create_task(self._check_after_write(conn, sub))
                self._push_checks.add(task)
                task.add_done_callback(self._push_checks.discard)

    async def _check_after_write(self, conn: Connection, sub: Subscription) -> None:
        try:
            while True:
                sub.dirty = False
                for cue in list(sub.cues):
                    fresh = await self._matches(sub, cue, since=sub.opened_at)
                    if fresh:
                        sub.pushed.update(r.memory.id for r in fresh)
                        sub.hold(fresh)
                        conn.wake()
                if not sub.dirty:
                    return
        except HebbsError as exc:
            log.warning("a subscription's check after a write failed: %s", exc)
        except Exception:
            log.exception("a subscription's check after a write failed")
        finally:
            sub.checking = False

    async def _close(self, conn: Connection, request: Request, command: Close) -> Closed:
        if command.subscription_id is None:
            closed = len(conn.subscriptions)
            conn.subscriptions.clear()
            return Closed(closed=closed)
        if conn.subscriptions.pop(command.subscription_id, None) is None:
            raise NotFound(f"no subscription {command.subscription_id} on this connection")
        return Closed(closed=1)
