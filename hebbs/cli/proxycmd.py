"""`hebbs proxy`: serve the OpenAI-compatible chat proxy (hebbs/proxy/, docs/proxy.md) until Ctrl-C."""

from __future__ import annotations

import argparse
import sys

from hebbs.client import Client
from hebbs.errors import InvalidInput


def run(args: argparse.Namespace) -> int:
    from hebbs.proxy import ProxyConfig
    from hebbs.proxy.serve import brains_for, client_token, serve

    token, token_path, made = (None, None, False) if args.no_client_token else client_token(args.home)
    try:
        config = ProxyConfig(upstream=args.upstream, port=args.port, api_key_env=args.api_key_env,
                             remember=args.remember, top_k=args.top_k, stall_seconds=args.stall_seconds,
                             client_token=token, agent=args.agent)
        brains = brains_for(args.vault, args.global_, args.home, remember=args.remember,
                            exchange_place=args.exchanges)
        from hebbs.proxy.app import api_key

        api_key(config)  # a missing key is said now, not at the first request
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    # Reach every brain once before serving: a wrong --home or vault is said now, not at the first chat.
    for _, brain in brains.named():
        with Client(brain.vault_path, home=args.home) as client:
            client.count()
    where = " and ".join(f"{name} brain ({client.vault_path})" for name, client in brains.named())
    if brains.exchanges is not None:
        where += f"; earlier exchanges ({brains.exchanges.vault_path}) {args.exchanges}"
    print(f"hebbs proxy: http://127.0.0.1:{config.port}/v1 -> {config.upstream}; recalls from the {where}"
          + ("; remembers each exchange" if config.remember else ""), file=sys.stderr, flush=True)
    if token is None:
        print("hebbs proxy: --no-client-token: every local user and process can use it", file=sys.stderr, flush=True)
    elif made:
        print(f"hebbs proxy: clients give this key as their API key (shown once; kept in {token_path}):\n  {token}",
              file=sys.stderr, flush=True)
    else:
        print(f"hebbs proxy: clients give the key in {token_path} as their API key", file=sys.stderr, flush=True)
    serve(config, brains)
    return 0
