"""Subscriptions: a connection subscribes, then feeds text; matches not sent before go out as progress
frames under the subscribe request's id. A mixin of handlers.Handlers, which gives it the pool."""

from __future__ import annotations

import secrets
from typing import Any, Protocol

from hebbs import validate
from hebbs.errors import InvalidInput, NotFound
from hebbs.protocol import Close, Closed, Feed, Fed, Request, Subscribe, Subscribed, SubscriptionPush

from .vaults import VaultPool, VaultSlot

FEED_TOP_K = 20


class Subscription:
    """What one subscribe asked for, and which memories it has already been sent."""

    def __init__(self, subscription_id: str, request_id: Any, slot: VaultSlot, entity_id: str | None,
                 threshold: float) -> None:
        self.id = subscription_id
        self.request_id = request_id
        self.slot = slot
        self.entity_id = entity_id
        self.threshold = threshold
        self.pushed: set[str] = set()


class Connection(Protocol):
    """The client a request came from (server.Connection): where progress frames and pushes go."""

    subscriptions: dict[str, Subscription]

    async def progress(self, request_id: Any, data: Any) -> None: ...



class SubscriptionHandlers:
    pool: VaultPool

    async def _subscribe(self, conn: Connection, request: Request, command: Subscribe) -> Subscribed:
        slot = self.pool.slot(request.vault_path)
        threshold = validate.unit_float(command.confidence_threshold, "confidence_threshold")
        entity_id = validate.entity(command.entity_id)
        subscription = Subscription(secrets.token_hex(6), request.id, slot, entity_id, threshold)
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
            async with self.pool.use(sub.slot) as engine:
                if engine.vault.store.shared:
                    # A vault other daemons write to: what they acknowledged before this feed is matched
                    # too, not only once this daemon's listener has caught up (within a second).
                    await self.pool.run(engine.vault.catch_up)
                found = await self.pool.run(engine.recall, text, strategies=["similarity"], top_k=FEED_TOP_K,
                                            entity_id=sub.entity_id, reinforce=False)
            fresh = [r for r in found.results
                     if (r.confidence or 0.0) >= sub.threshold and r.memory.id not in sub.pushed]
            if fresh:
                sub.pushed.update(r.memory.id for r in fresh)
                await conn.progress(sub.request_id, SubscriptionPush(subscription_id=sub.id, matches=fresh))
                pushed += len(fresh)
        return Fed(pushed=pushed)

    async def _close(self, conn: Connection, request: Request, command: Close) -> Closed:
        if command.subscription_id is None:
            closed = len(conn.subscriptions)
            conn.subscriptions.clear()
            return Closed(closed=closed)
        if conn.subscriptions.pop(command.subscription_id, None) is None:
            raise NotFound(f"no subscription {command.subscription_id} on this connection")
        return Closed(closed=1)
