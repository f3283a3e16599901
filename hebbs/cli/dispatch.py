"""Which module serves a parsed command line. Kept apart from the command modules so that they can
share helpers (commands.py) without importing each other in a circle."""

from __future__ import annotations

import argparse

from . import commands

# Served by reflectcmds.py (with `forget --candidates`).
REFLECT_COMMANDS = frozenset({"reflect-prepare", "reflect-commit", "reflect", "insights", "contradictions"})


def run(args: argparse.Namespace) -> int:
    if args.command in ("index", "watch", "list"):
        from . import vaultcmds

        return vaultcmds.run(args)
    if args.command == "proxy":
        from . import proxycmd

        return proxycmd.run(args)
    if args.command == "daemon":
        from . import daemoncmds

        return daemoncmds.run(args)
    if args.command == "mcp":
        from hebbs.mcp_server import serve

        serve(home=args.home, vault=args.vault, global_=args.global_)
        return 0
    if args.command == "palace":
        from . import palacecmd

        return palacecmd.run(args)
    if args.command in REFLECT_COMMANDS or (args.command == "forget" and args.candidates):
        from . import reflectcmds

        if args.command == "forget":
            return reflectcmds.cmd_forget_candidates(args)
        return reflectcmds.COMMANDS[args.command](args)
    return commands.COMMANDS[args.command](args)
