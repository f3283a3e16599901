"""Record stores: where a vault's records live, RocksDB in its folder (`storage.py`) or a shared
PostgreSQL database (`postgres.py`), with what both keep beside the records: durability, the change log,
idempotency keys, the access log and kept originals (docs/architecture.md)."""
