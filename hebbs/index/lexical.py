"""Persistent BM25 lexical index over memory text, backed by tantivy.

Dense embeddings blur exact identifiers (a file name, an error code, a command flag, a person's
name); this index catches them. Text is tokenized here in Python by `tokenize` and handed to
tantivy already split (joined by single spaces into a field that uses tantivy's "whitespace"
tokenizer), so tantivy never re-splits an identifier and index and query always agree.

Durability model (group commit). A tantivy commit writes and fsyncs a new segment plus meta.json:
measured ~10 ms on tmpfs and 10-90 ms p50 (p99 up to ~280 ms) on a VM disk, far too slow to pay on
every remember, and tantivy-py exposes neither a no-fsync mode nor near-real-time readers. So
`commit(seq)` only *requests* a commit: the buffered changes become durable and searchable either
`flush_delay` seconds later (a background timer coalesces bursts into one tantivy commit), before the
next `search`/`count`, on `flush()`, or on `close()`. `applied_seq` only ever reports a sequence whose
changes are durably committed; it is persisted in a sidecar file written atomically *after* the
tantivy commit. A crash therefore can only leave the sidecar behind the index content, never ahead,
and the engine's "applied_seq != my seq -> rebuild" check repairs it.

The directory is owned by the index: when it is unreadable it is wiped and recreated empty.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import shutil
import struct
import threading
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import TypeVar

import tantivy

from ..errors import CorruptVault
from ..fsutil import atomic_write
from ..store.contract import settle_ties

T = TypeVar("T")

try:
    import fcntl
except ImportError:  # Windows: tantivy's own lock still protects the writer, just not our wipe
    fcntl = None  # type: ignore[assignment]

__all__ = ["tokenize", "LexicalIndex", "LexicalIndexBusy", "FORMAT_VERSION", "damaged_segment_files"]

log = logging.getLogger("hebbs.lexical")  # the name users and tests filter on

# Bump whenever `tokenize` or the schema changes: a mismatch makes `open` discard the old index
# (applied_seq -1) so the engine rebuilds it with the new rules instead of mixing two token sets.
FORMAT_VERSION = 3

ID_BYTES = 16
STATE_FILE = "hebbs-lexical.json"
_WRITER_LOCK = ".tantivy-writer.lock"
DEFAULT_FLUSH_DELAY = 0.5
# tantivy's per-thread minimum is 15 MB; the arena is allocated lazily so this is a ceiling.
WRITER_HEAP_BYTES = 64_000_000
# Longer tokens are base64 blobs or minified junk, not something anyone types into a query.
MAX_TOKEN_CHARS = 100
# A pasted paragraph as query: past this many distinct terms, more terms only add latency.
MAX_QUERY_TERMS = 256
# With an `allowed` filter, fetch this many times k per page so one round usually suffices.
OVERSAMPLE = 4
MIN_PAGE = 32

_ID, _HI, _LO, _BODY = "id", "hi", "lo", "body"
# How many memories' terms terms_of keeps (a set of words each: about a KB).
TERMS_CACHE_MAX = 4096
# Postings keep term frequencies (needed by BM25) but not positions: no phrase queries are run.
_INDEX_OPTION = "freq"


class LexicalIndexBusy(RuntimeError):
    """Another writer (this process or another) holds the index directory's lock."""


# --------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------

# Function words only. Deliberately no single letters or contraction fragments ("s", "t", "ll"):
# those are real identifier parts ("-v", "--top-k", "k8s" style names).
STOPWORDS: frozenset[str] = frozenset("""
a an the and or but nor if then else so than too very
is am are was were be been being do does did has have had having
i me my mine myself we us our ours ourselves you your yours yourself yourselves
he him his himself she her hers herself it its itself they them their theirs themselves
this that these those what which who whom whose when where why how
of at by for with about against between into through during before after above below
to from up down in out on off over under again further once here there
all any both each few more most other some such no not only own same
can will just should would could shall may might must
as until while because
""".split())

# Apostrophes inside a word are dropped ("don't" -> "dont").
_INNER_APOSTROPHE = re.compile(r"(?<=[^\W_])['\u2019](?=[^\W_])")
# A possessive "'s" goes whole before that: "James's" was "jamess", a word no text about James holds
# ("James" stems to "jame"); "user's" gives "user" as "users" did.
_POSSESSIVE = re.compile(r"(?<=[^\W_])['\u2019]s\b", re.I)
# Characters that can never be part of an identifier: whitespace, brackets, quotes, list and
# sentence punctuation, and operators that glue a flag to its value ("--top-k=5").
_SPLIT = re.compile(r"[\s()\[\]{}<>\"'`\u2018\u2019\u201c\u201d,;!?|*=&^\\]+")
# Leading symbols worth keeping because they change meaning: "--flag", ".env", "$HOME",
# "@user", "#123", "~/.bashrc", "/etc/hosts". Anything else in front is noise.
_LEAD_KEEP = "-.$@#~/"
_LEADING_NOISE = re.compile(r"^[^\w" + re.escape(_LEAD_KEEP) + r"]+")
# Trailing sentence punctuation ("done.", "see:") goes; "c++" and "c#" keep their tail.
_TRAILING_NOISE = re.compile(r"[^\w+#]+$")
_SEGMENT = re.compile(r"[^\W_]+")
# camelCase / PascalCase / acronym boundaries (ASCII): "parseHTTPResponse" -> parse HTTP Response.
# Digits stay glued to their letters so "v2", "sha256", "utf8", "ipv4" survive as one part.
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")

_STEMMER = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).filter(
    tantivy.Filter.stemmer("english")).build()
_STEM_CACHE_MAX = 200_000


@functools.lru_cache(maxsize=_STEM_CACHE_MAX)
def _stem(word: str) -> str:
    """Snowball English (Porter2) stem via tantivy's stemmer; cached because vocabularies are small."""
    out = _STEMMER.analyze(word)
    return out[0] if out else word


def _word_tokens(segment: str, out: list[str]) -> None:
    """Tokens for one run of letters/digits: camelCase is kept whole and split into stemmed parts."""
    rest = segment[1:]
    if rest == rest.lower():  # no inner capital -> no camel boundary; the common case, kept cheap
        low = segment.lower()
        if low not in STOPWORDS and len(low) <= MAX_TOKEN_CHARS:
            out.append(_stem(low))
        return
    parts = _CAMEL_BOUNDARY.split(segment)
    if len(parts) > 1:
        whole = segment.lower()
        if len(whole) <= MAX_TOKEN_CHARS:
            out.append(whole)
    for part in parts:
        low = part.lower()
        if low and low not in STOPWORDS and len(low) <= MAX_TOKEN_CHARS:
            out.append(_stem(low))


def _maybe_compound(token: str, whole: str, out: list[str]) -> None:
    """Emit a sub-identifier unless it is the whole chunk again or a plain word (added as a part)."""
    if token and token != whole and not _SEGMENT.fullmatch(token) and len(token) <= MAX_TOKEN_CHARS:
        out.append(token)


def _chunk_tokens(chunk: str, out: list[str]) -> None:
    """Tokens for one whitespace/punctuation-delimited chunk (a word or an identifier)."""
    if chunk.isalnum():  # same set as _SEGMENT; skips three regex passes for plain words
        _word_tokens(chunk, out)
        return
    chunk = _TRAILING_NOISE.sub("", _LEADING_NOISE.sub("", chunk))
    if not chunk:
        return
    if _SEGMENT.fullmatch(chunk):
        _word_tokens(chunk, out)
        return
    segments = _SEGMENT.findall(chunk)
    if not segments:
        return  # pure punctuation such as "-" or "..."
    whole = chunk.lower()
    if len(whole) <= MAX_TOKEN_CHARS:
        out.append(whole)
    # "--top-k" also indexes "top-k" so either spelling in a query matches the other exactly.
    _maybe_compound(whole.lstrip(_LEAD_KEEP), whole, out)
    if "/" in whole:
        # Path and URL components ("docs/file.md" -> "file.md", "https://x.io/a" -> "x.io") so a
        # query naming the file or host matches wherever it lives.
        for component in whole.split("/"):
            _maybe_compound(_TRAILING_NOISE.sub("", _LEADING_NOISE.sub("", component)), whole, out)
    for segment in segments:
        _word_tokens(segment, out)


def tokenize(text: str) -> list[str]:
    """Split text into index terms that keep identifiers intact while still matching plain words.

    Rules, in order:
    1. A possessive "'s" is removed ("James's" -> "James", "user's" -> "user"), then apostrophes
       between letters ("don't" -> "dont").
    2. Text is cut into chunks at whitespace, brackets, quotes, `, ; ! ? | * = & ^ \\`.
       `. - _ / : @ # $ ~ +` do NOT cut, so "file.md", "ERR_CONN_RESET", "v2.3.1", "a/b.py",
       "std::vec", "bob@x.io" stay whole.
    3. Each chunk loses trailing punctuation ("done." -> "done", "see:" -> "see"; "c++" and "c#"
       keep theirs) and leading punctuation other than `- . $ @ # ~ /` ("--top-k", ".env" keep it).
    4. A chunk made only of letters/digits is a plain word: lowercased, dropped if it is an English
       stopword, otherwise Snowball-stemmed ("running" -> "run"). If it is camelCase/PascalCase it
       also keeps the unstemmed lowercased whole ("parseConfig" -> "parseconfig", "pars", "config").
    5. Any other chunk is an identifier and yields, unstemmed and lowercased:
       the whole chunk ("err_conn_reset"); the chunk without its leading symbols if that differs
       and is still compound ("--top-k" -> "top-k"); each compound "/"-separated component of a
       path or URL ("docs/file.md" -> "file.md"); then every letter/digit run inside it,
       treated as in rule 4 ("err", "conn", "reset"). So "--top-k" -> ["--top-k", "top-k", "top",
       "k"] and a query for "--top-k" outranks documents that only say "top".
    6. Tokens longer than MAX_TOKEN_CHARS are dropped (their parts still count).
    Case-insensitive throughout; camelCase splitting is ASCII-only. Scripts written without spaces
    (CJK) are not segmented: a run of them is one token.
    """
    out: list[str] = []
    for chunk in _SPLIT.split(_INNER_APOSTROPHE.sub("", _POSSESSIVE.sub("", text))):
        if chunk:
            out += _cached_chunk_tokens(chunk)
    return out


# A chunk's tokens depend on the chunk alone, and words repeat across texts (Zipf): recall's
# confidence step tokenizes every result, so a repeated word costs one lookup instead of a regex
# pass, a camelCase check and a stem.
_CHUNK_CACHE_MAX = 100_000


@functools.lru_cache(maxsize=_CHUNK_CACHE_MAX)
def _cached_chunk_tokens(chunk: str) -> tuple[str, ...]:
    found: list[str] = []
    _chunk_tokens(chunk, found)
    return tuple(found)


def _text_terms(text: str) -> frozenset[str]:
    return frozenset(tokenize(text))


# --------------------------------------------------------------------------------------------
# Index
# --------------------------------------------------------------------------------------------

def _schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    # Indexed bytes so a replace/remove can delete by exact id term.
    sb.add_bytes_field(_ID, indexed=True)
    # tantivy-py can only read numeric fast fields, so the 128-bit id is also kept as two u64
    # columns: far cheaper per hit than loading stored documents.
    sb.add_unsigned_field(_HI, fast=True)
    sb.add_unsigned_field(_LO, fast=True)
    sb.add_text_field(_BODY, tokenizer_name="whitespace", index_option=_INDEX_OPTION)
    return sb.build()


def _check_id(memory_id: bytes) -> bytes:
    if not isinstance(memory_id, (bytes, bytearray)) or len(memory_id) != ID_BYTES:
        raise ValueError(f"memory id must be {ID_BYTES} bytes, got {memory_id!r}")
    return bytes(memory_id)


def _is_fatal(exc: BaseException) -> bool:
    return isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit))


class _CallerFailed(Exception):
    """What the caller's own filter raised inside a search: its error, not the index's damage."""

    def __init__(self, original: BaseException) -> None:
        self.original = original


def _callers(passing: Callable[[list[bytes]], list[bool]]) -> Callable[[list[bytes]], list[bool]]:
    def checked(raws: list[bytes]) -> list[bool]:
        try:
            return passing(raws)
        except Exception as exc:
            raise _CallerFailed(exc) from exc
    return checked


def _is_damage(exc: BaseException) -> bool:
    """What tantivy raises reading damaged files: a Rust panic (pyo3's PanicException, a BaseException
    that `except Exception` misses) or an error naming the data it could not read."""
    if isinstance(exc, Exception):
        return isinstance(exc, (ValueError, OSError)) and not isinstance(exc, LexicalIndexBusy)
    return not _is_fatal(exc) and not isinstance(exc, (MemoryError,)) and type(exc).__name__ == "PanicException"


def _read_state(path: Path) -> int:
    """The durably applied seq from the sidecar, or -1 if missing, unreadable or another format."""
    try:
        state = json.loads((path / STATE_FILE).read_text(encoding="utf-8"))
        if state.get("format") != FORMAT_VERSION or state.get("tantivy") != tantivy.__version__:
            return -1
        seq = state["seq"]
        return seq if isinstance(seq, int) and not isinstance(seq, bool) else -1
    except FileNotFoundError:
        return -1
    except (OSError, ValueError, KeyError, AttributeError, TypeError):
        log.warning("lexical index state file in %s is unreadable; treating index as stale", path)
        return -1


def _write_state(path: Path, seq: int) -> None:
    # The tantivy version is recorded because it pins the stemmer: a different stemmer would make
    # new query terms miss old index terms, so an upgrade must trigger a rebuild.
    state = {"format": FORMAT_VERSION, "tantivy": tantivy.__version__, "seq": seq}
    atomic_write(path / STATE_FILE, json.dumps(state).encode())


def _raise_if_locked(path: Path) -> None:
    """Refuse to wipe a directory a live writer is using (tantivy's lock is a flock on this file)."""
    lock_file = path / _WRITER_LOCK
    if fcntl is None or not lock_file.exists():
        return
    fd = os.open(lock_file, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
    except BlockingIOError as exc:
        raise LexicalIndexBusy(f"lexical index {path} is locked by another writer") from exc
    finally:
        os.close(fd)


def _wipe(path: Path) -> None:
    _raise_if_locked(path)
    for entry in path.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _open_tantivy(path: Path, schema: tantivy.Schema) -> tantivy.Index:
    """Open (or create) the index and open every segment reader so damage surfaces here, not later."""
    index = tantivy.Index(schema, path=str(path), reuse=True)  # raises on a schema mismatch
    index.config_reader(reload_policy="manual")
    searcher = index.searcher()
    hits = searcher.search(_term_query(schema, "probe"), 1, count=False).hits
    searcher.fast_field_values(_HI, [addr for _, addr in hits])
    return index


# tantivy ends every segment file with a footer: JSON {"version", "crc"}, its length and a magic
# number (u32 little-endian each); crc is the CRC-32 of the bytes before the footer. tantivy itself
# never checks it when it reads, so a flipped bit in a posting list would go unnoticed.
_FOOTER_MAGIC = 1337
_FOOTER_MAX_LEN = 50_000
_SEGMENT_FILE = re.compile(r"^[0-9a-f]{32}\.[a-z]+$")
# The files tantivy writes for every segment of this schema (a .del file comes and goes with deletes).
_SEGMENT_PARTS = ("fast", "fieldnorm", "idx", "pos", "store", "term")


def damaged_segment_files(directory: os.PathLike[str] | str) -> list[tuple[str, str]]:
    """(file name, what is wrong) for each file of a committed segment whose checksum fails, read in
    chunks so that a large index does not pass through memory at once. Files of segments that were
    never committed (a crash mid-write leaves them, empty) are not part of the index."""
    directory = Path(directory)
    try:
        meta = json.loads((directory / "meta.json").read_bytes())
        committed = {str(segment["segment_id"]).replace("-", "") for segment in meta["segments"]}
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError):
        return [("meta.json", "unreadable")]
    damaged: list[tuple[str, str]] = []
    present = {p.name for p in directory.iterdir()}
    for segment in sorted(committed):
        for suffix in _SEGMENT_PARTS:
            if f"{segment}.{suffix}" not in present:
                damaged.append((f"{segment}.{suffix}", "missing"))
    for path in sorted(directory.iterdir()):
        if not _SEGMENT_FILE.match(path.name) or path.name.split(".")[0] not in committed:
            continue
        try:
            problem = _footer_problem(path)
        except OSError as exc:
            problem = f"unreadable ({exc.strerror or exc})"
        if problem:
            damaged.append((path.name, problem))
    return damaged


def _footer_problem(path: Path) -> str | None:
    with path.open("rb") as f:
        size = f.seek(0, os.SEEK_END)
        if size < 8:
            return "too short for its footer"
        f.seek(size - 8)
        length, magic = struct.unpack("<II", f.read(8))
        if magic != _FOOTER_MAGIC or length > min(_FOOTER_MAX_LEN, size - 8):
            return "its footer is damaged"
        f.seek(size - 8 - length)
        try:
            expected = json.loads(f.read(length))["crc"]
        except (ValueError, KeyError, TypeError):
            return "its footer is damaged"
        f.seek(0)
        remaining, crc = size - 8 - length, 0
        while remaining:
            chunk = f.read(min(remaining, 1 << 20))
            if not chunk:
                return "shorter than its footer says"
            crc = zlib.crc32(chunk, crc)
            remaining -= len(chunk)
    return None if crc == expected else "checksum mismatch"


def _term_query(schema: tantivy.Schema, token: str) -> tantivy.Query:
    return tantivy.Query.term_query(schema, _BODY, token, index_option=_INDEX_OPTION)


def _weighted(query: tantivy.Query, weight: float) -> tantivy.Query:
    return query if weight == 1.0 else tantivy.Query.boost_query(query, weight)


class LexicalIndex:
    """BM25 index of (memory id, text); see the module docstring for the durability model.

    Thread-safe: writer access and flushing are serialized by one lock; searches run outside it.
    """

    def __init__(self, path: Path, index: tantivy.Index, writer: tantivy.IndexWriter, schema: tantivy.Schema,
                 applied_seq: int, flush_delay: float) -> None:
        self._path = path
        self._index = index
        self._writer: tantivy.IndexWriter | None = writer
        self._schema = schema
        self._applied_seq = applied_seq
        self._flush_delay = flush_delay
        self._lock = threading.RLock()
        # memory id -> (its text's length and hash, the text's terms): recall's confidence step asks
        # for the terms of every result on every call, and the same memories come back again and again.
        # A text's terms, the recently asked ones kept (owned by this index, gone with it).
        self._terms = functools.lru_cache(maxsize=TERMS_CACHE_MAX)(_text_terms)
        self._pending_seq: int | None = None  # set by commit(), cleared once durable
        self._timer: threading.Timer | None = None
        # Set by the vault: rebuilds this index from the database when a read finds it damaged.
        self.repair: Callable[[], None] | None = None

    # ---- lifecycle -------------------------------------------------------------------------

    @classmethod
    def open(cls, directory: os.PathLike[str] | str, *, flush_delay: float = DEFAULT_FLUSH_DELAY,
             writer_heap_bytes: int = WRITER_HEAP_BYTES) -> LexicalIndex:
        """Open or create the index in `directory`.

        A corrupt, unreadable, older-format or other-tantivy-version index (or one without a valid
        state file) is wiped and recreated empty (applied_seq -1) with a log record, so the caller's
        seq check triggers a rebuild. `flush_delay` is how long commit() may wait to coalesce
        writes; 0 makes every commit() synchronous.
        Raises LexicalIndexBusy if another writer holds the directory.
        """
        path = Path(directory)
        if path.exists() and not path.is_dir():
            log.warning("lexical index path %s is not a directory; replacing it", path)
            path.unlink()
        path.mkdir(parents=True, exist_ok=True)
        schema = _schema()
        applied_seq = _read_state(path)
        if applied_seq < 0 and tantivy.Index.exists(str(path)):
            # Content of unknown vintage: start clean rather than reuse something the engine
            # will rebuild anyway (this also clears indexes built by an older FORMAT_VERSION).
            log.info("lexical index in %s has no valid state; recreating", path)
            _wipe(path)
        elif applied_seq >= 0 and not tantivy.Index.exists(str(path)):
            applied_seq = -1
        try:
            index = _open_tantivy(path, schema)
        except BaseException as exc:  # tantivy panics surface as PanicException (a BaseException)
            if _is_fatal(exc):
                raise
            log.warning("lexical index in %s is unreadable (%s); recreating it empty", path, exc)
            _wipe(path)
            index = _open_tantivy(path, schema)
            applied_seq = -1
        try:
            writer = index.writer(heap_size=writer_heap_bytes, num_threads=1)
        except ValueError as exc:
            if "LockBusy" in str(exc):
                raise LexicalIndexBusy(f"lexical index {path} is locked by another writer") from exc
            raise
        return cls(path, index, writer, schema, applied_seq, flush_delay)

    def close(self) -> None:
        """Flush pending changes, wait for merges and release tantivy's writer lock. Idempotent."""
        with self._lock:
            if self._writer is None:
                return
            try:
                self._flush_locked()
            finally:
                writer, self._writer = self._writer, None
                self._cancel_timer()
                writer.wait_merging_threads()  # consumes the writer, which drops the lock file

    def __enter__(self) -> LexicalIndex:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # ---- state -----------------------------------------------------------------------------

    @property
    def applied_seq(self) -> int:
        """Last seq whose changes are durably committed (-1 if new or unknown)."""
        return self._applied_seq

    @property
    def pending_seq(self) -> int | None:
        """Seq passed to commit() that is not durable yet (None when nothing is pending)."""
        return self._pending_seq

    @property
    def path(self) -> Path:
        return self._path

    # ---- writes ----------------------------------------------------------------------------

    def upsert(self, items: Iterable[tuple[bytes, str]]) -> None:
        """Add or replace documents; invisible until the next commit() takes effect."""
        # Tokenize before taking the lock so a big batch does not stall searches.
        docs = [(memory_id, self._document(memory_id, text))
                for memory_id, text in ((_check_id(m), t) for m, t in items)]
        with self._lock:
            writer = self._require_writer()
            for memory_id, doc in docs:
                # Delete-then-add in one batch is safe: tantivy applies a delete only to
                # documents added before it.
                writer.delete_documents_by_query(self._id_query(memory_id))
                writer.add_document(doc)

    def remove(self, ids: Iterable[bytes]) -> None:
        with self._lock:
            writer = self._require_writer()
            for memory_id in ids:
                writer.delete_documents_by_query(self._id_query(_check_id(memory_id)))

    def commit(self, seq: int) -> None:
        """Request that all changes so far become durable and searchable as `seq`.

        Cheap: the tantivy commit happens within flush_delay seconds, or sooner if a search,
        count, flush or close needs it. applied_seq advances only once it is durable.
        """
        with self._lock:
            self._require_writer()
            self._pending_seq = seq
            if self._flush_delay <= 0:
                self._flush_locked()
            elif self._timer is None:
                self._timer = threading.Timer(self._flush_delay, self._flush_from_timer)
                self._timer.daemon = True  # a lost flush only costs a rebuild on next open
                self._timer.start()

    def flush(self) -> None:
        """Make the last commit() durable and searchable now."""
        with self._lock:
            self._require_writer()
            self._flush_locked()

    def rebuild(self, items: Iterable[tuple[bytes, str]], seq: int) -> None:
        """Replace the whole index with `items` (streamed) and durably commit it as `seq`."""
        with self._lock:
            writer = self._require_writer()
            self._cancel_timer()
            # Not committed until the end, so a crash mid-rebuild leaves the previous index and
            # its (mismatching) seq in place and the engine simply rebuilds again.
            # delete_all_documents only drops committed segments; buffered uncommitted adds would
            # survive it, so discard them first (the rebuild supersedes them anyway).
            writer.rollback()
            writer.delete_all_documents()
            for memory_id, text in items:
                writer.add_document(self._document(_check_id(memory_id), text))
            self._pending_seq = seq
            self._flush_locked()

    # ---- reads -----------------------------------------------------------------------------

    def count(self) -> int:
        """Number of live documents once pending commits are applied."""
        return self._reading(lambda: self._searcher().num_docs)

    def _reading(self, read: Callable[[], T]) -> T:
        """`read`, and when tantivy fails on damaged files: the index rebuilt (`repair`) and `read`
        once more; a second failure is CORRUPT_VAULT, never a panic that kills the caller's thread."""
        failure: BaseException | None = None
        for attempt in range(1 if self.repair is None else 2):
            try:
                if attempt:
                    self.repair()
                return read()
            except _CallerFailed as exc:
                raise exc.original from None
            except BaseException as exc:
                if not _is_damage(exc):
                    raise
                failure = exc
            if not attempt:
                log.error("lexical index %s failed a read (%s: %s): rebuilding it from the database",
                          self._path, type(failure).__name__, failure)
        raise CorruptVault(f"the lexical index in {self._path} is damaged ({type(failure).__name__}: "
                           f"{str(failure)[:200]}) and a rebuild did not help: close the vault, remove that "
                           "folder and open it again (it is rebuilt from the database)") from None

    def search(self, query: str, k: int, *,
               allowed: Callable[[bytes], bool] | None = None) -> list[tuple[bytes, float]]:
        """BM25 top-k (memory id, score) by score desc; any token may match (OR).

        Query text goes through `tokenize` and straight into term queries, never through a query
        parser, so quotes, colons, AND/OR and friends are just text. Repeated terms are deduped:
        identifier expansion already repeats parts ("reset ERR_CONN_RESET" yields "reset" twice)
        and counting them twice would let that artefact, not the user, decide the ranking.
        With `allowed`, pages deeper until k allowed hits are found or results run out.
        """
        if k <= 0:
            return []
        passing = None if allowed is None else (lambda raws: [allowed(raw) for raw in raws])
        return self.search_terms(dict.fromkeys(tokenize(query), 1.0), k, passing=passing)

    def search_terms(self, weights: dict[str, float], k: int, *,
                     passing: Callable[[list[bytes]], list[bool]] | None = None,
                     only: list[bytes] | None = None, narrow: bool = True) -> list[tuple[bytes, float]]:
        """BM25 top-k over already tokenized terms, each term's score multiplied by its weight
        (pseudo-relevance feedback: the cue's terms plus terms of its best matches). `passing`, the
        filter asked about a whole page of hits at once, pages deeper as `search`'s `allowed` does.
        `only`: the search is restricted to these memories' ids (16 bytes each; a short list: a time window's memories),
        with the same scores, so that paging past every match outside them is not needed. `narrow`:
        the filter drops many hits (an entity, a time), so the first page oversamples more; a plain
        filter (revisions and superseded memories out) drops few, and a page of k and a margin does."""
        terms = [(t, w) for t, w in weights.items() if w > 0][:MAX_QUERY_TERMS]
        if k <= 0 or not terms or (only is not None and not only):
            return []
        return self._reading(lambda: settle_ties(lambda n: self._search_terms(terms, n, passing, only, narrow), k))

    def _search_terms(self, terms: list[tuple[str, float]], k: int,
                      passing: Callable[[list[bytes]], list[bool]] | None,
                      only: list[bytes] | None = None, narrow: bool = True) -> list[tuple[bytes, float]]:
        searcher = self._searcher()
        if searcher.num_docs == 0:
            return []
        if passing is not None:
            passing = _callers(passing)
        subqueries = [(tantivy.Occur.Should, _weighted(_term_query(self._schema, t), w)) for t, w in terms]
        q = subqueries[0][1] if len(subqueries) == 1 else tantivy.Query.boolean_query(subqueries)
        if only is not None:
            # The ids must match and add nothing to the score (boosted by 0: BM25's scores unchanged).
            members = tantivy.Query.boost_query(
                tantivy.Query.term_set_query(self._schema, _ID, only), 0.0)
            q = tantivy.Query.boolean_query([(tantivy.Occur.Must, q), (tantivy.Occur.Must, members)])
        if passing is None:
            return self._page(searcher, q, k, 0)
        return self._filtered(searcher, q, k, passing, narrow and only is None)

    def terms_of(self, text: str) -> frozenset[str]:
        """The index terms of a memory's text, remembered for the texts recalls read most recently."""
        return self._terms(text)

    def doc_freqs(self, terms: Iterable[str]) -> dict[str, int]:
        """How many live-or-not-yet-merged documents hold each (already tokenized) term."""
        terms = list(terms)

        def read() -> dict[str, int]:
            searcher = self._searcher()
            return {t: int(searcher.doc_freq(_BODY, t)) for t in terms}

        return self._reading(read)

    # ---- internals -------------------------------------------------------------------------

    def _filtered(self, searcher: tantivy.Searcher, q: tantivy.Query, k: int,
                  passing: Callable[[list[bytes]], list[bool]], narrow: bool = True) -> list[tuple[bytes, float]]:
        results: list[tuple[bytes, float]] = []
        # Every hit of a page is read (two fast fields) and asked about: a page four times k, where
        # nearly every hit passes, cost more than the search itself.
        offset, page = 0, max(k * OVERSAMPLE, MIN_PAGE) if narrow else k + k // 4 + 8
        while len(results) < k:
            hits = self._page(searcher, q, page, offset)
            results.extend(hit for hit, keep in zip(hits, passing([raw for raw, _ in hits])) if keep)
            if len(hits) < page:
                break  # exhausted every matching document
            # Geometric pages keep the total work O(final depth) even though tantivy recomputes
            # the top offset+limit on each call.
            offset, page = offset + page, page * 2
        return results[:k]

    def _page(self, searcher: tantivy.Searcher, q: tantivy.Query, limit: int,
              offset: int) -> list[tuple[bytes, float]]:
        hits = searcher.search(q, limit, count=False, offset=offset).hits
        if not hits:
            return []
        addrs = [addr for _, addr in hits]
        his = searcher.fast_field_values(_HI, addrs)
        los = searcher.fast_field_values(_LO, addrs)
        return [(int(hi).to_bytes(8, "big") + int(lo).to_bytes(8, "big"), float(score))
                for (score, _), hi, lo in zip(hits, his, los)]

    def _searcher(self) -> tantivy.Searcher:
        with self._lock:
            self._require_writer()
            if self._pending_seq is not None:
                self._flush_for_read()
            return self._index.searcher()

    def _flush_for_read(self) -> None:
        try:
            self._flush_locked()
        except Exception:
            # Serving slightly stale results beats failing recall; applied_seq stays behind, so
            # the engine rebuilds on next open if this never recovers.
            log.exception("lexical index flush failed; searching the last committed state")

    def _flush_from_timer(self) -> None:
        with self._lock:
            self._timer = None
            if self._writer is None:
                return
            try:
                self._flush_locked()
            except Exception:
                log.exception("background lexical index flush failed")

    def _flush_locked(self) -> None:
        self._cancel_timer()
        seq = self._pending_seq
        if seq is None:
            return
        assert self._writer is not None
        self._writer.commit()
        self._index.reload()
        # Sidecar strictly after the tantivy commit: it may lag the content, never lead it.
        _write_state(self._path, seq)
        self._applied_seq = seq
        self._pending_seq = None

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _require_writer(self) -> tantivy.IndexWriter:
        if self._writer is None:
            raise RuntimeError(f"lexical index {self._path} is closed")
        return self._writer

    def _id_query(self, memory_id: bytes) -> tantivy.Query:
        return tantivy.Query.term_query(self._schema, _ID, memory_id)

    def _document(self, memory_id: bytes, text: str) -> tantivy.Document:
        doc = tantivy.Document()
        doc.add_bytes(_ID, memory_id)
        doc.add_unsigned(_HI, int.from_bytes(memory_id[:8], "big"))
        doc.add_unsigned(_LO, int.from_bytes(memory_id[8:], "big"))
        doc.add_text(_BODY, " ".join(tokenize(text)))
        return doc

