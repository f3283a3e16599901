"""Benchmark hebbs.index.lexical on a synthetic vault.

    .venv/bin/python -m bench.bench_lexical [--docs 100000] [--dir PATH]

Prints bulk index rate, single-write latency (the lazy commit() the engine pays and a durable
upsert+commit+flush), search latency at k=50, reopen time and rebuild time.
"""

from __future__ import annotations

import argparse
import random
import statistics
import string
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.harness import percentile
from hebbs.index import lexical as lexical_index
from hebbs.index.lexical import LexicalIndex, tokenize

WORDS_PER_DOC = 20
VOCAB_SIZE = 4000
N_IDENTIFIERS = 2000
IDENTIFIER_RATE = 0.3  # share of docs that mention one identifier


def make_vocab(rng: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < VOCAB_SIZE:
        words.add("".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 10))))
    return sorted(words)


def make_identifiers(rng: random.Random, vocab: list[str]) -> list[str]:
    makers: list[Callable[[], str]] = [
        lambda: "ERR_" + "_".join(rng.choice(vocab).upper() for _ in range(2)),
        lambda: "--" + "-".join(rng.choice(vocab) for _ in range(2)),
        lambda: f"v{rng.randint(0, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 30)}",
        lambda: "_".join(rng.choice(vocab) for _ in range(3)),
        lambda: f"{rng.choice(vocab)}/{rng.choice(vocab)}.md",
        lambda: rng.choice(vocab) + rng.choice(vocab).capitalize(),
    ]
    return [rng.choice(makers)() for _ in range(N_IDENTIFIERS)]


class Corpus:
    def __init__(self, n_docs: int, seed: int = 7) -> None:
        rng = random.Random(seed)
        self.vocab = make_vocab(rng)
        self.identifiers = make_identifiers(rng, self.vocab)
        # Zipf-like word frequencies, as in real text.
        weights = [1.0 / (rank + 1) for rank in range(len(self.vocab))]
        self.docs: list[tuple[bytes, str]] = []
        for _ in range(n_docs):
            words = rng.choices(self.vocab, weights=weights, k=WORDS_PER_DOC)
            if rng.random() < IDENTIFIER_RATE:
                words[rng.randrange(WORDS_PER_DOC)] = rng.choice(self.identifiers)
            words[-1] += "."
            text = " ".join(words)
            self.docs.append((rng.randbytes(16), text[0].upper() + text[1:]))
        self.queries = self._queries(rng)

    def _queries(self, rng: random.Random) -> list[str]:
        queries = []
        for i in range(500):
            if i % 3 == 0:
                queries.append(rng.choice(self.identifiers))
            else:
                queries.append(" ".join(rng.choices(self.vocab[:1500], k=rng.randint(1, 5))))
        return queries

    def items(self) -> Iterator[tuple[bytes, str]]:
        return iter(self.docs)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def bench(n_docs: int, directory: Path) -> None:
    t0 = time.perf_counter()
    corpus = Corpus(n_docs)
    print(f"generated {n_docs} docs in {time.perf_counter() - t0:.1f}s; index dir {directory}")

    t0 = time.perf_counter()
    n_tokens = sum(len(tokenize(text)) for _, text in corpus.docs)
    tok_s = time.perf_counter() - t0
    print(f"tokenize only:        {n_docs / tok_s:,.0f} docs/s ({n_tokens / n_docs:.1f} tokens/doc)")

    ix = LexicalIndex.open(directory)
    t0 = time.perf_counter()
    ix.rebuild(corpus.items(), 1)
    bulk_s = time.perf_counter() - t0
    print(f"bulk index (durable): {n_docs / bulk_s:,.0f} docs/s ({bulk_s:.1f}s for {ix.count()} docs)")

    rng = random.Random(11)
    seq = 1
    lazy = time_writes(ix, corpus, rng, seq, 400, durable=False)
    seq += 400
    ix.flush()
    durable = time_writes(ix, corpus, rng, seq, 100, durable=True)
    seq += 100
    print(f"upsert+commit (lazy): p50 {ms(percentile(lazy, 50))}  p99 {ms(percentile(lazy, 99))}  (what a remember pays)")
    print(f"upsert+commit+flush:  p50 {ms(percentile(durable, 50))}  p99 {ms(percentile(durable, 99))}  "
          "(a synchronous durable commit)")

    ix.flush()
    for query in corpus.queries[:50]:  # warm the page cache as a running daemon would be
        ix.search(query, 50)
    plain = time_searches(ix, corpus.queries, None)
    print(f"search k=50:          p50 {ms(percentile(plain, 50))}  p99 {ms(percentile(plain, 99))}")
    after_write = []
    for i in range(50):
        seq += 1
        ix.upsert([(rng.randbytes(16), corpus.docs[i][1])])
        ix.commit(seq)
        t0 = time.perf_counter()
        ix.search(corpus.queries[i], 50)
        after_write.append(time.perf_counter() - t0)
    print(f"search right after a write (pays the flush): p50 {ms(percentile(after_write, 50))}  "
          f"p99 {ms(percentile(after_write, 99))}")
    filtered = time_searches(ix, corpus.queries, lambda m: m[0] % 10 == 0)  # ~10% of memories allowed
    print(f"search k=50 allowed=10%: p50 {ms(percentile(filtered, 50))}  p99 {ms(percentile(filtered, 99))}")
    hits = [len(ix.search(q, 50)) for q in corpus.queries]
    print(f"  mean hits returned: {statistics.mean(hits):.1f}")

    ix.close()
    calls = count_tokenize_calls()
    t0 = time.perf_counter()
    ix = LexicalIndex.open(directory)
    reopen_s = time.perf_counter() - t0
    print(f"reopen:               {ms(reopen_s)} (applied_seq {ix.applied_seq}, {ix.count()} docs, "
          f"tokenize calls during open: {calls()})")
    lexical_index.tokenize = tokenize  # unwrap before the rebuild

    t0 = time.perf_counter()
    ix.rebuild(corpus.items(), seq + 1)
    print(f"rebuild:              {time.perf_counter() - t0:.1f}s")
    ix.close()
    size = sum(p.stat().st_size for p in directory.iterdir() if p.is_file())
    print(f"index size on disk:   {size / 1e6:.1f} MB")


def time_writes(ix: LexicalIndex, corpus: Corpus, rng: random.Random, seq: int, n: int,
                durable: bool) -> list[float]:
    times = []
    for i in range(n):
        item = (rng.randbytes(16), corpus.docs[i][1] + " " + rng.choice(corpus.identifiers))
        t0 = time.perf_counter()
        ix.upsert([item])
        ix.commit(seq + i + 1)
        if durable:
            ix.flush()
        times.append(time.perf_counter() - t0)
    return times


def time_searches(ix: LexicalIndex, queries: list[str],
                  allowed: Callable[[bytes], bool] | None) -> list[float]:
    times = []
    for query in queries:
        t0 = time.perf_counter()
        ix.search(query, 50, allowed=allowed)
        times.append(time.perf_counter() - t0)
    return times


def count_tokenize_calls() -> Callable[[], int]:
    """Wrap lexical_index.tokenize to prove reopening does not re-tokenize stored documents."""
    original = lexical_index.tokenize
    calls = [0]

    def counting(text: str) -> list[str]:
        calls[0] += 1
        return original(text)

    lexical_index.tokenize = counting  # type: ignore[assignment]
    return lambda: calls[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--dir", type=Path, default=None, help="index directory (default: a temp dir)")
    args = parser.parse_args()
    if args.dir is not None:
        bench(args.docs, args.dir)
        return
    with tempfile.TemporaryDirectory(prefix="hebbs-bench-lexical-") as tmp:
        bench(args.docs, Path(tmp) / "lexical")


if __name__ == "__main__":
    main()
