"""The memory commands: each turns parsed arguments into SDK calls and prints the result."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from hebbs.client import Client, to_micros
from hebbs.errors import InvalidInput, VaultNotInitialized
from hebbs.paths import hebbs_home, init_vault, resolve_vault
from hebbs.protocol import MAX_FRAME, RememberItem
from hebbs.schema import ScoringWeights

from . import output

IMPORT_BATCH_ITEMS = 256
IMPORT_BATCH_BYTES = MAX_FRAME // 4
def client_for(args: argparse.Namespace) -> Client:
    return Client(vault=args.vault, global_=args.global_, home=args.home)


def _json(args: argparse.Namespace) -> bool:
    return args.format == "json"


def _context(raw: str | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"--context is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidInput("--context must be a JSON object, e.g. '{\"type\": \"preference\"}'")
    return value


def _text(words: list[str] | str) -> str:
    text = " ".join(words) if isinstance(words, list) else words
    return sys.stdin.read() if text == "-" else text


def parse_weights(raw: str | None) -> ScoringWeights | None:
    if raw is None:
        return None
    parts = raw.split(":")
    try:
        r, t, i, f = (float(p) for p in parts)
    except ValueError:
        raise InvalidInput(f"--weights takes four numbers R:T:I:F (relevance:recency:importance:reinforcement), "
                           f"got {raw!r}") from None
    return ScoringWeights(relevance=r, recency=t, importance=i, reinforcement=f)


def parse_time_range(raw: str | None) -> tuple[int | None, int | None] | None:
    if raw is None:
        return None
    if ".." not in raw:
        raise InvalidInput(f"--time-range takes START..END (either side may be empty), got {raw!r}")
    start, end = raw.split("..", 1)
    return (_time(start, "time range start"), _time(end, "time range end"))


def _time(raw: str, field: str) -> int | None:
    raw = raw.strip()
    if not raw:
        return None
    return to_micros(int(raw) if raw.isdigit() else raw, field)


# Commands --------------------------------------------------------------------------------------

def cmd_init(args: argparse.Namespace) -> int:
    vault, created = init_vault(args.path, hebbs_home(args.home))
    if _json(args):
        output.emit_json({"vault": str(vault), "created": created})
    elif created:
        print(f"created vault {vault}")
    else:
        print(f"vault {vault} already exists")
    return 0


def cmd_remember(args: argparse.Namespace) -> int:
    with client_for(args) as client:
        memory = client.remember(_text(args.content), importance=args.importance, context=_context(args.context),
                                 entity_id=args.entity, created_at=_time(args.created_at, "--created-at")
                                 if args.created_at else None, consolidate=False if args.no_consolidate else None)
    if _json(args):
        output.emit_json(memory)
    elif memory.consolidated:
        print(f"consolidated into {memory.id}: said {memory.restatements + 1} times "
              f"(importance {memory.importance:.2f}; `hebbs unconsolidate` undoes it)")
    else:
        entity = f", entity {memory.entity_id}" if memory.entity_id else ""
        print(f"remembered {memory.id} (importance {memory.importance:.2f}{entity})")
    return 0


def cmd_unconsolidate(args: argparse.Namespace) -> int:
    with client_for(args) as client:
        memory = client.unconsolidate(args.id)
    if _json(args):
        output.emit_json(memory)
    else:
        print(f"restored {memory.id} as a memory of its own")
    return 0


def cmd_consolidate(args: argparse.Namespace) -> int:
    with client_for(args) as client:
        pairs = client.consolidate(dry_run=args.dry_run)
        texts = {mid: client.get(mid).content for pair in pairs for mid in pair} if pairs and not _json(args) else {}
    if _json(args):
        output.emit_json([{"restatement": new, "into": old} for new, old in pairs])
        return 0
    verb = "would merge" if args.dry_run else "merged"
    for new, old in pairs:
        print(f"{output.short_id(new)} -> {output.short_id(old)}  {output.one_line(texts[new], output.width() - 20)}")
    print(f"{verb} {_count(len(pairs), 'restatement')}")
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    with client_for(args) as client:
        memory = client.get(args.id)
    if _json(args):
        output.emit_json(memory)
    else:
        output.print_memory(memory)
    return 0


def cmd_revise(args: argparse.Namespace) -> int:
    if args.no_entity and args.entity:
        raise InvalidInput("--entity and --no-entity contradict each other")
    entity: Any = None if args.no_entity else args.entity if args.entity is not None else msgspec.UNSET
    content = None if args.content is None else _text(args.content)
    if content is None and args.importance is None and args.context is None and entity is msgspec.UNSET:
        raise InvalidInput("nothing to change: give --content, --importance, --context, --entity or --no-entity")
    with client_for(args) as client:
        memory = client.revise(args.id, content=content, importance=args.importance, context=_context(args.context),
                               entity_id=entity)
    if _json(args):
        output.emit_json(memory)
    else:
        print(f"revised {memory.id}")
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    if not args.ids and args.entity is None:
        raise InvalidInput("forget needs memory ids or --entity (--candidates lists what has decayed)")
    with client_for(args) as client:
        count = client.forget(args.ids or None, entity_id=args.entity)
    if _json(args):
        output.emit_json({"forgotten": count})
    else:
        print(f"forgot {_count(count, 'memory')}")
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    cue = " ".join(args.cue) if args.cue else None
    with client_for(args) as client:
        found = client.recall(cue, strategies=args.strategy, top_k=args.top_k, entity_id=args.entity,
                              time_range=parse_time_range(args.time_range), weights=parse_weights(args.weights),
                              include_superseded=args.include_superseded, reinforce=args.reinforce,
                              mmr_lambda=args.mmr, associate=args.associate)
    if _json(args):
        output.emit_json(found)
    else:
        output.print_results(found.results, found.notes, abstained=found.abstained)
    return 0


def cmd_used(args: argparse.Namespace) -> int:
    with client_for(args) as client:
        used = client.reinforce(args.ids)
    if _json(args):
        output.emit_json(used)
    else:
        for memory in used:
            print(f"{output.short_id(memory.id)}  used {memory.access_count}x  "
                  f"{output.one_line(memory.content, output.width() - 30)}")
    return 0


def cmd_prime(args: argparse.Namespace) -> int:
    with client_for(args) as client:
        found = client.prime(args.entity, args.cue, args.max_memories)
    if _json(args):
        output.emit_json(found)
    else:
        output.print_results(found.results, found.notes)
    return 0


def cmd_subscribe(args: argparse.Namespace) -> int:
    with client_for(args) as client, client.subscribe(args.entity, args.threshold) as subscription:
        if not _json(args):
            print(f"subscribed ({subscription.id}); reading lines from stdin, Ctrl-D ends", file=sys.stderr)
        for line in sys.stdin:
            text = line.strip()
            if not text:
                continue
            matches = subscription.feed(text)
            if _json(args):
                output.emit_json({"text": text, "matches": matches})
            else:
                for r in matches:
                    print(f"{r.confidence or 0.0:.3f}  {output.short_id(r.memory.id)}  "
                          f"{output.one_line(r.memory.content, output.width() - 20)}", flush=True)
    return 0


def cmd_queries(args: argparse.Namespace) -> int:
    with client_for(args) as client:
        entries = client.queries(args.limit)
    if _json(args):
        output.emit_json(entries)
        return 0
    if not entries:
        print("no recalls logged yet")
    rows = [[output.when(e.at), f"{e.latency_ms:.1f}", str(e.result_count), ",".join(e.strategies),
             e.entity_id or "-", e.cue or "(no cue)"] for e in entries]
    output.table(["when", "ms", "results", "strategies", "entity", "cue"], rows, right=(1, 2))
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    with client_for(args) as client:
        found = client.inspect(args.id)
    if _json(args):
        output.emit_json(found)
        return 0
    output.print_memory(found.memory)
    print(f"\nedges ({len(found.edges)})")
    for edge in found.edges:
        arrow = f"-> {edge.target}" if edge.source == found.memory.id else f"<- {edge.source}"
        print(f"  {edge.edge_type:<13} {arrow}  confidence {edge.confidence:.2f}")
    print(f"\nhistory ({len(found.history)} earlier versions)")
    for old in found.history:
        print(f"  {output.when(old.updated_at)}  {output.one_line(old.content, output.width() - 22)}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    with client_for(args) as client:
        out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
        count = 0
        try:
            for memory in client.export(include_revisions=args.include_revisions):
                out.write(output.to_json(memory) + "\n")
                count += 1
        finally:
            if args.output:
                out.close()
    if args.output:
        if _json(args):
            output.emit_json({"exported": count, "file": args.output})
        else:
            print(f"exported {_count(count, 'memory')} to {args.output}")
    return 0


def _import_items(lines: Iterator[str]) -> Iterator[tuple[int, RememberItem | None]]:
    fields = set(RememberItem.__struct_fields__)
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = msgspec.json.decode(line)
        except msgspec.DecodeError as exc:
            raise InvalidInput(f"line {number}: not JSON ({exc})") from None
        if not isinstance(record, dict):
            raise InvalidInput(f"line {number}: expected a JSON object")
        if record.get("kind") == "REVISION":
            yield number, None  # an earlier version only means something beside the memory it belonged to
            continue
        try:
            yield number, msgspec.convert({k: v for k, v in record.items() if k in fields}, RememberItem)
        except msgspec.ValidationError as exc:
            raise InvalidInput(f"line {number}: {exc}") from None


def cmd_import(args: argparse.Namespace) -> int:
    source = sys.stdin if args.file == "-" else open(args.file, encoding="utf-8")
    imported = skipped = 0
    with client_for(args) as client:
        batch: list[RememberItem] = []
        size = 0
        try:
            for _, item in _import_items(iter(source)):
                if item is None:
                    skipped += 1
                    continue
                batch.append(item)
                size += len(item.content) * 4 + 256
                if len(batch) >= IMPORT_BATCH_ITEMS or size >= IMPORT_BATCH_BYTES:
                    imported += len(client.remember_many(batch, consolidate=False))
                    batch, size = [], 0
            if batch:
                imported += len(client.remember_many(batch, consolidate=False))
        finally:
            if source is not sys.stdin:
                source.close()
    if _json(args):
        output.emit_json({"imported": imported, "skipped_revisions": skipped})
    else:
        print(f"imported {_count(imported, 'memory')}" + (f" (skipped {skipped} revision records)" if skipped else ""))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    home = hebbs_home(args.home)
    with Client(global_=True, home=home) as brain:
        daemon = brain.status(vault=False)
        global_stats = brain.status().vault
    project_stats = None
    project_error = None
    if not args.global_:
        try:
            project_dir = resolve_vault(args.vault, False, home)
            with Client(vault=project_dir, home=home) as project:
                project_stats = project.status().vault
        except VaultNotInitialized as exc:
            if args.vault is not None:
                raise
            project_error = str(exc)
    if _json(args):
        output.emit_json({"daemon": daemon, "global": global_stats, "project": project_stats})
        return 0
    print(f"daemon   pid {daemon.pid}, up {daemon.uptime_s:.0f}s, model {daemon.model or '(loading)'}, "
          f"{len(daemon.open_vaults)} open vaults, stops after {daemon.idle_timeout_s:.0f}s idle")
    for name, stats in (("global", global_stats), ("project", project_stats)):
        if stats is None:
            print(f"{name:<8} none here (run `hebbs init` to create a project vault)" if project_error else
                  f"{name:<8} -")
            continue
        kinds = ", ".join(_count(n, KIND_NAMES.get(k, k.lower())) for k, n in sorted(stats.by_kind.items()))
        print(f"{name:<8} {stats.path}: {_count(stats.memories, 'memory')}" + (f" ({kinds})" if kinds else ""))
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    """Runs here, not in the daemon: a read-only open needs no lock, and a doctor must work when the
    daemon cannot open the vault. Exit code 0 when no damage was found, 1 otherwise."""
    from hebbs.store.doctor import doctor

    report = doctor(resolve_vault(args.vault, args.global_, hebbs_home(args.home)), export=args.export)
    if _json(args):
        output.emit_json(report)
        return 0 if report.healthy else 1
    print(f"vault    {report.vault}: {'healthy' if report.healthy else 'DAMAGED'} (database opened: {report.opened})")
    for f in report.files:
        if not f.ok:
            print(f"file     {f.path} ({f.kind}): {f.problem}")
    for family in report.families:
        state = "damaged" if family.damaged else "ok"
        print(f"family   {family.family:<20} {family.readable:>8} readable keys  {state}")
        for error in family.errors:
            print(f"           {error}")
    print(f"memories {report.memories_readable} readable, {len(report.memories_lost)} lost")
    if report.memories_lost:
        print("lost     " + " ".join(report.memories_lost[:20]) + (" ..." if len(report.memories_lost) > 20 else ""))
    if report.export_path:
        print(f"exported {_count(report.exported or 0, 'memory')} to {report.export_path}")
    for line in report.advice:
        print(f"advice   {line}")
    return 0 if report.healthy else 1


KIND_NAMES = {"EPISODE": "episode", "INSIGHT": "insight", "REVISION": "earlier version"}


def _count(n: int, noun: str) -> str:
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{n} {noun if n == 1 else plural}"


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "init": cmd_init, "remember": cmd_remember, "get": cmd_get, "revise": cmd_revise, "forget": cmd_forget,
    "recall": cmd_recall, "used": cmd_used, "unconsolidate": cmd_unconsolidate, "consolidate": cmd_consolidate, "prime": cmd_prime, "subscribe": cmd_subscribe, "queries": cmd_queries,
    "inspect": cmd_inspect, "export": cmd_export, "import": cmd_import, "status": cmd_status,
    "doctor": cmd_doctor,
}
