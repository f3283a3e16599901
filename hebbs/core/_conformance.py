"""Each backend stated as what the layers above take, for mypy to check (pyproject.toml, [tool.mypy]):
a backend missing a method of its contract, or with another signature, fails the check (tests/test_contracts.py).
Imported by nothing: the layers above receive their backend from open_vault.open_store."""

from __future__ import annotations

from ..index.vector import VectorIndex
from ..store.contract import Claims, RecordStore, VectorSearch
from ..store.postgres import PgStore, PgVectorIndex, WorkClaims
from ..store.storage import Store


def record_stores(rocksdb: Store, postgres: PgStore) -> list[RecordStore]:
    return [rocksdb, postgres]


def vector_searches(hnsw: VectorIndex, pgvector: PgVectorIndex) -> list[VectorSearch]:
    return [hnsw, pgvector]


def claims(postgres: WorkClaims) -> Claims:
    return postgres
