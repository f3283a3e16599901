"""Reflection on a real vault (RocksDB, the ONNX model): clusters, prompts, sessions, commit, insight notes."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from hebbs import Engine, InvalidInput, MemoryKind, NotFound, Source
from hebbs.workflows import reflect
from hebbs.schema import EdgeType, InsightInput, ReflectSession
from hebbs.store.storage import decode

DEPLOY = [
    "The deploy pipeline failed because the Docker image build timed out.",
    "Deploys to production run through the GitHub Actions pipeline every night.",
    "The staging deploy broke when the Kubernetes manifest had a wrong image tag.",
    "We roll back a failed production deploy with helm rollback.",
    "The CI pipeline caches Docker layers to make deploys faster.",
    "A deploy to production needs two approvals in the pipeline.",
    "The canary deploy caught a memory leak before it reached all Kubernetes pods.",
    "Deploy logs are kept in the pipeline artifacts for thirty days.",
]
BAKING = [
    "Carol feeds her sourdough starter with rye flour every morning.",
    "The sourdough loaf needs a long cold proof in the fridge overnight.",
    "Baking bread at 250 degrees with steam gives a crisp crust.",
    "Carol's croissant dough needs three folds of cold butter.",
    "A higher hydration dough makes an open, airy bread crumb.",
    "The bakery sells out of sourdough bread by noon on Saturdays.",
    "Whole wheat flour makes the bread dough ferment faster.",
    "Carol scores each loaf with a razor blade before baking it.",
]
ASTRONOMY = [
    "The telescope showed Saturn's rings clearly last night.",
    "Jupiter's four largest moons are visible with binoculars.",
    "The Andromeda galaxy is the farthest object visible to the naked eye.",
    "A new moon is the best time to photograph faint nebulae.",
    "The Perseid meteor shower peaks in mid August.",
    "Mars looks red because of iron oxide dust on its surface.",
    "The astronomy club meets at the observatory on clear Fridays.",
    "Light from the Sun takes about eight minutes to reach Earth.",
]
TOPICS = {"deploy": DEPLOY, "baking": BAKING, "astronomy": ASTRONOMY}
UTC = dt.timezone.utc


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("HEBBS_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def plant(engine: Engine, **fields) -> dict[str, str]:
    """The three topics, eight memories each, a minute apart; returns memory id -> topic."""
    start = dt.datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
    items, topics = [], []
    for n, (topic, texts) in enumerate((t, x) for t, xs in TOPICS.items() for x in xs):
        items.append({"content": texts, "created_at": start + dt.timedelta(minutes=n), **fields})
        topics.append(topic)
    memories = engine.remember_many(items, check_contradictions=False)
    return {m.id: t for m, t in zip(memories, topics)}


def snapshot(engine: Engine) -> tuple:
    """What a failed commit must leave as it was."""
    return (engine.count(), engine.stats().write_seq, sorted(m.id for m in engine.memories()),
            len(engine.insights()))


# Clusters ------------------------------------------------------------------------------------

def test_three_planted_topics_make_three_clusters_the_same_every_time(engine):
    topic_of = plant(engine)
    first = engine.reflect_prepare()
    second = engine.reflect_prepare()
    assert first.memory_count == 24 and not first.unclustered
    assert len(first.clusters) == 3
    found = sorted({topic_of[m.id] for m in c.memories}.pop() for c in first.clusters
                   if len({topic_of[m.id] for m in c.memories}) == 1)
    assert found == ["astronomy", "baking", "deploy"]  # each cluster is exactly one topic
    assert all(len(c.memories) == 8 for c in first.clusters)
    assert [[m.id for m in c.memories] for c in first.clusters] == \
           [[m.id for m in c.memories] for c in second.clusters]
    assert first.session_id != second.session_id
    assert first.silhouette == second.silhouette and first.silhouette > reflect.MIN_SILHOUETTE


def test_each_cluster_has_members_a_representative_terms_and_a_prompt_within_budget(engine, embedder):
    topic_of = plant(engine)
    prepared = engine.reflect_prepare()
    for cluster in prepared.clusters:
        topic = topic_of[cluster.memories[0].id]
        times = [m.created_at for m in cluster.memories]
        assert times == sorted(times, reverse=True)  # most recent first
        assert cluster.representative_id in {m.id for m in cluster.memories}
        rep = next(m for m in cluster.memories if m.id == cluster.representative_id)
        assert rep.centrality == max(m.centrality for m in cluster.memories)
        assert all(m.content in TOPICS[topic] and m.importance == 0.5 for m in cluster.memories)
        assert len(cluster.terms) == reflect.TERMS
        assert {"deploy": "deploy", "baking": "sourdough", "astronomy": "visible"}[topic] in cluster.terms
        assert all(t not in {"the", "and", "with", "for"} for t in cluster.terms)
        for m in cluster.memories:
            assert f"[{m.id}]" in cluster.prompt and m.content in cluster.prompt
        assert '"insights"' in cluster.prompt and "source_memory_ids" in cluster.prompt
        assert cluster.omitted == 0
        actual = embedder.count_tokens([cluster.prompt])[0]
        assert actual <= cluster.prompt_tokens <= reflect.PROMPT_BUDGET


def test_members_that_do_not_fit_the_budget_are_left_out_least_typical_first(engine):
    plant(engine)
    cluster = engine.reflect_prepare().clusters[0]
    prompt, tokens, shown = reflect.cluster_prompt(engine, cluster.memories, 1, 3, cluster.terms, None, budget=400)
    assert 0 < shown < len(cluster.memories) and tokens <= 400
    typical = sorted(cluster.memories, key=lambda m: -m.centrality)
    assert all(m.id in prompt for m in typical[:shown]) and not any(m.id in prompt for m in typical[shown:])
    assert f"({len(cluster.memories) - shown} more memories left out" in prompt
    long = [reflect.member_line(m) for m in cluster.memories]
    long[0] = reflect.member_line(cluster.memories[0].__class__(
        id=cluster.memories[0].id, content="word " * 5000, created_at=0, importance=0.5))
    assert len(long[0]) < reflect.MEMBER_CHARS + 100  # one long memory is cut, not the whole prompt


def test_scope_leaves_out_insights_revisions_and_superseded_memories(engine):
    plant(engine, entity_id="acme")
    old = engine.remember("Acme renews its contract every March.", entity_id="acme")
    engine.remember("Acme renews its contract every April.", entity_id="acme", supersedes=[old.id])
    revised = engine.remember("Acme's CTO is called Dana.", entity_id="acme")
    engine.revise(revised.id, content="Acme's CTO is called Dana Smith.")
    engine.remember("An insight about Acme.", entity_id="acme", kind="INSIGHT")
    engine.remember_many([{"content": t, "entity_id": "globex"} for t in DEPLOY], check_contradictions=False)

    prepared = engine.reflect_prepare(entity_id="acme")
    ids = {m.id for c in prepared.clusters for m in c.memories} | {m.id for m in prepared.unclustered}
    kinds = {engine.get(i).kind for i in ids}
    assert kinds == {MemoryKind.EPISODE} and old.id not in ids and revised.id in ids
    assert all(engine.get(i).entity_id == "acme" for i in ids) and prepared.memory_count == 26

    newest_first = engine.reflect_prepare(entity_id="acme", max_memories=5)
    assert newest_first.memory_count == 5
    since = dt.datetime(2025, 3, 1, 9, 20, tzinfo=UTC)  # the last four planted memories and the later ones
    assert engine.reflect_prepare(entity_id="acme", since=since).memory_count == 6


def test_too_few_memories_or_a_bad_limit_is_a_clear_error(engine):
    engine.remember_many([{"content": t} for t in DEPLOY[:4]], check_contradictions=False)
    with pytest.raises(InvalidInput, match="at least 5 memories.*has 4"):
        engine.reflect_prepare()
    with pytest.raises(InvalidInput, match="entity 'nobody' has 0"):
        engine.reflect_prepare(entity_id="nobody")
    for bad in (4, 501, "10", True):
        with pytest.raises(InvalidInput, match="max_memories"):
            engine.reflect_prepare(max_memories=bad)


# Sessions ------------------------------------------------------------------------------------

def one_insight(prepared, n: int = 0) -> dict:
    cluster = prepared.clusters[n]
    return {"content": f"Cluster {cluster.index} is about {cluster.terms[0]}.", "confidence": 0.8,
            "source_memory_ids": [m.id for m in cluster.memories[:3]], "tags": ["topic", cluster.terms[0]]}


def test_a_session_expires_after_ten_minutes(engine):
    plant(engine)
    prepared = engine.reflect_prepare()
    assert prepared.expires_at - reflect.SESSION_TTL_US == decode(
        engine.vault.store.get("meta", f"reflect_session:{prepared.session_id}".encode()), ReflectSession).created_at
    before = snapshot(engine)
    with pytest.raises(InvalidInput, match="expired .* run it again"):
        reflect.commit(engine, prepared.session_id, [one_insight(prepared)], now=prepared.expires_at + 1)
    assert snapshot(engine) == before
    done = reflect.commit(engine, prepared.session_id, [one_insight(prepared)], now=prepared.expires_at)
    assert len(done.insights) == 1


def test_expired_sessions_are_cleared_when_a_new_one_starts_and_sessions_survive_a_reopen(tmp_path, embedder):
    path = tmp_path / "v"
    with Engine.open(path, embedder=embedder) as eng:
        plant(eng)
        stale = reflect.prepare(eng, now=1_000_000)
        live = eng.reflect_prepare()
        assert eng.vault.store.get("meta", f"reflect_session:{stale.session_id}".encode()) is None
    with Engine.open(path, embedder=embedder) as eng:
        done = eng.reflect_commit(live.session_id, [one_insight(live)])
        assert done.insights[0].kind == MemoryKind.INSIGHT
        with pytest.raises(NotFound, match="no reflect session"):
            eng.reflect_commit(stale.session_id, [one_insight(stale)])


# Commit --------------------------------------------------------------------------------------

def bad_inputs(prepared, outsider: str) -> list[tuple[object, str, type]]:
    good = one_insight(prepared)
    return [
        ([{**good, "source_memory_ids": [outsider]}], "not one of this session's memories", InvalidInput),
        ([{**good, "confidence": 1.5}], "confidence must be from 0 to 1", InvalidInput),
        ([{**good, "confidence": "high"}], "Expected `float`", InvalidInput),
        ([{**good, "content": "   "}], "content must not be empty", InvalidInput),
        ([{**good, "source_memory_ids": []}], "cites no source_memory_ids", InvalidInput),
        ([{**good, "source_memory_ids": ["not-an-id"]}], "not a valid memory id", InvalidInput),
        ([{**good, "colour": "blue"}], "unknown field `colour`", InvalidInput),
        ([{k: v for k, v in good.items() if k != "confidence"}], "missing required field `confidence`", InvalidInput),
        ([good, {**good, "confidence": -0.1}], "insight 1 confidence", InvalidInput),  # all or nothing
        ([], "nothing to commit", InvalidInput),
        ("just text", "must be a list", InvalidInput),
    ]


def test_commit_validation_errors_store_nothing(engine):
    plant(engine)
    prepared = engine.reflect_prepare()
    outsider = engine.remember("Remembered after the prepare.")
    before = snapshot(engine)
    for insights, message, error in bad_inputs(prepared, outsider.id):
        with pytest.raises(error, match=message):
            engine.reflect_commit(prepared.session_id, insights)
        assert snapshot(engine) == before, message
    with pytest.raises(NotFound, match="no reflect session"):
        engine.reflect_commit("01J00000000000000000000000", [one_insight(prepared)])
    with pytest.raises(InvalidInput, match="session_id"):
        engine.reflect_commit("", [one_insight(prepared)])
    gone = prepared.clusters[1].memories[0].id
    engine.forget([gone])
    before = snapshot(engine)
    with pytest.raises(NotFound, match="forgotten after reflect-prepare"):
        engine.reflect_commit(prepared.session_id, [{**one_insight(prepared, 1), "source_memory_ids": [gone]}])
    assert snapshot(engine) == before
    # None of these used the session up.
    assert len(engine.reflect_commit(prepared.session_id, [one_insight(prepared)]).insights) == 1


def test_committed_insights_link_to_their_sources_and_come_back_in_recall(engine):
    topic_of = plant(engine, entity_id="team")
    prepared = engine.reflect_prepare()
    deploy = next(c for c in prepared.clusters if topic_of[c.memories[0].id] == "deploy")
    baking = next(c for c in prepared.clusters if topic_of[c.memories[0].id] == "baking")
    sources = [m.id for m in deploy.memories[:4]]
    engine.revise(sources[0], importance=0.9)
    done = engine.reflect_commit(prepared.session_id, [
        InsightInput(content="Production deploys fail mostly on image builds and manifests; the pipeline "
                             "catches them with canaries and approvals.",
                     confidence=0.85, source_memory_ids=sources, tags=["deploy", "reliability"]),
        {"content": "Carol's bread depends on slow, cold fermentation.", "confidence": 0.6,
         "source_memory_ids": [m.id for m in baking.memories[:3]]},
    ])
    assert done.files == [] and done.warnings == []  # a plain vault directory has no notes folder
    insight = done.insights[0]
    assert insight.kind == MemoryKind.INSIGHT and insight.entity_id == "team"
    assert insight.importance == 0.9  # the most important source's
    assert insight.context == {"origin": "reflect", "confidence": 0.85, "tags": ["deploy", "reliability"],
                               "reflect_session": prepared.session_id}
    out = [(e.edge_type, e.target, e.confidence) for e in engine.edges(insight.id, "out")]
    assert sorted(out) == sorted((EdgeType.INSIGHT_FROM.name, s, pytest.approx(0.85)) for s in sources)
    assert {e.source for e in engine.edges(sources[1], "in") if e.edge_type == "INSIGHT_FROM"} == {insight.id}

    listed = engine.insights()
    assert [i.memory.id for i in listed] == [done.insights[1].id, insight.id]  # newest first
    assert listed[1].confidence == 0.85 and listed[1].tags == ["deploy", "reliability"]
    assert sorted(listed[1].source_ids) == sorted(sources)
    assert [i.memory.id for i in engine.insights(min_confidence=0.7)] == [insight.id]
    assert engine.insights(entity_id="nobody") == [] and len(engine.insights(max_results=1)) == 1

    results = engine.recall("why do production deploys fail", top_k=5, reinforce=False)
    kinds = {r.memory.kind for r in results}
    assert insight.id in results.ids() and MemoryKind.EPISODE in kinds

    with pytest.raises(InvalidInput, match="committed already"):
        engine.reflect_commit(prepared.session_id, [one_insight(prepared)])
    # Insights are not material for the next reflection.
    again = engine.reflect_prepare()
    assert insight.id not in {m.id for c in again.clusters for m in c.memories}


def test_a_markdown_vault_gets_each_insight_as_a_note(tmp_path, embedder):
    root = tmp_path / "notes"
    root.mkdir()
    with Engine.open(root / ".hebbs", embedder=embedder) as eng:
        topic_of = plant(eng)
        section = Source(file_path="ops/deploys.md", heading_path=["Deploys", "Rollbacks"])
        sourced = eng.remember("Rollbacks use helm rollback and take two minutes.", source=section)
        prepared = eng.reflect_prepare()
        deploy = next(c for c in prepared.clusters if sourced.id in {m.id for m in c.memories})
        sources = [sourced.id] + [m.id for m in deploy.memories if m.id != sourced.id][:2]
        done = eng.reflect_commit(prepared.session_id, [{
            "content": "Deploy failures are handled by rolling back fast.\nThe pipeline makes that cheap.",
            "confidence": 0.7, "source_memory_ids": sources, "tags": ["deploy"]}])
    assert len(done.files) == 1
    note = Path(done.files[0])
    assert note.parent == root / "insights" and note.name.endswith(f"-{done.insights[0].id[-6:].lower()}.md")
    assert note.name.startswith(dt.datetime.now(UTC).strftime("%Y-")) and "deploy-failures-are-handled" in note.name
    text = note.read_text()
    assert text.startswith("---\nhebbs_id: " + done.insights[0].id)
    assert "confidence: 0.7" in text and 'tags: ["deploy"]' in text
    assert "# Deploy failures are handled by rolling back fast." in text
    assert "The pipeline makes that cheap." in text and "## Sources" in text
    for sid in sources:
        assert f"`{sid}`" in text
    assert "[[ops/deploys#Rollbacks]]" in text
    assert topic_of  # the planted memories are there too
    assert not list(root.glob("*.md")) and not (root / "contradictions").exists()


def test_the_global_vault_never_writes_notes_next_to_itself(tmp_path, embedder, monkeypatch):
    home = tmp_path / "user" / ".hebbs"
    monkeypatch.setenv("HEBBS_HOME", str(home))
    with Engine.open(home, embedder=embedder) as eng:
        plant(eng)
        prepared = eng.reflect_prepare()
        done = eng.reflect_commit(prepared.session_id, [one_insight(prepared)])
    assert done.files == [] and not (tmp_path / "user" / "insights").exists()


def test_the_commit_file_format(tmp_path):
    good = {"content": "A pattern.", "confidence": 0.5, "source_memory_ids": ["01J00000000000000000000000"]}
    session_id, insights = reflect.load_commit_file(json.dumps({"session_id": "S1", "insights": [good]}))
    assert session_id == "S1" and insights[0].content == "A pattern." and insights[0].tags == []
    for raw, message in (("{", "not valid JSON"), ("[]", "must be a JSON object"),
                         (json.dumps({"insights": [good]}), "must be a JSON object"),
                         (json.dumps({"session_id": "S1", "insights": [{**good, "confidence": 2}]}), "from 0 to 1")):
        with pytest.raises(InvalidInput, match=message):
            reflect.load_commit_file(raw)


def test_clustering_alone_is_deterministic_and_does_not_split_noise(embedder):
    import numpy as np

    vectors = embedder.embed(DEPLOY + BAKING + ASTRONOMY).astype(np.float64)
    labels, score = reflect.cluster_vectors(vectors)
    assert len(set(labels.tolist())) == 3 and (labels == reflect.cluster_vectors(vectors)[0]).all()
    assert reflect.cluster_vectors(vectors[:5])[1] is None  # too few for two clusters of three
    noise = np.random.default_rng(7).standard_normal((40, embedder.dim))
    labels, score = reflect.cluster_vectors(noise)
    assert set(labels.tolist()) == {0} and score < reflect.MIN_SILHOUETTE
