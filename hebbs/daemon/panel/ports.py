"""Binding the panel's port, and naming the process that holds it when it is taken."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

from hebbs.errors import HebbsError

LISTEN = "0A"


class PortInUse(HebbsError):
    status_code = "PORT_IN_USE"


def bind_local(port: int) -> socket.socket:
    """A listening TCP socket on 127.0.0.1:port (never another interface); PortInUse names the holder."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        if exc.errno != errno.EADDRINUSE:
            raise PortInUse(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}") from None
        holder = port_holder(port)
        who = f" by {holder}" if holder else ""
        raise PortInUse(f"port {port} is already in use{who}; pick another with `hebbs palace --port N` "
                        f"(or set port in [panel] of $HEBBS_HOME/config.toml)") from None
    sock.listen(128)
    sock.setblocking(False)
    return sock


def port_holder(port: int, proc: Path = Path("/proc")) -> str | None:
    """'pid 123 (python3 -m http.server)' for the process listening on a local TCP port, when /proc tells."""
    inodes = _listening_inodes(port, proc)
    if not inodes:
        return None
    targets = {f"socket:[{inode}]" for inode in inodes}
    for pid_dir in proc.iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            fds = list((pid_dir / "fd").iterdir())
        except OSError:
            continue  # another user's process, or gone
        for fd in fds:
            try:
                if os.readlink(fd) in targets:
                    return f"pid {pid_dir.name} ({_command_line(pid_dir)})"
            except OSError:
                continue
    return "a process this user cannot see (another user's?)"


def _listening_inodes(port: int, proc: Path) -> set[str]:
    inodes: set[str] = set()
    for table in ("net/tcp", "net/tcp6"):
        try:
            lines = (proc / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def _command_line(pid_dir: Path) -> str:
    try:
        words = (pid_dir / "cmdline").read_bytes().split(b"\0")
        text = " ".join(w.decode(errors="replace") for w in words if w)
        return text[:120] or (pid_dir / "comm").read_text().strip()
    except OSError:
        return "?"
