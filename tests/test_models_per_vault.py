"""One model per vault (issue 43, item 1): a vault records its model (name, dimension, files' sha256) and
refuses another's vectors; a daemon serves vaults of different models at once, each warm model counted
in its memory budget and unloaded when no open vault uses it; `hebbs reembed` moves a vault to another
model, resumably (a real daemon killed mid-way), through every door, on RocksDB and PostgreSQL.

Real parts only: real models (MiniLM and bge-small-en-v1.5; EmbeddingGemma once, from the suite's shared
cached copy), real daemons on real sockets (daemon_fixtures), a real PostgreSQL with pgvector.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

from hebbs import AsyncClient, Engine
from hebbs.embedding.embed import Embedder, get_embedder
from hebbs.errors import ModelBudgetExceeded, ModelMismatch
from hebbs.models import load_registry
from hebbs.protocol import Reembed
from hebbs.store.storage import WriteSet
from hebbs.workflows.reembed import staging_dir

import processes

pytest_plugins = ["daemon_fixtures"]

BGE = "bge-small-en-v1.5"
MINILM = "all-MiniLM-L6-v2"
GEMMA = "embeddinggemma-300m"
FACTS = ["Acme uses Salesforce as their CRM", "The deploy runs every Friday at 5pm",
         "Maria prefers tea over coffee", "Our API rate limit is 100 requests per minute"]
STORES = ["rocksdb", "postgresql"]


@pytest.fixture(scope="module")
def bge() -> Embedder:
    return get_embedder(BGE)


def _meta(engine: Engine, name: str) -> Any:
    return engine.vault.store.get_meta(name)


def _pg_vault(path: Path, url: str, extra: str = "") -> Path:
    from pg_fixtures import attach

    attach(path, url)
    if extra:
        with open(path / "config.toml", "a") as f:
            f.write(extra)
    return path


def _vault(tmp_path: Path, store_kind: str, request: Any, name: str = "vault", extra: str = "") -> Path:
    path = tmp_path / name
    if store_kind == "postgresql":
        return _pg_vault(path, request.getfixturevalue("pg_server").url, extra)
    return path


# What a vault records, and what it refuses -------------------------------------------------------

@pytest.mark.parametrize("store_kind", STORES)
def test_a_vault_records_its_model_its_dimension_and_its_files(tmp_path, store_kind, request, bge) -> None:
    with Engine.open(_vault(tmp_path, store_kind, request), embedder=bge) as engine:
        engine.remember(FACTS[0])
        assert (_meta(engine, "model_id"), _meta(engine, "model_dim"), _meta(engine, "model_spec")) == (BGE, 384, BGE)
        assert _meta(engine, "model_files") == load_registry()["models"][BGE]["sha256"]
        assert engine.stats().model == BGE


@pytest.mark.parametrize("store_kind", STORES)
def test_a_vault_refuses_another_models_vectors(tmp_path, store_kind, request, embedder, bge) -> None:
    path = _vault(tmp_path, store_kind, request)
    with Engine.open(path, embedder=embedder) as engine:
        kept = engine.remember(FACTS[0])
    # Opening with the other model's embedder (bge: the same 384 dimensions, other vectors).
    with pytest.raises(ModelMismatch, match="hebbs reembed"):
        Engine.open(path, embedder=bge)
    with pytest.raises(ModelMismatch):
        Engine.open(path, model=BGE)
    with Engine.open(path, embedder=embedder) as engine:
        # Vectors of another dimension (EmbeddingGemma's 768) offered to the vault's write path.
        with pytest.raises(ModelMismatch, match="384-d"):
            engine.vault.apply(WriteSet(), vectors=([kept.id], np.ones((1, 768), dtype=np.float32)))
        # A remember through an embedder swapped under the open vault: refused, nothing written.
        engine.vault.embedder = bge
        with pytest.raises(ModelMismatch, match=BGE):
            engine.remember(FACTS[1])
        engine.vault.embedder = embedder
        assert engine.count() == 1 and engine.recall(FACTS[0], top_k=1)[0].memory.id == kept.id
        # The same model name from other files (another version of its weights) is refused too.
        files = dict(_meta(engine, "model_files"))
        files["model.safetensors"] = "0" * 64
        writes = WriteSet()
        writes.put_meta("model_files", files)
        engine.vault.store.commit(writes)
    with pytest.raises(ModelMismatch, match="model.safetensors differ"):
        Engine.open(path, embedder=embedder)


def test_a_vault_recorded_before_the_hashes_gets_them(tmp_path, embedder) -> None:
    with Engine.open(tmp_path / "v", embedder=embedder) as engine:
        engine.remember(FACTS[0])
        writes = WriteSet()
        writes.delete("meta", b"model_files")
        engine.vault.store.commit(writes)
        assert _meta(engine, "model_files") is None
    with Engine.open(tmp_path / "v", embedder=embedder) as engine:
        assert _meta(engine, "model_files") == embedder.files


def test_a_config_naming_another_model_keeps_the_vaults_own(tmp_path, embedder) -> None:
    """The vault's vectors decide: its config naming another model is a switch `hebbs reembed` makes."""
    with Engine.open(tmp_path / "v", embedder=embedder) as engine:
        engine.remember(FACTS[0])
    (tmp_path / "v" / "config.toml").write_text(f'model = "{BGE}"\n')
    with Engine.open(tmp_path / "v") as engine:
        assert engine.embedder.model_id == MINILM


# Through the daemon: every door, both stores ----------------------------------------------------

def _bge_vault_root(home: Any, store_kind: str, request: Any) -> Path:
    """A notes folder whose new vault's config names bge-small (the vault is made with it); in PostgreSQL,
    searched by pgvector."""
    from daemon_fixtures import short_tmp

    from hebbs.paths import init_vault

    root = short_tmp("hbp")
    url = request.getfixturevalue("pg_server").url if store_kind == "postgresql" else None
    vault, _ = init_vault(root, home.home, store=url, name=f"t-{root.name}" if url else None)
    text = f'model = "{BGE}"\n' + (vault / "config.toml").read_text()
    if url:
        text = text.replace("\n[store]\n", '\n[store]\nsimilar = "pgvector"\n', 1)
    (vault / "config.toml").write_text(text)
    return root


def _through(door: str, home: Any, root: Path) -> tuple[str, str, str]:
    """Remember FACTS and recall one through a door; (the top recalled content, the vault's model as that
    door reports it, the model after reembed to MiniLM and back through that door)."""
    if door == "cli":
        for fact in FACTS:
            home.hebbs("--vault", str(root), "remember", fact)
        top = json.loads(home.hebbs("--vault", str(root), "--format", "json", "recall", "what CRM do they use",
                                    "--top-k", "1").stdout)["results"][0]["memory"]["content"]
        model = json.loads(home.hebbs("--vault", str(root), "--format", "json", "status").stdout)["project"]["model"]
        home.hebbs("--vault", str(root), "reembed", "--model", MINILM)
        config = root / ".hebbs" / "config.toml"
        assert config.read_text().startswith(f'model = "{MINILM}"\n')  # the config names what the vault holds
        # One setting away: the config names a model, `hebbs reembed` moves the vault there.
        config.write_text(config.read_text().replace(MINILM, BGE, 1))
        back = json.loads(home.hebbs("--vault", str(root), "--format", "json", "reembed").stdout)
        return top, model, back["model"]
    if door == "sdk":
        with home.client(root) as client:
            client.remember_many([{"content": f} for f in FACTS])
            top = client.recall("what CRM do they use", top_k=1).results[0].memory.content
            model = client.stats().model
            client.reembed(MINILM)
            return top, model, client.reembed(BGE).model
    if door == "async":
        async def go() -> tuple[str, str, str]:
            async with AsyncClient(vault=root, home=home.home) as client:
                await client.remember_many([{"content": f} for f in FACTS])
                top = (await client.recall("what CRM do they use", top_k=1)).results[0].memory.content
                model = (await client.stats()).model
                await client.reembed(MINILM)
                return top, model, (await client.reembed(BGE)).model
        return asyncio.run(go())
    # The socket protocol, one frame per command (what every client sends).
    with home.client(root) as client:
        for fact in FACTS:
            client.request(msgspec.convert({"type": "remember", "content": fact}, type=_command("remember")))
        found = client.request(msgspec.convert({"type": "recall", "cue": "what CRM do they use", "top_k": 1},
                                               type=_command("recall")))
        model = client.status(vault=True).vault.model
        client.request(Reembed(model=MINILM))
        return found.results[0].memory.content, model, client.request(Reembed(model=BGE)).model


def _command(tag: str) -> Any:
    from hebbs.protocol import COMMAND_TYPES

    return COMMAND_TYPES[tag]


@pytest.mark.parametrize("store_kind", STORES)
@pytest.mark.parametrize("door", ["cli", "sdk", "async", "socket"])
def test_a_bge_vault_through_every_door(shared_daemon, door, store_kind, request) -> None:
    root = _bge_vault_root(shared_daemon, store_kind, request)
    top, model, back = _through(door, shared_daemon, root)
    assert (top, model, back) == (FACTS[0], BGE, BGE)
    # Reembedded to MiniLM and back: the vault recalls with bge's vectors.
    with shared_daemon.client(root) as client:
        assert client.stats().model == BGE
        assert client.recall("when do deploys run", top_k=1).results[0].memory.content == FACTS[1]
        assert client.count() == len(FACTS)


@pytest.mark.parametrize("store_kind", STORES)
def test_a_bge_vault_through_mcp(shared_daemon, store_kind, request) -> None:
    from mcp_server.test_mcp import call, run

    root = _bge_vault_root(shared_daemon, store_kind, request)

    async def scenario(session: Any) -> Any:
        for fact in FACTS:
            await call(session, "remember", content=fact)
        found = await call(session, "recall", cue="what CRM do they use", top_k=1, brain="project")
        return found, await call(session, "status")

    found, status = run(shared_daemon.home, root, scenario)
    assert FACTS[0] in json.dumps(found)
    assert BGE in json.dumps(status)


# The daemon's models: several at once, a budget, unloaded when unused ------------------------------

def _status(home: Any) -> Any:
    with home.client(global_=True) as client:
        return client.status(vault=False)


def test_vaults_of_two_models_at_once_and_the_unused_model_unloaded(make_daemon) -> None:
    home = make_daemon(vault_idle_timeout=5)
    home.start()
    minilm_root, bge_root = home.project(), home.project()
    (bge_root / ".hebbs" / "config.toml").write_text(f'model = "{BGE}"\n')
    with home.client(minilm_root) as a, home.client(bge_root) as b:
        b.remember(FACTS[0])  # loads bge first: the MiniLM vault is then used just before the status
        a.remember(FACTS[0])
        status = _status(home)
        models = {m.id: m for m in status.models}
        assert set(models) == {MINILM, BGE}
        assert models[BGE].vaults == [str(bge_root / ".hebbs")] and models[BGE].warm_mib == 110
        assert models[MINILM].default and str(minilm_root / ".hebbs") in models[MINILM].vaults
        assert {v.path: v.model for v in status.open_vaults} == {str(minilm_root / ".hebbs"): MINILM,
                                                                 str(bge_root / ".hebbs"): BGE}
        assert status.model_memory_mb == 3072
        shown = home.hebbs("daemon", "status").stdout
        assert f"(model {BGE}," in shown and "models   " in shown
    # Both vaults close after 5 s unused: bge goes with its vault, the default model stays warm.
    home.wait_until(lambda: [m.id for m in _status(home).models] == [MINILM], what="bge unloaded")


def test_a_model_past_the_budget_is_refused(make_daemon, monkeypatch) -> None:
    monkeypatch.setenv("HEBBS_MODEL_MEMORY_MB", "300")  # MiniLM (210 MiB) fits, MiniLM and bge (110) do not
    home = make_daemon()
    home.start()
    home.wait_until(lambda: _status(home).models, what="the default model warm")
    root = home.project()
    (root / ".hebbs" / "config.toml").write_text(f'model = "{BGE}"\n')
    with home.client(root) as client, pytest.raises(ModelBudgetExceeded, match="300 MiB"):
        client.remember(FACTS[0])
    done = home.hebbs("--vault", str(root), "recall", "crm", check=False)
    assert done.returncode == 1 and "[MODEL_BUDGET]" in done.stderr and "Traceback" not in done.stderr


# reembed: resumable after a kill, never searched with mixed vectors -------------------------------

def test_reembed_killed_mid_way_resumes_and_loses_nothing(make_daemon, bge) -> None:
    home = make_daemon()
    home.start()
    root = home.project()
    vault = root / ".hebbs"
    texts = [f"note {n}: the {w} service owns the {n % 7} queue" for n, w in
             enumerate(["billing", "search", "auth", "mail", "ledger"] * 200)]
    with home.client(root) as client:
        ids = [m.id for m in client.remember_many([{"content": t} for t in texts], consolidate=False)]
    reembed = processes.popen([str(Path(sys.executable).with_name("hebbs")), "--vault", str(root), "reembed",
                               "--model", BGE], env=home.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        home.wait_until(lambda: len(list(staging_dir(vault).glob("part-*.npz"))) >= 2, what="two batches staged")
        # Meanwhile the vault serves with its old model, its vectors all MiniLM's.
        with home.client(root) as client:
            assert client.stats().model == MINILM
            assert client.recall(texts[3], top_k=1).results[0].memory.id == ids[3]
            assert [v.reembedding for v in client.status(vault=False).open_vaults] == [BGE]
        os.kill(home.pid(), signal.SIGKILL)
        reembed.wait(60)
    finally:
        processes.stop(reembed)
    staged = len(list(staging_dir(vault).glob("part-*.npz")))
    assert 2 <= staged < len(texts) // 64 + 1, "killed before the end of the staging"
    home.start()
    with home.client(root) as client:
        assert client.stats().model == MINILM and client.count() == len(texts)
        # Written and revised while nothing runs: the switch embeds them (their text is not the staged one).
        added = client.remember("the pager rota changes every Monday", consolidate=False)
        client.revise(ids[0], content="note 0: the billing service now owns the priority queue")
    done = home.hebbs("--vault", str(root), "--format", "json", "reembed", "--model", BGE, timeout=300)
    summary = json.loads(done.stdout)
    assert summary["model"] == BGE and summary["previous"] == MINILM
    assert summary["memories"] >= len(texts) + 1 and summary["resumed"] >= 2 * 64
    assert summary["caught_up"] >= 1
    assert not staging_dir(vault).exists()
    with home.client(root) as client:
        assert client.stats().model == BGE and client.count() == len(texts) + 1
        # Their vectors are the new model's: the dense channel alone finds each by its own text.
        assert client.recall("the pager rota changes every Monday", strategies=["similarity"],
                             top_k=1).results[0].memory.id == added.id
        assert client.recall("note 0: the billing service now owns the priority queue", strategies=["similarity"],
                             top_k=1).results[0].memory.id == ids[0]
    client_stop = home.client(global_=True)
    client_stop.shutdown()
    client_stop.close()
    home.wait_until(lambda: not home.socket.exists(), what="the daemon stopped")
    # Every stored vector is bge's vector of its memory's text: nothing of MiniLM is left.
    with Engine.open(vault, embedder=bge) as engine:
        some = [added.id, ids[0], ids[5], ids[-1]]
        stored = engine.vault.vectors_or_zeros(some)
        from hebbs.core.memory_text import embedding_text

        fresh = bge.embed_documents([embedding_text(engine.get(mid)) for mid in some])
        assert np.min(np.sum(stored * fresh, axis=1)) > 0.99


# EmbeddingGemma, once: 768 dimensions in PostgreSQL, pgvector's index following the model ----------

def test_gemma_in_postgresql_by_reembed(make_daemon, monkeypatch, pg_server) -> None:
    from gemma_cache import gemma_cache

    monkeypatch.setenv("HEBBS_MODEL_CACHE", str(gemma_cache()))
    home = make_daemon()
    home.start()
    root = home.project()
    from pg_fixtures import attach

    name = attach(root / ".hebbs", pg_server.url)
    with open(root / ".hebbs" / "config.toml", "a") as f:
        f.write('similar = "pgvector"\n')
    for fact in FACTS:
        home.hebbs("--vault", str(root), "remember", fact)
    done = home.hebbs("--vault", str(root), "reembed", "--model", GEMMA, timeout=600)
    assert f"to {GEMMA} (768 dimensions)" in done.stdout
    top = json.loads(home.hebbs("--vault", str(root), "--format", "json", "recall", "what CRM do they use", "--top-k", "1").stdout)["results"][0]["memory"]["content"]
    assert top == FACTS[0]
    import psycopg

    with psycopg.connect(pg_server.url) as conn:
        vault_id = conn.execute("SELECT id FROM hebbs.vaults WHERE name = %s", (name,)).fetchone()[0]
        indexes = [row[0] for row in conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname LIKE %s",
                                                  (f"vectors_hnsw_{vault_id}_%",))]
    assert indexes and all("vector(768)" in d for d in indexes), indexes
    assert f"(model {GEMMA}," in home.hebbs("daemon", "status").stdout


def test_a_shared_vault_moved_by_one_engine_refuses_the_others_old_model(tmp_path, pg_server, embedder, bge) -> None:
    """Two engines (two machines) on one vault in PostgreSQL: one moves it to bge-small; the other, still
    holding MiniLM, is refused its next write (its vectors would be MiniLM's) but keeps answering from
    the MiniLM vectors it holds; opened again, it is on bge and writes."""
    from pg_fixtures import attach

    from hebbs.workflows import reembed

    name = attach(tmp_path / "a", pg_server.url)
    attach(tmp_path / "b", pg_server.url, name)
    with Engine.open(tmp_path / "a", embedder=embedder) as a:
        kept = a.remember(FACTS[0])
        reembed.stage(a.vault, bge)
    b = Engine.open(tmp_path / "b", embedder=embedder)
    try:
        reembed.switch(tmp_path / "a", bge)
        with pytest.raises(ModelMismatch, match=BGE):
            b.remember(FACTS[1])
        assert b.recall(FACTS[0], top_k=1)[0].memory.id == kept.id
    finally:
        b.close()
    with Engine.open(tmp_path / "b") as b:
        assert b.embedder.model_id == BGE
        added = b.remember(FACTS[1])
        assert b.recall("when do deploys run", top_k=1)[0].memory.id == added.id
        assert b.count() == 2
