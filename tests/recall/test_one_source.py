"""A recall's options and its strategy names each have one source: a strategy added to
hebbs/recall/registry.py alone (docs/architecture.md, "Adding a strategy") is a choice of the command
line built from the declarations and runs through the engine; the protocol's Recall request cannot
drift from RecallOptions. Real model, real vault."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import msgspec
import pytest

import hebbs.recall
from hebbs import protocol
from hebbs.cli import declared
from hebbs.recall import registry
from hebbs.recall.fusion import Candidate
from hebbs.recall.options import RecallOptions


def _important(vault, query):
    """docs/architecture.md's toy strategy: the most important memories that pass the filters."""
    ranked = sorted(((e.importance, mid) for mid, e in vault.entries() if query.allowed(mid)), reverse=True)
    return {mid: Candidate(importance, ["important"]) for importance, mid in ranked[:query.limit]}, []


@pytest.fixture
def registry_with_important(monkeypatch):
    """The registry as the guide's diff edits it (its module run again with the one added entry and its
    name on the import line); nothing else is touched."""
    toy = types.ModuleType("hebbs.recall.important")
    toy.recall = _important  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "hebbs.recall.important", toy)
    monkeypatch.setattr(hebbs.recall, "important", toy, raising=False)
    source = Path(registry.__file__).read_text()
    import_line = next(line for line in source.splitlines() if line.startswith("from . import "))
    entry = next(line for line in source.splitlines() if line.strip().startswith('"analogical":'))
    edited = (source.replace(import_line, import_line + ", important")
              .replace(entry, entry + '\n    "important": important.recall,'))
    assert edited.count("important") == 3
    namespace: dict = {"__name__": registry.__name__, "__package__": "hebbs.recall"}
    exec(compile(edited, registry.__file__, "exec"), namespace)
    monkeypatch.setattr(registry, "REGISTRY", namespace["REGISTRY"])
    monkeypatch.setattr(registry, "STRATEGIES", namespace["STRATEGIES"])


def _strategy_choices() -> tuple[str, ...]:
    entries = declared.arguments(protocol.Recall)
    return next(kind["choices"] for args, kind in entries if "--strategy" in args)


def test_the_command_lines_strategies_are_the_registrys() -> None:
    """Tried: the --strategy choices the CLI is generated with (cli/declared_options.py) are the registry's."""
    assert _strategy_choices() == registry.STRATEGIES
    assert "fused" not in registry.STRATEGIES


def test_a_strategy_added_to_the_registry_alone_is_offered_and_runs(registry_with_important, engine) -> None:
    """Tried: with only the registry edited, the CLI's generated --strategy choices offer the new
    strategy and Engine.recall runs it (before: protocol.STRATEGIES, a second list, refused it)."""
    assert "important" in _strategy_choices()
    for content, importance in [("the deploy key rotates every 90 days", 0.9), ("lunch was pasta", 0.1),
                                ("on-call handover is on Mondays", 0.6)]:
        engine.remember(content, importance=importance)
    answer = engine.recall(strategies=["important"], top_k=2)
    assert [r.memory.content for r in answer.results] == ["the deploy key rotates every 90 days",
                                                          "on-call handover is on Mondays"]
    assert all(r.strategies == ["important"] for r in answer.results)


def test_recall_request_and_options_cannot_drift() -> None:
    """Tried: the protocol's Recall holds RecallOptions' fields, in order with their defaults (plus
    `vaults`), and the declaration check refuses a request whose default differs."""
    fields = [(f.name, f.default) for f in msgspec.structs.fields(protocol.Recall) if f.name != "vaults"]
    assert fields == [(name, getattr(RecallOptions(), name)) for name in RecallOptions.__dataclass_fields__]

    class Drifted(msgspec.Struct, kw_only=True):
        cue: str | None = None
        top_k: int = 5

    with pytest.raises(TypeError, match="RecallOptions"):
        protocol._same_options(Drifted, RecallOptions, own=())


def test_engine_recall_takes_the_options_as_keywords(engine) -> None:
    """Tried: Engine.recall still takes each option by keyword, and an unknown one is a TypeError."""
    engine.remember("the build broke after the upgrade")
    assert engine.recall("build", top_k=1, include_superseded=False).results
    with pytest.raises(TypeError, match="top"):
        engine.recall("build", top=1)
