"""`hebbs palace`: make sure the daemon serves the Memory Palace, print its address, open the browser."""

from __future__ import annotations

import argparse
import os
import sys
import webbrowser

from hebbs.client import Client
from hebbs.errors import InvalidInput

from . import output


def run(args: argparse.Namespace) -> int:
    if args.port is not None and not 1 <= args.port <= 65535:
        raise InvalidInput(f"--port must be from 1 to 65535, got {args.port}")
    with Client(global_=True, home=args.home) as client:  # starts the daemon when none is running
        state = client.panel(args.port)
    opened = False
    if not args.no_browser and _has_desktop():
        try:
            # The one-time address: a browser's argv is readable by every local user in /proc.
            opened = webbrowser.open(state.opener or state.url)
        except webbrowser.Error:
            opened = False
    if args.format == "json":
        output.emit_json({"url": state.url, "port": state.port, "pid": state.pid, "browser": opened})
        return 0
    print(f"Memory Palace: {state.url}")
    print("(the address carries this daemon's private token: do not share it)")
    if not args.no_browser and not opened:
        print("no browser could be opened here: open the address above yourself")
    return 0


def _has_desktop() -> bool:
    """Whether a graphical browser can open: without a display, webbrowser would start a text browser
    (lynx, w3m) in this terminal and wait for it."""
    return (sys.platform == "darwin" or bool(os.environ.get("BROWSER")) or bool(os.environ.get("DISPLAY"))
            or bool(os.environ.get("WAYLAND_DISPLAY")))
