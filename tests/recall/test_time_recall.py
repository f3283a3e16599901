"""Recall with time words and typed freshness, through the Engine, both SDK clients and the CLI."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from pathlib import Path

import msgspec
import pytest

from hebbs import AsyncClient, Engine, InvalidInput, RecallResults, ScoringWeights
from hebbs.recall import scoring
from hebbs.recall.prime import prime

pytest_plugins = ["daemon_fixtures"]

UTC = dt.timezone.utc
NOW = dt.datetime(2023, 5, 10, 15, 30, tzinfo=UTC)  # a Wednesday


def day(d: int, month: int = 5) -> dt.datetime:
    return dt.datetime(2023, month, d, 12, 0, tzinfo=UTC)


@pytest.fixture
def diary(tmp_path: Path, embedder) -> Engine:
    """The same kind of event at three times: only the time tells them apart."""
    eng = Engine.open(tmp_path / "vault", embedder=embedder)
    eng.remember_many([
        {"content": "Dinner with Sam at the Thai place, we talked about the garden", "created_at": day(3)},
        {"content": "Dinner with Sam at the Italian place, we talked about his new job", "created_at": day(20, 4)},
        {"content": "Dinner with Sam at the sushi bar, we talked about the holidays", "created_at": day(9)},
        {"content": "Call with the landlord about the broken heater", "created_at": day(2)},
    ])
    yield eng
    eng.close()


def test_time_words_prefer_memories_from_then_and_say_how_they_were_read(diary: Engine) -> None:
    found = diary.recall("where did I have dinner with Sam last week", now=NOW, reinforce=False)
    assert found.time_understood is not None
    assert found.time_understood.phrase == "last week"
    assert found.time_understood.text == "'last week' read as 2023-05-01..2023-05-07"
    assert (found.time_understood.start, found.time_understood.end) == (
        int(dt.datetime(2023, 5, 1, tzinfo=UTC).timestamp() * 1e6),
        int(dt.datetime(2023, 5, 8, tzinfo=UTC).timestamp() * 1e6) - 1)
    assert "Thai" in found[0].memory.content
    assert any("'last week' read as 2023-05-01..2023-05-07" in note for note in found.notes)
    assert len(found) == 4  # preferred, not filtered: the other dinners are still there, below
    yesterday = diary.recall("dinner with Sam yesterday", now=NOW, reinforce=False)
    assert "sushi" in yesterday[0].memory.content
    in_april = diary.recall("dinner with Sam in April 2023", now=NOW, reinforce=False)
    assert "Italian" in in_april[0].memory.content


def test_a_cue_without_time_words_is_untouched(diary: Engine) -> None:
    found = diary.recall("dinner with Sam", now=NOW, reinforce=False)
    assert found.time_understood is None and not any("read as" in n for n in found.notes)


def test_an_explicit_time_range_wins(diary: Engine) -> None:
    found = diary.recall("dinner with Sam last week", time_range=(day(15, 4), day(25, 4)), now=NOW, reinforce=False)
    assert found.time_understood is None and [r.memory.content.split()[5] for r in found] == ["Italian"]


def test_the_reference_time_moves_the_reading(diary: Engine) -> None:
    later = diary.recall("dinner with Sam last week", now=dt.datetime(2023, 5, 17, tzinfo=UTC), reinforce=False)
    assert later.time_understood.text == "'last week' read as 2023-05-08..2023-05-14"
    assert "sushi" in later[0].memory.content
    with pytest.raises(InvalidInput, match="now"):
        diary.recall("x", now=dt.datetime(2023, 5, 17))  # naive: ambiguous


def test_time_words_can_be_turned_off(tmp_path: Path, embedder) -> None:
    (tmp_path / "vault").mkdir()
    (tmp_path / "vault" / "config.toml").write_text("[recall.time_words]\nenabled = false\n")
    with Engine.open(tmp_path / "vault", embedder=embedder) as eng:
        eng.remember("Dinner with Sam", created_at=day(3))
        assert eng.recall("dinner with Sam last week", now=NOW, reinforce=False).time_understood is None


def test_prime_passes_now_and_reports_the_reading(diary: Engine) -> None:
    primed = prime(diary, None, "dinner with Sam last week", max_memories=3, now=NOW)
    assert primed.time_understood.phrase == "last week"
    assert any(note.startswith("'last week' read as 2023-05-01..2023-05-07") for note in primed.notes)


def test_recency_follows_the_kind_half_life(tmp_path: Path, embedder) -> None:
    """A 60-day-old rule is still fresh (730-day half-life); a 60-day-old task is stale (7 days)."""
    with Engine.open(tmp_path / "vault", embedder=embedder) as eng:
        old = day(10, 3)
        rule = eng.remember("deploys need two approvals", context={"type": "rule"}, created_at=old)
        task = eng.remember("deploys: fix the flaky approval check", context={"type": "task"}, created_at=old)
        plain = eng.remember("deploys happen on Tuesdays", created_at=old)
        found = {r.memory.id: r.components.recency
                 for r in eng.recall("deploys", weights=ScoringWeights(recency=1.0), now=NOW, reinforce=False)}
        age = (NOW - old).total_seconds() / 86400
        assert found[rule.id] == pytest.approx(1 - age / 730)
        assert found[task.id] == 0.0
        assert found[plain.id] == pytest.approx(1 - age / 730)  # untyped: recall.untyped_recency_days


def test_a_months_old_fact_does_not_rank_below_the_same_memory_untyped(tmp_path: Path, embedder) -> None:
    """Issue 41 item 7: typed `fact` as SKILL.md asks, a memory got a 180-day recency window against
    730 untyped, so a months-old fact ranked below the same sentence untyped or typed `reference`.
    Types meant to last (half-life at least the decay default) are now at least as fresh as untyped."""
    with Engine.open(tmp_path / "vault", embedder=embedder) as eng:
        old = NOW - dt.timedelta(days=120)
        sentence = "The billing service retries failed charges three times"
        fact, plain, reference, preference = eng.remember_many(
            [{"content": sentence, "created_at": old, "context": {"type": "fact"}},
             {"content": sentence, "created_at": old},
             {"content": sentence, "created_at": old, "context": {"type": "reference"}},
             {"content": sentence, "created_at": old, "context": {"type": "preference"}}], consolidate=False)
        found = {r.memory.id: r for r in eng.recall("how often does billing retry a failed charge", now=NOW,
                                                    reinforce=False, mmr_lambda=1.0)}
        assert found[fact.id].score >= found[plain.id].score
        assert found[fact.id].score >= found[reference.id].score
        assert found[preference.id].score >= found[plain.id].score
        assert found[fact.id].components.recency == pytest.approx(1 - 120 / 730)


def test_the_untyped_recency_window_is_recall_s_own_setting(tmp_path: Path, embedder) -> None:
    """Forgetting (decay.default_half_life_days) and ranking an untyped memory are separate settings."""
    (tmp_path / "vault").mkdir()
    (tmp_path / "vault" / "config.toml").write_text("[recall]\nuntyped_recency_days = 100\n"
                                                     "[decay]\ndefault_half_life_days = 5\n")
    with Engine.open(tmp_path / "vault", embedder=embedder) as eng:
        old = day(10, 3)
        plain = eng.remember("deploys happen on Tuesdays", created_at=old)
        odd = eng.remember("deploys: the approval bot is flaky", context={"type": "gossip"}, created_at=old)
        found = {r.memory.id: r.components.recency
                 for r in eng.recall("deploys", weights=ScoringWeights(recency=1.0), now=NOW, reinforce=False)}
        age = (NOW - old).total_seconds() / 86400
        assert found[plain.id] == pytest.approx(1 - age / 100)
        assert found[odd.id] == pytest.approx(1 - age / 100)  # a type no table names is untyped here


def test_a_flat_recency_window_is_still_available(tmp_path: Path, embedder) -> None:
    (tmp_path / "vault").mkdir()
    (tmp_path / "vault" / "config.toml").write_text("[recall]\nrecency_window = 90\n")
    with Engine.open(tmp_path / "vault", embedder=embedder) as eng:
        rule = eng.remember("deploys need two approvals", context={"type": "rule"}, created_at=day(10, 3))
        found = eng.recall("deploys", now=NOW, reinforce=False)
        assert found[0].memory.id == rule.id and found[0].components.recency == pytest.approx(1 - 61.1458 / 90, abs=1e-3)


def test_bad_settings_are_named(tmp_path: Path, embedder) -> None:
    for text, name in (("[recall]\nrecency_window = \"weekly\"\n", "recency_window"),
                       ("[recall.time_words]\nboost = 3\n", "boost"),
                       ("[recall]\nuntyped_recency_days = 0\n", "untyped_recency_days")):
        vault = tmp_path / name
        vault.mkdir()
        (vault / "config.toml").write_text(text)
        with pytest.raises(InvalidInput, match=name):
            Engine.open(vault, embedder=embedder)


def test_recency_window_days() -> None:
    from hebbs.config import DecayConfig

    decay = DecayConfig(half_life_days={"task": 2.0})
    assert scoring.recency_window_days("task", "half_life", decay) == 2.0
    assert scoring.recency_window_days("Rule", "half_life", decay) == 730.0  # built-in table under the vault's
    assert scoring.recency_window_days(None, "half_life", decay) == 30.0
    assert scoring.recency_window_days(None, "half_life", decay, untyped_days=730.0) == 730.0
    assert scoring.recency_window_days("chat", "half_life", decay, untyped_days=730.0) == 730.0
    assert scoring.recency_window_days("task", "half_life", decay, untyped_days=730.0) == 2.0
    assert scoring.recency_window_days("task", 45.0, decay) == 45.0


def test_now_through_both_clients_and_the_cli(shared_daemon, project: Path) -> None:
    with shared_daemon.client(project) as hb:
        hb.remember_many([{"content": "Dinner with Sam at the Thai place", "created_at": day(3)},
                          {"content": "Dinner with Sam at the sushi bar", "created_at": day(9)}])
        found = hb.recall("dinner with Sam last week", now=NOW, reinforce=False)
        assert isinstance(found, RecallResults) and "Thai" in found[0].memory.content
        assert found.time_understood.text == "'last week' read as 2023-05-01..2023-05-07"
        primed = hb.prime(None, "dinner with Sam yesterday", max_memories=2, now="2023-05-10T15:30:00Z")
        assert primed.time_understood.phrase == "yesterday"

    async def async_recall() -> RecallResults:
        async with AsyncClient(vault=project, home=shared_daemon.home) as hb:
            return await hb.recall("dinner with Sam yesterday", now=NOW, reinforce=False)
    assert "sushi" in asyncio.run(async_recall())[0].memory.content

    run = shared_daemon.hebbs
    out = json.loads(run("recall", "dinner with Sam last week", "--now", "2023-05-10T15:30:00Z", "--no-reinforce",
                         "--format", "json", cwd=project).stdout)
    assert out["time_understood"]["phrase"] == "last week" and "Thai" in out["results"][0]["memory"]["content"]
    text = run("recall", "dinner with Sam last week", "--now", "2023-05-10T15:30:00Z", "--no-reinforce",
               cwd=project).stdout
    assert "note: 'last week' read as 2023-05-01..2023-05-07" in text
    bad = run("recall", "x", "--now", "next tuesday", check=False, cwd=project)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr and "--now" in bad.stderr


def test_a_time_word_keeps_the_score_the_weighted_components(shared_daemon, project: Path) -> None:
    """Issue 41 item 8: a time word added 0.25 outside the four components (a score of 1.011 where the
    components gave 0.761). The time the cue names is the recency component now: every score is the
    weights times the components, and at most 1, through the daemon and the CLI."""
    weights = ScoringWeights()

    def check(results: list[dict]) -> None:
        assert results
        for r in results:
            c = r["components"]
            dot = (weights.relevance * c["relevance"] + weights.recency * c["recency"]
                   + weights.importance * c["importance"] + weights.reinforcement * c["reinforcement"])
            assert r["score"] == pytest.approx(dot, abs=1e-9) and r["score"] <= 1.0

    with shared_daemon.client(project) as hb:
        hb.remember_many([{"content": "Dinner with Sam at the noodle bar", "created_at": day(3), "importance": 1.0},
                          {"content": "Dinner with Sam at the tapas bar", "created_at": day(20, 4), "importance": 1.0}])
        hb.reinforce([m.memory.id for m in hb.recall("dinner with Sam", reinforce=False)] * 3)
        found = hb.recall("dinner with Sam at the noodle bar last week", now=NOW, reinforce=False)
        assert found.time_understood is not None and "noodle" in found[0].memory.content
        check([msgspec.to_builtins(r) for r in found.results])
        assert found[0].components.recency == 1.0  # created within the week the cue names
    out = json.loads(shared_daemon.hebbs("recall", "dinner with Sam at the noodle bar last week", "--now",
                                         "2023-05-10T15:30:00Z", "--format", "json", cwd=project).stdout)
    check(out["results"])


def test_a_window_with_few_memories_is_searched_exactly(tmp_path: Path, embedder, monkeypatch) -> None:
    """A search narrowed to a time window that holds few memories scores just those (open_vault's
    EXACT_SEARCH_MAX): the same hits, in the same order, as the graph search widened until the window
    is exhausted, for both channels; an empty window finds nothing without searching."""
    from hebbs.core import open_vault
    eng = Engine.open(tmp_path / "vault", embedder=embedder)
    topics = ["the garden", "a new job", "the holidays", "the broken heater", "the tax return", "a trip to Rome"]
    eng.remember_many([{"content": f"On day {d} we talked about {topics[d % len(topics)]} over dinner",
                        "created_at": day(d % 28 + 1, 1 + d % 5)} for d in range(120)])
    vault = eng.vault
    cue = "what did we say about the heater at dinner"
    vector = embedder.embed_query(cue)
    may = (int(day(1).timestamp() * 1e6), int(day(31).timestamp() * 1e6))
    empty = (int(dt.datetime(2020, 1, 1, tzinfo=UTC).timestamp() * 1e6),
             int(dt.datetime(2020, 2, 1, tzinfo=UTC).timestamp() * 1e6))
    exact = (vault.similar(vector, 10, vault.scope(window=may)),
             vault.lexical_hits(cue, 10, vault.scope(window=may)))
    assert vault.similar(vector, 10, vault.scope(window=empty)) == []
    assert vault.lexical_hits(cue, 10, vault.scope(window=empty)) == []
    monkeypatch.setattr(open_vault, "EXACT_SEARCH_MAX", 0)  # every search through the graph and paging again
    widened = (vault.similar(vector, 10, vault.scope(window=may)),
               vault.lexical_hits(cue, 10, vault.scope(window=may)))
    assert len(exact[0]) == 10 and len(exact[1]) == 10
    assert [mid for mid, _ in exact[0]] == [mid for mid, _ in widened[0]]
    # scored from the stored float16 copies: within their rounding of the graph's float32 cosine
    assert [s for _, s in exact[0]] == pytest.approx([s for _, s in widened[0]], abs=2e-4)
    assert exact[1] == widened[1]
    assert all(may[0] <= vault.entry(mid).created_at <= may[1] for mid, _ in exact[0] + exact[1])
    eng.close()
