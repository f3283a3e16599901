"""Idempotency keys the SDK gives the memories a remember stores, unless the caller gave one.

A write whose reply never came (the daemon died after its commit, the connection broke) has an
unknown outcome: sent again without a key, it is stored twice. With a key, the daemon returns the
memory already stored under it instead (store/idempotency.py; a key is kept as long as its memory).
So every memory the SDK sends to be remembered carries a key, which makes a remember safe to send
again:

- the client sends it again itself, once, when the reply was lost (reconnecting, and starting the
  daemon again unless autostart is off);
- a client remembers the keys of a call whose outcome stayed unknown, and the same call made again
  on it (the same arguments, the same vault) reuses them;
- the DaemonUnavailable raised carries them (`.keys`, one per memory in order), for a retry from
  elsewhere (another process: `remember(..., key=...)`, or items with "key").

Like the rest of the SDK, this module must not import numpy, the model or the engine.
"""

from __future__ import annotations

import hashlib
import uuid
from collections import OrderedDict
from typing import Any

import msgspec

from .protocol import DaemonUnavailable, Remember, _Command

# Keys the SDK made start so, which tells them from a caller's in an export.
SDK_KEY_PREFIX = "sdk-"
# Calls with an unknown outcome a client keeps the keys of (the oldest is dropped past this).
UNSETTLED_KEPT = 64


def new_key() -> str:
    return SDK_KEY_PREFIX + uuid.uuid4().hex


def keyed(command: _Command) -> tuple[_Command, list[str | None]]:
    """The command with a new key for every memory it stores that has none, and per memory the key
    it goes with; (command, []) for a command that stores no memory."""
    if not isinstance(command, Remember):
        return command, []
    if command.items is not None:
        items = [item if item.key is not None else msgspec.structs.replace(item, key=new_key())
                 for item in command.items]
        return msgspec.structs.replace(command, items=items), [item.key for item in items]
    if command.content is None:
        return command, []  # refused by the daemon: nothing to key
    key = command.key if command.key is not None else new_key()
    return msgspec.structs.replace(command, key=key), [key]


def safe_to_resend(command: _Command) -> bool:
    """Whether sending command again cannot change more than sending it once did."""
    if command.spec.retryable:
        return True
    if not isinstance(command, Remember):
        return False
    if command.items is not None:
        return all(item.key is not None for item in command.items)
    return command.key is not None


def own_results(result: Any, given: _Command, sent: _Command) -> Any:
    """What remember returned, with `existing` cleared where the key was the SDK's: a resent call
    finds the memory its first sending stored, which the caller did not store before."""
    if not isinstance(sent, Remember) or not isinstance(given, Remember):
        return result
    if given.items is None:
        return _fresh(result) if given.key is None and getattr(result, "existing", False) else result
    if not isinstance(result, list):
        return result
    return [_fresh(memory) if item.key is None and getattr(memory, "existing", False) else memory
            for item, memory in zip(given.items, result)]


def _fresh(memory: Any) -> Any:
    return msgspec.structs.replace(memory, existing=False)


class Unsettled:
    """A client's calls whose outcome stayed unknown: their keyed commands, by what was asked."""

    def __init__(self) -> None:
        self._calls: OrderedDict[str, _Command] = OrderedDict()

    @staticmethod
    def fingerprint(command: _Command, vault: Any) -> str:
        # repr, not JSON: a text the wire cannot carry is refused later, as InvalidInput, not here.
        return hashlib.sha256(repr((vault, command)).encode("utf-8", "surrogatepass")).hexdigest()

    def prepare(self, command: _Command, vault: Any) -> tuple[str, _Command, list[str | None]]:
        """(the call's fingerprint, the command to send, its keys): the keys of the same call made
        earlier with an unknown outcome, else new ones."""
        if not isinstance(command, Remember):
            return "", command, []
        fingerprint = self.fingerprint(command, vault)
        earlier = self._calls.get(fingerprint)
        sent, keys = keyed(command) if earlier is None else (earlier, keyed(earlier)[1])
        return fingerprint, sent, keys

    def settled(self, fingerprint: str) -> None:
        self._calls.pop(fingerprint, None)

    def unknown(self, fingerprint: str, sent: _Command, keys: list[str | None], exc: DaemonUnavailable) -> None:
        """Keep a call whose reply never came (and tell the caller its keys, on the error)."""
        if not fingerprint:
            return
        self._calls[fingerprint] = sent
        self._calls.move_to_end(fingerprint)
        while len(self._calls) > UNSETTLED_KEPT:
            self._calls.popitem(last=False)
        exc.keys = list(keys)
        exc.args = (f"{exc}; {retry_hint(keys)}",)


def retry_hint(keys: list[str | None]) -> str:
    if len(keys) == 1:
        return (f"it may have been stored: make the same call again on this client, or pass key={keys[0]!r}, "
                "to store it at most once")
    return (f"they may have been stored: make the same call again on this client, or give each item its key "
            f"from this error's .keys ({len(keys)}), to store each at most once")
