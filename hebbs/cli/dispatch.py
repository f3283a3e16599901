"""Which function serves a parsed command line: the one its parser named (`run`, "module:function" in
hebbs.cli, set where the parser is built in main.py). Kept apart from the command modules so that they
can share helpers (commands.py) without importing each other in a circle."""

from __future__ import annotations

import argparse
import importlib


def run(args: argparse.Namespace) -> int:
    route = args.run
    if args.command == "forget" and args.candidates:
        route = "reflectcmds:cmd_forget_candidates"
    module, name = route.split(":")
    serve = getattr(importlib.import_module(f"hebbs.cli.{module}"), name)
    return serve(args, args.declared) if module == "declared" else serve(args)


def serve_mcp(args: argparse.Namespace) -> int:
    from hebbs.mcp_server import serve

    serve(home=args.home, vault=args.vault, global_=args.global_)
    return 0
