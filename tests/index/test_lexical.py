"""Tests for hebbs.index.lexical: tokenizer rules and the persistent tantivy BM25 index (real files)."""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hebbs.index.lexical import FORMAT_VERSION, STATE_FILE, LexicalIndex, LexicalIndexBusy, tokenize


def mid(n: int) -> bytes:
    return n.to_bytes(16, "big")


DISTRACTORS = [
    "the connection was reset by the server after an error",
    "error handling for conn pools and reset logic",
    "we picked the top results and kept k of them",
    "top k sampling is a decoding strategy",
    "version 2 of the api shipped in march 3",
    "released v2 with 1 new feature",
    "snake case is a naming style used in python",
    "the name of the snake in the case was unknown",
    "markdown file with notes about md rendering",
    "a file saved to disk",
    "Alice reviewed the pull request about retries",
    "meeting notes on quarterly planning and budget",
    "deploy script failed due to a missing env var",
    "the cache hit ratio dropped after the deploy",
    "Bob prefers tabs over spaces in config files",
    "use the reset button to restart the router",
    "error rates went up during the top of the hour",
    "timeouts in the http client need tuning",
    "kubernetes pod crashed with OOM kill",
    "postgres vacuum runs every night",
]

TARGETS = {
    "ERR_CONN_RESET": "the upstream failed with ERR_CONN_RESET during sync",
    "--top-k": "pass --top-k 50 to the recall command",
    "v2.3.1": "upgrade the client to v2.3.1 before friday",
    "snake_case_name": "rename the variable to snake_case_name in the parser",
    "file.md": "the summary lives in docs/file.md now",
}
PARTIALS = {
    "ERR_CONN_RESET": "conn",
    "--top-k": "top",
    "v2.3.1": "v2",
    "snake_case_name": "snake",
    "file.md": "file",
}


@pytest.fixture
def index_dir(tmp_path: Path) -> Path:
    return tmp_path / "lexical"


@pytest.fixture
def ix(index_dir: Path) -> Iterator[LexicalIndex]:
    index = LexicalIndex.open(index_dir)
    yield index
    index.close()


def corpus() -> list[tuple[bytes, str]]:
    docs = [(mid(i), text) for i, text in enumerate(DISTRACTORS)]
    docs += [(mid(100 + i), text) for i, text in enumerate(TARGETS.values())]
    return docs


def target_id(identifier: str) -> bytes:
    return mid(100 + list(TARGETS).index(identifier))


def ids(results: list[tuple[bytes, float]]) -> list[bytes]:
    return [r[0] for r in results]


# ---- tokenizer ------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("ERR_CONN_RESET", ["err_conn_reset", "err", "conn", "reset"]),
    ("--top-k", ["--top-k", "top-k", "top", "k"]),
    ("file.md", ["file.md", "file", "md"]),
    ("snake_case_name", ["snake_case_name", "snake", "case", "name"]),
    ("camelCase", ["camelcase", "camel", "case"]),
])
def test_tokenize_identifiers(text: str, expected: list[str]) -> None:
    assert tokenize(text) == expected


def test_tokenize_versions_paths_and_flags() -> None:
    assert tokenize("v2.3.1")[0] == "v2.3.1"
    assert "file.md" in tokenize("see docs/file.md")
    assert tokenize("--top-k=5")[:2] == ["--top-k", "top-k"]
    assert "parsehttprespons" not in tokenize("parseHTTPResponse")  # compound stays unstemmed
    assert tokenize("parseHTTPResponse")[:3] == ["parsehttpresponse", "pars", "http"]


def test_tokenize_words_stopwords_and_punctuation() -> None:
    assert tokenize("done.") == ["done"]
    assert tokenize("end,") == ["end"]
    assert tokenize("The user's files") == ["user", "file"]
    assert tokenize("Running runs") == ["run", "run"]
    assert tokenize("the and of to") == []
    assert tokenize("") == [] and tokenize("  ...  - ") == []


def test_a_possessive_is_the_name_it_belongs_to() -> None:
    """"James's car" gave "jamess", which no text about James holds ("James" stems to "jame"): a
    question about James's car found nothing by its name. The possessive goes whole."""
    for name in ("James", "Charles", "boss", "Dana", "Johns"):
        assert tokenize(f"{name}'s car")[0] == tokenize(name)[0], name
        assert tokenize(f"{name}\u2019s car")[0] == tokenize(name)[0], name
    assert tokenize("don't stop") == ["dont", "stop"]  # other apostrophes between letters go as before


# ---- ranking --------------------------------------------------------------------------------

@pytest.mark.parametrize("identifier", list(TARGETS))
def test_identifier_ranks_first_and_partials_match(ix: LexicalIndex, identifier: str) -> None:
    ix.upsert(corpus())
    ix.commit(1)
    results = ix.search(identifier, 10)
    assert ids(results)[0] == target_id(identifier)
    assert target_id(identifier) in ids(ix.search(PARTIALS[identifier], 25))


def test_scores_descending_and_k_respected(ix: LexicalIndex) -> None:
    ix.upsert(corpus())
    ix.commit(1)
    results = ix.search("error reset top file", 5)
    assert len(results) == 5
    scores = [s for _, s in results]
    assert scores == sorted(scores, reverse=True)
    assert ix.search("error", 0) == []


def test_stemming(ix: LexicalIndex) -> None:
    ix.upsert([(mid(1), "the backup job runs nightly"), (mid(2), "unrelated text")])
    ix.commit(1)
    assert ids(ix.search("running", 5)) == [mid(1)]


def test_person_name(ix: LexicalIndex) -> None:
    ix.upsert(corpus())
    ix.commit(1)
    assert ids(ix.search("what did Alice say?", 3))[0] == mid(10)


# ---- writes ---------------------------------------------------------------------------------

def test_upsert_replaces(ix: LexicalIndex) -> None:
    ix.upsert([(mid(1), "original zebra text"), (mid(2), "zebra elsewhere")])
    ix.commit(1)
    ix.upsert([(mid(1), "replacement giraffe text")])
    ix.commit(2)
    assert ix.count() == 2
    assert ids(ix.search("zebra", 5)) == [mid(2)]
    assert ids(ix.search("giraffe", 5)) == [mid(1)]


def test_duplicate_id_within_one_batch_keeps_last(ix: LexicalIndex) -> None:
    ix.upsert([(mid(1), "first version"), (mid(1), "second version")])
    ix.commit(1)
    assert ix.count() == 1
    assert ix.search("first", 5) == []


def test_remove(ix: LexicalIndex) -> None:
    ix.upsert(corpus())
    ix.commit(1)
    ix.remove([target_id("file.md"), mid(999)])  # unknown ids are ignored
    ix.commit(2)
    assert target_id("file.md") not in ids(ix.search("file.md", 50))
    assert ix.count() == len(corpus()) - 1


def test_bad_ids_rejected(ix: LexicalIndex) -> None:
    with pytest.raises(ValueError):
        ix.upsert([(b"short", "text")])
    with pytest.raises(ValueError):
        ix.remove([b"x" * 17])


def test_empty_text_is_counted_but_unfindable(ix: LexicalIndex) -> None:
    ix.upsert([(mid(1), ""), (mid(2), "the of and")])
    ix.commit(1)
    assert ix.count() == 2
    assert ix.search("anything", 5) == []


# ---- durability -----------------------------------------------------------------------------

def test_commit_is_lazy_but_search_sees_it(index_dir: Path) -> None:
    with LexicalIndex.open(index_dir, flush_delay=60) as ix:
        ix.upsert([(mid(1), "lazy commit body")])
        ix.commit(7)
        assert ix.applied_seq == -1 and ix.pending_seq == 7  # not durable yet
        assert ids(ix.search("lazy", 5)) == [mid(1)]          # search forces the flush
        assert ix.applied_seq == 7 and ix.pending_seq is None


def test_background_flush(index_dir: Path) -> None:
    with LexicalIndex.open(index_dir, flush_delay=0.05) as ix:
        ix.upsert([(mid(1), "timer body")])
        ix.commit(3)
        deadline = time.monotonic() + 60  # a guard, not a timing: the disk is shared with the other workers
        while ix.applied_seq != 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ix.applied_seq == 3
        assert json.loads((index_dir / STATE_FILE).read_text())["seq"] == 3


def test_sync_commit_with_zero_delay(index_dir: Path) -> None:
    with LexicalIndex.open(index_dir, flush_delay=0) as ix:
        ix.upsert([(mid(1), "sync body")])
        ix.commit(4)
        assert ix.applied_seq == 4


def test_persistence_across_reopen(index_dir: Path) -> None:
    queries = ["ERR_CONN_RESET", "--top-k", "file.md", "error reset", "snake"]
    with LexicalIndex.open(index_dir) as ix:
        ix.upsert(corpus())
        ix.commit(41)
        ix.remove([mid(3)])
        ix.commit(42)
        before = {q: ix.search(q, 10) for q in queries}
    with LexicalIndex.open(index_dir) as ix:
        assert ix.applied_seq == 42
        assert ix.count() == len(corpus()) - 1
        assert {q: ix.search(q, 10) for q in queries} == before


def test_close_flushes_pending(index_dir: Path) -> None:
    ix = LexicalIndex.open(index_dir, flush_delay=60)
    ix.upsert([(mid(1), "pending at close")])
    ix.commit(9)
    ix.close()
    ix.close()  # idempotent
    with LexicalIndex.open(index_dir) as again:
        assert again.applied_seq == 9 and again.count() == 1


def test_uncommitted_changes_lost_on_crash_are_detected(index_dir: Path) -> None:
    with LexicalIndex.open(index_dir, flush_delay=0) as ix:
        ix.upsert([(mid(1), "durable")])
        ix.commit(1)
        # Simulate a crash: pending work never reaches disk because the process dies.
        ix.upsert([(mid(2), "lost")])
        ix._pending_seq = None  # what a crash before the flush amounts to
    with LexicalIndex.open(index_dir) as ix:
        assert ix.applied_seq == 1  # behind the engine's seq 2 -> engine rebuilds


def test_deleted_directory_then_rebuild(index_dir: Path) -> None:
    with LexicalIndex.open(index_dir) as ix:
        ix.upsert(corpus())
        ix.commit(5)
        expected = ix.search("ERR_CONN_RESET reset", 10)
    shutil.rmtree(index_dir)
    with LexicalIndex.open(index_dir) as ix:
        assert ix.applied_seq == -1 and ix.count() == 0
        ix.rebuild(iter(corpus()), 5)
        assert ix.applied_seq == 5
        assert ix.search("ERR_CONN_RESET reset", 10) == expected
    with LexicalIndex.open(index_dir) as ix:
        assert ix.applied_seq == 5


def test_rebuild_replaces_everything(ix: LexicalIndex) -> None:
    ix.upsert([(mid(1), "old content walrus")])
    ix.commit(1)
    ix.rebuild([(mid(2), "new content otter")], 2)
    assert ix.count() == 1 and ix.applied_seq == 2
    assert ix.search("walrus", 5) == []


def _segment_file(index_dir: Path, suffix: str) -> Path:
    return next(p for p in index_dir.iterdir() if p.name.endswith(suffix) and p.name != "meta.json")


@pytest.mark.parametrize("damage", ["meta_garbage", "segment_truncated", "segment_deleted", "state_garbage",
                                    "state_other_format", "state_other_tantivy", "state_deleted"])
def test_corruption_recovers_empty(index_dir: Path, damage: str, caplog: pytest.LogCaptureFixture) -> None:
    with LexicalIndex.open(index_dir) as ix:
        ix.upsert(corpus())
        ix.commit(5)
    if damage == "meta_garbage":
        (index_dir / "meta.json").write_bytes(b"\x00not json\xff")
    elif damage == "segment_truncated":
        term = _segment_file(index_dir, ".term")
        term.write_bytes(term.read_bytes()[: term.stat().st_size // 2])
    elif damage == "segment_deleted":
        _segment_file(index_dir, ".idx").unlink()
    elif damage == "state_garbage":
        (index_dir / STATE_FILE).write_text("{{{")
    elif damage == "state_deleted":
        (index_dir / STATE_FILE).unlink()
    else:
        state = json.loads((index_dir / STATE_FILE).read_text())
        key = "format" if damage == "state_other_format" else "tantivy"
        state[key] = FORMAT_VERSION + 1 if key == "format" else "0.0.0"
        (index_dir / STATE_FILE).write_text(json.dumps(state))
    with caplog.at_level(logging.INFO, logger="hebbs.lexical"):
        ix = LexicalIndex.open(index_dir)
    try:
        assert ix.applied_seq == -1
        assert ix.count() == 0
        assert caplog.records  # the recovery is not silent
        ix.rebuild(corpus(), 6)
        assert ids(ix.search("ERR_CONN_RESET", 1)) == [target_id("ERR_CONN_RESET")]
    finally:
        ix.close()


def test_path_that_is_a_file_is_replaced(index_dir: Path) -> None:
    index_dir.write_bytes(b"not a directory")
    with LexicalIndex.open(index_dir) as ix:
        assert ix.applied_seq == -1 and index_dir.is_dir()


def test_second_writer_is_refused_not_wiped(index_dir: Path) -> None:
    with LexicalIndex.open(index_dir, flush_delay=0) as ix:
        ix.upsert([(mid(1), "kept")])
        ix.commit(1)
        (index_dir / STATE_FILE).unlink()  # would normally trigger a wipe on open
        with pytest.raises(LexicalIndexBusy):
            LexicalIndex.open(index_dir)
        assert ids(ix.search("kept", 5)) == [mid(1)]


def test_use_after_close_raises(index_dir: Path) -> None:
    ix = LexicalIndex.open(index_dir)
    ix.close()
    with pytest.raises(RuntimeError):
        ix.search("x", 5)


# ---- queries --------------------------------------------------------------------------------

ODD_QUERIES = [
    "", " ", "\"", "\"unbalanced", "'", "a:b:c", "title:", ":", "(", ")", "(a OR b", "a AND", "AND OR NOT",
    "NOT", "+", "-", "--", "*", "?", "~", "^2", "a^", "\\", "[1 TO 5]", "{", "}", "/regex/", "field:(x y)",
    "\x00", "🙂 emoji", "日本語", "x" * 5000, "word " * 2000, "IN [a, b]", "\"phrase query\"~2", "a && b || !c",
]


@pytest.mark.parametrize("query", ODD_QUERIES)
def test_odd_queries_never_raise(ix: LexicalIndex, query: str) -> None:
    ix.upsert(corpus())
    ix.commit(1)
    results = ix.search(query, 10)
    assert isinstance(results, list)


def test_every_token_is_indexed_verbatim(ix: LexicalIndex) -> None:
    # Odd whitespace and symbols must not make tantivy's whitespace split disagree with tokenize.
    text = "a\u00a0b\u3000c\u2028d\x1ce\u200bf tab\there ERR_X:Y mail@x.io ~/.cfg über-Straße ①②"
    ix.upsert([(mid(1), text)])
    ix.commit(1)
    ix.flush()
    searcher = ix._index.searcher()  # white-box: check the exact stored terms, not re-tokenized ones
    for token in tokenize(text):
        assert searcher.doc_freq("body", token) == 1, token


def test_empty_query_and_empty_index(ix: LexicalIndex) -> None:
    assert ix.search("anything", 10) == []
    ix.upsert(corpus())
    ix.commit(1)
    assert ix.search("", 10) == [] and ix.search("the of", 10) == []


def test_allowed_filter_pages_past_filtered_hits(ix: LexicalIndex) -> None:
    # Lower ids mention "shared" more often and so outrank higher ids; the filter hides all of
    # the best 300 hits, forcing several deeper pages.
    docs = [(mid(i), "shared " * (1 + (400 - i) // 40) + f"doc{i}") for i in range(400)]
    ix.upsert(docs)
    ix.commit(1)
    allowed_ids = {mid(i) for i in range(300, 400, 3)}
    results = ix.search("shared", 10, allowed=lambda m: m in allowed_ids)
    assert len(results) == 10
    assert all(m in allowed_ids for m in ids(results))
    scores = [s for _, s in results]
    assert scores == sorted(scores, reverse=True)
    unfiltered = ix.search("shared", 400)
    assert ids(results) == [m for m in ids(unfiltered) if m in allowed_ids][:10]


def test_allowed_filter_returns_fewer_when_exhausted(ix: LexicalIndex) -> None:
    ix.upsert(corpus())
    ix.commit(1)
    only = target_id("file.md")
    assert ids(ix.search("file error reset", 10, allowed=lambda m: m == only)) == [only]
    assert ix.search("file", 10, allowed=lambda m: False) == []


def test_concurrent_writes_and_searches(index_dir: Path) -> None:
    with LexicalIndex.open(index_dir, flush_delay=0.01) as ix:
        errors: list[BaseException] = []

        def writer() -> None:
            try:
                for i in range(100):
                    ix.upsert([(mid(i), f"concurrent token{i}")])
                    ix.commit(i)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        thread = threading.Thread(target=writer)
        thread.start()
        while thread.is_alive():
            ix.search("concurrent", 5)
        thread.join()
        assert not errors
        assert ix.count() == 100 and len(ix.search("concurrent", 200)) == 100


def test_weighted_terms_rank_by_weight_and_plain_search_is_weight_one(ix: LexicalIndex) -> None:
    ix.upsert([(mid(1), "apples grow in the orchard"), (mid(2), "pears ripen in the cellar")])
    ix.commit(1)
    assert ids(ix.search_terms({"appl": 1.0, "pear": 3.0}, 2)) == [mid(2), mid(1)]
    assert ids(ix.search_terms({"appl": 3.0, "pear": 1.0}, 2)) == [mid(1), mid(2)]
    assert ix.search_terms({"appl": 1.0}, 5) == ix.search("apples", 5)
    assert ix.search_terms({"appl": 0.0}, 5) == [] and ix.search_terms({}, 5) == []
