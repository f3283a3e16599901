"""`hebbs index DIR --ray ADDRESS`: a notes tree indexed into a vault in PostgreSQL with its sections
embedded on a real Ray cluster (a head node and a second worker node, two raylets on localhost), the
writes going through the daemon and the store's work claims as without Ray."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import processes
from daemon_fixtures import free_port

pytest_plugins = ["daemon_fixtures"]


def _ray_start(args: list[str], env: dict[str, str], log: Path) -> int:
    """`ray start ...` in a session of its own; returns its process group, which every process of the
    node stays in (how the fixture stops exactly what it started)."""
    with log.open("ab") as out:
        proc = processes.popen([str(Path(sys.executable).with_name("ray")), "start", *args], env=env,
                               stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        pgid = proc.pid
        code = proc.wait(timeout=300)
    if code != 0:
        _kill_group(pgid)
        raise AssertionError(f"ray start failed ({code}):\n{log.read_text()[-3000:]}")
    return pgid


def _kill_group(pgid: int) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory) -> Iterator[str]:
    """A Ray cluster on localhost: a head node and a worker node, one CPU each. Yields its address;
    every process of both nodes is stopped afterwards, whatever happened."""
    import ray  # noqa: F401 - never skipped: ray is in the test extra, and a missing one fails here

    temp = Path(f"/tmp/hbray{os.getpid()}")
    temp.mkdir(exist_ok=True)
    log = temp / "start.log"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    port = free_port()
    common = ["--num-cpus", "1", "--object-store-memory", str(100 * 1024 * 1024), "--disable-usage-stats",
              "--dashboard-agent-listen-port", "0"]
    groups: list[int] = []
    try:
        groups.append(_ray_start(["--head", "--port", str(port), "--include-dashboard=false",
                                  "--temp-dir", str(temp), *common],
                                 env, log))
        groups.append(_ray_start(["--address", f"127.0.0.1:{port}", *common], env, log))
        yield f"127.0.0.1:{port}"
    finally:
        for pgid in reversed(groups):
            _kill_group(pgid)
        shutil.rmtree(temp, ignore_errors=True)


def test_index_through_a_ray_cluster(ray_cluster, pg_server):
    from daemon_fixtures import DaemonHome, short_tmp
    from test_postgres_indexers import _sections, _stored, _tree

    home = DaemonHome()
    folder = short_tmp("hbr")
    total = _tree(folder, files=16)
    name = f"ray-{folder.name}"
    try:
        home.hebbs("init", str(folder), "--store", pg_server.url, "--name", name)
        done = home.hebbs("--format", "json", "index", str(folder), "--ray", ray_cluster, timeout=600)
        summary = json.loads(done.stdout)
        assert summary["embedded"] == total and summary["sections_total"] == total
        assert summary["embedded_on_ray"] == total  # every section's text went to the cluster
        stored = _stored(pg_server, name)
        sections = _sections(stored)
        assert len(sections) == total and len(set(sections)) == total

        # The vectors the cluster made are the model's: the same as the daemon's own, so recall finds them.
        client = home.client(folder)
        try:
            hit = client.recall("Item n7s2", strategies=["lexical"], top_k=1).results[0].memory
            assert hit.context["file"] == "note-07.md"
            from hebbs.embedding.embed import get_embedder
            from hebbs.core.memory_text import embedding_text
            from hebbs.store.storage import vector_key

            here = get_embedder().embed_documents([embedding_text(hit)])[0]
            there = np.array(json.loads(pg_server.sql(
                "SELECT c.embedding::text FROM hebbs.vectors c JOIN hebbs.vaults v ON v.id = c.vault "
                f"WHERE v.name = '{name}' AND c.key = '\\x{vector_key(hit.id).hex()}'::bytea")))
            assert np.allclose(here, there, atol=2e-3)  # stored as float16, as every vector
            assert client.recall(hit.content, strategies=["similarity"], top_k=1).results[0].memory.id == hit.id
        finally:
            client.close()
    finally:
        home.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def test_an_unreachable_cluster_is_a_clear_error(pg_server):
    from daemon_fixtures import DaemonHome, short_tmp

    home = DaemonHome()
    folder = short_tmp("hbr")
    (folder / "a.md").write_text("# A\n\nSome text long enough to index.\n")
    try:
        # A port held bound and never listening refuses every connection; a freed one could be taken
        # meanwhile by another test's server (the Ray head of the fixture above among them).
        with socket.socket() as held:
            held.bind(("127.0.0.1", 0))
            done = home.hebbs("index", str(folder), "--ray", f"127.0.0.1:{held.getsockname()[1]}", check=False,
                              timeout=300)
        assert done.returncode != 0
        assert "Ray cluster" in done.stderr and "Traceback" not in done.stderr
    finally:
        home.cleanup()
        shutil.rmtree(folder, ignore_errors=True)
