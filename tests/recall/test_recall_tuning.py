"""What recall sees of a note's section, how sections of one note support each other, how the
channel weights follow memory length, and the fast ULID text conversions recall relies on."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from ulid import ULID

from hebbs.recall import fusion as rc
from hebbs.config import FusionParams
from hebbs.core.memory_text import embedding_text, lexical_text, note_title
from hebbs.schema import Memory, Source
from hebbs.store.storage import id_bytes, id_str
from hebbs.notes import index_notes


def section(file: str, heading_path: list[str], content: str, front_matter: dict | None = None) -> Memory:
    ctx = {"file": file, "front_matter": front_matter} if front_matter else {"file": file}
    return Memory(id=str(ULID()), content=content, context=ctx,
                  source=Source(file_path=file, heading_path=heading_path))


def test_a_section_is_embedded_with_its_note_title_headings_and_description():
    memory = section("hosting/netlify/index.md", ["Procedure"], "## Procedure\n\nClick deploy.",
                     {"title": "Host on Netlify", "description": "Deploy your site to Netlify."})
    assert embedding_text(memory) == ("Host on Netlify > Procedure\nDeploy your site to Netlify.\n\n"
                                      "## Procedure\n\nClick deploy.")
    assert note_title(memory) == "Host on Netlify"


def test_without_front_matter_the_file_names_the_note_and_a_bundle_its_folder():
    assert note_title(section("Daily notes.md", [], "x")) == "Daily notes"
    assert note_title(section("recipes/bread/index.md", [], "x")) == "bread"
    # A `# Title` heading equal to the title is not repeated.
    memory = section("Daily notes.md", ["Daily notes", "Setup"], "## Setup\nturn it on")
    assert embedding_text(memory).splitlines()[0] == "Daily notes > Setup"


def test_memories_not_from_files_are_indexed_as_they_are():
    memory = Memory(id=str(ULID()), content="Alice: I moved to Paris", context={"tags": ["travel"]})
    assert embedding_text(memory) == "Alice: I moved to Paris"
    assert lexical_text(memory) == "Alice: I moved to Paris\ntravel"


def test_lexical_text_carries_title_aliases_description_and_tags():
    memory = section("menus.md", ["Render"], "## Render\ntext", {"title": "Menus", "aliases": ["navigation"],
                                                                  "summary": "Build site menus."})
    memory.context["tags"] = ["ui"]
    text = lexical_text(memory)
    for part in ("Menus", "Render", "navigation", "Build site menus.", "ui"):
        assert part in text.splitlines()


def test_sibling_sections_support_each_other_and_lone_memories_keep_their_order():
    cands = {m: rc.Candidate(r) for m, r in (("a1", 0.8), ("a2", 0.7), ("a3", 0.6), ("b1", 0.85), ("c", 0.5))}
    files = {"a1": "a.md", "a2": "a.md", "a3": "a.md", "b1": "b.md"}
    rc.sibling_support(cands, files.get, weight=0.3, count=2)
    # a1 gains 0.3 * (0.7 + 0.6) and overtakes the lone b1; everything is rescaled to at most 1.
    assert max(cands, key=lambda m: cands[m].relevance) == "a1"
    assert abs(cands["a1"].relevance - 1.0) < 1e-9
    assert cands["b1"].relevance > cands["c"].relevance
    assert abs(cands["b1"].relevance / cands["c"].relevance - 0.85 / 0.5) < 1e-9
    assert "sibling_support" in cands["a2"].details and "sibling_support" not in cands["b1"].details


def test_sibling_support_off_changes_nothing():
    cands = {"a1": rc.Candidate(0.8), "a2": rc.Candidate(0.7)}
    rc.sibling_support(cands, lambda m: "a.md", weight=0.0, count=2)
    assert [c.relevance for c in cands.values()] == [0.8, 0.7]


def test_lexical_weight_follows_the_length_of_the_memories_in_play():
    p = FusionParams(lexical_weight=0.6, long_lexical_weight=0.4)
    assert rc.lexical_weight_for(p, []) == 0.6
    assert rc.lexical_weight_for(p, [12, 20, 25]) == 0.6
    assert rc.lexical_weight_for(p, [150, 300, 220]) == 0.4
    middle = rc.lexical_weight_for(p, [50, 55, 60])
    assert 0.4 < middle < 0.6


def test_fast_ulid_text_matches_the_ulid_library():
    for _ in range(2000):
        u = ULID.from_bytes(os.urandom(16))
        assert id_str(u.bytes) == str(u)
        assert id_bytes(str(u)) == u.bytes
    u = ULID()
    assert id_bytes(str(u).lower()) == u.bytes  # non-canonical text still goes through the library
    for bad in ("8" + str(u)[1:], str(u)[:-1] + "U", str(u)[:-1] + "é", str(u)[:-1] + "_", " " + str(u)[1:]):
        try:
            expected: object = ULID.from_str(bad).bytes
        except ValueError as exc:
            expected = type(exc)
        try:
            got: object = id_bytes(bad)
        except ValueError as exc:
            got = type(exc)
        assert got == expected, bad


def test_fused_candidates_come_in_a_fixed_order():
    """Ties in relevance keep the candidates' order, so that order may not follow string hashes (a
    set's order did, and the same recall answered differently in another process)."""
    sim_hits = [("s1", 0.9), ("both", 0.8), ("s2", 0.7)]
    lex_hits = [("l1", 5.0), ("both", 4.0), ("l2", 1.0)]
    fused = rc.fuse("plain words", sim_hits, lex_hits, FusionParams(), words_of=lambda mid: 10)
    assert list(fused) == ["s1", "both", "s2", "l1", "l2"]
    assert fused["both"].strategies == ["similarity", "lexical"]
    assert fused["l1"].strategies == ["lexical"] and fused["s2"].strategies == ["similarity"]


def test_the_tail_past_the_normalization_depth_is_ordered_by_both_channels_ranks():
    """Past normalization_depth min-max gives every hit 0 in its channel: a memory deep in both lists
    must still come before one deep in one list only, and the floor must stay below the head."""
    params = FusionParams(normalization_depth=3)
    sim_hits = [(f"s{n}", 1.0 - n / 100) for n in range(6)] + [("both", 0.9)]
    lex_hits = [(f"l{n}", 10.0 - n) for n in range(6)] + [("both", 3.0)]
    fused = rc.fuse("plain words", sim_hits, lex_hits, params, words_of=lambda mid: 10)
    assert fused["both"].relevance > max(fused[m].relevance for m in ("s5", "l5", "s4", "l4"))
    assert min(fused[m].relevance for m in ("s0", "l0", "s1", "l1")) > fused["both"].relevance
    off = rc.fuse("plain words", sim_hits, lex_hits, FusionParams(normalization_depth=3, rank_weight=0.0),
                  words_of=lambda mid: 10)
    assert off["both"].relevance == 0.0  # what the floor is for


def test_a_question_naming_only_the_note_finds_its_sections(tmp_path: Path, embedder):
    from hebbs import Engine

    root = tmp_path / "notes"
    root.mkdir()
    (root / "sourdough.md").write_text("---\ntitle: Sourdough starter\n---\n\n## Feeding\n\n"
                                       "Add equal weights of flour and water every morning.\n")
    (root / "garden.md").write_text("---\ntitle: Vegetable garden\n---\n\n## Watering\n\n"
                                    "Water the beds every morning before it gets hot.\n")
    with Engine.open(root / ".hebbs", embedder=embedder) as engine:
        index_notes(engine, root)
        top = engine.recall("how often do I feed the sourdough starter", top_k=1, reinforce=False).results[0]
        assert top.memory.context["file"] == "sourdough.md"


def test_neighbor_support_lifts_a_match_its_nearest_neighbours_share_and_stays_in_range():
    # a, b, c say the same thing; d is about something else. b and d tie; b's neighbours agree.
    vectors = {"a": [1.0, 0.0], "b": [0.95, 0.312], "c": [0.9, 0.436], "d": [0.0, 1.0]}
    cands = {m: rc.Candidate(r) for m, r in (("a", 0.9), ("b", 0.6), ("c", 0.5), ("d", 0.6))}
    rc.neighbor_support(cands, lambda ids: np.array([vectors[m] for m in ids]), weight=0.2, count=2, pool=50)
    assert cands["b"].relevance > cands["d"].relevance
    assert all(0.0 <= c.relevance <= 1.0 for c in cands.values())
    assert "neighbor_support" in cands["b"].details


def test_neighbor_support_off_or_outside_the_pool_changes_nothing():
    cands = {"a": rc.Candidate(0.9), "b": rc.Candidate(0.5), "c": rc.Candidate(0.1)}
    vectors_of = lambda ids: np.eye(3)[:len(ids)]  # noqa: E731
    rc.neighbor_support(cands, vectors_of, weight=0.0, count=5, pool=50)
    assert [c.relevance for c in cands.values()] == [0.9, 0.5, 0.1]
    rc.neighbor_support(cands, lambda ids: np.ones((len(ids), 2)) / 2 ** 0.5, weight=0.5, count=5, pool=2)
    assert cands["c"].relevance == 0.1  # not among the 2 best: untouched
    assert abs(cands["a"].relevance - 0.7) < 1e-6 and abs(cands["b"].relevance - 0.7) < 1e-6


def test_feedback_terms_keep_the_cue_and_add_what_the_best_candidates_share():
    top = [(1.0, ["index", "catalog", "catalog", "library"]), (0.5, ["catalog", "card", "library"])]
    weights = rc.feedback_terms(["index", "retriev"], top, count=2, weight=0.5)
    assert weights["retriev"] == 0.25  # the cue's own terms share 1 - weight
    assert set(weights) == {"index", "retriev", "catalog", "library"}  # the 2 heaviest feedback terms
    assert weights["catalog"] > weights["library"] and abs(sum(weights.values()) - 1.0) < 1e-9
    assert rc.feedback_terms(["index"], [], count=5, weight=0.5) == {"index": 0.5}
    assert rc.feedback_terms([], top, count=5, weight=0.5) == {}


def test_a_cue_of_several_sentences_is_the_mean_of_its_sentences(embedder):
    from hebbs.recall.query import cue_embedding

    one = "How are library catalogs kept up to date?"
    two = one + " What does it cost to automate them?"
    assert np.allclose(cue_embedding(embedder, one), embedder.embed_query(one))
    mean = embedder.embed_queries([one, "What does it cost to automate them?"]).mean(axis=0)
    assert np.allclose(cue_embedding(embedder, two), mean / np.linalg.norm(mean), atol=1e-6)
    assert np.allclose(cue_embedding(embedder, two, by_sentence=False), embedder.embed_query(two))
    assert np.allclose(cue_embedding(embedder, "Use v2.3 e.g. for this"), embedder.embed_query("Use v2.3 e.g. for this"))


def test_similarity_alone_searches_the_cue_as_a_whole(tmp_path: Path, embedder):
    from hebbs import Engine, ScoringWeights

    texts = ["Library catalogs are updated every night from the acquisitions list.",
             "Automating a catalog costs about a year of a librarian's time.",
             "The reading room opens at nine.", "Journals are bound every spring."]
    cue = "How are library catalogs kept up to date? What does it cost to automate them?"
    with Engine.open(tmp_path / "v", embedder=embedder) as engine:
        made = engine.remember_many([{"content": t} for t in texts], check_contradictions=False)
        cosines = embedder.embed(texts) @ embedder.embed_query(cue)
        got = engine.recall(cue, strategies=["similarity"], top_k=4, reinforce=False,
                            weights=ScoringWeights(relevance=1.0, recency=0.0, importance=0.0,
                                                   reinforcement=0.0)).results
    assert [r.memory.id for r in got] == [made[i].id for i in np.argsort(-cosines)]
    assert [r.details["similarity"] for r in got] == pytest.approx(sorted(cosines, reverse=True), abs=1e-5)


def test_default_recall_embeds_a_paragraph_once_and_by_sentence_when_asked(tmp_path: Path, embedder):
    """Tried: `recall.cue_by_sentence = true` in a vault's config, a cue of two sentences. Before, the
    option was read only when the strategies named "lexical", which default recall ("fused") never
    does: it was on in every config and did nothing. Now default recall searches the cue's own
    embedding (the option is off by default: its gain did not pay for a pass of the model per
    sentence), and with the option on, the mean of its sentences'."""
    import msgspec

    from hebbs import Engine

    texts = ["Library catalogs are updated every night from the acquisitions list.",
             "Automating a catalog costs about a year of a librarian's time."]
    cue = "How are library catalogs kept up to date? What does it cost to automate them?"
    mean = embedder.embed_queries(["How are library catalogs kept up to date?",
                                   "What does it cost to automate them?"]).mean(axis=0)
    mean /= np.linalg.norm(mean)
    with Engine.open(tmp_path / "v", embedder=embedder) as engine:
        made = engine.remember_many([{"content": t} for t in texts], check_contradictions=False)
        stored = dict(zip([m.id for m in made], embedder.embed(texts)))
        whole = {r.memory.id: r.details["similarity"] for r in engine.recall(cue, top_k=2, reinforce=False)}
        config = engine.vault.config
        engine.vault.config = msgspec.structs.replace(
            config, recall=msgspec.structs.replace(config.recall, cue_by_sentence=True))
        by_sentence = {r.memory.id: r.details["similarity"] for r in engine.recall(cue, top_k=2, reinforce=False)}
    assert whole == pytest.approx({mid: float(v @ embedder.embed_query(cue)) for mid, v in stored.items()}, abs=1e-5)
    assert by_sentence == pytest.approx({mid: float(v @ mean) for mid, v in stored.items()}, abs=1e-5)


def test_only_a_long_cue_gets_lexical_feedback(tmp_path: Path, embedder):
    from hebbs import Engine

    texts = ["Automatic indexing assigns subject headings to documents by counting their words.",
             "Subject headings in library catalogs are assigned by trained indexers.",
             "Citation counts show which journals scientists read most.",
             "The cafeteria serves soup on Mondays."]
    long_cue = ("How well does automatic indexing by computer compare with the subject headings that "
                "trained human indexers assign to documents in library catalogs and journals?")
    with Engine.open(tmp_path / "v", embedder=embedder) as engine:
        engine.remember_many([{"content": t} for t in texts], check_contradictions=False)
        long_results = engine.recall(long_cue, top_k=3, reinforce=False).results
        assert all(r.details.get("lexical_feedback") for r in long_results)
        assert {r.memory.content for r in long_results[:2]} == set(texts[:2])
        short = engine.recall("subject headings", top_k=3, reinforce=False).results
        assert not any(r.details.get("lexical_feedback") for r in short)


def _lexical_threads(engine, monkeypatch) -> list[str]:
    """The names of the threads the vault's lexical searches run on, appended as they run."""
    import threading

    searched_on: list[str] = []
    lexical_hits = engine.vault.lexical_hits
    monkeypatch.setattr(engine.vault, "lexical_hits", lambda *args: (
        searched_on.append(threading.current_thread().name), lexical_hits(*args))[1])
    return searched_on


class _TakenUpAtOnce:
    """The lexical search's thread, made to start each search before the caller embeds the cue. A
    search the helper has not started when the embedding is done runs on the caller's thread, which
    on a busy machine with the int8 cue graph (about 2 ms) happened in CI."""

    def __init__(self, pool):
        self.pool = pool

    def submit(self, search):
        import threading

        started = threading.Event()

        def run():
            started.set()
            return search()

        future = self.pool.submit(run)
        started.wait(timeout=60)
        return future

    def shutdown(self, wait: bool = True) -> None:
        self.pool.shutdown(wait=wait)


def test_the_lexical_search_runs_beside_the_cues_embedding(tmp_path: Path, embedder, monkeypatch):
    """Default recall's lexical search needs only the cue's words: it runs on another thread while the
    cue is embedded, and on the caller's once the cue's vector is known (the time-word pass). The
    answer is the one the search in line gave, to the score."""
    from hebbs import Engine
    from hebbs.recall.query import Query

    texts = ["Dana moved the standup to 10:30 on Tuesdays", "The standup used to be at 9:00",
             "Bob owns the billing service", "Dana reviewed the billing service last week"]
    with Engine.open(tmp_path / "v", embedder=embedder) as engine:
        engine.remember_many([{"content": t} for t in texts], check_contradictions=False)
        searched_on = _lexical_threads(engine, monkeypatch)
        monkeypatch.setattr(engine.vault, "_beside", _TakenUpAtOnce(engine.vault._beside))
        now = 1_700_000_000_000_000

        def answer(cue: str) -> tuple:
            found = engine.recall(cue, top_k=3, now=now)
            return [(r.memory.id, r.score, r.confidence, r.details) for r in found], found.abstained, found.notes

        beside = answer("when is the standup")
        assert [name.startswith("hebbs-lexical") for name in searched_on] == [True]
        searched_on.clear()
        timed = answer("what did Dana review last week")
        assert [name.startswith("hebbs-lexical") for name in searched_on] == [True, False]  # the pass inside last week
        monkeypatch.setattr(Query, "embedding_pending", property(lambda self: False))
        searched_on.clear()
        assert answer("when is the standup") == beside and answer("what did Dana review last week") == timed
        assert not any(name.startswith("hebbs-lexical") for name in searched_on)


def test_a_recall_under_the_vaults_lock_searches_in_line(tmp_path: Path, embedder, monkeypatch):
    """A caller holding the vault's lock recalls with the lexical search on its own thread: a search
    that finds the index damaged rebuilds it under that lock, which the helper would wait for while
    the caller waits for the helper."""
    import threading

    from hebbs import Engine

    with Engine.open(tmp_path / "v", embedder=embedder) as engine:
        engine.remember_many([{"content": "Bob owns the billing service"}], check_contradictions=False)
        searched_on = _lexical_threads(engine, monkeypatch)
        with engine.vault.append_lock:
            found = engine.recall("who owns billing", top_k=1)
        assert found.results[0].memory.content == "Bob owns the billing service"
        assert searched_on == [threading.current_thread().name]
