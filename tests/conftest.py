"""Shared test set-up: nothing a test does may touch the real ~/.hebbs.

The embedding model's ONNX graph is built once per test session into a shared cache directory
(HEBBS_MODEL_CACHE), so every test loads the real model without rebuilding it.

The suite runs in parallel (`-n 4` in the README's command; pytest-xdist): each worker is a process
with its own HEBBS_HOME, daemons, PostgreSQL and Chromium, its directories from mkdtemp and its ports
from the OS. Only the model's cache is shared: the controller sets HEBBS_MODEL_CACHE before it
starts the workers, and they inherit it.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

import processes
import scratch

_SESSION_DIR = Path(tempfile.mkdtemp(prefix="hebbs-tests-"))
os.environ.setdefault("HEBBS_MODEL_CACHE", str(_SESSION_DIR / "models"))
os.environ["HEBBS_HOME"] = str(_SESSION_DIR / "home")
# The suite starts hundreds of Python processes (the CLI, daemons); under PYTHONDONTWRITEBYTECODE
# (set in some shells and sandboxes) each one compiled hebbs from source again (0.1-0.2 s of CPU
# apiece), and pytest rewrote every test module's asserts again in each worker of every run.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
# Every child renders tables at one width whatever terminal, or none, runs pytest. pytest imports
# readline, which exports the terminal's COLUMNS (80 without one) to the C environment only: children
# started with the inherited environment saw 80 while those given dict(os.environ) saw none (the
# CLI's 120), and xdist's workers, started after that export, had COLUMNS=80 in os.environ too.
os.environ["COLUMNS"] = "120"
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


def pytest_unconfigure(config) -> None:
    # Each process removes its own session directory (a worker's HEBBS_HOME; the controller's holds
    # the model cache, used until every worker is done). A run left 90 MB of model in /tmp before.
    shutil.rmtree(_SESSION_DIR, ignore_errors=True)
    scratch.remove_all()


@pytest.fixture(scope="session", autouse=bool(os.environ.get("PYTEST_XDIST_WORKER")))
def _model_graph_built() -> None:
    """In a parallel run, the first worker builds the model's graph and its int8 cue graph into the
    shared cache and the others wait for it, instead of every worker (and every daemon they start
    meanwhile) building the same files at once."""
    from hebbs.embedding.embed import default_cache_dir, get_embedder

    cache = default_cache_dir()
    cache.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(cache / ".tests-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        get_embedder().embed_query("the cue graph")


@pytest.fixture(scope="session")
def embedder(_model_graph_built):
    from hebbs.embedding.embed import get_embedder

    return get_embedder()


# Engine-level modules whose tests run on both stores: the embedded RocksDB vault and a vault in
# PostgreSQL with pgvector (hebbs/store/postgres.py), through the `store_kind` parameter of `engine`.
BOTH_STORES = {"test_engine", "test_engine_inputs", "test_causal", "test_analogical", "test_decay",
               "test_contradiction_review", "test_reflect", "test_consolidation", "test_association",
               "test_multistrategy", "test_time_recall", "test_query_log", "test_provenance", "test_truth_values"}


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
    from hebbs.core.open_vault import OpenVault
    from hebbs.index.vector import VectorIndex

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


# A test module that defines a fixture wider than a test (a palace with its Chromium, a damaged
# vault, a Ray cluster) runs on one worker, so that the fixture is built once.
_SHARED_FIXTURE = re.compile(r"""scope\s*=\s*["'](?:module|class|package)["']""")


# optionalhook: a venv made before pytest-xdist joined the test extra still runs the tests serially.
@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under `-n N` (xdist's default `--dist load`): every test is scheduled on its own, wherever a
    worker is free, except the tests of a module with a module-scoped fixture, which go together.
    (xdist's loadgroup would do this from marks, but it renames node ids in a way pytest 9.2 ignores.)
    The scheduler runs in the controller, which sees node ids, not fixtures: the module's source says."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    shares: dict[str, bool] = {}

    def shares_a_fixture(path: str) -> bool:
        if path not in shares:
            try:
                shares[path] = bool(_SHARED_FIXTURE.search((config.rootpath / path).read_text()))
            except OSError:
                shares[path] = False
        return shares[path]

    class ByModuleFixture(LoadScopeScheduling):
        # Units run largest first (xdist's --loadscope-reorder): the module groups start at once
        # and the single tests fill the workers around them.
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if shares_a_fixture(path) else nodeid

    return ByModuleFixture(config, log)


def pytest_terminal_summary(terminalreporter) -> None:
    # Figures a test measured for the run's reader (e.g. the default install's size, issue 44), not asserted timings.
    figures = [(report.nodeid, name, value) for report in terminalreporter.stats.get("passed", [])
               if report.when == "call" for name, value in report.user_properties]
    for nodeid, name, value in figures:
        terminalreporter.write_line(f"measured: {name}: {value} ({nodeid})")
