"""Idempotency keys: `remember(..., key=K)` a second time in the same vault returns the first memory.

A key is stored in the meta family in the very batch that stores its memory, so a crash can never
leave one without the other: `idem/key/<K>` names the memory, `idem/of/<memory id>` names the key
(so that forgetting the memory frees the key in the forget's own batch). A key is kept as long as
its memory.

`idem/key/<K>` also holds a digest of the text first stored under the key (`<id> <digest>`), so a
second call under the key with the same text gets the memory back, and one with other text is refused
(KeyReused) however the memory changed since (revised, or a restatement folded into another); the
memory's text now is accepted too. A key stored before the digest was kept has none: only its
memory's text is compared.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..errors import InvalidInput
from .contract import RecordStore
from .storage import WriteSet

MAX_KEY_LENGTH = 512
_KEY = "idem/key/"
_OWNER = "idem/of/"


def check(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"key must be a non-empty string, got {value!r}")
    if len(value) > MAX_KEY_LENGTH:
        raise InvalidInput(f"key is {len(value)} characters; the limit is {MAX_KEY_LENGTH}")
    return value


def digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def lookup(store: RecordStore, key: str) -> str | None:
    """The id of the memory stored under key, or None."""
    return entry(store, key)[0]


def entry(store: RecordStore, key: str) -> tuple[str | None, str | None]:
    """(the id of the memory stored under key, the digest of the text first stored under it), each or None."""
    return _split(store.get_meta(_KEY + key))


def lookup_many(store: RecordStore, keys: list[str]) -> list[str | None]:
    """lookup for many keys, in one read."""
    return [_split(value)[0] for value in store.get_meta_many([_KEY + key for key in keys])]


def _split(value: str | None) -> tuple[str | None, str | None]:
    if value is None:
        return None, None
    memory_id, _, text_digest = value.partition(" ")
    return memory_id, text_digest or None


def key_of(store: RecordStore, memory_id: str) -> str | None:
    """The key the memory was stored under, or None."""
    return store.get_meta(_OWNER + memory_id)


def put(writes: WriteSet, key: str, memory_id: str, text: str | None = None) -> None:
    """Store key for memory_id, with the digest of the text given under it (when there is one)."""
    writes.put_meta(_KEY + key, memory_id if text is None else f"{memory_id} {digest(text)}")
    writes.put_meta(_OWNER + memory_id, key)


def drop(store: RecordStore, writes: WriteSet, memory_id: str) -> None:
    """Free the key of a memory being forgotten (nothing when it has none)."""
    key = store.get_meta(_OWNER + memory_id)
    if key is not None:
        writes.delete("meta", (_KEY + key).encode())
        writes.delete("meta", (_OWNER + memory_id).encode())
