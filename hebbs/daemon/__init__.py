"""The hebbs daemon: one process per user that keeps the model loaded and serves every vault.

Run it with `python -m hebbs.daemon` or let the first CLI or SDK call start it (hebbs.client).
"""

from __future__ import annotations

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    from .main import main as run

    return run(argv)
