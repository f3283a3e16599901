"""`hebbs index` and `hebbs watch`: markdown notes folders and their PATH/.hebbs vaults (`hebbs list`: statuscmds.py).

Parsing and embedding happen in the daemon; the CLI sends requests and draws progress. `watch`
runs the file watcher here and turns its two phases into index requests.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from hebbs.client import Client
from hebbs.errors import Cancelled, HebbsError, InvalidInput, VaultNotInitialized
from hebbs.paths import VAULT_DIR, enclosing_vault, hebbs_home, init_vault
from hebbs.protocol import IndexingInProgress

from . import output
from .progress import ProgressBar

BUSY_RETRY_SECONDS = 0.5
STOP_TIMEOUT = 30.0


def run(args: argparse.Namespace) -> int:
    return {"index": cmd_index, "watch": cmd_watch}[args.command](args, notes_folder(args))


def folder_path(args: argparse.Namespace) -> str:
    """The notes folder as given: PATH, or --vault (a notes folder or its .hebbs directory), else here."""
    if args.global_:
        raise InvalidInput(f"hebbs {args.command} works on a notes folder and its PATH/.hebbs; the global "
                           "vault is none: give the folder as PATH or --vault")
    path = args.path if args.path not in (None, ".") else None
    if args.vault is None:
        return path or "."
    given = Path(args.vault).expanduser()
    folder = str(given.parent if given.name == VAULT_DIR else given)
    if path is not None and Path(path).expanduser().absolute() != Path(folder).absolute():
        raise InvalidInput(f"give the notes folder once: PATH {path} and --vault {args.vault} differ")
    return folder


def notes_folder(args: argparse.Namespace) -> Path:
    """The notes folder the command works on (PATH or --vault, else here), checked."""
    root = Path(folder_path(args)).expanduser().absolute()
    if not root.exists():
        raise InvalidInput(f"{root} does not exist")
    if not root.is_dir():
        raise InvalidInput(f"{root} is not a directory; give the notes folder")
    return _notes_root(args, root)


def _notes_root(args: argparse.Namespace, root: Path) -> Path:
    """The notes folder whose vault serves root, found the way recall finds it: root itself when it has a
    vault (or --nested asks for one), else the nearest indexed folder above it, else root (a new vault)."""
    if (root / VAULT_DIR).is_dir() or getattr(args, "nested", False):
        return root
    outer = enclosing_vault(root, hebbs_home(args.home))
    if outer is None:
        return root
    if args.format != "json":
        print(f"{root} is inside the notes folder {outer.parent}: using its vault {outer} "
              f"(--nested makes a separate vault here)", file=sys.stderr)
    return outer.parent


def folder_client(args: argparse.Namespace, root: Path) -> Client:
    return Client(vault=root / VAULT_DIR, home=args.home)


def _ensure_vault(args: argparse.Namespace, root: Path) -> bool:
    """Create ROOT/.hebbs when missing: indexing a folder for the first time should just work."""
    vault, created = init_vault(root, hebbs_home(args.home), nested=True)  # _notes_root decided already
    if created and args.format != "json":
        print(f"initialized a new vault in {vault}", file=sys.stderr)
    return created


def _index_once(args: argparse.Namespace, root: Path, client: Client) -> Any:
    """One index run with a progress bar; Ctrl-C stops it in the daemon too, not only here."""
    bar = ProgressBar(sys.stderr, enabled=args.format != "json" and sys.stderr.isatty())
    try:
        return client.index(root, progress=bar, ray=getattr(args, "ray", None), full=getattr(args, "full", False))
    except KeyboardInterrupt:
        bar.close()
        _cancel_after_interrupt(args, root)
        raise
    finally:
        bar.close()


def cmd_index(args: argparse.Namespace, root: Path) -> int:
    if args.cancel or args.follow:
        return _cancel(args, root) if args.cancel else _follow(args, root)
    created = _ensure_vault(args, root)
    with folder_client(args, root) as client:
        summary = _index_once(args, root, client)
    if args.format == "json":
        output.emit_json({"vault": str(root / VAULT_DIR), "initialized": created, **_builtins(summary)})
    else:
        print_summary(root, summary)
    return 0


def _cancel_after_interrupt(args: argparse.Namespace, root: Path) -> None:
    """Ctrl-C: stop the run in the daemon too, and say what that leaves."""
    if args.format != "json":
        print("cancelling the index run...", file=sys.stderr, flush=True)
    with folder_client(args, root) as client:
        client.index_cancel(root)
    if args.format != "json":
        print(f"cancelled: what was indexed so far stays; `hebbs index {shlex.quote(str(root))}` does the rest",
              file=sys.stderr)


def _cancel(args: argparse.Namespace, root: Path) -> int:
    require_vault(root)
    with folder_client(args, root) as client:
        result = client.index_cancel(root)
    if args.format == "json":
        output.emit_json(result)
    elif result.cancelled:
        print(f"cancelled the index run on {root}; what it indexed so far stays")
    else:
        print(f"no index run is going on {root}")
    return 0


def _follow(args: argparse.Namespace, root: Path) -> int:
    require_vault(root)
    bar = ProgressBar(sys.stderr, enabled=args.format != "json" and sys.stderr.isatty())
    with folder_client(args, root) as client:
        try:
            summary = client.index_follow(root, progress=bar)
        except Cancelled:
            bar.close()
            if args.format == "json":
                output.emit_json({"vault": str(root / VAULT_DIR), "following": True, "cancelled": True})
            else:
                print(f"the index run on {root} was cancelled")
            return 0
        finally:
            bar.close()
    if args.format == "json":
        output.emit_json({"vault": str(root / VAULT_DIR), "following": summary is not None,
                          **(_builtins(summary) if summary is not None else {})})
    elif summary is None:
        print(f"no index run is going on {root}")
    else:
        print_summary(root, summary)
    return 0


def require_vault(root: Path) -> None:
    if not (root / VAULT_DIR).is_dir():
        raise VaultNotInitialized(f"{root} has no vault yet; `hebbs index {shlex.quote(str(root))}` indexes its "
                                  "notes into one")


def print_summary(root: Path, s: Any, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    out.write(f"indexed {root} in {s.seconds:.1f}s\n")
    out.write(f"  files     {s.files_scanned} scanned: {s.files_changed} new or changed, {s.files_unchanged} "
              f"unchanged, {s.files_removed} removed\n")
    out.write(f"  sections  {s.sections_added} added, {s.sections_revised} revised, {s.sections_updated} updated, "
              f"{s.sections_removed} removed; {s.embedded} embedded, {s.sections_total} in the vault\n")
    if getattr(s, "embedded_on_ray", 0):
        out.write(f"            {s.embedded_on_ray} of the embedded texts on the Ray cluster\n")
    out.write(f"  links     {s.edges_added} edges added, {s.edges_removed} removed, {s.unresolved_links} unresolved\n")
    if s.contradiction_candidates:
        out.write(f"  {s.contradiction_candidates} possible contradictions queued for review\n")
    if s.forgotten_left_out:
        one = s.forgotten_left_out == 1
        out.write(f"  {s.forgotten_left_out} {'section' if one else 'sections'} left out: "
                  f"{'its memory was' if one else 'their memories were'} forgotten (hebbs forget); "
                  f"{'it comes' if one else 'each comes'} back when its text in the note changes\n")
    if s.reconciled:
        out.write(f"  {s.reconciled} memories repaired after an interrupted run\n")
    for warning in s.warnings:
        out.write(f"  warning: {warning}\n")


class _Watch:
    """The watcher's callbacks: each phase becomes an index request to the daemon (which embeds)."""

    def __init__(self, args: argparse.Namespace, root: Path) -> None:
        self.args = args
        self.root = root
        self.client = folder_client(args, root)
        # The watcher may call back from its own threads: one request at a time on our connection.
        self._lock = threading.Lock()
        # Set at Ctrl-C, once the run in progress is cancelled: its Cancelled error is said already.
        self.stopping = False

    def _request(self, phase: int, paths: list[str] | None) -> Any:
        while True:
            try:
                with self._lock:
                    return self.client.index(self.root, phase=phase, paths=paths)
            except IndexingInProgress:
                time.sleep(BUSY_RETRY_SECONDS)  # an `hebbs index` of the same folder is running

    def phase1(self, paths: set[Path]) -> Any:
        result = self._request(1, sorted(str(p) for p in paths))
        self._report("scanned", result)
        return result

    def phase2(self) -> Any:
        result = self._request(2, None)
        self._report("indexed", result)
        return result

    def error(self, exc: BaseException) -> None:
        if self.stopping and isinstance(exc, Cancelled):
            return
        # The watcher keeps running; say what went wrong and carry on with the next change.
        status_code = getattr(exc, "status_code", "INTERNAL")
        output.print_error(f"watch: {exc}", status_code, self.args.format == "json")

    def _report(self, what: str, result: Any) -> None:
        if self.args.format == "json":
            output.emit_json({"event": what, **_builtins(result)})
        elif what == "indexed":
            print(f"{time.strftime('%H:%M:%S')} indexed: {result.sections_added} added, {result.sections_revised} "
                  f"revised, {result.sections_removed} removed ({result.seconds:.1f}s)", flush=True)
        elif result.files_changed or result.files_removed:
            print(f"{time.strftime('%H:%M:%S')} {result.files_changed} changed, {result.files_removed} removed",
                  flush=True)
        if what == "scanned" and self.args.format != "json":
            for warning in result.warnings:  # a note skipped or parsed with a problem, named
                print(f"  warning: {warning}", flush=True)


def cmd_watch(args: argparse.Namespace, root: Path) -> int:
    from hebbs.notes import NotesWatcher  # watchdog, only for this command

    _stop_on_signals()
    _ensure_vault(args, root)
    watch = _Watch(args, root)
    # Catch up first, so the watcher only has to follow changes from now on.
    with watch.client as client:
        summary = _index_once(args, root, client)
        if args.format == "json":
            output.emit_json({"event": "indexed", **_builtins(summary)})
        else:
            print_summary(root, summary)
        watcher = NotesWatcher(root, on_phase1=watch.phase1, on_phase2=watch.phase2, on_error=watch.error)
        try:
            watcher.start()
            # Said only now that the watches are in place: an edit from here on will be seen.
            if args.format == "json":
                output.emit_json({"event": "watching", "path": str(root)})
            else:
                print(f"watching {root} (Ctrl-C stops)", flush=True)
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            watch.stopping = True
            _cancel_run_in_progress(args, root)
        finally:
            watcher.stop(timeout=STOP_TIMEOUT)
    if args.format != "json":
        print("stopped watching")
    return 0


def _stop_on_signals() -> None:
    """Ctrl-C and SIGTERM stop the watcher cleanly, even when it was started with SIGINT ignored (as
    `cmd &` or `nohup` in a script hand it down): a watcher runs until told to stop, so the way to tell
    it must always work."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)


def _cancel_run_in_progress(args: argparse.Namespace, root: Path) -> None:
    """Ctrl-C while the watcher's own index run goes on: stop that run in the daemon, as `hebbs index`
    does, instead of waiting (up to STOP_TIMEOUT, silently) for it to end."""
    try:
        with folder_client(args, root) as client:
            cancelled = client.index_cancel(root).cancelled
    except HebbsError:
        return  # no daemon to ask, or nothing to cancel: there is nothing to wait for either
    if cancelled and args.format != "json":
        print(f"cancelled the index run in progress; what it indexed stays, `hebbs index {shlex.quote(str(root))}` "
              f"does the rest", file=sys.stderr)


def _builtins(value: Any) -> dict[str, Any]:
    import msgspec

    return msgspec.to_builtins(value)

