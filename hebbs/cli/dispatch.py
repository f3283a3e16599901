"""Which function serves a parsed command line: the one its parser named (`run`, "module:function" in
hebbs.cli, set where the parser is built in main.py). Kept apart from the command modules so that they
can share helpers (commands.py) without importing each other in a circle."""

from __future__ import annotations

import argparse
import importlib

from hebbs.errors import InvalidInput


def run(args: argparse.Namespace) -> int:
    module, name = args.run.split(":")
    serve = getattr(importlib.import_module(f"hebbs.cli.{module}"), name)
    return serve(args, args.declared) if module == "declared" else serve(args)


def serve_mcp(args: argparse.Namespace) -> int:
    try:
        from hebbs.mcp_http import DEFAULT_PORT, serve_http
        from hebbs.mcp_server import serve
    except ModuleNotFoundError as exc:
        if exc.name != "mcp" and not (exc.name or "").startswith("mcp."):
            raise
        raise InvalidInput("hebbs mcp needs the MCP SDK, an optional part of hebbs: "
                           "pip install -e '.[mcp]' in a checkout (or pip install 'mcp==2.3.0')") from None

    if args.http:
        serve_http(home=args.home, vault=args.vault, global_=args.global_, host=args.host or "127.0.0.1",
                   port=DEFAULT_PORT if args.port is None else args.port, allow_remote=args.allow_remote)
    elif args.host is not None or args.port is not None or args.allow_remote:
        raise InvalidInput("--host, --port and --allow-remote are for --http (over stdio there is no address)")
    else:
        serve(home=args.home, vault=args.vault, global_=args.global_)
    return 0
