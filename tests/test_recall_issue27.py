"""Defects of recall found by a feature audit through the daemon (issue 27). Each test failed before
its fix; real model, real vaults, the real daemon and CLI where the defect was seen there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from daemon_fixtures import DaemonHome

pytest_plugins = ["daemon_fixtures"]

TOPICS = ["checkout page timeouts with large carts", "login page blank on Safari", "CSV export drops last row",
          "search results missing recent items", "email digest sent twice", "avatar upload fails for PNG files",
          "dark mode contrast on settings page", "billing invoice rounding error", "API rate limit headers missing",
          "mobile push notifications delayed", "password reset link expires early", "report PDF fonts broken"]
FILLER = ("The team discussed the impact on customers, the support load, and the release plan. "
          "Engineering will profile the service, write a regression test and ship the fix behind a flag. "
          "QA verifies on staging before the weekly release train; the incident review follows on Thursday. ")


def _write_tickets(root: Path) -> None:
    """Twelve ticket notes of long, alike sections, each naming its key once, and a note about keys."""
    for i, topic in enumerate(TOPICS):
        note = root / "tickets" / f"{topic.split()[0].lower()}-{i}.md"
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text(f"# {topic.capitalize()}\n\n## Summary\n\n{FILLER * 2}The problem: {topic}. "
                        f"Tracked as PROJ-{4460 + i}.\n\n## Plan\n\n{FILLER}\n")
    (root / "tracker.md").write_text("# Tracker\n\n## Ticket keys\n\nEvery ticket in the PROJ project gets a key "
                                     "like PROJ-1234 and keys are never reused; link it in the pull request title.\n")


def _recall(daemon: "DaemonHome", project: Path, *args: str) -> dict:
    return json.loads(daemon.hebbs("recall", *args, "--format", "json", cwd=project).stdout)


def test_a_hyphenated_ticket_key_is_an_identifier(shared_daemon: "DaemonHome", project: Path) -> None:
    """Tried: `hebbs recall PROJ-4465 --top-k 1` in a notes vault of twelve alike ticket notes. Before,
    a key with a hyphen was not read as an identifier, the dense channel outweighed the exact match
    and the note about ticket keys in general came first for 3 of 12 keys (`--strategy lexical` had
    them all right). Every key now finds its own ticket, and the answer does not abstain."""
    _write_tickets(project)
    shared_daemon.hebbs("index", str(project), cwd=project)
    for i in range(len(TOPICS)):
        found = _recall(shared_daemon, project, f"PROJ-{4460 + i}", "--top-k", "1")
        assert found["results"][0]["memory"]["content"].rstrip().endswith(f"Tracked as PROJ-{4460 + i}."), (i, found)
        assert found["abstained"] is False
        assert found["results"][0]["details"]["lexical_weight"] == 0.8


def test_a_date_only_end_of_a_time_range_is_the_whole_day(shared_daemon: "DaemonHome", project: Path) -> None:
    """Tried: a memory remembered 2026-03-31 14:23, then `--time-range 2026-01-01..2026-03-31`. Before,
    the end meant 2026-03-31 00:00 and the memory was missed. A date alone as the end now means the
    whole day, through the CLI and the SDK alike; a time given as the end is still exact."""
    shared_daemon.hebbs("remember", "The quarterly vendor review found two duplicate invoices",
                        "--created-at", "2026-03-31T14:23:00Z", cwd=project)
    shared_daemon.hebbs("remember", "The vendor review of April found nothing", "--created-at",
                        "2026-04-01T00:00:00Z", cwd=project)
    found = _recall(shared_daemon, project, "vendor review", "--time-range", "2026-01-01..2026-03-31")
    assert [r["memory"]["content"] for r in found["results"]] == [
        "The quarterly vendor review found two duplicate invoices"]
    exact = _recall(shared_daemon, project, "vendor review", "--time-range", "2026-01-01..2026-03-31T12:00:00Z")
    assert exact["results"] == []
    with shared_daemon.client(project) as hb:
        assert len(hb.recall("vendor review", time_range=("2026-01-01", "2026-03-31")).results) == 1


RESTATED = ["The production deploy key is stored in the team vault under deploy/prod",
            "The production deploy key is kept in the team vault under deploy/prod",
            "Production's deploy key is stored in the team vault, under deploy/prod"]


def test_mmr_one_is_score_order_and_zero_is_diversity(shared_daemon: "DaemonHome", project: Path) -> None:
    """Tried: `--mmr 1` (the help said "pure relevance") on restatements of one fact among others.
    Before, restatements (cosine >= 0.95) still went last, so 1 reordered and only 0 ("off") gave
    score order. Now 1 is score order, 0 the most diverse, and the help says so."""
    with shared_daemon.client(project) as hb:
        hb.remember_many([{"content": t} for t in RESTATED + [
            "Deploys to production need an approval from the on-call engineer",
            "The staging deploy key rotates every ninety days",
            "Production deploys are frozen during the holiday period"]])
    cue = "where is the production deploy key stored"
    pure = _recall(shared_daemon, project, cue, "--top-k", "5", "--mmr", "1")
    scores = [r["score"] for r in pure["results"]]
    assert scores == sorted(scores, reverse=True)
    assert {r["memory"]["content"] for r in pure["results"][:3]} == set(RESTATED)
    diverse = _recall(shared_daemon, project, cue, "--top-k", "5", "--mmr", "0")
    assert diverse["results"][0]["memory"]["id"] == pure["results"][0]["memory"]["id"]
    assert len({r["memory"]["content"] for r in diverse["results"][:3]} & set(RESTATED)) == 1
    default = _recall(shared_daemon, project, cue, "--top-k", "5")
    assert [r["memory"]["content"] for r in default["results"][3:]] != [] and \
        len({r["memory"]["content"] for r in default["results"][:3]} & set(RESTATED)) == 1
    helped = " ".join(shared_daemon.hebbs("recall", "--help").stdout.split())
    assert "1 = pure relevance, results in score order" in helped and "0 = diversity alone" in helped


def test_the_panel_recall_form_carries_the_diversity_setting() -> None:
    """The panel's recall form has the same setting, says what its values mean, and sends it."""
    from starlette.datastructures import QueryParams

    from hebbs.daemon.panel import app, pages

    form, problems = app.recall_form(QueryParams("cue=deploy+key&mmr=1"), reinforce_allowed=False)
    assert problems == [] and form["mmr"] == 1.0
    command, _ = app.recall_command(form)
    assert command.mmr_lambda == 1.0
    assert "--mmr 1" in pages.command_line("/tmp/x/.hebbs", Path("/tmp/home"), form)
    html = pages.recall_form("/tmp/x/.hebbs", "t", form, [])
    assert 'name="mmr"' in html and "1 = score order, 0 = most diverse" in html
    bad, problems = app.recall_form(QueryParams("cue=x&mmr=2"), reinforce_allowed=False)
    assert bad["mmr"] is None and "from 0 to 1" in problems[0]
    assert app.recall_command(app.recall_form(QueryParams("cue=x"), reinforce_allowed=False)[0])[0].mmr_lambda is None


def test_a_notes_front_matter_type_sets_its_freshness(shared_daemon: "DaemonHome", project: Path) -> None:
    """Tried: a year-old note with `type: status` in its front matter beside a year-old note without
    a type, recalled as of today. Before, the type stayed under context.front_matter only, and the
    status note ranked as fresh as an untyped one (recency 0.5 in a 730-day window). Now it is the
    memory's context type: a status is stale after its 3-day half-life, and `get` shows the type."""
    (project / "status.md").write_text('---\ntype: status\ncreated: "2025-12-01T09:00:00Z"\n---\n# Billing migration status\n\n'
                                       "The billing migration is blocked on the invoice export.\n")
    (project / "plan.md").write_text('---\ncreated: "2025-12-01T09:00:00Z"\n---\n# Billing migration plan\n\n'
                                     "The billing migration moves invoices to the new ledger in two steps.\n")
    shared_daemon.hebbs("index", str(project), cwd=project)
    found = _recall(shared_daemon, project, "billing migration", "--now", "2026-12-01T09:00:00Z")
    by_file = {r["memory"]["context"]["file"]: r for r in found["results"]}
    assert by_file["status.md"]["memory"]["context"]["type"] == "status"
    assert by_file["status.md"]["components"]["recency"] == 0.0
    assert 0.45 < by_file["plan.md"]["components"]["recency"] < 0.55
    assert "type" not in by_file["plan.md"]["memory"]["context"]
