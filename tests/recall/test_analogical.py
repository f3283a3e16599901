"""Analogical recall: structural vectors (stored, kept current, discriminative), alpha re-ranking, A:B::C:?."""

from __future__ import annotations

import numpy as np
import pytest

from hebbs import Engine, InvalidInput, Memory, NotFound, ScoringWeights
from hebbs.recall import analogical
from hebbs.store.storage import id_bytes

BY_RELEVANCE = ScoringWeights(relevance=1.0, recency=0.0, importance=0.0, reinforcement=0.0)


def stored(eng: Engine, memory_id: str) -> np.ndarray | None:
    raw = eng.vault.store.get("vectors_associative", b"\x00" + id_bytes(memory_id))
    return None if raw is None else np.frombuffer(raw, dtype="<f4")


def assert_current(eng: Engine, memory_id: str) -> None:
    """The stored structural vector equals one computed afresh from the memory and its edges."""
    have = stored(eng, memory_id)
    assert have is not None
    np.testing.assert_allclose(have, analogical.compute(eng.vault.store, memory_id), atol=1e-6)


@pytest.fixture
def shapes(engine: Engine) -> dict[str, str]:
    """A decision `seed`; `wordy`, which says nearly the same words as a plain note; `twin`, a decision of
    the same shape about something else; and plain notes of assorted topics around them."""
    m: dict[str, str] = {}
    plain = ["The team lunch moved to the Italian place", "Printer on floor three is out of toner",
             "Quarterly revenue grew eight percent", "The new intern starts on Monday",
             "Office wifi was slow this afternoon", "Someone left an umbrella in room 4B",
             "The staging server was rebooted overnight", "Marketing wants a new landing page"]
    for n, text in enumerate(plain):
        m[f"plain{n}"] = engine.remember(text).id
    m["seed_cause"] = engine.remember("Postgres handles our transactional workload better in load tests").id
    m["twin_cause"] = engine.remember("Mobile releases kept shipping with accessibility regressions").id
    decision = {"type": "decision", "owner": "alice", "reviewed": True, "tags": ["infra"]}
    m["seed"] = engine.remember("We decided to move the payments service from MySQL to Postgres", importance=0.9,
                             entity_id="payments", context=decision,
                             edges=[(m["seed_cause"], "CAUSED_BY", 0.9)]).id
    m["twin"] = engine.remember("We decided to hold a design review before every mobile release", importance=0.9,
                             entity_id="mobile", context={**decision, "owner": "bob", "tags": ["process"]},
                             edges=[(m["twin_cause"], "CAUSED_BY", 0.8)]).id
    m["wordy"] = engine.remember("Moving the payments service from MySQL to Postgres came up in chat").id
    engine.add_edge(m["plain6"], "RELATED_TO", m["seed"], 0.5)
    engine.add_edge(m["plain1"], "RELATED_TO", m["twin"], 0.5)
    return m


def test_structural_vector_is_stored_normalized_at_write_time(engine, shapes):
    for memory_id in shapes.values():
        vec = stored(engine, memory_id)
        assert vec is not None and vec.shape == (analogical.STRUCT_DIM,)
        assert abs(float(np.linalg.norm(vec)) - 1.0) < 1e-5
        assert_current(engine, memory_id)


def test_shape_ignores_words_but_not_structure():
    base = Memory(id="01ARZ3NDEKTSV4RRFFQ69G5FAV", content="We picked Postgres for payments",
                  context={"owner": "alice", "reviewed": True})
    reworded = Memory(id=base.id, content="They chose MySQL for billing!!!", context={"owner": "bob", "reviewed": False})
    retyped = Memory(id=base.id, content=base.content, context={"owner": "alice", "reviewed": "yes"})
    with_entity = Memory(id=base.id, content=base.content, context=base.context, entity_id="payments")
    f = analogical.features
    np.testing.assert_array_equal(f(base, {}, {}), f(reworded, {}, {}))
    assert not np.array_equal(f(base, {}, {}), f(retyped, {}, {}))  # a value of another type is another shape
    assert not np.array_equal(f(base, {}, {}), f(with_entity, {}, {}))
    from hebbs.schema import EdgeType
    assert not np.array_equal(f(base, {}, {}), f(base, {EdgeType.CAUSED_BY: 1}, {}))
    assert not np.array_equal(f(base, {EdgeType.CAUSED_BY: 1}, {}), f(base, {}, {EdgeType.CAUSED_BY: 1}))


def test_structural_similarity_varies_instead_of_sitting_at_one_value(engine, shapes):
    store = engine.vault.store
    names = list(shapes)
    matrix = np.vstack([analogical.structure_of(store, shapes[n]) for n in names])

    def sims(reference: str) -> tuple[dict[str, float], dict[str, float]]:
        ref = analogical.structure_of(store, shapes[reference])
        keep = [i for i, n in enumerate(names) if n != reference]
        stretched = analogical.structural_similarity(ref, matrix[keep])
        raw = matrix[keep] @ ref
        return ({names[i]: float(v) for i, v in zip(keep, stretched)},
                {names[i]: float(v) for i, v in zip(keep, raw)})

    by_name, raw = sims("seed")
    values = np.array(list(by_name.values()))
    assert by_name["twin"] > 0.9 and by_name["wordy"] < 0.5
    assert values.max() - values.min() > 0.9 and values.std() > 0.2
    # The stretch keeps the raw order: it spreads the scores, it does not reorder them.
    order = sorted(by_name, key=lambda n: (raw[n], by_name[n]))
    assert [by_name[n] for n in order] == sorted(by_name.values())

    # The failure this avoids: among ordinary notes, raw cosines crowd together; stretched, they spread.
    plain, plain_raw = sims("plain0")
    notes = [n for n in plain if n.startswith("plain")]
    raw_spread = max(plain_raw[n] for n in notes) - min(plain_raw[n] for n in notes)
    spread = max(plain[n] for n in notes) - min(plain[n] for n in notes)
    assert raw_spread < 0.3 and spread > 1.5 * raw_spread
    # A note differing only in length stays closer than a decision that differs in every other group.
    assert min(plain[n] for n in notes) > plain["seed"]


def test_low_alpha_prefers_shape_high_alpha_prefers_meaning(engine, shapes):
    def order(alpha: float) -> list[str]:
        res = engine.recall(strategies=["analogical"], seed=shapes["seed"], alpha=alpha, top_k=20,
                         weights=BY_RELEVANCE, reinforce=False)
        assert shapes["seed"] not in res.ids()  # a memory is not its own analogy
        assert all(r.strategies == ["analogical"] and r.details["analogical_alpha"] == alpha for r in res)
        return res.ids()

    low, high = order(0.1), order(0.9)
    assert low.index(shapes["twin"]) < low.index(shapes["wordy"])
    assert high.index(shapes["wordy"]) < high.index(shapes["twin"])
    assert low[0] == shapes["twin"] and high[0] == shapes["wordy"]


def test_relevance_is_the_alpha_blend(engine, shapes):
    res = engine.recall(strategies=["analogical"], seed=shapes["seed"], alpha=0.3, top_k=20, reinforce=False)
    for r in res:
        d = r.details
        want = 0.3 * max(0.0, d["embedding_similarity"]) + 0.7 * d["structural_similarity"]
        assert r.components.relevance == pytest.approx(min(1.0, want), abs=1e-5)
        assert d["analogical_reference"] == shapes["seed"]


def test_cue_takes_the_shape_of_its_best_match(engine, shapes):
    res = engine.recall("switching the payments database to Postgres", strategies=["analogical"], alpha=0.2, top_k=5,
                     weights=BY_RELEVANCE, reinforce=False)
    reference = res[0].details["analogical_reference"]
    assert reference in (shapes["seed"], shapes["wordy"])
    assert any("shape of the best match" in n for n in res.notes)


def test_default_alpha_comes_from_config(engine, shapes):
    res = engine.recall(strategies=["analogical"], seed=shapes["seed"], reinforce=False)
    assert res[0].details["analogical_alpha"] == engine.config.recall.analogical_alpha


def test_vector_kept_current_through_edges_revise_and_forget(engine, shapes):
    seed, twin, wordy = shapes["seed"], shapes["twin"], shapes["wordy"]
    before_seed, before_wordy = stored(engine, seed).copy(), stored(engine, wordy).copy()
    engine.add_edge(wordy, "CAUSED_BY", seed, 0.5)  # both endpoints change shape
    assert not np.array_equal(stored(engine, wordy), before_wordy)
    assert not np.array_equal(stored(engine, seed), before_seed)
    assert_current(engine, wordy)
    assert_current(engine, seed)

    before_twin = stored(engine, twin).copy()
    engine.revise(twin, context={"type": "task"}, importance=0.1)
    assert not np.array_equal(stored(engine, twin), before_twin)
    assert_current(engine, twin)

    after_edge = stored(engine, seed).copy()
    engine.forget([wordy])  # the neighbour loses an incoming edge
    assert stored(engine, wordy) is None
    assert not np.array_equal(stored(engine, seed), after_edge)
    assert_current(engine, seed)
    np.testing.assert_allclose(stored(engine, seed), before_seed, atol=1e-6)


def test_vectors_missing_from_older_vaults_are_computed(engine, shapes):
    seed = shapes["seed"]
    want = stored(engine, seed).copy()
    from hebbs.store.storage import WriteSet
    writes = WriteSet()
    writes.delete("vectors_associative", b"\x00" + id_bytes(seed))
    engine.vault.store.commit(writes)
    np.testing.assert_allclose(analogical.structure_of(engine.vault.store, seed), want, atol=1e-6)


@pytest.fixture
def drinks(engine: Engine) -> dict[str, str]:
    texts = {
        "a": "Alice prefers tea in the morning", "b": "Alice prefers coffee in the morning",
        "c": "Bob prefers tea in the evening", "d": "Bob prefers coffee in the evening",
        "x1": "Bob prefers tea in the afternoon", "x2": "Alice prefers coffee at night",
        "x3": "Carol drinks water at lunch", "x4": "Bob prefers juice in the evening",
        "x5": "Coffee beans are roasted in Brazil", "x6": "The evening train to Bob's town was late",
    }
    made = engine.remember_many([{"content": t} for t in texts.values()])
    return {name: m.id for name, m in zip(texts, made)}


def test_analogy_by_ids(engine, drinks):
    res = engine.recall(analogy=(drinks["a"], drinks["b"], drinks["c"]), weights=BY_RELEVANCE, reinforce=False)
    assert res[0].memory.id == drinks["d"]
    assert not {drinks["a"], drinks["b"], drinks["c"]} & set(res.ids())
    assert res[0].strategies == ["analogical"] and res[0].details["analogical_reference"] == drinks["b"]


def test_analogy_by_cues_and_mixed(engine, drinks):
    res = engine.recall(analogy=("tea", "coffee", drinks["c"]), weights=BY_RELEVANCE, reinforce=False)
    assert res[0].memory.id == drinks["d"] and drinks["c"] not in res.ids()
    res = engine.recall(analogy=("Alice prefers tea in the morning", "Alice prefers coffee in the morning",
                              "Bob prefers tea in the evening"), strategies=["analogical"], weights=BY_RELEVANCE,
                     reinforce=False)
    # Three cues name no memories, so nothing is excluded: the best answer still ranks first.
    assert res[0].memory.id == drinks["d"]


def test_analogy_arguments(engine, drinks):
    with pytest.raises(InvalidInput, match="three"):
        engine.recall(analogy=(drinks["a"], drinks["b"]))
    with pytest.raises(NotFound):
        engine.recall(analogy=(drinks["a"], drinks["b"], "01ARZ3NDEKTSV4RRFFQ69G5FAV"))
    with pytest.raises(InvalidInput, match="analogical"):
        engine.recall("tea", strategies=["similarity"], analogy=(drinks["a"], drinks["b"], drinks["c"]))
    with pytest.raises(InvalidInput, match="alpha"):
        engine.recall(strategies=["analogical"], seed=drinks["a"], alpha=1.5)
    with pytest.raises(InvalidInput, match="analogical recall needs"):
        engine.recall(strategies=["analogical"])
