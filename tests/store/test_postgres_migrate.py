"""`hebbs migrate` moves a vault from its RocksDB database into PostgreSQL and back with every record:
memories, revisions, edges, contradiction candidates, kept originals, access history, keys, the
query log; the same ids, the same answers."""

from __future__ import annotations

import json
from pathlib import Path

from hebbs import Engine
from hebbs.config import load_config
from hebbs.schema import PendingContradiction
from hebbs.store.changelog import PREFIX as CHANGES
from hebbs.store.storage import COLUMN_FAMILIES, decode_vector
from hebbs.notes import index_notes

pytest_plugins = ["daemon_fixtures"]


def _records(engine: Engine) -> dict[str, dict[bytes, bytes]]:
    """Every record of every family, as the store holds it (less the store's own sequence bookkeeping);
    vectors as their values (RocksDB keeps float16, pgvector float32 of the same values)."""
    store = engine.vault.store
    return {family: {k: (decode_vector(v).tobytes() if family == "vectors" else v) for k, v in store.scan(family)
                     if not (family == "meta" and (k.startswith(CHANGES) or k == b"write_seq"))}
            for family in COLUMN_FAMILIES}


def _fill(engine: Engine, notes: Path) -> dict[str, str]:
    index_notes(engine, notes)
    a = engine.remember("the billing service runs on port 8443", key="billing-port", entity_id="billing")
    b = engine.remember("billing moved to port 9443", entity_id="billing")
    engine.revise(a.id, content="the billing service ran on port 8443 until March")
    engine.add_edge(b.id, "CAUSED_BY", a.id)
    engine.reinforce(b.id)
    engine.add_pending([PendingContradiction(id="01" + "0" * 24, memory_a=a.id, memory_b=b.id, similarity=0.9,
                                             confidence=0.8, reasons=["port differs"], created_at=1)])
    engine.recall("which port does billing use", reinforce=True)
    engine.recall("deploy label")
    return {"a": a.id, "b": b.id}


def test_migrate_to_postgres_and_back_keeps_everything(pg_server, embedder):
    from daemon_fixtures import DaemonHome, short_tmp

    home = DaemonHome()
    notes = short_tmp("hbn")
    (notes / "runbook.md").write_text("# Runbook\n\n## Deploys\n\nDeploys need the **release** label.\n")
    try:
        home.hebbs("init", str(notes))
        vault = notes / ".hebbs"
        with Engine.open(vault, embedder=embedder) as engine:
            ids = _fill(engine, notes)
            before = _records(engine)
            section = next(m.id for m in engine.memories() if m.source is not None)
            original = engine.source(section).text
        assert all(before[f] for f in ("default", "vectors", "graph", "meta", "pending", "query_log", "temporal"))

        done = home.hebbs("migrate", "--vault", str(notes), "--to", pg_server.url, "--name", f"m-{notes.name}",
                          "--format", "json")
        counts = json.loads(done.stdout)["records"]
        assert counts == {family: len(records) for family, records in before.items()}
        assert "[store]" in (vault / "config.toml").read_text()
        assert list(vault.glob("db.before-migrate-*"))  # the old database is kept, renamed
        with Engine.open(vault, embedder=embedder) as engine:
            assert engine.vault.store.where.endswith(f"vault 'm-{notes.name}'")
            assert _records(engine) == before
            assert engine.source(section).text == original  # kept originals answer for the same ids
            # keys kept: the key's first text gets its memory back
            assert engine.remember("the billing service runs on port 8443", key="billing-port").id == ids["a"]
            assert [m.content for m in engine.history(ids["a"])] == ["the billing service runs on port 8443"]
            assert engine.accesses(ids["b"])
            assert engine.recall("billing port", top_k=1).results[0].memory.id in ids.values()
            after = _records(engine)  # with the query just logged

        back = home.hebbs("migrate", "--vault", str(notes), "--to", "rocksdb")
        assert "default" in back.stdout and "now kept in its own RocksDB database" in back.stdout
        assert load_config(vault).store.url is None  # detached: [store] keeps only its durability
        assert "postgresql://" not in (vault / "config.toml").read_text()
        with Engine.open(vault, embedder=embedder) as engine:
            assert engine.vault.store.__class__.__name__ == "Store"
            assert _records(engine) == after
            assert engine.source(section).text == original
    finally:
        home.cleanup()
