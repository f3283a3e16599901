"""What the 8-client soak found: stats() (behind `status`) iterated the vault's catalog while a
remember on another worker thread resized it, and failed with INTERNAL "dictionary changed size
during iteration". Reproduced here in-process, where it is quick and deterministic enough."""

from __future__ import annotations

import threading
import time

from hebbs import Engine

SECONDS = 3.0


def test_stats_while_another_thread_remembers(tmp_path, embedder):
    with Engine.open(tmp_path / "v", embedder=embedder) as eng:
        eng.remember_many([{"content": f"seed memory {n}"} for n in range(1500)], check_contradictions=False)
        failures: list[BaseException] = []
        stop = threading.Event()

        def read() -> None:
            while not stop.is_set():
                try:
                    eng.stats()
                    eng.count()
                except RuntimeError as exc:
                    failures.append(exc)
                    return

        readers = [threading.Thread(target=read) for _ in range(2)]
        for r in readers:
            r.start()
        deadline = time.monotonic() + SECONDS
        n = 0
        while time.monotonic() < deadline and not failures:
            eng.remember_many([{"content": f"new memory {n}.{k}"} for k in range(5)], check_contradictions=False)
            if n % 3 == 0:  # forgets shrink the catalog as remembers grow it
                eng.forget([r.memory.id for r in eng.recall(f"new memory {n}", top_k=1).results])
            n += 1
        stop.set()
        for r in readers:
            r.join()
        assert not failures, failures[0]
