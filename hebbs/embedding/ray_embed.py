"""Embedding on a Ray cluster, for indexing a corpus larger than one machine embeds in good time
(`hebbs index DIR --ray ADDRESS`, docs/scale.md).

The daemon never imports Ray: a bridge process (`python -m hebbs.embedding.ray_embed ADDRESS MODEL`)
connects to the cluster as its driver, starts one actor per CPU of the cluster, each holding the same
model as the daemon, and answers the daemon's requests on its stdin/stdout (length-prefixed msgpack
frames): a list of texts in, their vectors out, the texts cut into pieces spread over the actors.
`RayEmbedder` stands in for the vault's embedder during one index run: large calls (an indexer's
batches) go to the cluster, everything else (a recall's cue) stays on the local model; the vectors
are the same model's, so the vault cannot tell where they were made. Writing stays with the daemon,
through the store and, for a vault in PostgreSQL, its work claims.
"""

from __future__ import annotations

import importlib.util
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import numpy as np

from ..errors import InvalidInput
from ..fsutil import last_lines

# Fewer texts than this are embedded locally: a round trip to the cluster costs more than they do.
REMOTE_AT_LEAST = 16
PIECE = 32  # texts per actor call
# Connecting, and starting an actor with the model on every CPU of the cluster, may take this long.
READY_SECONDS = 300.0
_HEADER = struct.Struct(">I")


def _send(stream: BinaryIO, value: Any) -> None:
    data = msgspec.msgpack.encode(value)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _receive(stream: BinaryIO) -> Any:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError
    (size,) = _HEADER.unpack(header)
    return msgspec.msgpack.decode(stream.read(size))


class RayEmbedder:
    """The vault's embedder, with large batches of memories embedded on a Ray cluster through a bridge
    process; cues stay with the local embedder (a few at a time, through its own cue graph)."""

    def __init__(self, local: Any, address: str) -> None:
        if importlib.util.find_spec("ray") is None:
            raise InvalidInput("hebbs index --ray needs Ray, which is not installed: pip install 'hebbs[ray]'")
        self.local = local
        self.address = address
        self.remote_texts = 0
        self._lock = threading.Lock()
        self._log = tempfile.NamedTemporaryFile(prefix="hebbs-ray-", suffix=".log", delete=False)
        env = dict(os.environ)
        env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        self._bridge = subprocess.Popen(
            [sys.executable, "-m", "hebbs.embedding.ray_embed", address, str(local.spec)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=env)
        ready: Any = {"error": f"it did not answer within {READY_SECONDS:.0f} s"}
        if select.select([self._bridge.stdout], [], [], READY_SECONDS)[0]:
            try:
                ready = _receive(self._bridge.stdout)
            except EOFError:
                ready = {"error": "the bridge exited"}
        if "error" in ready:
            tail = self._tail()  # before close(), which removes the log
            self.close()
            raise InvalidInput(f"cannot index through the Ray cluster at {address}: {ready['error']}{tail}") from None
        self.actors = int(ready["actors"])

    def _tail(self) -> str:
        lines = last_lines(self._log.name, 5)
        return ("\n" + "\n".join(lines)) if lines else ""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.local, name)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if len(texts) < REMOTE_AT_LEAST:
            return self.local.embed(texts)
        with self._lock:
            _send(self._bridge.stdin, texts)
            try:
                answer = _receive(self._bridge.stdout)
            except EOFError:
                raise InvalidInput(f"the Ray cluster at {self.address} went away during the index run"
                                   f"{self._tail()}") from None
        if "error" in answer:
            raise InvalidInput(f"the Ray cluster at {self.address} failed to embed: {answer['error']}")
        self.remote_texts += len(texts)
        return np.frombuffer(answer["data"], dtype=np.float32).reshape(answer["shape"]).copy()

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed([self.local.document_prompt + text for text in texts])

    def close(self) -> None:
        bridge = self._bridge
        if bridge.stdin is not None:
            try:
                bridge.stdin.close()
            except OSError:
                pass
        try:
            bridge.wait(timeout=30)
        except subprocess.TimeoutExpired:
            bridge.kill()
            bridge.wait()
        for stream in (bridge.stdout, self._log):
            if stream is not None:
                stream.close()
        Path(self._log.name).unlink(missing_ok=True)


# The bridge process ---------------------------------------------------------------------------------

def _exit_with(parent: int) -> None:
    """End this bridge when the daemon that started it is gone (killed: no EOF reaches a bridge still
    busy connecting)."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def _bridge(address: str, model: str) -> None:
    threading.Thread(target=_exit_with, args=(os.getppid(),), daemon=True).start()
    import ray

    out, inp = sys.stdout.buffer, sys.stdin.buffer
    sys.stdout = sys.stderr  # Ray's messages must not mix with the frames
    try:
        host, _, port = address.rpartition(":")
        try:
            # ray.init waits a long time for a cluster that is not there: one look first.
            socket.create_connection((host or "127.0.0.1", int(port)), timeout=10).close()
        except (OSError, ValueError) as exc:
            raise ConnectionError(f"nothing answers at {address} ({exc}); start one with `ray start --head`") from None
        ray.init(address=address, logging_level="WARNING", log_to_driver=False)
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))

        @ray.remote(num_cpus=1)
        class Worker:
            def __init__(self, model: str) -> None:
                from hebbs.embedding.embed import Embedder

                self.embedder = Embedder.load(model, threads=1)

            def embed(self, texts: list[str]) -> bytes:
                return self.embedder.embed(texts).astype(np.float32).tobytes()

        # Spread over the nodes, so a cluster of machines embeds on all of them.
        workers = [Worker.options(scheduling_strategy="SPREAD").remote(model) for _ in range(cpus)]
        dim = len(ray.get([w.embed.remote(["ready"]) for w in workers])[0]) // 4
    except Exception as exc:  # noqa: BLE001 - told to the daemon, which says it to the user
        _send(out, {"error": f"{type(exc).__name__}: {exc}".strip()})
        return
    _send(out, {"actors": len(workers)})
    try:
        while True:
            try:
                texts = _receive(inp)
            except EOFError:
                return
            try:
                pieces = [texts[i:i + PIECE] for i in range(0, len(texts), PIECE)]
                parts = ray.get([workers[n % len(workers)].embed.remote(piece) for n, piece in enumerate(pieces)])
                _send(out, {"shape": [len(texts), dim], "data": b"".join(parts)})
            except Exception as exc:  # noqa: BLE001 - one failed batch fails the run, not silently
                _send(out, {"error": f"{type(exc).__name__}: {exc}".strip()})
    finally:
        ray.shutdown()


if __name__ == "__main__":
    # The daemon's handlers are not this process's: a stop signal ends it.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    if len(sys.argv) != 3:
        sys.exit("usage: python -m hebbs.embedding.ray_embed ADDRESS MODEL")
    _bridge(sys.argv[1], sys.argv[2])
