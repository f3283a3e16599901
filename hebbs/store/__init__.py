"""Storage layer: the RocksDB records, the derived HNSW and BM25 indexes, the embedding model,
and the open-vault object that owns them all (docs/architecture.md)."""
