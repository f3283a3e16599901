"""What is there: `hebbs status`, `hebbs daemon status` and `hebbs list`, each the `status` command's reply
shown one way (declared: StatusShell, ListShell).

`hebbs status` shows the daemon and the vaults here (starting the daemon if none runs); `hebbs daemon
status` the daemon alone, in full, and never starts one; `hebbs list` a notes folder's files, and where
its vault is kept when that is not its own RocksDB database.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import msgspec

from hebbs.client import Client
from hebbs.errors import VaultNotInitialized
from hebbs.paths import hebbs_home, resolve_vault
from hebbs.protocol import DaemonBusy, DaemonUnavailable

from . import output
from .commands import KIND_NAMES, _count, _json
from .vaultcmds import folder_client, notes_folder, require_vault


class StatusShell:
    summary = "the daemon and the vaults it serves"

    @staticmethod
    def instead(args: argparse.Namespace) -> int | None:
        """`hebbs daemon status` (the `daemon` subcommand has actions): the daemon's state alone, in full,
        or that none answers (it starts none)."""
        if not hasattr(args, "action"):
            return None
        with Client(global_=True, home=hebbs_home(args.home), autostart=False) as probe:
            try:
                status = probe.status(vault=False)
            except DaemonBusy as exc:
                return _said(args, {"running": True, "busy": True}, f"running, but refusing new connections: {exc}")
            except DaemonUnavailable:
                _said(args, {"running": False}, f"no daemon running for {hebbs_home(args.home)}")
                return output.EXIT_NO_DAEMON
        if _json(args):
            output.emit_json({"running": True, **msgspec.to_builtins(status)})
            return 0
        print(f"running: pid {status.pid}, up {status.uptime_s:.0f}s, {status.requests} requests, "
              f"model {status.model or '(loading)'}")
        print(f"socket {status.socket}; {_after(status.idle_timeout_s, 'stops after {}s idle', 'never stops when idle')}, "
              f"{_after(status.vault_idle_timeout_s, 'closes vaults after {}s unused', 'never closes unused vaults')}")
        print(f"connections {status.connections} of at most {status.max_connections}"
              f" ({status.refused_busy} refused as busy since the start)")
        if status.panel is not None:
            print(f"panel {status.panel.url}  (Memory Palace; the address carries this daemon's token)")
        _models(status)
        for vault in status.open_vaults:
            doing = ", indexing" if vault.indexing else f", moving to {vault.reembedding}" if vault.reembedding else ""
            print(f"  open  {vault.path}  (model {vault.model}, idle {vault.idle_s:.0f}s{doing})")
        return 0

    @staticmethod
    def send(args: argparse.Namespace, fields: dict[str, Any]) -> tuple[Any, Any, Any, str | None]:
        """The daemon's state, the global vault's statistics and the project vault's (None, with why, when
        there is none here)."""
        home = hebbs_home(args.home)
        with Client(global_=True, home=home) as global_vault:
            daemon = global_vault.status(vault=False)
            global_stats = global_vault.stats()
        project_stats = None
        project_error = None
        if not args.global_:
            try:
                project_dir = resolve_vault(args.vault, False, home)
                with Client(vault=project_dir, home=home) as project:
                    project_stats = project.stats()
            except VaultNotInitialized as exc:
                if args.vault is not None:
                    raise
                project_error = str(exc)
        return daemon, global_stats, project_stats, project_error

    @staticmethod
    def json(args: argparse.Namespace, found: Any) -> Any:
        daemon, global_stats, project_stats, _ = found
        return {"daemon": daemon, "global": global_stats, "project": project_stats}

    @staticmethod
    def show(args: argparse.Namespace, client: None, fields: dict[str, Any], found: Any) -> None:
        daemon, global_stats, project_stats, project_error = found
        print(f"daemon   pid {daemon.pid}, up {daemon.uptime_s:.0f}s, model {daemon.model or '(loading)'}, "
              f"{len(daemon.open_vaults)} open vaults, "
              f"{_after(daemon.idle_timeout_s, 'stops after {}s idle', 'never stops when idle')}")
        if daemon.panel is not None:
            print(f"panel    {daemon.panel.url}  (Memory Palace; the address carries this daemon's token)")
        for name, stats in (("global", global_stats), ("project", project_stats)):
            if stats is None:
                print(f"{name:<8} none here (`hebbs init` creates a project vault in this folder)" if project_error
                      else f"{name:<8} -")
                continue
            kinds = ", ".join(_count(n, KIND_NAMES.get(k, k.lower())) for k, n in sorted(stats.by_kind.items()))
            print(f"{name:<8} {stats.path}: {_count(stats.memories, 'memory')}" + (f" ({kinds})" if kinds else "")
                  + f", model {stats.model}" + _kept(stats.store, ", "))
        _models(daemon)


def _models(status: Any) -> None:
    """The warm models and what they take of the daemon's model memory budget."""
    if not status.models:
        return
    held = ", ".join(f"{m.id} ({m.warm_mib} MiB, " + (_count(len(m.vaults), "vault") if m.vaults else "default")
                     + ")" for m in status.models)
    print(f"models   {held}: {sum(m.warm_mib for m in status.models)} of {status.model_memory_mb} MiB")


def _said(args: argparse.Namespace, data: dict[str, Any], text: str) -> int:
    if _json(args):
        output.emit_json(data)
    else:
        print(text)
    return 0


def _kept(store: str, before: str) -> str:
    """Where a vault is kept, said only when that is not its own RocksDB database (PostgreSQL)."""
    return "" if store == "rocksdb" else f"{before}kept in {store}"


class ListShell:
    """`hebbs list`: the request names the notes folder found from PATH (as index finds it); text output
    also says where a vault kept elsewhere (PostgreSQL) lives."""

    @staticmethod
    def send(args: argparse.Namespace, fields: dict[str, Any]) -> tuple[Path, Any, str]:
        root = notes_folder(args)
        require_vault(root)
        with folder_client(args, root) as client:
            files = client.list(root, sections=fields["sections"])
            store = client.stats().store if args.format != "json" else "rocksdb"
        return root, files, store

    @staticmethod
    def json(args: argparse.Namespace, found: Any) -> Any:
        return found[1]  # the files

    @staticmethod
    def show(args: argparse.Namespace, client: None, fields: dict[str, Any], found: Any) -> None:
        root, files, store = found
        if store != "rocksdb":
            print(f"vault {root / '.hebbs'} {_kept(store, '')}")
        if not files:
            print(f"no notes in {root}")
            return
        rows = [[f.state, str(f.sections), str(f.pending), f.entity_id or "-", f.path] for f in files]
        output.table(["state", "sections", "pending", "entity", "path"], rows, right=(1, 2))
        for f in files:
            if f.state == "skipped" and f.warnings:
                print(f"skipped {f.path}: {f.warnings[-1]}")
        if fields["sections"]:
            for f in files:
                for s in f.section_list or []:
                    heading = " > ".join(s.heading_path) or "(top)"
                    memory = output.short_id(s.memory_id) if s.memory_id else "-"
                    print(f"  {f.path}  {s.state:<7} {memory:<8}  {heading}")


def _after(seconds: float, timed: str, never: str) -> str:
    """A timeout as status prints it: 0 means never, for every timeout of the daemon."""
    return timed.format(f"{seconds:.0f}") if seconds > 0 else never
