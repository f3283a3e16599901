"""Which local user holds the other end of a loopback connection to the panel.

Every local user can connect to 127.0.0.1, and a copy of the panel's cookie (cookies ignore ports, so a
server on another port the browser visits receives it) with forged browser headers would otherwise pass
for the browser. The kernel knows who owns the client's socket: Linux lists it, with its owner's uid, in
/proc/net/tcp. A connection from another user is refused whatever it carries.
"""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

__all__ = ["other_users_peer"]

TCP_TABLE = Path("/proc/net/tcp")  # the panel binds 127.0.0.1 only: IPv4


def other_users_peer(client: tuple[str, int] | None, server: tuple[str, int] | None) -> int | None:
    """The uid owning the client end of this connection when it is another user's (root aside: root can
    read $HEBBS_HOME anyway), else None. None too when the kernel does not say (no /proc)."""
    if not client or not server:
        return None
    uid = socket_owner(client, server)
    return uid if uid is not None and uid not in (os.geteuid(), 0) else None


def socket_owner(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    local, remote = _hex(client), _hex(server)
    if local is None or remote is None:
        return None
    try:
        lines = TCP_TABLE.read_text().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        # sl local_address rem_address st tx:rx tr:when retrnsmt uid ...: the client's own socket is the
        # row whose local end is the client and whose remote end is the panel.
        if len(fields) > 7 and fields[1] == local and fields[2] == remote:
            return int(fields[7])
    return None


def _hex(address: tuple[str, int]) -> str | None:
    """An IPv4 address and port as /proc/net/tcp writes them (the address in host byte order)."""
    try:
        packed = socket.inet_aton(address[0])
    except (OSError, TypeError):
        return None
    return f"{struct.unpack('=I', packed)[0]:08X}:{address[1]:04X}"
