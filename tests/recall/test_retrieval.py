"""Retrieval quality: exact identifiers, paraphrases, diversity, supersession, the lexical index's life cycle."""

from __future__ import annotations

import shutil

import pytest

from hebbs import Engine
from hebbs.recall.fusion import has_identifier

FILLER = [
    "The connection to the database server was reset during the nightly backup",
    "Network errors happen when the load balancer restarts",
    "We retry failed HTTP requests three times with exponential backoff",
    "The command line accepts a flag to limit the number of results",
    "Release notes are published for every version of the library",
    "Python functions are named in lowercase with underscores",
    "Markdown files hold the project documentation",
    "The team met on Tuesday to plan the quarter",
    "Caroline went hiking in the mountains last weekend",
    "The cafe on the corner serves excellent espresso",
]
IDENTIFIERS = {
    "ERR_CONN_RESET": "Clients see ERR_CONN_RESET when the proxy drops idle sockets",
    "--top-k": "Pass --top-k to cap how many memories come back",
    "v2.3.1": "The regression first shipped in v2.3.1 and was fixed later",
    "snake_case_name": "The config loader reads the key snake_case_name from the environment",
    "file.md": "Meeting minutes are kept in file.md at the repository root",
}


@pytest.fixture
def corpus(engine):
    fill = engine.remember_many([{"content": t} for t in FILLER])
    ids = {ident: engine.remember(text).id for ident, text in IDENTIFIERS.items()}
    return engine, ids, fill


@pytest.mark.parametrize("identifier", list(IDENTIFIERS))
def test_exact_identifier_is_found_first_by_default(corpus, identifier):
    vault, ids, _ = corpus
    assert has_identifier(identifier)
    default = vault.recall(identifier, top_k=3, reinforce=False)
    assert default.ids()[0] == ids[identifier]
    assert "lexical" in default[0].strategies


def test_default_finds_an_identifier_that_similarity_alone_misses(engine):
    """Twelve runbook entries differ only in their error code: dense similarity cannot tell the codes
    apart and ranks another entry first; BM25 pins the exact token."""
    causes = ["the disk is full", "the certificate expired", "the token was revoked", "the quota ran out",
              "the replica lagged", "the lock timed out", "the schema changed", "the cache was cold",
              "the DNS entry vanished", "the clock drifted", "the socket was reset", "the pool was exhausted"]
    made = engine.remember_many([{"content": f"Runbook: error code KX-{4100 + i} means {cause}"}
                                for i, cause in enumerate(causes)])
    target = made[7]
    similarity = engine.recall("KX-4107", strategies=["similarity"], top_k=1, reinforce=False)
    assert similarity.ids() != [target.id]
    assert engine.recall("KX-4107", top_k=1, reinforce=False).ids() == [target.id]


def test_default_finds_a_paraphrase_that_lexical_alone_misses(corpus):
    vault, _, fill = corpus
    cue = "Who was trekking up some peaks?"  # shares no word with the memory about hiking
    lexical = vault.recall(cue, strategies=["lexical"], top_k=3, reinforce=False)
    hiking = fill[8].id
    assert hiking not in lexical.ids()
    assert vault.recall(cue, top_k=3, reinforce=False).ids()[0] == hiking


def test_near_duplicates_do_not_fill_the_top_five_with_mmr(engine):
    dupes = engine.remember_many([{"content": t} for t in [
        "The deploy key for production is stored in the vault under ops/deploy",
        "The deploy key for production is stored in the vault under ops/deploy.",
        "the deploy key for production is stored in the vault under ops/deploy",
        "The production deploy key is stored in the vault under ops/deploy",
        "The deploy key for production is kept in the vault under ops/deploy",
    ]])
    others = engine.remember_many([{"content": t} for t in [
        "Deploys to production need an approval from the on-call engineer",
        "The staging deploy key rotates every ninety days",
        "Production deploys are frozen during the holiday period",
    ]])
    cue = "where is the production deploy key stored"
    plain = engine.recall(cue, top_k=5, mmr_lambda=1.0, reinforce=False)
    assert set(plain.ids()) == {m.id for m in dupes}, "without MMR the restatements crowd out the rest"
    diverse = engine.recall(cue, top_k=5, reinforce=False)  # MMR is on by default
    assert diverse.ids()[0] in {m.id for m in dupes}
    assert len(set(diverse.ids()) & {m.id for m in dupes}) < 5
    assert set(diverse.ids()) & {m.id for m in others}


def test_superseded_fact_is_hidden_by_default_and_shown_below_its_successor(engine):
    old = engine.remember("The team standup is at 9:30 every morning", importance=0.9)
    new = engine.remember("The team standup moved to 10:00 every morning", importance=0.2, supersedes=[old.id])
    assert engine.get(old.id).superseded_by == new.id
    cue = "what time is the standup"
    assert old.id not in engine.recall(cue, top_k=5, reinforce=False).ids()
    shown = engine.recall(cue, top_k=5, include_superseded=True, reinforce=False).ids()
    assert shown.index(new.id) < shown.index(old.id)
    # Nothing is deleted: the old fact and the link stay inspectable.
    assert engine.get(old.id).content.endswith("9:30 every morning")
    assert any(e.edge_type == "REVISED_FROM" and e.target == old.id for e in engine.edges(new.id))
    # Forgetting the successor brings the old fact back.
    engine.forget(ids=[new.id])
    assert engine.get(old.id).superseded_by is None
    assert old.id in engine.recall(cue, top_k=5, reinforce=False).ids()


def test_lexical_index_is_rebuilt_after_deleting_it(tmp_path, embedder):
    path = tmp_path / "v"
    with Engine.open(path, embedder=embedder) as eng:
        target = eng.remember("The staging cluster is called kestrel-7")
        eng.remember_many([{"content": t} for t in FILLER])
    shutil.rmtree(path / "lexical")
    with Engine.open(path, embedder=embedder) as eng:
        assert eng.recall("kestrel-7", strategies=["lexical"], top_k=1, reinforce=False).ids() == [target.id]


def test_lexical_stays_consistent_after_forget_and_revise(corpus):
    vault, ids, _ = corpus
    vault.forget(ids=[ids["v2.3.1"]])
    assert ids["v2.3.1"] not in vault.recall("v2.3.1", strategies=["lexical"], reinforce=False).ids()
    vault.revise(ids["file.md"], content="Meeting minutes moved to notes/minutes.md")
    # Words only the old text had no longer find it.
    assert ids["file.md"] not in vault.recall("repository root", strategies=["lexical"], reinforce=False).ids()
    assert vault.recall("minutes.md", strategies=["lexical"], top_k=1, reinforce=False).ids() == [ids["file.md"]]


def test_every_result_explains_its_score(corpus):
    vault, ids, _ = corpus
    result = vault.recall("ERR_CONN_RESET", top_k=1, reinforce=False)[0]
    assert set(result.strategies) <= {"similarity", "lexical"}
    assert result.details["lexical_rank"] == 1 and result.details["lexical_weight"] == 0.8
    parts = result.components
    assert 0 <= parts.relevance <= 1 and 0 <= parts.recency <= 1
    assert 0 <= parts.importance <= 1 and 0 <= parts.reinforcement <= 1
