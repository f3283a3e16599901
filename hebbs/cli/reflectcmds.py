"""Reflection, contradiction review and decay candidates: `hebbs contradictions
[commit | auto]`, `forget --candidates`, and the text and shells of `reflect-prepare`, `reflect-commit`,
`reflect` and `insights` (built from their declarations, cli/declared.py) (docs/reflect.md).

The commit files are read here with msgspec into the protocol's Structs, not with
hebbs.workflows.reflect.load_commit_file / hebbs.workflows.contradiction_review.load_verdicts_file: those modules import
numpy, and a CLI call must not. The daemon checks the values (sessions, ids, confidences) itself.
"""

from __future__ import annotations

import argparse
from typing import Any

import msgspec

from hebbs.errors import InvalidInput
from hebbs.schema import (ContradictionCommitted, ContradictionVerdict, Insight, InsightInput,
                          ReflectAutoResult, ReflectCommitted, ReflectPrepared)

from . import output
from .commands import _count, open_input


# Commit files ----------------------------------------------------------------------------------

def _read(path: str) -> bytes:
    with open_input(path, binary=True) as f:
        return f.read()


def _decode(raw: bytes, what: str) -> Any:
    try:
        return msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"the {what} file is not valid JSON: {exc}") from None


def _items(items: Any, type_: type, what: str) -> list[Any]:
    """Each item as the protocol Struct, an error naming the item that does not fit."""
    if not isinstance(items, list):
        raise InvalidInput(f"{what}s must be a list")
    out = []
    for n, item in enumerate(items):
        try:
            out.append(msgspec.convert(item, type_))
        except msgspec.ValidationError as exc:
            raise InvalidInput(f"{what} {n}: {exc}") from None
    return out


def load_commit_file(raw: bytes) -> tuple[str, list[InsightInput]]:
    """`{"session_id": "...", "insights": [...]}`: what `hebbs reflect-commit --file` reads."""
    data = _decode(raw, "insights")
    if not isinstance(data, dict) or "session_id" not in data or "insights" not in data:
        raise InvalidInput('the insights file must be a JSON object {"session_id": "...", "insights": [...]}')
    return str(data["session_id"]), _items(data["insights"], InsightInput, "insight")


def load_verdicts_file(raw: bytes) -> list[ContradictionVerdict]:
    """`{"verdicts": [...]}` or the bare list: what `hebbs contradictions commit --file` reads."""
    data = _decode(raw, "verdicts")
    if isinstance(data, dict):
        if "verdicts" not in data:
            raise InvalidInput('the verdicts file must be {"verdicts": [{"pending_id": "...", "verdict": "..."}]}')
        data = data["verdicts"]
    return _items(data, ContradictionVerdict, "verdict")


# Reflection ------------------------------------------------------------------------------------

def print_prepared(prepared: ReflectPrepared) -> None:
    """`hebbs reflect-prepare`'s text (built from its declaration, cli/declared.py)."""
    print(f"session {prepared.session_id} (expires {output.when(prepared.expires_at)}): "
          f"{_count(prepared.memory_count, 'memory')} in {_count(len(prepared.clusters), 'cluster')}, "
          f"{len(prepared.unclustered)} unclustered")
    for cluster in prepared.clusters:
        print(f"\ncluster {cluster.index}: {_count(len(cluster.memories), 'memory')}; {', '.join(cluster.terms)}")
        for member in cluster.memories:
            print(f"  {output.short_id(member.id)}  {output.one_line(member.content, output.width() - 12)}")
    print("\nEach cluster's prompt is in --format json. Answer them, then: hebbs reflect-commit --file insights.json")


class ReflectCommitShell:
    """`hebbs reflect-commit --file`: the session and its insights come from the file."""

    @staticmethod
    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--file", required=True, help='{"session_id": ..., "insights": [...]} (- reads stdin)')

    @staticmethod
    def fields(args: argparse.Namespace, fields: dict[str, Any]) -> dict[str, Any]:
        session_id, insights = load_commit_file(_read(args.file))
        return {**fields, "session_id": session_id, "insights": insights}

    @staticmethod
    def show(args: argparse.Namespace, client: Any, fields: dict[str, Any], committed: ReflectCommitted) -> None:
        _print_committed_insights(committed)


def _print_committed_insights(committed: ReflectCommitted) -> None:
    print(f"stored {_count(len(committed.insights), 'insight')} from session {committed.session_id}")
    for memory in committed.insights:
        print(f"  {output.short_id(memory.id)}  {output.one_line(memory.content, output.width() - 12)}")
    _print_files_and_warnings(committed)


def print_reflected(result: ReflectAutoResult) -> None:
    """`hebbs reflect`'s text (built from its declaration, cli/declared.py)."""
    print(f"{_count(result.clusters, 'cluster')}: {result.proposed} insights proposed, {result.accepted} accepted")
    if result.committed is not None:
        _print_committed_insights(result.committed)
    for rejected in result.rejected:
        print(f"rejected: {rejected}")
    for problem in result.problems:
        print(f"problem: {problem}")


def print_insights(found: list[Insight]) -> None:
    """`hebbs insights`' text (built from its declaration, cli/declared.py)."""
    if not found:
        print("no insights yet (hebbs reflect-prepare starts a reflection)")
    output.table(["when", "conf", "id", "entity", "sources", "content"], [_insight_row(i) for i in found],
                 right=(1, 4))


def _insight_row(insight: Insight) -> list[str]:
    confidence = "-" if insight.confidence is None else f"{insight.confidence:.2f}"
    return [output.when(insight.memory.created_at), confidence, output.short_id(insight.memory.id),
            insight.memory.entity_id or "-", str(len(insight.source_ids)), insight.memory.content]


# Contradictions --------------------------------------------------------------------------------

def cmd_contradictions(args: argparse.Namespace) -> int:
    """`hebbs contradictions ACTION`: the command declared with that CLI name (`contradictions list`, ...)."""
    from .declared import run_named

    if args.action != "commit" and args.file is not None:
        raise InvalidInput("--file goes with `hebbs contradictions commit`")
    return run_named(args, f"contradictions {args.action}")


class ContradictionsListShell:
    @staticmethod
    def show(args: argparse.Namespace, client: Any, fields: dict[str, Any], prepared: Any) -> int:
        if not prepared.candidates:
            print("no contradiction candidates pending")
        for c in prepared.candidates:
            print(f"{c.pending_id}  confidence {c.confidence:.2f}  similarity {c.similarity:.2f}")
            for side, memory in (("a", c.memory_a), ("b", c.memory_b)):
                print(f"  {side}  {output.short_id(memory.id)}  {output.one_line(memory.content, output.width() - 16)}")
            reasons = [r for r in c.reasons if not r.startswith(("a: ", "b: "))]  # the sides are printed above
            if reasons:
                print(f"  why: {'; '.join(reasons)}")
        if prepared.dropped:
            print(f"({_count(prepared.dropped, 'candidate')} dropped: a side was forgotten or replaced since)")
        if prepared.candidates:
            print("\nDecide each, then: hebbs contradictions commit --file verdicts.json")
        return 0


class ContradictionsCommitShell:
    @staticmethod
    def fields(args: argparse.Namespace, fields: dict[str, Any]) -> dict[str, Any]:
        if args.file is None:
            raise InvalidInput("contradictions commit needs --file verdicts.json ('-' reads stdin)")
        return {**fields, "verdicts": load_verdicts_file(_read(args.file))}

    @staticmethod
    def show(args: argparse.Namespace, client: Any, fields: dict[str, Any], committed: Any) -> int:
        _print_verdicts(committed)
        return 0


def _print_files_and_warnings(committed: ReflectCommitted | ContradictionCommitted) -> None:
    for path in committed.files:
        print(f"note: wrote {path}")
    if committed.files:
        print("note: hebbs writes these notes into your notes folder; [notes] in .hebbs/config.toml names another "
              "folder for the next ones (move the old ones yourself: outside it they are indexed as notes) or "
              "turns them off")
    for warning in committed.warnings:
        print(f"warning: {warning}")


def _print_verdicts(committed: ContradictionCommitted) -> None:
    print(f"{_count(len(committed.contradictions), 'contradiction')} confirmed, "
          f"{_count(len(committed.revisions), 'revision')}, {len(committed.dismissed)} dismissed")
    for memory_id in committed.superseded:
        print(f"  superseded {memory_id}")
    _print_files_and_warnings(committed)


class ContradictionsAutoShell:
    @staticmethod
    def show(args: argparse.Namespace, client: Any, fields: dict[str, Any], result: Any) -> int:
        print(f"reviewed {_count(result.reviewed, 'candidate')}; {len(result.left_pending)} left pending")
        if result.committed is not None:
            _print_verdicts(result.committed)
        for problem in result.problems:
            print(f"problem: {problem}")
        return 0
