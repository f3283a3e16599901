"""A timeout of 0 means never, for the daemon's idle timeout and for its vault idle timeout alike (it
closed every vault at once), and `hebbs daemon status` says so (it printed "stops after 0s idle")."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

pytest_plugins = ["daemon_fixtures"]


def test_a_vault_idle_timeout_of_0_never_closes_a_vault(tmp_path: Path, embedder) -> None:
    from hebbs import Engine
    from hebbs.daemon.vaults import VaultPool

    vault = tmp_path / "vault"
    Engine.open(vault, embedder=embedder).close()
    executor = ThreadPoolExecutor(max_workers=2)
    pool = VaultPool(tmp_path / "home", 0, executor, opener=lambda path, models: Engine.open(path, embedder=embedder))

    async def scenario() -> bool:
        slot = pool.slot(str(vault))
        async with pool.use(slot) as engine:
            engine.remember("kept open")
        await pool.close_idle()  # what the daemon's housekeeping does on every tick
        still_open = slot.engine is not None
        await pool.close_all()
        return still_open

    try:
        assert asyncio.run(scenario())
    finally:
        executor.shutdown(wait=True)


def test_status_says_never_for_timeouts_of_0(make_daemon) -> None:
    home = make_daemon(idle_timeout=0, vault_idle_timeout=0)
    home.start()
    said = home.hebbs("daemon", "status").stdout
    assert "never stops when idle" in said and "never closes unused vaults" in said, said
    assert "after 0s" not in said
    said = home.hebbs("status", "--global").stdout
    assert "never stops when idle" in said and "after 0s" not in said, said
