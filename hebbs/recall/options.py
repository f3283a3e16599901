"""A recall's options, declared once: their names, defaults and types.

`Engine.recall(cue, **options)` builds a RecallOptions, `pipeline.plan` checks it and `pipeline.run`
reads it; the protocol's Recall request (hebbs/protocol.py), which adds what each door shows of an
option, is checked against these fields when it is declared. The sizes every recall shares are named
here too.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..schema import ScoringWeights

F = TypeVar("F", bound=Callable[..., Any])

# How many results a recall returns unless asked.
DEFAULT_TOP_K = 10
# A recall keeps top_k * POOL_FACTOR ranked candidates when some may still move: superseded memories
# go below their successors (include_superseded), and MMR picks its top_k from that pool.
POOL_FACTOR = 3


@dataclass(frozen=True, kw_only=True)
class RecallOptions:
    """What a caller may ask of one recall (Engine.recall's keyword arguments; docs/recall.md)."""

    cue: str | None = None
    strategies: Sequence[str] | None = None
    top_k: int = DEFAULT_TOP_K
    entity_id: str | None = None
    time_range: Any = None
    weights: ScoringWeights | Mapping[str, float] | None = None
    include_superseded: bool = False
    reinforce: bool = False
    mmr_lambda: float | None = None
    seed: str | None = None
    direction: str = "forward"
    max_depth: int = 5
    edge_types: Sequence[str] | None = None
    alpha: float | None = None
    analogy: Sequence[str] | None = None
    now: Any = None
    as_of: Any = None
    associate: bool = False
    # Only memories stored by this author, agent and session (schema.Origin).
    author: str | None = None
    agent: str | None = None
    session: str | None = None


def pooled(top_k: int, include_superseded: bool) -> int:
    """How many ranked results a recall keeps before superseded memories move below their successors."""
    return top_k * POOL_FACTOR if include_superseded else top_k


def takes_options(returns: str) -> Callable[[F], F]:
    """For a method written `recall(self, cue=None, **options)`: its signature shows the options as its
    parameters (self, the cue, then the others by keyword), in help(), inspect and the generated
    reference (Engine.recall)."""
    def attach(method: F) -> F:
        method.__dict__["__signature__"] = signature(returns)
        return method
    return attach


def signature(returns: str) -> inspect.Signature:
    """A method's signature taking the options as its parameters: self, the cue, then the others by keyword."""
    fields = dataclasses.fields(RecallOptions)
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for field in fields:
        kind = (inspect.Parameter.POSITIONAL_OR_KEYWORD if field.name == "cue"
                else inspect.Parameter.KEYWORD_ONLY)
        params.append(inspect.Parameter(field.name, kind, default=field.default, annotation=field.type))
    return inspect.Signature(params, return_annotation=returns)
