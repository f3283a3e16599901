"""What is true now (issue 41, findings 1-4; docs/honesty.md "What is true now"): a changed value kept
as a change, the newer value first and marked current, confirmed conflicts marked at every door, and
recall as of a point in time. Through a real daemon, with the SDK and the CLI; the engine-level test
of the point in time runs on both stores (RocksDB and PostgreSQL)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from hebbs import Client, Engine

if TYPE_CHECKING:
    from daemon_fixtures import DaemonHome

pytest_plugins = ["daemon_fixtures"]

DAY_US = 86_400 * 1_000_000
UNRELATED = ["The user lives in Lisbon", "The user works as a data engineer", "The user prefers tea over coffee",
             "The user drives a blue Toyota", "The user plays the piano on weekends"]
# (older value, newer value, the cue): SKILL.md's own example and the two others issue 41 found.
CHANGES = [("The user has 2 cats named Miso and Tofu", "The user has 3 cats named Miso and Tofu",
            "how many cats does the user have"),
           ("The on-call phone extension is 4411", "The on-call phone extension is 4412",
            "what is the on-call extension"),
           ("Our API rate limit is 100 requests per minute", "Our API rate limit is 200 requests per minute",
            "what is the API rate limit")]


def _remember_timeline(client: Client, now: int) -> None:
    client.remember_many([{"content": t, "created_at": now - 40 * DAY_US} for t in UNRELATED])
    for older, newer, _ in CHANGES:
        # The older value is worded exactly as the newer and only a little older: nothing but the
        # change itself can put the newer first.
        client.remember(older, created_at=now - 3 * DAY_US)
        client.remember(newer, created_at=now - 2 * DAY_US)


def _cli_recall(daemon: DaemonHome, where: list[str], cue: str, *extra: str) -> dict[str, Any]:
    done = daemon.hebbs("recall", cue, "--top-k", "3", "--format", "json", *where, *extra)
    return json.loads(done.stdout)


@pytest.mark.parametrize("where", ["global", "project"])
def test_a_changed_value_is_kept_as_a_change_newest_first(make_daemon: Callable[..., DaemonHome], where: str) -> None:
    """Findings 1 and 2: `recall CUE --top-k 3` showed one of the two values (MMR took the other for
    a restatement), sometimes the older first, and nothing said which is current. Now the newer is
    rank 1 and current, the older right below it, marked as the older value with the newer's id. A
    daemon of its own: its global vault holds only these memories."""
    now = time.time_ns() // 1000
    daemon = make_daemon(idle_timeout=0)
    daemon.start()
    project = daemon.project()
    try:
        _changed_values_shown(daemon, project, where, now)
    finally:
        shutil.rmtree(project, ignore_errors=True)


def _changed_values_shown(daemon: DaemonHome, project: Path, where: str, now: int) -> None:
    client = daemon.client(global_=True) if where == "global" else daemon.client(vault=project)
    args = ["--global"] if where == "global" else ["--vault", str(project)]
    with client:
        _remember_timeline(client, now)
        for older, newer, cue in CHANGES:
            found = client.recall(cue, top_k=3)
            contents = [r.memory.content for r in found]
            assert contents[:2] == [newer, older], (cue, contents)
            first, second = found[0], found[1]
            assert first.current and first.newer is None and not first.marks
            assert not second.current and second.newer == first.memory.id
            assert second.memory.newer_value == first.memory.id and second.memory.valid_until == first.memory.created_at
            assert first.memory.older_value == second.memory.id  # the newer keeps its history
            assert any(m.startswith("older value: ") and first.memory.id in m for m in second.marks), second.marks
            # The command line shows the same, in JSON and in its table.
            shown = _cli_recall(daemon, args, cue)
            assert [r["memory"]["content"] for r in shown["results"]][:2] == [newer, older]
            assert shown["results"][0]["current"] is True and shown["results"][1]["current"] is False
            assert shown["results"][1]["newer"] == first.memory.id
            table = daemon.hebbs("recall", cue, "--top-k", "3", *args).stdout
            assert "[older value " in table and "is no longer current" in table, table
            shown_old = daemon.hebbs("get", second.memory.id, *args).stdout
            shown_new = daemon.hebbs("get", first.memory.id, *args).stdout
            assert "older value" in shown_old and first.memory.id in shown_old and "true until" in shown_old
            assert "newer value of" in shown_new and second.memory.id in shown_new, shown_new


def test_recall_as_of_a_time_returns_what_was_true_then(shared_daemon: DaemonHome, project: Path) -> None:
    """Finding 4: `--now 2026-06-01` returned a memory created in December and hid what was true in
    June. `--as-of` leaves out what was created later and makes the value of then the current one;
    `--now` stays the clock for recency and time words, and hides nothing (one meaning each)."""
    june, december = 1_780_272_000_000_000, 1_796_083_200_000_000  # 2026-06-01, 2026-12-01 (UTC)
    with shared_daemon.client(vault=project) as client:
        client.remember_many([{"content": t, "created_at": june - 40 * DAY_US} for t in UNRELATED])
        old = client.remember("The user has 2 cats named Miso and Tofu", created_at=june - 30 * DAY_US)
        new = client.remember("The user has 3 cats named Miso and Tofu", created_at=december)
        cue = "how many cats does the user have"
        then = client.recall(cue, top_k=3, as_of="2026-06-01")
        assert then.ids()[0] == old.id and new.id not in then.ids()
        assert then[0].current and not then[0].marks
        today = client.recall(cue, top_k=3)
        assert today.ids()[:2] == [new.id, old.id] and not today[1].current
        clock_only = client.recall(cue, top_k=3, now="2026-06-01")
        assert new.id in clock_only.ids()  # --now is the clock, not a point in time
        shown = _cli_recall(shared_daemon, ["--vault", str(project)], cue, "--as-of", "2026-06-01")
        assert shown["results"][0]["memory"]["id"] == old.id
        assert new.id not in [r["memory"]["id"] for r in shown["results"]]
        help_text = shared_daemon.hebbs("recall", "--help").stdout
        assert "--as-of" in help_text and "hides nothing" in " ".join(help_text.split())


def test_a_confirmed_conflict_is_marked_at_every_door(shared_daemon: DaemonHome, project: Path) -> None:
    """Finding 3: after a `contradiction` verdict both facts came back unflagged. Now each result
    names the other (conflicts_with, and a mark) in the SDK, the CLI's JSON and table."""
    with shared_daemon.client(vault=project) as client:
        client.remember_many([{"content": t} for t in UNRELATED])
        a = client.remember("Acme uses Salesforce as its CRM")
        b = client.remember("Acme does not use Salesforce as its CRM")
        pending = [p for p in client.contradiction_prepare().candidates
                   if {p.memory_a.id, p.memory_b.id} == {a.id, b.id}]
        assert pending, "the checker queues the pair"
        client.contradiction_commit([{"pending_id": pending[0].pending_id, "verdict": "contradiction"}])
        found = client.recall("Does Acme use Salesforce?", top_k=3)
        by_id = {r.memory.id: r for r in found}
        assert {a.id, b.id} <= set(by_id)
        assert by_id[a.id].conflicts_with == [b.id] and by_id[b.id].conflicts_with == [a.id]
        assert all(any("conflicts with" in m for m in by_id[x].marks) for x in (a.id, b.id))
        shown = _cli_recall(shared_daemon, ["--vault", str(project)], "Does Acme use Salesforce?")
        assert {r["memory"]["id"]: r["conflicts_with"] for r in shown["results"]}[a.id] == [b.id]
        table = shared_daemon.hebbs("recall", "Does Acme use Salesforce?", "--top-k", "3", "--vault",
                                    str(project)).stdout
        assert "[conflicts with" in table


def test_as_of_on_both_stores(engine: Engine) -> None:
    """The point in time reads only record fields (valid_until, newer_value, superseded_by) that
    both stores keep (run on each, conftest's BOTH_STORES): a value superseded after the time is the
    current one then, and one replaced before it is gone."""
    t0 = 1_750_000_000_000_000
    first = engine.remember("The staging database runs Postgres 14", created_at=t0)
    second = engine.remember("The staging database runs Postgres 15", created_at=t0 + 10 * DAY_US,
                             supersedes=[first.id])
    third = engine.remember("The staging database runs Postgres 16", created_at=t0 + 20 * DAY_US,
                            supersedes=[second.id])
    cue = "which Postgres does staging run"
    assert engine.recall(cue, top_k=3, as_of=t0 + 5 * DAY_US).ids() == [first.id]
    assert engine.recall(cue, top_k=3, as_of=t0 + 15 * DAY_US).ids() == [second.id]
    assert engine.recall(cue, top_k=3).ids() == [third.id]
    assert engine.recall(cue, top_k=3, as_of=t0 - DAY_US).ids() == []
    assert engine.get(first.id).valid_until == second.created_at


def test_export_and_import_keep_a_change_and_a_conflict(engine: Engine, tmp_path: Path, embedder: Any) -> None:
    """The links are ids: an import gives memories new ids, and the older value still names its
    newer one, a conflict still names the other memory (rebuilt from the CONTRADICTS edges)."""
    old = engine.remember("The on-call phone extension is 4411", created_at=1_750_000_000_000_000)
    new = engine.remember("The on-call phone extension is 4412", created_at=1_760_000_000_000_000)
    a = engine.remember("The team's standup is at 9:30 every morning")
    b = engine.remember("The team has no standup meeting at all")
    engine.add_edge(a.id, "CONTRADICTS", b.id)
    assert engine.get(old.id).newer_value == new.id and engine.get(b.id).conflicts_with == [a.id]
    records = list(engine.export_records())
    other = Engine.open(tmp_path / "other", embedder=embedder)
    try:
        ids = other.import_records(records).ids
        moved = other.get(ids[old.id])
        assert moved.newer_value == ids[new.id] and moved.value_change == "4411 -> 4412"
        assert other.get(ids[new.id]).older_value == ids[old.id]
        assert other.get(ids[a.id]).conflicts_with == [ids[b.id]]
        assert other.get(ids[b.id]).conflicts_with == [ids[a.id]]
    finally:
        other.close()
    engine.remove_edge(a.id, "CONTRADICTS", b.id)  # the edge gone, neither memory names the other
    assert engine.get(a.id).conflicts_with == [] and engine.get(b.id).conflicts_with == []


def test_a_verdict_settles_a_linked_change(engine: Engine) -> None:
    """The link marks; a verdict decides: neutral undoes it (both current again), revision hides the
    older value (superseded, true until the newer's time), contradiction makes the two a conflict."""
    t0 = 1_750_000_000_000_000
    cue = "what is the on-call extension"
    for verdict in ("neutral", "revision", "contradiction"):
        old = engine.remember(f"The {verdict} desk phone extension is 4411", created_at=t0)
        new = engine.remember(f"The {verdict} desk phone extension is 4412", created_at=t0 + DAY_US)
        assert engine.get(old.id).newer_value == new.id
        [pending] = [p.id for p in engine.pending() if {p.memory_a, p.memory_b} == {old.id, new.id}]
        engine.contradiction_commit([{"pending_id": pending, "verdict": verdict}])
        settled = engine.get(old.id)
        found = {r.memory.id: r for r in engine.recall(f"{verdict} desk {cue}", top_k=5)}
        if verdict != "revision":
            assert engine.get(new.id).older_value is None  # no longer one value changed
        if verdict == "neutral":
            assert settled.newer_value is None and settled.valid_until is None
            assert found[old.id].current and found[new.id].current
        elif verdict == "revision":
            assert settled.superseded_by == new.id and settled.valid_until == new.created_at
            assert old.id not in found
        else:
            assert settled.newer_value is None and settled.conflicts_with == [new.id]
            assert found[old.id].current and found[old.id].conflicts_with == [new.id]


def test_a_contradicts_edge_added_by_hand_is_a_conflict_not_a_change(engine: Engine) -> None:
    """An agent's CONTRADICTS edge is a `contradiction` verdict given by hand: the value link between
    the two goes, and each names the other as a conflict."""
    old = engine.remember("The lab door code is 1234", created_at=1_750_000_000_000_000)
    new = engine.remember("The lab door code is 9876", created_at=1_760_000_000_000_000)
    assert engine.get(old.id).newer_value == new.id and engine.get(new.id).older_value == old.id
    engine.add_edge(new.id, "CONTRADICTS", old.id)
    a, b = engine.get(old.id), engine.get(new.id)
    assert a.newer_value is None and a.valid_until is None and b.older_value is None
    assert a.conflicts_with == [new.id] and b.conflicts_with == [old.id]
    found = {r.memory.id: r for r in engine.recall("what is the lab door code", top_k=3)}
    assert found[old.id].current and found[old.id].conflicts_with == [new.id]


def test_a_negation_in_another_verb_form_is_a_change(engine: Engine) -> None:
    """"likes" / "does not like": the check's stemming took "likes" to "lik" and left "like" whole, so
    the negation bore on no word of the other memory, and the older value was not marked."""
    t0 = 1_750_000_000_000_000
    old = engine.remember("The user likes spicy food", created_at=t0)
    new = engine.remember("The user does not like spicy food", created_at=t0 + DAY_US)
    assert engine.get(old.id).newer_value == new.id
    found = {r.memory.id: r for r in engine.recall("does the user like spicy food", top_k=3)}
    assert found[new.id].current and not found[old.id].current
    cats = engine.remember("The user likes cats", created_at=t0)
    engine.remember("The user likes dogs", created_at=t0 + DAY_US)
    assert engine.get(cats.id).newer_value is None  # two likes, not one value changed


CHANGE_T0 = 1_750_000_000_000_000


def _assert_changes(engine: Engine, pairs: list[tuple[str, str, str]]) -> None:
    """Each (older, newer, cue), the newer a day later: linked as the older's successor, ranked above it
    for the cue, the older marked."""
    for older, newer, cue in pairs:
        old = engine.remember(older, created_at=CHANGE_T0)
        new = engine.remember(newer, created_at=CHANGE_T0 + DAY_US)
        assert engine.get(old.id).newer_value == new.id, older
        found = engine.recall(cue, top_k=3)
        assert [r.memory.id for r in found][:2] == [new.id, old.id], cue
        assert found[0].current and not found[1].current


def _assert_two_facts(engine: Engine, pairs: list[tuple[str, str]]) -> None:
    """Each (older, newer), the newer a day later: two facts, the older not linked to the newer."""
    for older, newer in pairs:
        old = engine.remember(older, created_at=CHANGE_T0)
        engine.remember(newer, created_at=CHANGE_T0 + DAY_US)
        assert engine.get(old.id).newer_value is None, older


def test_a_changed_name_after_is_is_a_change(engine: Engine) -> None:
    """bench_truth's names and places: "Dana's manager is Priya Shah", then "... is Lukas Berg" was
    not linked (the check knew numbers, literals and negation only), so the older name stayed current.
    A copula holds one value at a time; a verb that may hold several ("likes") and a tail that says
    another thing ("is near the lake") are left alone."""
    pairs = [("Dana's manager is Priya Shah", "Dana's manager is Lukas Berg", "who is Dana's manager"),
             ("The team offsite this year is in Porto", "The team offsite this year is in Krakow",
              "where is the team offsite"),
             ("The default branch of the main repository is master",
              "The default branch of the main repository is trunk", "what is the default branch")]
    _assert_changes(engine, pairs)
    _assert_two_facts(engine, [("The user likes Vim", "The user likes Emacs"),
                               ("The cabin is in the Alps", "The cabin is near the lake"),
                               ("Alice is on call this week", "Bob is on call this week")])


def test_a_value_said_to_have_changed_is_a_change(engine: Engine) -> None:
    """Tried as a new user, in words of one's own: "The standup meeting is at 9:30", then "The standup
    meeting moved to 10:00", and five more such pairs, were two current facts, the older one often first:
    the check read the same statement with another value, and these say "moved to", "was upgraded to",
    "changed to", "now". A change verb with "to" about the same subject, or "now" in a sentence that
    otherwise repeats the other but for one value, makes the newer the older's successor; a state that is
    no value ("is protected" / "moved to main") and "now" about another thing are left alone."""
    pairs = [("The standup meeting is at 9:30", "The standup meeting moved to 10:00", "when is standup"),
             ("The staging server runs Ubuntu 22.04", "The staging server was upgraded to Ubuntu 24.04",
              "what OS does the staging server run"),
             ("The office wifi password is sunflower42", "The office wifi password changed to tulip77",
              "what is the office wifi password"),
             ("We deploy on Tuesdays", "We deploy on Thursdays now", "which day do we deploy"),
             ("Maria is the tech lead of the payments team", "Jonas is now the tech lead of the payments team",
              "who leads the payments team"),
             ("Sara lives in Berlin", "Sara moved to Munich", "where does Sara live"),
             ("Dana works as a nurse", "Dana works as a teacher now", "what is Dana's job")]
    _assert_changes(engine, pairs)
    _assert_two_facts(engine, [("The release branch is protected", "The release branch moved to main"),
                               ("Bob owns the billing service", "Alice now owns the search service")])
