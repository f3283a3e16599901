"""`hebbs`: the command line. Every command is a thin shell over one or two daemon requests.

This module and everything it imports at start must stay light (no numpy, no model, no engine):
a recall through the CLI is one process start plus one socket round trip.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from hebbs.errors import HebbsError

from . import output

FORMATS = ("text", "json")


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as JSON when the command line asked for JSON."""

    json_errors = False

    def error(self, message: str) -> NoReturn:
        if _Parser.json_errors:
            output.print_error(message, "INVALID_REQUEST", json_mode=True)
            sys.exit(2)
        super().error(message)


def _common() -> argparse.ArgumentParser:
    # SUPPRESS: a flag given before the command must survive the subcommand's own defaults.
    common = argparse.ArgumentParser(add_help=False)
    where = common.add_mutually_exclusive_group()
    where.add_argument("--global", dest="global_", action="store_true", default=argparse.SUPPRESS,
                       help="use the global brain ($HEBBS_HOME)")
    where.add_argument("--vault", metavar="PATH", default=argparse.SUPPRESS,
                       help="use the vault of this notes folder (or this .hebbs directory)")
    common.add_argument("--format", choices=FORMATS, default=argparse.SUPPRESS,
                        help="text for people (default), json for programs")
    common.add_argument("--home", metavar="DIR", default=argparse.SUPPRESS,
                        help="HEBBS_HOME: where the daemon and the global brain live (default ~/.hebbs)")
    return common


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = _Parser(prog="hebbs", parents=[common],
                     description="A local-first memory engine for AI agents: remember, recall, reflect.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[common], help=help_text, description=help_text)

    p = command("init", "create a project vault (PATH/.hebbs, default: here)")
    p.add_argument("path", nargs="?", default=".")

    p = command("index", "index a markdown notes folder into its vault (creating the vault if needed)")
    p.add_argument("path", nargs="?", default=".")

    p = command("watch", "keep a notes folder's vault current as its files change (Ctrl-C stops)")
    p.add_argument("path", nargs="?", default=".")

    p = command("list", "the indexed files of a notes folder")
    p.add_argument("path", nargs="?", default=".")
    p.add_argument("--sections", action="store_true", help="list each file's sections too")

    p = command("remember", "store a memory")
    p.add_argument("content", nargs="+", help="the text ('-' reads it from stdin)")
    _memory_fields(p)
    p.add_argument("--created-at", metavar="TIME", help="ISO 8601 time or microseconds since the epoch")
    p.add_argument("--no-consolidate", action="store_true",
                   help="store it even if it restates an existing memory (default: the vault's setting)")

    p = command("unconsolidate", "make a restatement record (listed by `hebbs inspect ID`) a memory of its own again")
    p.add_argument("id")

    p = command("consolidate", "merge restatements already in the vault into the memories they repeat")
    p.add_argument("--dry-run", action="store_true", help="list what would be merged; change nothing")

    p = command("get", "show one memory (full id or its last 6+ characters)")
    p.add_argument("id")

    p = command("revise", "change a memory in place (its earlier text is kept as history)")
    p.add_argument("id")
    p.add_argument("--content", help="the new text ('-' reads it from stdin)")
    _memory_fields(p, defaults=False)
    p.add_argument("--no-entity", action="store_true", help="detach the memory from its entity")

    p = command("forget", "remove memories by id, or every memory of an entity")
    p.add_argument("ids", nargs="*", metavar="ID")
    p.add_argument("--entity", help="forget every memory of this entity")
    p.add_argument("--candidates", action="store_true",
                   help="only list the memories decayed below the forget threshold; deletes nothing")

    p = command("recall", "find memories for a cue")
    p.add_argument("cue", nargs="*", help="what to look for (none: the most recent memories)")
    p.add_argument("--strategy", action="append", choices=["similarity", "lexical", "temporal", "causal", "analogical",
                                                              "associative"],
                   help="repeatable; default: similarity and lexical fused (temporal without a cue)")
    p.add_argument("--top-k", type=int, default=10)
    p.add_argument("--entity", help="only this entity's memories")
    p.add_argument("--weights", metavar="R:T:I:F",
                   help="relevance:recency:importance:reinforcement, e.g. 0.5:0.2:0.2:0.1")
    p.add_argument("--time-range", metavar="START..END",
                   help="ISO 8601 times (or microseconds); either side may be empty")
    p.add_argument("--include-superseded", action="store_true", help="also return memories replaced by newer ones")
    reinforcing = p.add_mutually_exclusive_group()
    reinforcing.add_argument("--reinforce", action="store_true",
                             help="count every returned memory as used (old behaviour; prefer `hebbs used ID`)")
    reinforcing.add_argument("--no-reinforce", action="store_true", help="the default: recall changes no score")
    p.add_argument("--mmr", type=float, metavar="LAMBDA", help="diversify: 1 = pure relevance, lower = more diverse")
    p.add_argument("--associate", action="store_true",
                   help="also bring memories used together with the best matches (tagged associative)")

    p = command("used", "count memories as used (what an answer relied on): raises their reinforcement")
    p.add_argument("ids", nargs="+", metavar="ID", help="full ids or their last 6+ characters")

    p = command("prime", "load an entity's recent memories plus those relevant to a cue")
    p.add_argument("--entity", help="the entity (default: every entity)")
    p.add_argument("--cue", help="what the conversation is about")
    p.add_argument("--max", type=int, default=20, dest="max_memories", help="how many memories (default 20)")

    p = command("subscribe", "read lines from stdin and print memories that match them, each once")
    p.add_argument("--entity", help="only this entity's memories")
    p.add_argument("--threshold", type=float, default=0.5, help="minimum confidence, 0..1 (default 0.5)")

    p = command("queries", "the most recent recalls (the query log)")
    p.add_argument("--limit", type=int, default=20)

    p = command("inspect", "one memory with its edges and history")
    p.add_argument("id")

    p = command("reflect-prepare", "cluster memories into a reflection session, one prompt per cluster")
    _reflect_scope(p)

    p = command("reflect-commit", "store the insights written from a reflect-prepare session")
    p.add_argument("--file", required=True, help='{"session_id": ..., "insights": [...]} (- reads stdin)')

    p = command("reflect", "reflect-prepare and reflect-commit in one, through the configured LLM")
    _reflect_scope(p)

    p = command("insights", "the insights reflection stored, newest first")
    p.add_argument("--entity", help="only this entity's insights")
    p.add_argument("--min-confidence", type=float, default=0.0, help="0..1 (default 0)")
    p.add_argument("--limit", type=int, default=100)

    p = command("contradictions", "list pending contradiction candidates; `commit --file` applies verdicts, "
                                  "`auto` asks the configured LLM")
    p.add_argument("action", nargs="?", choices=["list", "commit", "auto"], default="list")
    p.add_argument("--file", help='commit: {"verdicts": [{"pending_id", "verdict"}]} (- reads stdin)')
    p.add_argument("--limit", type=int, default=100, help="how many candidates (default 100)")
    p.add_argument("--min-confidence", type=float, default=0.7,
                   help="auto: commit only verdicts at least this sure (default 0.7)")

    p = command("export", "write every memory as JSON lines")
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    p.add_argument("--include-revisions", action="store_true",
                   help="also export the earlier versions of revised memories")

    p = command("import", "read memories from JSON lines (what export writes); ids are assigned anew")
    p.add_argument("file", help="a JSONL file, or - for stdin")

    command("status", "the daemon and the brains it serves")

    p = command("doctor", "check every file of a vault (read-only), say what is readable, and save it")
    p.add_argument("--export", metavar="FILE", help="write every readable memory here as JSON lines")

    p = command("daemon", "control the background daemon")
    p.add_argument("action", choices=["status", "start", "stop", "logs"])
    p.add_argument("--idle-timeout", type=float, help="start: stop after this many idle seconds (0 = never)")
    p.add_argument("--vault-idle-timeout", type=float, help="start: close vaults unused for this many seconds")
    p.add_argument("-n", "--lines", type=int, default=40, help="logs: how many lines")
    return parser


def _reflect_scope(p: argparse.ArgumentParser) -> None:
    p.add_argument("--entity", help="only this entity's memories")
    p.add_argument("--since", metavar="TIME", help="only memories created since (ISO 8601 or microseconds)")
    p.add_argument("--max-memories", type=int, default=500, help="newest first, 5..500 (default 500)")


def _memory_fields(p: argparse.ArgumentParser, defaults: bool = True) -> None:
    p.add_argument("--importance", type=float, default=0.5 if defaults else None, help="0..1 (default 0.5)")
    p.add_argument("--entity", help="who or what the memory is about")
    p.add_argument("--context", metavar="JSON", help='a JSON object, e.g. \'{"type": "preference"}\'')


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _Parser.json_errors = _wants_json(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    args.format = getattr(args, "format", "text")
    args.global_ = getattr(args, "global_", False)
    args.vault = getattr(args, "vault", None)
    args.home = getattr(args, "home", None)
    if args.command is None:
        parser.print_help()
        return 2
    json_mode = args.format == "json"
    from . import dispatch

    try:
        return dispatch.run(args)
    except HebbsError as exc:
        output.print_error(str(exc), exc.status_code, json_mode)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0  # `hebbs export | head`: the reader has all it wanted


def _wants_json(argv: list[str]) -> bool:
    return any(a == "--format=json" for a in argv) or any(
        a == "--format" and i + 1 < len(argv) and argv[i + 1] == "json" for i, a in enumerate(argv))


def entry() -> Any:
    sys.exit(main())


if __name__ == "__main__":
    entry()
