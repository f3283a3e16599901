"""How much the daemon takes from its clients: connections, and how long one may sit idle or stall.

Every connection holds a descriptor. Without a cap, 400 idle connections against a limit of 256
left the daemon unable to accept anyone (and logging the failure 5,000 times a second). Now the
daemon raises its soft descriptor limit at start where the hard limit allows, serves at most
max_connections clients (for the next one it closes the connection idle longest; only when every
connection is busy does the newcomer get a BUSY error frame and is closed: 256 idle connections
used to lock out every new client for the idle timeout), closes a connection that has sent nothing
for connection_idle_timeout (unless it holds a subscription), and closes one that leaves a frame
half-sent, or its replies unread, for frame_timeout.
"""

from __future__ import annotations

import math
import os
import resource

import msgspec

DEFAULT_MAX_CONNECTIONS = 256
DEFAULT_CONNECTION_IDLE_TIMEOUT = 600.0
DEFAULT_FRAME_TIMEOUT = 30.0
# Descriptors kept for everything but client connections: vault files (RocksDB keeps some open per
# column family), the model, the log, the socket itself.
RESERVED_FDS = 200
WANTED_FDS = 65_536


def check_seconds(value: float, what: str) -> float:
    """A timeout in seconds, 0 or more: ValueError for a negative one, NaN or infinity (a NaN idle
    timeout made every status call fail for the daemon's life)."""
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{what} must be a number of seconds, 0 or more; got {value}")
    return value


class Limits(msgspec.Struct, kw_only=True, frozen=True):
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    # Seconds a connection may wait between requests; 0 = forever.
    connection_idle_timeout: float = DEFAULT_CONNECTION_IDLE_TIMEOUT
    # Seconds to finish sending a frame once it has begun, and for the client to take a reply.
    frame_timeout: float = DEFAULT_FRAME_TIMEOUT

    def __post_init__(self) -> None:
        if self.max_connections < 1:
            raise ValueError(f"max connections must be at least 1, got {self.max_connections}")
        if not (self.connection_idle_timeout >= 0 and self.frame_timeout > 0) \
                or not math.isfinite(self.connection_idle_timeout + self.frame_timeout):
            raise ValueError("the connection idle timeout must be at least 0 and the frame timeout above 0")

    def fitted(self, fd_limit: int) -> "Limits":
        """These limits with max_connections lowered to what fd_limit leaves after the reserve."""
        room = max(1, fd_limit - RESERVED_FDS)
        if self.max_connections <= room:
            return self
        return msgspec.structs.replace(self, max_connections=room)


def raise_fd_limit(wanted: int = WANTED_FDS) -> int:
    """Raise the soft RLIMIT_NOFILE towards wanted, as far as the hard limit allows; the soft limit after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass  # not allowed here: serve within the limit we have
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else wanted


def env_number(name: str, default: float, kind: type = float) -> float:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        return kind(raw)
    except ValueError:
        raise SystemExit(f"{name} must be a{'n integer' if kind is int else ' number'}, got {raw!r}") from None
