"""The heuristic contradiction classifier, alone and over a real engine's neighbours."""

from __future__ import annotations

import pytest

from hebbs import Engine
from hebbs.workflows.contradiction_check import MAX_CONFIDENCE, THRESHOLD, classify, find_candidates


@pytest.mark.parametrize("a, b, cue", [
    ("The deploy pipeline is reliable.", "The deploy pipeline is unreliable.", "antonyms: reliable / unreliable"),
    ("The nightly backup job succeeded on Monday.", "The nightly backup job failed on Monday.", "antonyms"),
    ("Feature flags are enabled in production.", "Feature flags are disabled in production.", "antonyms"),
    ("Acme renews the Salesforce contract in March.", "Acme does not renew the Salesforce contract in March.",
     "negation: only b negates"),
    ("The API timeout is 30 seconds.", "The API timeout is 60 seconds.", "numbers differ: 30 vs 60"),
])
def test_planted_contradictions_score_above_the_threshold(a, b, cue):
    verdict = classify(a, b)
    assert THRESHOLD < verdict.confidence <= MAX_CONFIDENCE
    assert any(r.startswith(cue) for r in verdict.reasons)
    assert verdict.reasons[-2].startswith("a: ") and verdict.reasons[-1].startswith("b: ")
    assert classify(b, a).confidence == verdict.confidence  # symmetric


@pytest.mark.parametrize("a, b", [
    ("The deploy pipeline is reliable and fast.", "Our deploy pipeline is reliable; builds finish fast."),
    ("Acme uses Salesforce for their CRM.", "Bob likes green tea in the morning."),
    ("The pipeline is reliable.", "Lunch was unreliable."),  # an antonym, but not the same statement
    ("Carol prefers email.", "Carol prefers email."),
])
def test_consistent_or_unrelated_pairs_score_nothing(a, b):
    assert classify(a, b).confidence <= THRESHOLD


def test_revision_markers_strengthen_but_never_stand_alone():
    alone = classify("Acme uses Salesforce for the CRM.", "Acme now uses Salesforce for the CRM.")
    assert alone.confidence == 0.0
    both = classify("Acme uses Salesforce for the CRM.", "Acme no longer uses Salesforce for the CRM, instead HubSpot.")
    negation_only = classify("Acme uses Salesforce for the CRM.", "Acme does not use Salesforce for the CRM.")
    assert both.confidence > negation_only.confidence > THRESHOLD
    assert any(r.startswith("revision marker") for r in both.reasons)


def test_confidence_is_capped():
    a = "The service is reliable, fast and enabled with 3 replicas."
    b = "The service is not reliable, it is unreliable, slow and disabled with 5 replicas now."
    assert classify(a, b).confidence == MAX_CONFIDENCE


def test_sections_are_judged_sentence_by_sentence():
    a = "## Ops\n\nWe moved to a new office. The deploy pipeline is reliable since March. Coffee is good."
    b = "## Retro\n\nThe team grew to eight people.\nThe deploy pipeline is unreliable since March."
    verdict = classify(a, b)
    assert verdict.confidence > THRESHOLD
    assert verdict.reasons[-2] == 'a: "The deploy pipeline is reliable since March."'


def test_find_candidates_over_engine_neighbours(tmp_path, embedder):
    with Engine.open(tmp_path / "v", embedder=embedder) as eng:
        yes, no, other, also = eng.remember_many([
            {"content": "The staging database is healthy after the upgrade."},
            {"content": "The staging database is unhealthy after the upgrade."},
            {"content": "Quarterly revenue grew in the Nordics."},
            {"content": "The staging database is healthy and backed up after the upgrade."},
        ])
        found = find_candidates(eng, [no.id])
        assert [(p.memory_a, p.memory_b) for p in found] == [(no.id, yes.id)] or \
            {frozenset((p.memory_a, p.memory_b)) for p in found} == {frozenset((no.id, yes.id)),
                                                                      frozenset((no.id, also.id))}
        pair = next(p for p in found if yes.id in (p.memory_a, p.memory_b))
        assert pair.similarity >= 0.5 and THRESHOLD < pair.confidence <= MAX_CONFIDENCE
        assert find_candidates(eng, [no.id], skip=lambda a, b: True) == []
        assert find_candidates(eng, [other.id]) == []
        eng.add_pending(found)
        eng.add_pending(found)  # queued once
        assert len(eng.pending()) == len(found)


def test_one_negation_and_one_antonym_say_the_same():
    """Held-out docs: "all pages are included" and "no pages are excluded" agree."""
    assert classify("If this setting is left empty, all tags and pages are included.",
                    "If this setting is left empty, no tags or pages are excluded.").confidence == 0.0
    assert classify("Locked notes open only with the password.",
                    "Unlocked notes open without the password.").confidence <= THRESHOLD


def test_different_versions_are_different_objects():
    """Two versions' behaviour, each stated as such, is history rather than a disagreement."""
    verdict = classify("In Jekyll 2, any URL built from the permalink field had a trailing slash added automatically.",
                       "Jekyll 3 no longer adds a trailing slash automatically to permalink URLs.")
    assert verdict.confidence <= THRESHOLD
    assert classify("The request timeout is 30 seconds.", "The request timeout is 60 seconds.").confidence > THRESHOLD


def test_soft_wrapped_lines_markers_and_settings_are_not_claims():
    wrapped = "The format string must adhere to the pattern syntax and should not\ncontain any slashes."
    assert classify(wrapped, "The format string must adhere to the pattern syntax.").confidence <= THRESHOLD
    assert classify("Lorem ipsum dolor sit amet, (2) consectetur adipiscing elit.",
                    "Lorem ipsum dolor sit amet, (1) consectetur adipiscing elit.").confidence == 0.0
    assert classify("post_excerpt_max_categories: 2", "post_excerpt_max_categories: 0").confidence == 0.0
    # A copy cut short holds fewer numbers, not other ones.
    assert classify("An egg is 5 to 8 cm long and 4.5 to 5.5 cm wide, about",
                    "An egg is 5 to 8 cm long and 4.5 to 5.5 cm wide, about 2 inches").confidence == 0.0
