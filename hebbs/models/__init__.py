"""Package data for hebbs' known embedding models (registry.toml)."""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any

REGISTRY_PATH = Path(__file__).with_name("registry.toml")


@lru_cache(maxsize=1)
def _load() -> dict[str, Any]:
    with open(REGISTRY_PATH, "rb") as f:
        return tomllib.load(f)


def load_registry() -> dict[str, Any]:
    """The parsed registry: ``{"default": id, "models": {id: entry}}`` (a fresh copy each call)."""
    import copy

    return copy.deepcopy(_load())
