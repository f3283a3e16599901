"""Ties rank the same on both stores (issue 42, defect 8): a vault migrated from RocksDB into PostgreSQL
and back gives the same result list, in the same order, for cues whose matches tie, however each
store's indexes were built (RocksDB's in the order memories were written, PostgreSQL's and a migrated
vault's rebuilt in key order, which for memories written in one millisecond is another order)."""

from __future__ import annotations

from pathlib import Path

from hebbs import Engine
from hebbs.store.migrate import to_postgres, to_rocksdb

# Same words, same length: equal BM25 for "deploy window"; the second group, identical texts, equal
# vectors as well. All of one instant, so recency ties too.
OWNERS = ["ana", "bo", "cy", "di", "ed", "flo", "gus", "hal", "ivy", "jo", "kai", "lu", "mo", "ned", "oz",
          "pia", "quin", "rex", "sol", "tam", "uma", "vic", "wyn", "xia"]
CUES = [("deploy window", ["lexical"]), ("the backup runs nightly at two", ["similarity"]),
        ("deploy window", None), ("backup nightly", None)]


def _fill(engine: Engine) -> None:
    at = 1_700_000_000_000_000
    made = engine.remember_many([{"content": f"draft {n}: owner unknown", "created_at": at} for n in OWNERS]
                                + [{"content": f"draft {n}: schedule unknown", "created_at": at} for n in OWNERS],
                                consolidate=False)
    # Revised last first: the indexes of this vault now hold them in an order of their own, where a
    # vault rebuilt from its records (a migration, another daemon in PostgreSQL) holds them by id.
    texts = [f"the deploy window is owned by {name}" for name in OWNERS] + ["the backup runs nightly at two"] * len(OWNERS)
    for memory, text in reversed(list(zip(made, texts))):
        engine.revise(memory.id, content=text)


def _lists(engine: Engine) -> list[list[str]]:
    return [[r.memory.id for r in engine.recall(cue, strategies=strategies, top_k=top_k, now=1_700_000_100_000_000,
                                                  mmr_lambda=1.0).results]
            for cue, strategies in CUES for top_k in (5, 10)]


def test_ties_rank_the_same_in_rocksdb_and_postgresql_both_ways(tmp_path: Path, pg_server, embedder):
    vault = tmp_path / "vault"
    with Engine.open(vault, embedder=embedder) as engine:
        _fill(engine)
        rocksdb = _lists(engine)
    assert all(len(found) in (5, 10) for found in rocksdb)

    to_postgres(vault, pg_server.url, f"ties-{tmp_path.name[-12:]}", say=lambda _line: None)
    with Engine.open(vault, embedder=embedder) as engine:
        assert engine.vault.store.shared
        postgresql = _lists(engine)
    assert postgresql == rocksdb

    to_rocksdb(vault, say=lambda _line: None)
    with Engine.open(vault, embedder=embedder) as engine:
        assert not engine.vault.store.shared
        assert _lists(engine) == rocksdb
