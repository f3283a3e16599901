"""hebbs_hnswlib's mapped loader (vendor/hnswlib): a checkpoint used where it lies, copy-on-write.

It must answer exactly as hnswlib's own load_index of the same file, take writes (adds within the
room it reserved and past it, deletions, replacements), save what it holds, outlive the file being
replaced under it (checkpoints are renamed over the old one), and refuse a damaged file by raising.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import hebbs_hnswlib as hnswlib

DIM = 16


def build(path, n: int = 2_000) -> np.ndarray:
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(n, DIM)).astype("float32")
    index = hnswlib.Index(space="cosine", dim=DIM)
    index.init_index(max_elements=n, ef_construction=60, M=8, allow_replace_deleted=True)
    index.add_items(vectors, np.arange(n), num_threads=1)
    for label in range(0, n, 7):
        index.mark_deleted(label)
    index.save_index(str(path))
    return vectors


def loaded(path, mapped: bool, capacity: int = 0) -> hnswlib.Index:
    index = hnswlib.Index(space="cosine", dim=DIM)
    load = index.load_index_mapped if mapped else index.load_index
    load(str(path), max_elements=capacity, allow_replace_deleted=True)
    index.set_ef(80)
    return index


def answers(index: hnswlib.Index, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return index.knn_query(queries, k=10, num_threads=1)


def test_the_mapped_load_answers_as_load_index_and_takes_writes(tmp_path):
    path = tmp_path / "hnsw.bin"
    vectors = build(path)
    queries = np.random.default_rng(4).normal(size=(50, DIM)).astype("float32")
    plain, mapped = loaded(path, mapped=False), loaded(path, mapped=True)
    assert mapped.get_current_count() == plain.get_current_count() == len(vectors)
    for got, want in zip(answers(mapped, queries), answers(plain, queries)):
        assert np.array_equal(got, want)
    assert np.allclose(mapped.get_items([1, 2, 3]), plain.get_items([1, 2, 3]))

    # The checkpoint is replaced by a rename, as a new checkpoint is published: the mapping keeps the old file.
    replacement = tmp_path / "next.bin"
    replacement.write_bytes(os.urandom(path.stat().st_size))
    os.replace(replacement, path)
    for got, want in zip(answers(mapped, queries), answers(plain, queries)):
        assert np.array_equal(got, want)

    # Writes land on both alike: deletions, a replaced deleted slot, adds within the reserved room and,
    # after a resize past it, adds that move level 0 into memory of its own.
    rng = np.random.default_rng(5)
    for index in (plain, mapped):
        index.mark_deleted(11)
    fresh = rng.normal(size=(3 * len(vectors), DIM)).astype("float32")
    labels = np.arange(10_000, 10_000 + len(fresh))
    for index in (plain, mapped):
        index.add_items(fresh[:1], labels[:1], num_threads=1, replace_deleted=True)
        index.resize_index(2 * len(vectors))
        index.add_items(fresh[1:len(vectors)], labels[1:len(vectors)], num_threads=1)
        index.resize_index(4 * len(vectors))
        index.add_items(fresh[len(vectors):], labels[len(vectors):], num_threads=1)
    assert mapped.get_current_count() == plain.get_current_count()
    for got, want in zip(answers(mapped, fresh[:50]), answers(plain, fresh[:50])):
        assert np.array_equal(got, want)

    saved = tmp_path / "saved.bin"
    mapped.save_index(str(saved))
    again = loaded(saved, mapped=True)
    for got, want in zip(answers(again, queries), answers(plain, queries)):
        assert np.array_equal(got, want)


@pytest.mark.parametrize("damage", ["truncated in level 0", "truncated in the links", "a link list size too big",
                                    "trailing bytes", "an element count past the file"])
def test_a_damaged_file_raises_instead_of_loading(tmp_path, damage):
    path = tmp_path / "hnsw.bin"
    build(path, n=300)
    raw = bytearray(path.read_bytes())
    level0_end = 96 + 300 * int.from_bytes(raw[24:32], "little")
    if damage == "truncated in level 0":
        raw = raw[:level0_end - 10]
    elif damage == "truncated in the links":
        raw = raw[:len(raw) - 3]
    elif damage == "a link list size too big":
        raw[level0_end:level0_end + 4] = (1 << 30).to_bytes(4, "little")
    elif damage == "trailing bytes":
        raw += b"\0" * 8
    else:
        raw[16:24] = (10**9).to_bytes(8, "little")
    path.write_bytes(bytes(raw))
    with pytest.raises(RuntimeError, match="corrupted"):
        loaded(path, mapped=True)
