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


def test_literals_name_things_and_subject_words_tell_sections_apart():
    """npm docs: two commands described in parallel are two commands, not a disagreement."""
    assert classify('This runs a predefined command specified in the "stop" property of the "scripts" object.',
                    'This runs a predefined command specified in the `"start"` property of the `"scripts"` object.'
                    ).confidence == 0.0
    assert classify("## npm stop\n\nThe command stop runs the script of the package.",
                    "## npm start\n\nThe command start runs the script of the package.",
                    ("npm stop", "npm start")).confidence == 0.0
    # Without literals or subjects that tell them apart, the antonym still counts.
    assert classify("The nightly job is stopped on the staging cluster.",
                    "The nightly job is started on the staging cluster.").confidence > THRESHOLD


def test_a_choice_a_setting_offers_is_not_a_claim():
    assert classify("Use this setting to specify which tags should be excluded from the listing.",
                    "Use this setting to specify which tags should be included in the listing.",
                    ("Usage", "Usage")).confidence == 0.0


def test_the_same_sentence_with_another_value_is_a_candidate():
    verdict = classify("`check` checks whether the file is formatted with those options and returns a `Boolean`.",
                       "`check` checks whether the file is formatted with those options and returns a "
                       "`Promise<boolean>`.")
    assert verdict.confidence > THRESHOLD
    assert verdict.reasons[0] == "values differ: boolean vs promise<boolean>"
    # A literal in the subject's place names which thing is described.
    assert classify("The `and` function evaluates the arguments from left to right and returns early.",
                    "The `or` function evaluates the arguments from left to right and returns early.",
                    ("and", "or")).confidence == 0.0


OLD_DEFAULT = """## Trailing Commas

Print trailing commas wherever possible in multi-line comma-separated syntactic structures.

| Default  | CLI Override                     | API Override                      |
| -------- | -------------------------------- | --------------------------------- |
| `"none"` | <code>--trailing-comma</code>    | <code>trailingComma</code>        |
"""
NEW_DEFAULT = OLD_DEFAULT.replace('`"none"`', '`"all"` ')


def test_the_same_setting_with_another_default_is_a_candidate():
    verdict = classify(OLD_DEFAULT, NEW_DEFAULT, ("Trailing Commas", "Trailing Commas"))
    assert verdict.confidence > THRESHOLD and verdict.reasons[0] == "defaults differ for trailing commas: none vs all"
    assert classify("## save\n\n* Default: true\n* Type: Boolean", "## save\n\n* Default: false\n* Type: Boolean",
                    ("save", "save")).confidence > THRESHOLD
    # Two settings with different defaults are two settings, also under one generic heading.
    assert classify("## save\n\n* Default: true\n* Type: Boolean", "## dry-run\n\n* Default: false\n* Type: Boolean",
                    ("save", "dry-run")).confidence == 0.0
    assert classify("## Options\n\n### --audit-level\n\n* Default: **low**\n",
                    "## Options\n\n### --format\n\n* Default: **table**\n", ("Options", "Options")).confidence == 0.0


def test_a_negation_counts_only_where_it_bears_on_the_shared_statement():
    """pnpm docs: "Node does not use X, but instead, bar is resolved ..." denies "use", not "resolved"."""
    assert classify("Node does not use the copy in the project folder, but instead, bar is resolved to its real "
                    "location.",
                    "bar is resolved to its real location in the store.").confidence <= THRESHOLD
    assert classify("forget me please", "do not forget me please").confidence > THRESHOLD


def test_headings_and_sentences_both_memories_hold_are_not_where_they_differ():
    # Headings name cases ("Store path is NOT specified"); they assert nothing.
    assert classify("### Store path is specified\n\nCopying occurs between the store and other disks.",
                    "### Store path is NOT specified\n\nOne store is created per disk.").confidence == 0.0
    # Both memories describe the same two options: neither disagrees with the other.
    both = "Only development packages will be fetched.\nDevelopment packages will not be fetched."
    assert classify("### --dev\n\n" + both, "Options of fetch.\n\n" + both).confidence == 0.0


def test_a_vault_with_an_outdated_copy_queues_the_changed_default_not_parallel_commands(tmp_path, embedder):
    """A real vault: the options page in two versions side by side, and two command pages written in
    parallel. Indexing queues the changed default and not the two commands."""
    from hebbs.notes import index_notes

    root = tmp_path / "notes"
    (root / "v1").mkdir(parents=True)
    (root / "v2").mkdir()
    (root / "v1/options.md").write_text("# Options\n\n" + OLD_DEFAULT)
    (root / "v2/options.md").write_text("# Options\n\n" + NEW_DEFAULT)
    for verb in ("start", "stop"):
        (root / f"npm-{verb}.md").write_text(
            f"# npm {verb}\n\nThis runs a predefined command specified in the `\"{verb}\"` property of a "
            f"package's `\"scripts\"` object.\n\n```bash\nnpm {verb} [-- <args>]\n```\n")
    with Engine.open(root / ".hebbs", embedder=embedder) as eng:
        index_notes(eng, root)
        files = {m.id: m.source.file_path for m in eng.memories()}
        pairs = {frozenset((files[p.memory_a], files[p.memory_b])) for p in eng.pending()}
        assert pairs == {frozenset(("v1/options.md", "v2/options.md"))}
        assert all(m.superseded_by is None for m in eng.memories())  # queued for review, nothing resolved


def test_examples_typo_fixes_code_lines_and_cross_references_are_not_values():
    """Vite docs, two versions side by side: what changed there is not a changed fact."""
    assert classify("You can specify additional CLI options like `--port` or `--open`.",
                    "You can specify additional CLI options like `--port` or `--https`.").confidence == 0.0
    assert classify("In the build, `.wasm` files smaller than `assetInlineLimit` will be inlined as base64 strings.",
                    "In the build, `.wasm` files smaller than `assetsInlineLimit` will be inlined as base64 strings."
                    ).confidence == 0.0
    assert classify("target: 'ws://localhost:5174',", "target: 'ws://localhost:5173',").confidence == 0.0
    # Each page links the other in backticks; they stay two settings.
    assert classify("## ssr.noExternal\n\nBy default, only linked dependencies are not externalized. "
                    "See `ssr.external`.",
                    "## ssr.external\n\nBy default, all dependencies are externalized except for linked dependencies. "
                    "Listed ones take priority over `ssr.noExternal`.",
                    ("ssr.noExternal", "ssr.external")).confidence <= THRESHOLD
    # A default is compared without quotes and notes, and not from a code example.
    assert classify("## worker.format\n\n- **Default:** `'iife'`", "## worker.format\n\n- **Default:** `iife`",
                    ("worker.format", "worker.format")).confidence == 0.0
    assert classify("## css.modules\n\n```ts\n/** default: undefined */\n```",
                    "## css.modules\n\n```ts\n/** default: null */\n```",
                    ("css.modules", "css.modules")).confidence == 0.0
    # A renamed value stays a candidate.
    assert classify("## build.minify\n\n- **Default:** `'esbuild'`", "## build.minify\n\n- **Default:** `'oxc'`",
                    ("build.minify", "build.minify")).confidence > THRESHOLD
