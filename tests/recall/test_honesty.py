"""Honest recall (docs/honesty.md): confidence and abstention, stable scores and explicit reinforcement,
contradiction candidates that are real. Real model, real vaults, a real daemon where it goes through
the socket."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from hebbs import AsyncClient, Engine
from hebbs.errors import NotFound
from hebbs.recall import confidence
from hebbs.notes import index_notes

if TYPE_CHECKING:
    from daemon_fixtures import DaemonHome

pytest_plugins = ["daemon_fixtures"]

DAY_US = 86_400 * 1_000_000
TEAM_NOTES = [
    "Acme uses Salesforce as its CRM and renews the contract every March",
    "The deploy pipeline runs on GitHub Actions and takes about twelve minutes",
    "Alice prefers short written status updates over meetings",
    "The staging database is Postgres 15, restored from production every Sunday",
    "Bob owns the billing service and is on call in odd weeks",
    "Our API rate limit is 500 requests per minute per customer",
    "The mobile app release train leaves every second Thursday",
    "Carol wants pull requests to stay under 400 changed lines",
    "The office wifi password is rotated by IT every quarter",
    "Customer support answers tickets within four business hours",
    "Feature flags live in LaunchDarkly and are cleaned up after each release",
    "The data warehouse is Snowflake, loaded nightly by Airflow",
]


@pytest.fixture
def team(engine: Engine) -> Engine:
    old = time.time_ns() // 1000 - 800 * DAY_US  # past the 730-day recency window of untyped memories: recency is exactly 0
    engine.remember_many([{"content": t, "created_at": old} for t in TEAM_NOTES])
    return engine


# Confidence and abstention -------------------------------------------------------------------

def test_unrelated_cue_abstains_and_related_one_does_not(team: Engine) -> None:
    """Tried: a cue about physics and one about cooking on a vault of team notes, then two cues the
    notes answer. The first two abstain (with the note, still listing candidates); the others do not,
    and their best result is the note that answers them, with a confidence above the unrelated ones'."""
    for cue in ("quantum chromodynamics lattice gauge", "how long should sourdough bread proof"):
        found = team.recall(cue, top_k=5)
        assert found.abstained, (cue, found.confidence)
        assert found.results and all(r.confidence is not None and r.confidence < found.threshold for r in found)
        assert any("nothing relevant known" in n for n in found.notes)
    for cue, expected in (("which CRM does Acme use", TEAM_NOTES[0]),
                          ("what database does staging run on", TEAM_NOTES[3])):
        found = team.recall(cue, top_k=5)
        assert not found.abstained, (cue, found.confidence)
        best = max(found, key=lambda r: r.confidence)
        assert best.memory.content == expected and found.confidence == best.confidence
        assert not any("nothing relevant known" in n for n in found.notes)


ACME_FACTS = ["Acme's office is in Berlin", "Acme signed a three-year contract in 2024", "Acme has 250 employees",
              "Acme's main contact is Dana Lee", "Acme pays invoices net 30", "Acme asked for SSO support",
              "Acme uses our API for order sync", "Acme's renewal is in March", "Acme reported a bug in the export",
              "Acme prefers email over phone calls", "Acme's fiscal year starts in April",
              "Acme is on the Enterprise plan", "Acme wants a quarterly business review"]


def test_memories_that_match_only_the_entity_a_cue_names_are_not_its_answer(team: Engine) -> None:
    """Issue 27 defect 9: "Who is Acme's CEO?" over Acme facts, none of which holds "CEO": "Acme has
    250 employees" and the other Acme facts scored 0.37, past the threshold, and the recall answered.
    A specific word of the cue that no memory holds must bring the cue closer to a memory for it to
    answer; when the rest of the cue names one thing only ("Who is Acme's"), every memory about that
    thing matches the rest alike, and the word may not move the cue away from it at all ("Acme is on
    the Enterprise plan", 0.025 away, had passed the general margin). The recall abstains and says
    why. A word a memory covers in meaning ("drink" for "green tea") still answers."""
    team.remember_many([{"content": t} for t in ACME_FACTS + ["Dana prefers green tea"]])
    found = team.recall("Who is Acme's CEO?", top_k=10)
    assert found.abstained, found.confidence
    held = [r for r in found if r.details.get("confidence_unseen") == ["CEO"]]
    assert {r.memory.content for r in held} >= {"Acme has 250 employees", "Acme's main contact is Dana Lee",
                                                "Acme's office is in Berlin", "Acme is on the Enterprise plan"}
    assert all(r.confidence <= confidence.UNSEEN_CAP < found.threshold for r in held)
    assert any(n.startswith("no memory holds 'CEO'") for n in found.notes), found.notes
    drink = team.recall("What does Dana drink?", top_k=3)
    assert not drink.abstained and drink.results[0].memory.content == "Dana prefers green tea"
    assert "confidence_unseen" not in drink.results[0].details
    # A cue whose words the vault holds is judged as before.
    crm = team.recall("which CRM does Acme use", top_k=3)
    assert not crm.abstained and not any("confidence_unseen" in r.details for r in crm)


@pytest.mark.parametrize("cue_graph", ["float32", "int8"])
def test_a_cue_and_its_rest_are_embedded_at_once(team: Engine, monkeypatch: pytest.MonkeyPatch, cue_graph: str) -> None:
    """A cue with a word no memory holds has the cue less that word embedded too (above): both are read
    from the cue before it is embedded and go through the model at once, in one run of a float32 graph
    and one after the other through the int8 copy (each run scales by its own range), and the answer
    is the one embedding them one by one gave."""
    team.remember_many([{"content": t} for t in ACME_FACTS + ["Dana prefers green tea"]])
    embedder = team.embedder
    monkeypatch.setattr(embedder, "cue_graph", cue_graph)
    pair = [2] if cue_graph == "float32" else [1, 1]
    runs: list[int] = []
    run = type(embedder)._run
    monkeypatch.setattr(type(embedder), "_run", lambda self, encodings, session=None: (
        runs.append(len(encodings)), run(self, encodings, session))[1])

    def answer(cue: str) -> tuple:
        found = team.recall(cue, top_k=10)
        return ([r.memory.id for r in found], [r.confidence for r in found], found.abstained, found.notes,
                [r.details.get("confidence_unseen") for r in found])

    cues = ("Who is Acme's CEO?", "What does Dana drink?", "which CRM does Acme use")
    together = {}
    for cue in cues:
        runs.clear()
        together[cue] = answer(cue)
        assert runs == (pair if cue != "which CRM does Acme use" else [1]), (cue, runs)
    monkeypatch.setattr(embedder, "embed_queries_at_once", None, raising=False)  # one run per text
    for cue in cues:
        runs.clear()
        assert answer(cue) == together[cue], cue
        assert runs == ([1, 1] if cue != "which CRM does Acme use" else [1]), (cue, runs)


def test_a_time_phrase_is_not_matched_as_words(team: Engine) -> None:
    """Tried: the same question with and without "in March 2023". A memory's date is not in its text,
    and recall reads the phrase as a range; the phrase's words leave confidence alone."""
    plain = team.recall("which CRM does Acme use", top_k=3)
    dated = team.recall("which CRM did Acme use in March 2023", top_k=3)
    assert not dated.abstained
    features = next(r for r in dated if r.memory.content == TEAM_NOTES[0]).details["confidence_features"]
    assert features["term_coverage"] == next(
        r for r in plain if r.memory.content == TEAM_NOTES[0]).details["confidence_features"]["term_coverage"]


def test_a_memory_from_the_time_a_cue_names_is_a_likelier_answer(engine: Engine) -> None:
    """Tried: LoCoMo's dated questions ("What dish did Nate make on 9 November, 2022?") abstained
    when the turn that answers them says it in other words ("cooked a coconut curry"): the time
    phrase is read as a range, not matched as words, and being from that day counted for nothing.
    Now it is a feature of its own (in_time): the same memory is more confidently the answer when
    the cue names its day than when it names another."""
    engine.remember_many([
        {"content": "Nate: I cooked a coconut curry with my sister tonight, it turned out great",
         "created_at": "2022-11-09T19:00:00Z"},
        {"content": "Nate: my turtles love the new tank", "created_at": "2022-10-02T19:00:00Z"},
        {"content": "Joanna: I started writing a new screenplay", "created_at": "2022-11-20T19:00:00Z"}])

    def curry(cue: str) -> float:
        found = engine.recall(cue, top_k=3)
        return next(r for r in found if "curry" in r.memory.content).confidence

    that_day = curry("What dish did Nate make on 9 November, 2022?")
    another_day = curry("What dish did Nate make on 9 December, 2022?")
    assert that_day > another_day + 0.05, (that_day, another_day)


def test_confidence_is_in_unit_range_for_every_strategy_and_absent_without_a_cue(team: Engine) -> None:
    """Tried: the same cue through each cue strategy, and a recall without a cue (temporal)."""
    for strategies in (None, ["similarity"], ["lexical"], ["similarity", "temporal"]):
        found = team.recall("who owns billing", strategies=strategies, top_k=4)
        assert found.results and all(0.0 <= r.confidence <= 1.0 for r in found)
        # The answer's confidence is the best over every candidate the recall considered, the results
        # among them: never below a result's.
        assert found.confidence >= max(r.confidence for r in found)
        closest = max(found, key=lambda r: r.details["confidence_features"]["cosine"])
        assert closest.confidence <= found.confidence
    recent = team.recall(top_k=3)
    assert not recent.abstained and recent.confidence is None and all(r.confidence is None for r in recent)


def test_an_empty_scope_abstains_without_candidates(team: Engine) -> None:
    """Tried: a cue restricted to an entity no memory has: nothing to list, and the answer says so."""
    found = team.recall("which CRM does Acme use", entity_id="nobody")
    assert found.abstained and not found.results and found.confidence == 0.0
    assert found.notes == ["no good match: nothing relevant known for this cue (no memory in this scope)"]


def test_abstain_threshold_is_configurable(tmp_path: Path, embedder) -> None:
    """Tried: a vault whose config sets recall.abstain_threshold to 1.0: every recall abstains."""
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "config.toml").write_text("[recall]\nabstain_threshold = 1.0\n")
    with Engine.open(tmp_path / "v", embedder=embedder) as eng:
        eng.remember("Acme uses Salesforce as its CRM")
        found = eng.recall("Acme uses Salesforce as its CRM")
        assert found.abstained and found.threshold == 1.0 and found.results


# Stable scores and explicit reinforcement ------------------------------------------------------

def test_repeated_recall_returns_identical_answers(team: Engine) -> None:
    """Tried: one recall three times, with default weights: same ids, same scores, same confidences,
    and no memory record changed (access counts, last access, decay score)."""
    before = {m.id: (m.access_count, m.last_accessed_at, m.decay_score) for m in team.memories()}
    answers = [team.recall("who is on call for billing", top_k=5) for _ in range(3)]
    first = [(r.memory.id, r.score, r.confidence) for r in answers[0]]
    assert all([(r.memory.id, r.score, r.confidence) for r in a] == first for a in answers[1:])
    assert {m.id: (m.access_count, m.last_accessed_at, m.decay_score) for m in team.memories()} == before
    assert len(team.queries()) == 3  # the query log is the one thing a recall writes


def test_reinforce_true_keeps_the_old_behaviour(team: Engine) -> None:
    """Tried: recall with reinforce=True twice: every returned memory is counted, and the second
    answer scores them higher (what the default no longer does)."""
    first = team.recall("who is on call for billing", top_k=3, reinforce=True)
    second = team.recall("who is on call for billing", top_k=3)
    assert all(team.get(r.memory.id).access_count == 1 for r in first)
    assert second[0].score > first[0].score


def test_reinforce_raises_exactly_the_named_memories(team: Engine) -> None:
    """Tried: reinforce two of the returned memories (one named twice): only they gain an access,
    a fresh last access and a higher reinforcement component; the others are untouched."""
    found = team.recall("who owns what at work", top_k=5)
    used = [found[1].memory.id, found[3].memory.id]
    before = {m.id: m for m in team.memories()}
    updated = team.reinforce([used[0], used[1], used[0]])
    assert sorted(m.id for m in updated) == sorted(used)
    after = {m.id: m for m in team.memories()}
    for mid, memory in after.items():
        if mid in used:
            assert memory.access_count == before[mid].access_count + 1
            assert memory.last_accessed_at > before[mid].last_accessed_at
            assert memory.decay_score > before[mid].decay_score
        else:
            assert (memory.access_count, memory.last_accessed_at) == (before[mid].access_count,
                                                                      before[mid].last_accessed_at)
    again = {r.memory.id: r for r in team.recall("who owns what at work", top_k=5)}
    old = {r.memory.id: r for r in found}
    for mid in old:
        if mid in again:
            rose = again[mid].components.reinforcement > old[mid].components.reinforcement
            assert rose == (mid in used)
    with pytest.raises(NotFound):
        team.reinforce(["01ARZ3NDEKTSV4RRFFQ69G5FAV"])


# Contradiction candidates ------------------------------------------------------------------

OPPOSITE_PROCEDURES = """\
# Collaboration

## Add a collaborator

To add a collaborator, open Settings > Collaborators and click Add. Enter their email address.

## Remove a collaborator

To remove a collaborator, open Settings > Collaborators and click Remove. Enter their email address.

## Enable two-factor authentication

Enable two-factor authentication in Settings > Security. You can enable it for every device.

## Disable two-factor authentication

Disable two-factor authentication in Settings > Security. You can disable it for every device.

## Show hidden files

To show hidden files, open the file explorer and choose View > Show hidden.

## Hide hidden files

To hide hidden files, open the file explorer and choose View > Hide hidden.

## Lock a note

Lock a note from the note menu and choose a password for it.

## Unlock a note

Unlock a note from the note menu and enter its password.
"""
PLANTED = """\
# Ops

## Pipeline

The deploy pipeline is reliable since the March upgrade.

## Flags

Feature flags are enabled in production.
"""
RETRO = """\
# Retro

## Pipeline

The deploy pipeline is unreliable since the March upgrade.

## Flags

Feature flags are disabled in production.
"""


def test_opposite_procedures_are_not_queued_while_a_real_contradiction_is(tmp_path: Path, embedder) -> None:
    """Tried: a notes folder with add/remove, enable/disable, show/hide and lock/unlock procedures,
    and two notes that disagree (reliable/unreliable, enabled/disabled). Indexing queues the two
    disagreements and none of the procedure pairs; nothing is resolved without review."""
    root = tmp_path / "notes"
    root.mkdir()
    (root / "help.md").write_text(OPPOSITE_PROCEDURES)
    (root / "ops.md").write_text(PLANTED)
    (root / "retro.md").write_text(RETRO)
    with Engine.open(root / ".hebbs", embedder=embedder) as eng:
        index_notes(eng, root)
        files = {m.id: m.source.file_path for m in eng.memories()}
        pairs = {frozenset((files[p.memory_a], files[p.memory_b])) for p in eng.pending()}
        texts = [{eng.get(p.memory_a).content, eng.get(p.memory_b).content} for p in eng.pending()]
        assert pairs == {frozenset(("ops.md", "retro.md"))}, texts
        assert len(eng.pending()) == 2
        assert all(m.superseded_by is None for m in eng.memories())


# Through the socket --------------------------------------------------------------------------

def test_confidence_and_abstention_survive_the_protocol_sdks_and_cli(shared_daemon: "DaemonHome",
                                                                     project: Path) -> None:
    """Tried: the same related and unrelated cues through hebbs.Client, hebbs.AsyncClient and
    `hebbs recall --format json` (and the text output); then `hebbs used` and Client.reinforce."""
    with shared_daemon.client(project) as hb:
        made = hb.remember_many([{"content": t} for t in TEAM_NOTES])
        related, unrelated = hb.recall("which CRM does Acme use"), hb.recall("quantum chromodynamics lattice gauge")
        assert not related.abstained and unrelated.abstained
        assert related.results[0].confidence is not None and related.confidence >= related.threshold
        again = hb.recall("which CRM does Acme use")
        # Same order and confidences; scores move only by the recency of memories seconds old.
        assert [(r.memory.id, r.confidence) for r in again] == [(r.memory.id, r.confidence) for r in related]
        assert all(abs(x.score - y.score) < 1e-5 for x, y in zip(again, related))

        async def through_async() -> tuple:
            async with AsyncClient(vault=project, home=shared_daemon.home) as client:
                return (await client.recall("which CRM does Acme use"),
                        await client.recall("quantum chromodynamics lattice gauge"),
                        await client.reinforce([made[0].id]))

        a_related, a_unrelated, a_used = asyncio.run(through_async())
        assert (a_related.abstained, a_unrelated.abstained) == (False, True)
        assert [r.confidence for r in a_related] == [r.confidence for r in related]
        assert a_used[0].id == made[0].id and a_used[0].access_count == 1

        cli = json.loads(shared_daemon.hebbs("recall", "quantum chromodynamics lattice gauge", "--format", "json",
                                             cwd=project).stdout)
        assert cli["abstained"] is True and 0 <= cli["confidence"] < cli["threshold"]
        assert all(0 <= r["confidence"] <= 1 for r in cli["results"])
        text = shared_daemon.hebbs("recall", "quantum chromodynamics lattice gauge", cwd=project).stdout
        assert text.startswith("No good match: nothing relevant known for this cue") and "conf" in text
        assert "No good match" not in shared_daemon.hebbs("recall", "which CRM does Acme use", cwd=project).stdout

        used = json.loads(shared_daemon.hebbs("used", made[1].id[-8:], made[2].id, "--format", "json",
                                              cwd=project).stdout)
        assert [m["id"] for m in used] == [made[1].id, made[2].id] and all(m["access_count"] == 1 for m in used)
        assert hb.reinforce(made[1].id)[0].access_count == 2
        assert hb.get(made[3].id).access_count == 0
        missing = shared_daemon.hebbs("used", "ZZZZZZZZ", cwd=project, check=False)
        assert missing.returncode == 1 and "Traceback" not in missing.stderr
