"""Issue 41 findings 5 and 6, through a real daemon and the `hebbs` CLI: a memory that matches what a
cue names is not an answer to what it asks (an attribute never stored abstains), a stored fact asked
in other words still answers, and a cue does not pass on a candidate that top_k leaves out."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hebbs.recall import confidence

if TYPE_CHECKING:
    from daemon_fixtures import DaemonHome

pytest_plugins = ["daemon_fixtures"]

DAY_US = 86_400 * 1_000_000
# A few facts about Acme among what an agent's vault holds (SKILL.md's global preference among them).
FACTS = ["Acme uses Salesforce as its CRM and renews the contract every March",
         "Acme's office is in Berlin",
         "Acme's main contact is Dana Lee",
         "Acme is on the Enterprise plan",
         "Acme pays invoices net 30",
         "The user prefers pytest over unittest and wants tests to use real components, not mocks",
         "The deploy pipeline runs on GitHub Actions and takes about twelve minutes",
         "The team offsite is in Madrid, the capital of Spain, every spring",
         "The staging database is Postgres 15, restored from production every Sunday"]
NEVER_STORED = ("When was Acme founded?", "What is Acme's phone number?", "How many employees does Acme have?",
                "Who is Acme's CEO?", "What is the capital of Portugal?")
PARAPHRASES = ("what does the user think of unit test frameworks", "which testing library does the user like")


def _recall(daemon: "DaemonHome", project: Path, cue: str, *args: str) -> dict[str, Any]:
    return json.loads(daemon.hebbs("recall", cue, *args, "--format", "json", cwd=project).stdout)


def test_an_attribute_never_stored_abstains_and_a_paraphrase_answers(shared_daemon: "DaemonHome",
                                                                      project: Path) -> None:
    """Tried as a new user: with a few facts about Acme stored, "When was Acme founded?" answered at
    0.73 with the Enterprise plan, the phone number at 0.55, the number of employees at 0.40, and the
    capital of Portugal with the Madrid offsite: each memory matches what the cue names (Acme, a
    capital), not what it asks. Each abstains now, with the note saying which word no memory holds.
    "what does the user think of unit test frameworks" abstained (0.20) with the pytest preference at
    rank 1; it answers now, as "which testing library does the user like" does. The facts asked in
    the vault's own words answer as before."""
    shared_daemon.client(project).remember_many([{"content": t} for t in FACTS])
    for cue in NEVER_STORED:
        found = _recall(shared_daemon, project, cue, "--top-k", "3")
        assert found["abstained"], (cue, found["confidence"], [r["memory"]["content"] for r in found["results"]])
        assert found["confidence"] < found["threshold"]
        # Portugal's capital falls below the threshold by the calibration alone, here as on main.
        assert "Portugal" in cue or any(n.startswith("no memory holds") for n in found["notes"]), (cue, found["notes"])
    for cue in PARAPHRASES:
        found = _recall(shared_daemon, project, cue, "--top-k", "3")
        assert not found["abstained"], (cue, found["confidence"])
        assert found["results"][0]["memory"]["content"] == FACTS[5], cue
        assert found["results"][0]["confidence"] >= found["threshold"], cue
    for cue, expected in (("which CRM does Acme use", 0), ("where is Acme's office", 1),
                          ("who is Acme's main contact", 2), ("how long does the deploy take", 6)):
        found = _recall(shared_daemon, project, cue, "--top-k", "3")
        assert not found["abstained"] and found["results"][0]["memory"]["content"] == FACTS[expected], cue
    table = shared_daemon.hebbs("recall", "When was Acme founded?", "--top-k", "2", cwd=project).stdout
    assert table.startswith("No good match") and "no memory holds 'founded'" in table


def test_a_cue_does_not_pass_on_a_candidate_below_the_results_shown(shared_daemon: "DaemonHome",
                                                                    project: Path) -> None:
    """Tried: top_k 1 over a vault where the memory that answers is old and unimportant, and a new,
    important one on the same topic ranks first by score. The answer said `abstained: false` from the
    hidden match's confidence while the one result shown was below the threshold. Now the verdict is
    the results': it abstains and says a more confident match ranks below them; with room for it, it
    answers."""
    old = time.time_ns() // 1000 - 800 * DAY_US
    shared_daemon.client(project).remember_many([
        {"content": "Acme uses Salesforce as its CRM and renews the contract every March", "importance": 0.1,
         "created_at": old},
        {"content": "Our sales team tracks every deal and contact in a shared spreadsheet", "importance": 1.0}])
    one = _recall(shared_daemon, project, "which CRM does Acme use", "--top-k", "1")
    assert one["results"][0]["memory"]["content"].startswith("Our sales team"), one["results"]
    assert one["results"][0]["confidence"] < one["threshold"]
    assert one["abstained"] and one["confidence"] == one["results"][0]["confidence"]
    assert any("ranks below the results shown: raise top_k" in n for n in one["notes"]), one["notes"]
    two = _recall(shared_daemon, project, "which CRM does Acme use", "--top-k", "2")
    assert not two["abstained"] and two["confidence"] >= two["threshold"]


def test_a_quantity_no_memory_holds_abstains_without_an_unseen_word(engine: Any) -> None:
    """"How old is Dana?" over facts about Dana, none with a number: "old" is a common word, so no
    word of the cue is unseen and the answer check was never asked; "Dana lives in Lisbon" answered
    at 0.85. A fact that holds a number still answers a count."""
    for text in ("Dana drinks green tea every morning", "Dana is allergic to peanuts", "Dana lives in Lisbon",
                 "Dana plays the guitar on weekends", "Dana works as a nurse"):
        engine.remember(text)
    old = engine.recall("How old is Dana?", top_k=3)
    assert old.abstained
    # The note says why; it read "no memory holds : ..." (no word named) when the number decided.
    assert not any(n.startswith("no memory holds") for n in old.notes), old.notes
    assert any(n.startswith("the cue asks for a number") for n in old.notes), old.notes
    engine.remember("Dana has 2 dogs named Rex and Bo")
    found = engine.recall("How many dogs does Dana have?", top_k=3)
    assert not found.abstained and found.results[0].memory.content == "Dana has 2 dogs named Rex and Bo"


def test_a_paraphrase_is_not_ranked_under_the_entitys_shortest_fact(engine: Any) -> None:
    """bench_truth's paraphrases: among seven facts about Acme, "who should I talk to at Acme" put
    "Acme is on the Enterprise plan" first and the main contact third. Every lexical hit held "Acme"
    alone, and BM25 told them apart by length, which min-max made the channel's whole range; the
    dense channel, which reads what is asked, was outweighed. Hits that hold the same cue words are
    now equal in the lexical channel, and the meaning decides among them."""
    engine.remember_many([{"content": t} for t in (
        "Acme uses Salesforce as its CRM", "Acme's office is in Berlin", "Acme's main contact is Dana Lee",
        "Acme is on the Enterprise plan", "Acme pays invoices net 30", "Acme's contract renews every March",
        "Acme asked for SSO support last quarter")], check_contradictions=False)
    for cue, expected in (("who should I talk to at Acme", "Acme's main contact is Dana Lee"),
                          ("what month does Acme's agreement come up again", "Acme's contract renews every March")):
        found = engine.recall(cue, top_k=3)
        assert found[0].memory.content == expected, (cue, [r.memory.content for r in found])
        assert found[0].details["lexical_rank"] > 1  # BM25 alone still ranks the shorter fact first


def test_a_count_is_answered_by_a_count_not_by_any_number(engine: Any) -> None:
    """"How many employees does Acme have?" answered 0.29 with "Acme pays invoices net 30" once that fact
    ranked among the results shown: it holds a number, which was all the quantity rule asked. A count
    is written before what it counts; a fact that states one answers, in other words too."""
    engine.remember_many([{"content": t} for t in (
        "Acme pays invoices net 30", "Acme's office is in Berlin", "Acme is on the Enterprise plan",
        "Acme's main contact is Dana Lee", "Acme's staging database is Postgres 15")], check_contradictions=False)
    assert engine.recall("How many employees does Acme have?", top_k=5).abstained
    # A number that ends a name counts nothing: "the eu-west-1 region" counted one region.
    assert not confidence.holds_quantity("Customer data is stored in the eu-west-1 region", count=True)
    engine.remember("Acme has 250 people on staff")
    found = engine.recall("How many employees does Acme have?", top_k=5)
    assert not found.abstained and found[0].memory.content == "Acme has 250 people on staff"


def test_a_time_or_an_age_is_answered_by_one(engine: Any) -> None:
    """"When was Umbrella founded?" answered 0.73 with "Umbrella is on the Business plan", and "How old
    is Priya?" 0.81 with "Priya has two rabbits" (a number, so the quantity rule let it pass). A memory
    that shares only what the cue names answers a "when" when it says when, an age when it states one."""
    engine.remember_many([{"content": t} for t in (
        "Umbrella is on the Business plan", "Umbrella's office is in Lyon", "Umbrella pays invoices net 30",
        "Priya has two rabbits", "Priya lives in Oslo", "Priya works as an architect")], check_contradictions=False)
    for cue in ("When was Umbrella founded?", "How old is Priya?"):
        found = engine.recall(cue, top_k=5)
        assert found.abstained, (cue, found.confidence, [r.memory.content for r in found])
        assert any(n.startswith("the cue asks for") or n.startswith("no memory holds") for n in found.notes), found.notes
    engine.remember_many([{"content": "Umbrella was founded in 1999"}, {"content": "Priya is 34"}],
                         check_contradictions=False)
    for cue, expected in (("When was Umbrella founded?", "Umbrella was founded in 1999"),
                          ("How old is Priya?", "Priya is 34")):
        found = engine.recall(cue, top_k=5)
        assert not found.abstained and found[0].memory.content == expected, (cue, [r.memory.content for r in found])


def test_a_place_is_answered_by_a_memory_that_says_where(engine: Any) -> None:
    """"Where did Kenji go to university?" answered 0.84 with "Kenji works as a teacher"; and "which
    city does Kenji call home" answered only because a memory that says nothing of a city was not held
    back, while "Kenji lives in Sapporo" was (the unseen "call" moved the cue away from it). A memory
    that shares only the name answers a "where" when it says where, and then that is enough."""
    engine.remember_many([{"content": t} for t in (
        "Kenji works as a teacher", "Kenji has a cat named Mochi", "Kenji drinks barley tea every morning",
        "Kenji is allergic to eggs", "Kenji plays the guitar on weekends")], check_contradictions=False)
    found = engine.recall("Where did Kenji go to university?", top_k=5)
    assert found.abstained, (found.confidence, [r.memory.content for r in found])
    engine.remember("Kenji lives in Sapporo")
    found = engine.recall("which city does Kenji call home", top_k=5)
    assert not found.abstained and found[0].memory.content == "Kenji lives in Sapporo"
    assert found[0].confidence >= found.threshold  # the answer is the memory that says where
    assert all(r.confidence < found.threshold for r in found.results[1:]), [(r.memory.content, r.confidence) for r in found]


def test_an_address_is_answered_by_a_memory_that_holds_one(engine: Any) -> None:
    """"What is Dana's email address?" answered 0.30 with "Dana lives in Lisbon" ("address" is close in
    meaning), and "What is Globex's website?" 0.51 with "Globex is on the Team plan". A question that
    ends on an email or web address is answered by a memory that holds one, in other words too."""
    engine.remember_many([{"content": t} for t in (
        "Dana lives in Lisbon", "Dana works as a nurse", "Dana has a dog named Rex",
        "Globex's office is in Toronto", "Globex is on the Team plan", "Globex uses HubSpot as its CRM")],
        check_contradictions=False)
    for cue in ("What is Dana's email address?", "What is Globex's website?"):
        found = engine.recall(cue, top_k=5)
        assert found.abstained, (cue, found.confidence, [r.memory.content for r in found])
        assert any(n.startswith("the cue asks for") or n.startswith("no memory holds") for n in found.notes), found.notes
    engine.remember_many([{"content": "Dana can be reached at dana.lee@example.com"},
                          {"content": "Globex's home page is globex.com"}], check_contradictions=False)
    for cue, expected in (("What is Dana's email address?", "Dana can be reached at dana.lee@example.com"),
                          ("What is Globex's website?", "Globex's home page is globex.com")):
        found = engine.recall(cue, top_k=5)
        assert not found.abstained and found[0].memory.content == expected, (cue, [r.memory.content for r in found])
    # "email" as a verb asks for no address: the rule leaves the cue to the calibration.
    assert confidence.form_asked("What did Dana email me about?") is None
    # A loopback address is a web address too ("What is the panel's URL?" over this repository's docs).
    assert confidence.holds_form("the panel is served on 127.0.0.1:6381", "a web address")
    assert confidence.holds_form("open http://localhost:6381/", "a web address")


def test_an_amount_of_money_is_answered_by_a_sum(engine: Any) -> None:
    """"What was Acme's revenue last year?" answered 0.33 with "Acme asked for SSO support last quarter"
    (and a number would not do: "Acme pays invoices net 30" is no revenue). A sum of money has its
    currency or its scale; one stated in other words answers. The abstain note's confidence is never
    written as the threshold it is below ("0.22 < 0.22" for 0.2195)."""
    engine.remember_many([{"content": t} for t in (
        "Acme pays invoices net 30", "Acme's office is in Berlin", "Acme is on the Enterprise plan",
        "Acme asked for SSO support last quarter", "Acme's main contact is Dana Lee")], check_contradictions=False)
    cue = "What was Acme's revenue last year?"
    found = engine.recall(cue, top_k=5)
    assert found.abstained, (found.confidence, [r.memory.content for r in found])
    note = next(n for n in found.notes if "nothing relevant known" in n)
    shown, threshold = re.search(r"best confidence ([\d.]+) < ([\d.]+)", note).groups()
    assert float(shown) < float(threshold) and float(shown) == pytest.approx(found.confidence, abs=0.005), note
    engine.remember("Acme made 40 million dollars in sales last year")
    found = engine.recall(cue, top_k=5)
    assert not found.abstained and found[0].memory.content == "Acme made 40 million dollars in sales last year"


def test_a_weekday_in_the_plural_says_when(engine: Any) -> None:
    """"which day do we deploy" abstained (0.20) over "We deploy on Thursdays": the time rule knew
    "Thursday" and not "Thursdays", so the memory that says when was taken for one that does not."""
    engine.remember_many([{"content": t} for t in (
        "We deploy on Thursdays", "The deploy pipeline runs on GitHub Actions", "Deploys need one approval")],
        check_contradictions=False)
    found = engine.recall("which day do we deploy", top_k=3)
    assert not found.abstained and found[0].memory.content == "We deploy on Thursdays", (
        found.confidence, [(r.memory.content, r.confidence) for r in found])
