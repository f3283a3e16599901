"""Shared test set-up: nothing a test does may touch the real ~/.hebbs.

The embedding model's ONNX graph is built once per test session into a shared cache directory
(HEBBS_MODEL_CACHE), so every test loads the real model without rebuilding it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

import processes

_SESSION_DIR = Path(tempfile.mkdtemp(prefix="hebbs-tests-"))
os.environ.setdefault("HEBBS_MODEL_CACHE", str(_SESSION_DIR / "models"))
os.environ["HEBBS_HOME"] = str(_SESSION_DIR / "home")
# The many daemons tests start must not all reach for the panel's port 6381; the panel's own tests
# serve it on a free port through `hebbs palace --port`.
os.environ["HEBBS_PANEL"] = "off"


@pytest.fixture(autouse=True)
def _children_end_with_their_test():
    """A child a test started (tests/processes.py) does not outlive the test, whatever its outcome;
    children of wider fixtures (started before this one) are left to those fixtures."""
    before = processes.running()
    yield
    processes.stop_all(keep=before)


@pytest.fixture(scope="session", autouse=True)
def _children_end_with_the_session():
    yield
    processes.stop_all()


@pytest.fixture(scope="session")
def embedder():
    from hebbs.store.embed import get_embedder

    return get_embedder()


# Engine-level modules whose tests run on both stores: the embedded RocksDB vault and a vault in
# PostgreSQL with pgvector (hebbs/store/postgres.py), through the `store_kind` parameter of `engine`.
BOTH_STORES = {"test_engine", "test_engine_inputs", "test_causal", "test_analogical", "test_decay",
               "test_contradiction_review", "test_reflect", "test_consolidation", "test_association",
               "test_multistrategy", "test_time_recall", "test_query_log"}


def pytest_generate_tests(metafunc):
    if "store_kind" in metafunc.fixturenames and metafunc.module.__name__.rsplit(".", 1)[-1] in BOTH_STORES:
        metafunc.parametrize("store_kind", ["rocksdb", "postgresql"])


@pytest.fixture
def store_kind() -> str:
    return "rocksdb"


@pytest.fixture(scope="session")
def pg_server():
    """One PostgreSQL with pgvector for the session (pg_fixtures.py); each vault in it has its own name."""
    from pg_fixtures import running_cluster

    with running_cluster() as cluster:
        yield cluster.servers[0]


@pytest.fixture
def vault_dir(tmp_path: Path, store_kind: str, request) -> Path:
    """Where the `engine` fixture opens its vault: attached to the session's PostgreSQL for store_kind
    postgresql (reopening the directory reopens the same vault)."""
    path = tmp_path / "vault"
    if store_kind == "postgresql":
        from pg_fixtures import attach

        attach(path, request.getfixturevalue("pg_server").url)
    return path


@pytest.fixture
def engine(vault_dir: Path, embedder):
    """An Engine on a fresh vault, with the shared, already warm embedder."""
    from hebbs import Engine

    engine = Engine.open(vault_dir, embedder=embedder)
    yield engine
    engine.close()


@pytest.fixture
def index_recovery(monkeypatch) -> dict[str, int]:
    """How often an open rebuilt the vector index in full, or caught a checkpoint up from the change
    log (counted by call: log records can be swallowed by another test's logging setup). Reset the
    counts between opens with `.update(rebuild=0, sync=0)`."""
    from hebbs.store.open_vault import OpenVault
    from hebbs.store.vector_index import VectorIndex

    calls = {"rebuild": 0, "sync": 0}
    rebuild, sync = OpenVault._rebuild_vector_index, VectorIndex.sync

    def counted_rebuild(self):
        calls["rebuild"] += 1
        return rebuild(self)

    def counted_sync(self, ids, stored):
        calls["sync"] += 1
        return sync(self, ids, stored)

    monkeypatch.setattr(OpenVault, "_rebuild_vector_index", counted_rebuild)
    monkeypatch.setattr(VectorIndex, "sync", counted_sync)
    return calls
