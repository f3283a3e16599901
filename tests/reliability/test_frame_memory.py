"""The memory unfinished frames hold, across connections (issue 26, item 11): a real daemon, 24
connections each sending a 16 MiB frame one byte short. Before the fix the daemon read them all
(237 to 955 MB in the fault run); now at most FRAME_MEMORY (64 MiB) of them is held at once, the
rest wait unread, and a calm client is served meanwhile."""

from __future__ import annotations

import socket
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from daemon_harness import HEADER, ForegroundDaemon  # noqa: E402

from hebbs.protocol import MAX_FRAME

CONNECTIONS = 24


def test_unfinished_frames_across_connections_hold_bounded_memory():
    daemon = ForegroundDaemon("--frame-timeout", "120").start()
    socks: list[socket.socket] = []
    sent: list[int] = []
    lock = threading.Lock()

    def send_short(sock: socket.socket) -> None:
        length = MAX_FRAME - 1024
        try:
            sock.sendall(HEADER.pack(length) + b"x" * (length - 1))
            with lock:
                sent.append(1)
        except OSError:
            pass

    try:
        with daemon.client() as calm:
            calm.remember("before the flood")
        before = daemon.rss_mb()
        threads = []
        for _ in range(CONNECTIONS):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(180)
            sock.connect(str(daemon.socket))
            socks.append(sock)
            threads.append(threading.Thread(target=send_short, args=(sock,), daemon=True))
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 120
        while len(sent) < 4 and time.monotonic() < deadline:  # the frames the budget lets in
            time.sleep(0.2)
        time.sleep(2)  # anything else the daemon would read arrives meanwhile
        held = daemon.rss_mb() - before
        with daemon.client() as calm:  # small frames need no room in the budget
            assert calm.remember("during the flood").id
            assert calm.count() == 2
        assert len(sent) < CONNECTIONS, "every frame was read: nothing bounds what unfinished frames hold"
        assert held < 200, f"the daemon grew by {held:.0f} MB holding unfinished frames"
    finally:
        for sock in socks:
            sock.close()
        daemon.stop()
