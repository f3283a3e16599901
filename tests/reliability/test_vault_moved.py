"""A vault folder deleted or moved while the daemon holds it open (hebbs/daemon/vaults.py).

The daemon's open handle still points at the old files: before this was checked, a remember after
`rm -rf .hebbs` was acknowledged and gone at the next restart, and after `mv .hebbs elsewhere &&
hebbs init` (what `hebbs doctor` advises for a damaged vault) new memories landed in the moved copy.
"""

from __future__ import annotations

import shutil

import pytest

from hebbs.errors import VaultNotInitialized
from hebbs.paths import VAULT_DIR, init_vault

pytest_plugins = ["daemon_fixtures"]


def contents(client, cue: str) -> set[str]:
    return {r.memory.content for r in client.recall(cue, strategies=["lexical"], top_k=20)}


def test_a_deleted_vault_refuses_writes_and_a_new_one_gets_them(make_daemon):
    daemon = make_daemon()
    daemon.start()
    root = daemon.project()
    with daemon.client(root) as client:
        client.remember("giraffes are tall")
        assert contents(client, "giraffes") == {"giraffes are tall"}

        shutil.rmtree(root / VAULT_DIR)
        with pytest.raises(VaultNotInitialized, match="no hebbs vault"):
            client.remember("lions roar")
        with pytest.raises(VaultNotInitialized):
            client.recall("giraffes")
        done = daemon.hebbs("remember", "lions roar", cwd=root, check=False)
        assert done.returncode != 0 and "Traceback" not in done.stderr
        assert "VAULT_NOT_INITIALIZED" in done.stderr

        init_vault(root, daemon.home)
        client.remember("zebras have stripes")
        assert contents(client, "giraffes zebras lions") == {"zebras have stripes"}

    daemon.stop()
    daemon.start()
    with daemon.client(root) as client:
        assert contents(client, "giraffes zebras lions") == {"zebras have stripes"}


def test_a_moved_vault_keeps_its_memories_and_the_new_one_gets_the_new_ones(make_daemon, request):
    daemon = make_daemon()
    daemon.start()
    root = daemon.project()
    moved = root.parent / f"{root.name}-moved.hebbs"
    request.addfinalizer(lambda: shutil.rmtree(moved, ignore_errors=True))
    with daemon.client(root) as client:
        client.remember("walruses have tusks")
        client.recall("walruses")  # the direct path (a connection's own thread) has the vault open

        shutil.move(root / VAULT_DIR, moved)
        init_vault(root, daemon.home)
        # Twice: the first write reopens the vault through the loop, the second takes the direct path.
        client.remember("otters hold hands")
        client.remember("otters sleep afloat")
        assert contents(client, "walruses otters") == {"otters hold hands", "otters sleep afloat"}
    with daemon.client(moved) as old:
        assert contents(old, "walruses otters") == {"walruses have tusks"}

    daemon.stop()
    daemon.start()
    with daemon.client(root) as client:
        assert contents(client, "walruses otters") == {"otters hold hands", "otters sleep afloat"}
