"""`hebbs team`: who may use which vault of a PostgreSQL store (hebbs/store/pgaccess.py, docs/scale.md).

Runs here, not in the daemon: it acts as the store's owner, whose credentials a team lead holds and no
daemon should."""

from __future__ import annotations

import argparse
from pathlib import Path

from hebbs.config import load_config
from hebbs.errors import InvalidInput
from hebbs.paths import hebbs_home, resolve_vault

from . import output


def _store(args: argparse.Namespace) -> tuple[str, str | None]:
    """The store's URL and the vault's name: --store and --name, else the vault here's [store]."""
    url, name = args.store, args.name
    if url is None or (name is None and args.action in ("grant", "revoke")):
        try:
            vault = resolve_vault(args.vault, args.global_, hebbs_home(args.home))
            store = load_config(vault).store
        except InvalidInput:
            store = None
        if store is None or store.url is None:
            raise InvalidInput("name the store with --store URL (and the vault with --name): no vault here is kept "
                               "in PostgreSQL")
        url = url or store.url
        name = name or store.name or (vault.parent.name if vault.name == ".hebbs" else vault.name)
    return url, name


def run(args: argparse.Namespace) -> int:
    from hebbs.store import pgaccess

    json_mode = args.format == "json"
    if args.action in ("add-role", "grant", "revoke") and not args.role:
        raise InvalidInput(f"hebbs team {args.action} needs a ROLE")
    if args.action == "drop-vault" and not args.name:
        raise InvalidInput("hebbs team drop-vault needs the vault's --name (no default: it deletes the vault)")
    url, name = _store(args)
    if args.action == "add-role":
        passfile = Path(args.passfile or f"{args.role}.pgpass").absolute()
        their_url = pgaccess.add_role(url, args.role, passfile)
        if json_mode:
            output.emit_json({"role": args.role, "passfile": str(passfile), "url": their_url})
        else:
            print(f"role {args.role} may log in; its password is in {passfile} (0600, libpq's format)")
            print(f"give that file to {args.role}; their store URL: {their_url} (passfile= where they keep it)")
            print(f"it may use no vault yet: hebbs team grant {args.role} --name VAULT")
    elif args.action == "grant":
        assert name is not None
        role = pgaccess.grant(url, name, args.role)
        if json_mode:
            output.emit_json({"vault": name, "role": args.role, "vault_role": role})
        else:
            print(f"{args.role} may use vault {name!r} (its role {role}); vaults not granted stay hidden from it")
    elif args.action == "revoke":
        assert name is not None
        held = pgaccess.revoke(url, name, args.role)
        if json_mode:
            output.emit_json({"vault": name, "role": args.role, "revoked": held})
        else:
            print(f"{args.role} may no longer use vault {name!r}" if held
                  else f"{args.role} held no grant of vault {name!r}")
    elif args.action == "drop-vault":
        removed = pgaccess.drop_vault(url, args.name)
        if json_mode:
            output.emit_json({"vault": args.name, "removed": removed})
        else:
            counts = ", ".join(f"{table} {n}" for table, n in removed.items() if n)
            print(f"dropped vault {args.name!r}: {sum(removed.values())} rows{f' ({counts})' if counts else ''}, "
                  "its indexes and its role")
    else:
        vaults = pgaccess.listing(url)
        if json_mode:
            output.emit_json([{"vault": v.name, "id": v.id, "vault_role": v.role, "granted_to": v.members}
                              for v in vaults])
        else:
            print(f"{'vault':<24} {'role':<20} granted to")
            for v in vaults:
                print(f"{v.name:<24} {v.role or '-':<20} "
                      f"{', '.join(v.members) if v.members else ('nobody' if v.role else 'everyone with table rights')}")
    return 0
