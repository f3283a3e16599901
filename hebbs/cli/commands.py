"""The memory commands: each turns parsed arguments into SDK calls and prints the result."""

from __future__ import annotations

import argparse
import itertools
import os
import select
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import msgspec

from hebbs.recall.brains import BRAINS, GLOBAL, PROJECT
from hebbs.client import Client, Subscription, to_micros
from hebbs.errors import DaemonUnavailable, InvalidInput, KeyReused, NotFound
from hebbs.fsutil import AtomicText
from hebbs.paths import VAULT_DIR, hebbs_home, init_vault, resolve_vault
from hebbs.protocol import MAX_FRAME, RememberItem, ReviseItem
from hebbs.schema import RecallResult, ScoringWeights
from hebbs.writekeys import retry_hint

from . import output

IMPORT_BATCH_ITEMS = 256
IMPORT_BATCH_BYTES = MAX_FRAME // 4
# An imported memory is stored under this idempotency key, so importing the same file twice stores it once.
IMPORT_KEY_PREFIX = "import:"
# A memory's links to other memories: sent after every memory of the file (hebbs/workflows/transfer.py).
IMPORT_LINKS = ("superseded_by", "revision_of", "restatement_of", "newer_value", "older_value")


def client_for(args: argparse.Namespace) -> Client:
    # Resolved here, not by the Client: a missing vault is then worded for the shell (--global), not Python.
    home = hebbs_home(args.home)
    return Client(vault=resolve_vault(args.vault, args.global_, home), home=home)


def _json(args: argparse.Namespace) -> bool:
    return args.format == "json"


def open_input(path: str, *, binary: bool = False) -> IO[Any]:
    """A file the user named, for reading; '-' is stdin. Errors name the problem, not an errno."""
    if path == "-":
        return sys.stdin.buffer if binary else sys.stdin
    target = Path(path).expanduser()
    if target.is_dir():
        raise InvalidInput(f"{path} is a directory; give a file")
    try:
        return open(target, "rb") if binary else open(target, encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput(f"{path} does not exist") from None
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror or exc}") from None


def writable_target(path: str) -> Path:
    """The file the user named for writing, once it is known that it can be: errors name the problem."""
    target = Path(path).expanduser()
    if target.is_dir():
        raise InvalidInput(f"{path} is a directory; give a file name, e.g. {os.path.join(path, 'memories.jsonl')}")
    folder = target.absolute().parent
    if not folder.is_dir():
        raise InvalidInput(f"cannot write {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise InvalidInput(f"cannot write {path}: the folder {folder} is not writable")
    return target


def open_output(path: str) -> AtomicText:
    """A new file (0600: memories are private) beside the one named, renamed over it once complete:
    never written through a symlink planted there, nor into a file someone else created."""
    target = writable_target(path)
    try:
        return AtomicText(target.absolute())
    except OSError as exc:
        raise InvalidInput(f"cannot write {path}: {exc.strerror or exc}") from None


def read_text_file(path: str, what: str) -> str:
    with open_input(path, binary=True) as f:
        raw = f.read()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"the {what} {path} is not UTF-8 text (byte {exc.start})") from None


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
    return (_time(start, "time range start"), _time(end, "time range end", day_end=True))


def _time(raw: str, field: str, day_end: bool = False) -> int | None:
    raw = raw.strip()
    if not raw:
        return None
    return to_micros(int(raw) if raw.isdigit() else raw, field, day_end=day_end)


# Commands --------------------------------------------------------------------------------------

def cmd_init(args: argparse.Namespace) -> int:
    if args.global_:
        raise InvalidInput("hebbs init takes the notes folder as PATH or --vault; the global vault needs no init")
    home = hebbs_home(args.home)
    if home.exists() and not home.is_dir():
        raise InvalidInput(f"{home} is not a directory, so it cannot be a HEBBS_HOME")
    from .vaultcmds import folder_path

    given = folder_path(args) if args.vault is not None else args.path
    root = Path(given).expanduser()
    if not root.exists() and root.name != VAULT_DIR:
        # `hebbs init ~/new-notes` starts a notes folder as well as its vault (what the errors that
        # suggest `hebbs init PATH` promise).
        try:
            root.mkdir(parents=True)
        except OSError as exc:
            raise InvalidInput(f"cannot create the folder {given}: {exc.strerror or exc}") from None
    if args.name is not None and args.store is None:
        raise InvalidInput("--name names the vault in a --store; without one the vault is the folder's own")
    vault, created = init_vault(root, home, nested=args.nested, store=args.store, name=args.name)
    if _json(args):
        output.emit_json({"vault": str(vault), "created": created})
    elif created:
        print(f"created vault {vault}")
    else:
        print(f"vault {vault} already exists")
    return 0


def parse_edge(raw: str) -> tuple[str, str, float]:
    """--edge ID:TYPE[:CONFIDENCE]."""
    parts = raw.split(":")
    if len(parts) not in (2, 3) or not parts[0] or not parts[1]:
        raise InvalidInput(f"--edge takes ID:TYPE[:CONFIDENCE], e.g. 01ABCDEF:CAUSED_BY:0.8, got {raw!r}")
    try:
        confidence = float(parts[2]) if len(parts) == 3 else 1.0
    except ValueError:
        raise InvalidInput(f"--edge confidence must be a number from 0 to 1, got {parts[2]!r}") from None
    return parts[0], parts[1].upper(), confidence


class RememberShell:
    @staticmethod
    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--replace", action="store_true",
                            help="with --key: a different text revises the memory stored under the key")
        parser.add_argument("--no-consolidate", action="store_true",
                            help="store it even if it restates an existing memory (default: the vault's setting)")

    @staticmethod
    def fields(args: argparse.Namespace, fields: dict[str, Any]) -> dict[str, Any]:
        if args.replace and not fields["key"]:
            raise InvalidInput("--replace goes with --key: it revises the memory stored under that key")
        return {**fields, "content": _text(fields["content"]), "edges": [parse_edge(e) for e in fields["edges"]],
                "consolidate": False if args.no_consolidate else None}

    @staticmethod
    def send(args: argparse.Namespace, fields: dict[str, Any]) -> tuple[Any, bool]:
        """The memory, and whether --replace revised it to the new text."""
        with client_for(args) as client:
            try:
                return client.remember(**fields), False
            except DaemonUnavailable as exc:
                if not exc.keys:
                    raise
                hint = f"it may have been stored: run it again with --key {exc.keys[0]} to store it at most once"
                raise DaemonUnavailable(str(exc).replace(retry_hint(exc.keys), hint)) from None
            except KeyReused as exc:  # refused by the engine, as at every door
                if not args.replace or exc.memory_id is None:
                    raise KeyReused(f"{exc} (here: give --replace to revise it to this text; its earlier text "
                                    "is kept as history)", exc.memory_id) from None
                revised = client.revise(exc.memory_id, content=fields["content"])
                return msgspec.structs.replace(revised, existing=True), True

    @staticmethod
    def json(args: argparse.Namespace, sent: tuple[Any, bool]) -> Any:
        return sent[0]  # the memory

    @staticmethod
    def show(args: argparse.Namespace, client: None, fields: dict[str, Any], sent: tuple[Any, bool]) -> None:
        memory, changed = sent
        if memory.existing:
            print(f"key {fields['key']!r} was already used for memory {memory.id}: "
                  + ("revised it to this text" if changed else "the same text, nothing stored"))
        elif memory.consolidated:
            print(f"consolidated into {memory.id}: said {memory.restatements + 1} times "
                  f"(importance {memory.importance:.2f}; `hebbs unconsolidate` undoes it)")
        else:
            scope = "".join(f", {name} {value}" for name, value in (("entity", memory.entity_id),
                                                                    ("agent", memory.agent), ("session", memory.session))
                            if value)
            print(f"remembered {memory.id} (importance {memory.importance:.2f}{scope})")


class ReviseShell:
    @staticmethod
    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--no-entity", action="store_true", help="detach the memory from its entity")

    @staticmethod
    def fields(args: argparse.Namespace, fields: dict[str, Any]) -> dict[str, Any]:
        if args.no_entity and fields["entity_id"]:
            raise InvalidInput("--entity and --no-entity contradict each other")
        entity: Any = None if args.no_entity else fields["entity_id"] if fields["entity_id"] is not None \
            else msgspec.UNSET
        content = None if fields["content"] is None else _text(fields["content"])
        if content is None and fields["importance"] is None and fields["context"] is None and entity is msgspec.UNSET:
            raise InvalidInput("nothing to change: give --content, --importance, --context, --entity or --no-entity")
        return {**fields, "content": content, "entity_id": entity}


def _revise_items(text: str, path: str) -> list[ReviseItem]:
    stripped = text.strip()
    try:
        if stripped.startswith("["):
            records = msgspec.json.decode(stripped)
        else:
            records = [msgspec.json.decode(line) for line in stripped.splitlines() if line.strip()]
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"{path} is not a JSON list or JSON lines: {exc}") from None
    items = []
    for n, record in enumerate(records):
        try:
            items.append(msgspec.convert(record, ReviseItem))
        except msgspec.ValidationError as exc:
            raise InvalidInput(f"revision {n}: {exc}") from None
    if not items:
        raise InvalidInput(f"{path} holds no revisions")
    return items


class ReviseManyShell:
    @staticmethod
    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("file", help='[{"id": ..., "content"?, "importance"?, "context"?, "entity_id"?}, ...] or '
                                         "one such object per line; - reads stdin")

    @staticmethod
    def fields(args: argparse.Namespace, fields: dict[str, Any]) -> dict[str, Any]:
        return {**fields, "items": _revise_items(read_text_file(args.file, "revisions file"), args.file)}

    @staticmethod
    def show(args: argparse.Namespace, client: Client, fields: dict[str, Any], memories: list[Any]) -> None:
        print(f"revised {_count(len(memories), 'memory')}")
        for memory in memories:
            print(f"  {output.short_id(memory.id)}  {output.one_line(memory.content, output.width() - 12)}")


class ConsolidateShell:
    @staticmethod
    def json(args: argparse.Namespace, pairs: list[tuple[str, str]]) -> Any:
        return [{"restatement": new, "into": old} for new, old in pairs]

    @staticmethod
    def show(args: argparse.Namespace, client: Client, fields: dict[str, Any], pairs: list[tuple[str, str]]) -> None:
        texts = {mid: client.get(mid).content for pair in pairs for mid in pair}
        for new, old in pairs:
            print(f"{output.short_id(new)} -> {output.short_id(old)}  "
                  f"{output.one_line(texts[new], output.width() - 20)}")
        print(f"{'would merge' if args.dry_run else 'merged'} {_count(len(pairs), 'restatement')}")


class EdgesShell:
    @staticmethod
    def show(args: argparse.Namespace, client: Client, fields: dict[str, Any], edges: list[Any]) -> None:
        # Each edge as the other memory it reaches, with its text: bare ids said nothing.
        me = client.get(args.id).id if edges else None
        others = {e.target if e.source == me else e.source for e in edges}
        texts = {}
        for other in others:
            try:
                texts[other] = client.get(other).content
            except NotFound:
                texts[other] = "(forgotten)"
        if not edges:
            print("no edges")
        output.table(["", "type", "memory", "conf", "content"],
                     [["->" if e.source == me else "<-", e.edge_type,
                       output.short_id(e.target if e.source == me else e.source), f"{e.confidence:.2f}",
                       texts[e.target if e.source == me else e.source]] for e in edges], right=(3,))


class NeighborsShell:
    @staticmethod
    def json(args: argparse.Namespace, near: list[Any]) -> Any:
        return [{"id": mid, "similarity": sim} for mid, sim in near]

    @staticmethod
    def show(args: argparse.Namespace, client: Client, fields: dict[str, Any], near: list[Any]) -> None:
        memories = [client.get(mid) for mid, _ in near]
        if not near:
            print("no other memories")
        output.table(["similarity", "id", "entity", "content"],
                     [[f"{sim:.3f}", output.short_id(m.id), m.entity_id or "-", m.content]
                      for (_, sim), m in zip(near, memories)], right=(0,))


class ForgetShell:
    @staticmethod
    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--candidates", action="store_true",
                            help="only list the memories decayed below the forget threshold; deletes nothing")

    @staticmethod
    def instead(args: argparse.Namespace) -> int | None:
        """--candidates: list what has decayed (decay.md) instead."""
        if not args.candidates:
            return None
        if args.ids or args.entity_id is not None:
            raise InvalidInput("--candidates only lists; forget the ones you choose with `hebbs forget ID...`")
        with client_for(args) as client:
            candidates = client.forget_candidates()
        if _json(args):
            output.emit_json(candidates)
            return 0
        if not candidates:
            print("no memories have decayed below the forget threshold")
            return 0
        output.table(["decay", "importance", "last used", "id", "content"],
                     [[f"{m.decay_score:.4f}", f"{m.importance:.2f}", output.when(m.last_accessed_at),
                       output.short_id(m.id), m.content] for m in candidates], right=(0, 1))
        print(f"\n{_count(len(candidates), 'candidate')}; nothing was deleted (hebbs forget ID... removes them)")
        return 0

    @staticmethod
    def fields(args: argparse.Namespace, fields: dict[str, Any]) -> dict[str, Any]:
        if not fields["ids"] and fields["entity_id"] is None:
            raise InvalidInput("forget needs memory ids or --entity (--candidates lists what has decayed)")
        return {**fields, "ids": fields["ids"] or None}

    @staticmethod
    def show(args: argparse.Namespace, client: Client, fields: dict[str, Any], done: Any) -> None:
        print(f"forgot {_count(done.forgotten, 'memory')}")


class RecallShell:
    @staticmethod
    def options(parser: argparse.ArgumentParser) -> None:
        # Not shown: recall reinforces nothing unless asked, so the flag changes nothing; kept so that the
        # scripts written when it did still run.
        parser.add_argument("--no-reinforce", action="store_true", help=argparse.SUPPRESS)
        parser.add_argument("--both", action="store_true",
                            help="search the project vault and the global vault together: one list, each result "
                                 "labelled")

    @staticmethod
    def fields(args: argparse.Namespace, fields: dict[str, Any]) -> dict[str, Any]:
        if args.reinforce and args.no_reinforce:
            raise InvalidInput("--reinforce and --no-reinforce contradict each other")
        return {**fields, "weights": parse_weights(fields["weights"]),
                "time_range": parse_time_range(fields["time_range"])}

    @staticmethod
    def brains(args: argparse.Namespace) -> tuple[Any, bool]:
        # --both from anywhere, as prime.
        return BRAINS if args.both else None, args.both and args.vault is None and not args.global_

    @staticmethod
    def show(args: argparse.Namespace, client: None, fields: dict[str, Any], found: Any) -> None:
        output.print_results(found.results, found.notes, abstained=found.abstained, threshold=found.threshold)


class PrimeShell:
    @staticmethod
    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--no-global", action="store_true",
                            help="prime from the project vault alone (default: the project vault and the global vault)")

    @staticmethod
    def brains(args: argparse.Namespace) -> tuple[Any, bool]:
        # Both brains (the default) from wherever the command runs.
        alone = ([GLOBAL] if args.global_ else [PROJECT]) if args.no_global else None
        return alone, args.vault is None and not args.global_ and not args.no_global

    @staticmethod
    def show(args: argparse.Namespace, client: None, fields: dict[str, Any], found: Any) -> None:
        output.print_results(found.results, found.notes)


class SubscribeShell:
    summary = ("read lines from stdin and print memories that match them, and those stored later that match "
               "a line read, each once")

    @staticmethod
    def send(args: argparse.Namespace, fields: dict[str, Any]) -> None:
        with client_for(args) as client, client.subscribe(
                fields["entity_id"], fields["confidence_threshold"], author=fields["author"], agent=fields["agent"],
                session=fields["session"]) as subscription:
            if not _json(args):
                print(f"subscribed ({subscription.id}); reading lines from stdin, Ctrl-D ends", file=sys.stderr)
            for line in _lines_or_pushes(subscription):
                if isinstance(line, list):  # memories stored since that match a line fed before
                    text, matches = None, line
                elif not (text := line.strip()):
                    continue
                else:
                    matches = subscription.feed(text)
                if _json(args):
                    output.emit_json({"text": text, "matches": matches})
                else:
                    for r in matches:
                        print(f"{r.confidence or 0.0:.3f}  {output.short_id(r.memory.id)}  "
                              f"{output.one_line(r.memory.content, output.width() - 20)}", flush=True)

    @staticmethod
    def json(args: argparse.Namespace, _: None) -> None:
        return None  # each line's matches were printed as they came

    @staticmethod
    def show(args: argparse.Namespace, client: None, fields: dict[str, Any], _: None) -> None:
        pass  # each line's matches were printed as they came


def _lines_or_pushes(subscription: Subscription) -> Iterator[str | list[RecallResult]]:
    """Each line of stdin as it comes, and between them each push of the daemon (a list of matches),
    until stdin ends."""
    stdin = sys.stdin.fileno()
    encoding = sys.stdin.encoding or "utf-8"
    pending = b""
    while True:
        watched = [stdin] + ([subscription.fileno()] if subscription.fileno() >= 0 else [])
        ready = select.select(watched, [], [])[0]
        if stdin not in ready:
            if pushed := subscription.wait(0):
                yield pushed
            continue
        chunk = os.read(stdin, 1 << 16)
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            yield line.decode(encoding, "replace")
        if not chunk:
            if pending:
                yield pending.decode(encoding, "replace")
            return


class InspectShell:
    @staticmethod
    def show(args: argparse.Namespace, client: Client, fields: dict[str, Any], found: Any) -> None:
        output.print_memory(found.memory, last_restated_at=found.last_restated_at)
        print(f"\nedges ({len(found.edges)})")
        for edge in found.edges:
            arrow = f"-> {edge.target}" if edge.source == found.memory.id else f"<- {edge.source}"
            print(f"  {edge.edge_type:<13} {arrow}  confidence {edge.confidence:.2f}")
        print(f"\nhistory ({len(found.history)} earlier versions)")
        for old in found.history:
            print(f"  {output.when(old.updated_at)}  {output.one_line(old.content, output.width() - 22)}")
        logged = f", the last {len(found.accesses)} logged" if len(found.accesses) < found.memory.access_count else ""
        print(f"\naccesses ({found.memory.access_count}{logged}, newest first)")
        for access in found.accesses:
            print(f"  {output.when(access.at)}  {ACCESS_VIA.get(access.via, access.via)}")


ACCESS_VIA = {"used": "used", "recall": "recalled with --reinforce", "panel": "marked useful in the Memory Palace"}


class SourceShell:
    # Its stdout is the note's text byte for byte, control characters and all (main.py).
    raw_output = True

    @staticmethod
    def show(args: argparse.Namespace, client: Client, fields: dict[str, Any], found: Any) -> None:
        version = "the current version" if found.latest else "an earlier version"
        if found.file_removed_at is not None:
            version = ("the last version" if found.latest else "an earlier version") + \
                f"; the file was removed {output.when(found.file_removed_at)}"
        print(f"{found.file}:{found.line_start}-{found.line_end}  {' > '.join(found.heading_path) or '(no heading)'}")
        print(f"version {found.sha256[:12]}  indexed {output.when(found.indexed_at)}  ({version})")
        print()
        print(found.text)


class ExportShell:
    summary = ("write everything the vault holds as JSON lines (docs/export.md): memories with their earlier versions, "
               "supersession, edges, access history, keys, contradiction candidates and kept originals")
    # Its stdout is JSON lines, kept byte for byte (main.py).
    raw_output = True

    @staticmethod
    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")

    @staticmethod
    def send(args: argparse.Namespace, fields: dict[str, Any]) -> tuple[int, int]:
        """(memories, earlier versions) written: memories counted as `hebbs count` counts them."""
        with client_for(args) as client:
            records = client.export_records()
            try:
                # The header, read before the output file is created: a vault that cannot be read fails first.
                first = next(records)
                out = open_output(args.output) if args.output else None
                count = revisions = 0
                try:
                    for record in itertools.chain([first], records):
                        (out or sys.stdout).write(output.to_json(record) + "\n")
                        if record["record"] == "memory":
                            if record.get("kind") == "REVISION":
                                revisions += 1
                            else:
                                count += 1
                except BaseException:
                    if out is not None:
                        out.abort()  # the file named is left as it was
                    raise
            finally:
                records.close()
            if out is not None:
                out.close()
        return count, revisions

    @staticmethod
    def json(args: argparse.Namespace, counts: tuple[int, int]) -> Any:
        # None: stdout holds the records
        return {"exported": counts[0], "revisions": counts[1], "file": args.output} if args.output else None

    @staticmethod
    def show(args: argparse.Namespace, client: None, fields: dict[str, Any], counts: tuple[int, int]) -> None:
        if args.output:  # else stdout holds the records alone
            print(f"exported {_count(counts[0], 'memory')}{_versions(counts[1])} to {args.output}")


def _decoded(lines: Iterator[bytes]) -> Iterator[tuple[int, Any]]:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = msgspec.json.decode(line)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"line {number}: not JSON text ({exc})") from None
        if not isinstance(record, dict):
            raise InvalidInput(f"line {number}: expected a JSON object")
        yield number, record


def _import_v2(client: Client, records: list[dict[str, Any]]) -> dict[str, int]:
    """Send the records in frames the daemon takes: memories first (their links to each other after all
    of them, once each has its new id), then what refers to them, in the file's order."""
    memories = [r for r in records if r.get("record") == "memory"]
    links = [{"record": "link", "memory": m.get("id"), **{k: m.pop(k) for k in IMPORT_LINKS if m.get(k) is not None}}
             for m in memories if any(m.get(k) is not None for k in IMPORT_LINKS)]
    rest = [r for r in records if r.get("record") not in ("memory", "header")]
    header = [r for r in records if r.get("record") == "header"]
    totals: dict[str, int] = {"memories": len(memories), "stored": 0, "already_there": 0, "edges": 0,
                              "accesses": 0, "pending": 0, "originals": 0,
                              "revisions": sum(m.get("kind") == "REVISION" for m in memories)}
    batch: list[dict[str, Any]] = list(header)
    size = 0
    for record in [*memories, *links, *rest]:
        batch.append(record)
        size += len(msgspec.json.encode(record)) + 64
        if size >= IMPORT_BATCH_BYTES or (record.get("record") == "memory" and len(batch) >= IMPORT_BATCH_ITEMS):
            _add_summary(totals, client.import_records(batch))
            batch, size = list(header), 0
    if len(batch) > len(header):
        _add_summary(totals, client.import_records(batch))
    return totals


def _add_summary(totals: dict[str, int], summary: Any) -> None:
    totals["stored"] += summary.imported
    totals["already_there"] += summary.already_there
    for name in ("edges", "accesses", "pending", "originals"):
        totals[name] += getattr(summary, name)


class ImportShell:
    summary = ("read what export writes (docs/export.md); ids are assigned anew and every link is mapped to them, and "
               "a memory imported before is not stored again")

    @staticmethod
    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("file", help="a JSONL file, or - for stdin")

    @staticmethod
    def send(args: argparse.Namespace, fields: dict[str, Any]) -> dict[str, int]:
        source = open_input(args.file, binary=True)
        try:
            records = [record for _, record in _decoded(iter(source))]
        finally:
            if source is not sys.stdin.buffer:
                source.close()
        with client_for(args) as client:
            if any("record" in r for r in records):
                return _import_v2(client, records)
            return _import_v1(client, records)

    @staticmethod
    def show(args: argparse.Namespace, client: None, fields: dict[str, Any], totals: dict[str, int]) -> None:
        before_n = totals["already_there"]
        again = (f"; {before_n} {'was' if before_n == 1 else 'were'} imported before and not stored again"
                 if before_n > 0 else "")
        links = ", ".join(f"{_count(totals[name], noun)}" for name, noun in (
            ("edges", "edge"), ("accesses", "access"), ("pending", "contradiction candidate"),
            ("originals", "original")) if totals.get(name))
        revisions = totals.get("revisions", 0)
        print(f"imported {_count(totals['memories'] - revisions, 'memory')}{_versions(revisions)}{again}"
              + (f"; restored {links}" if links else "")
              + (f" (skipped {totals['skipped_revisions']} revision records)" if totals.get("skipped_revisions")
                 else ""))


def _import_v1(client: Client, records: list[dict[str, Any]]) -> dict[str, int]:
    """A version 1 file (bare memories, from before the header): each memory through remember, its links
    to other memories dropped (the version 1 export did not carry what they pointed to)."""
    before = client.count()
    imported = skipped = 0
    batch: list[RememberItem] = []
    size = 0
    fields = set(RememberItem.__struct_fields__) - {"supersedes", "edges", "key"}
    for number, record in enumerate(records, 1):
        if record.get("kind") == "REVISION":
            skipped += 1  # an earlier version only means something beside the memory it belonged to
            continue
        item = {k: v for k, v in record.items() if k in fields}
        if isinstance(record.get("id"), str):
            item["key"] = IMPORT_KEY_PREFIX + record["id"]
        try:
            batch.append(msgspec.convert(item, RememberItem))
        except msgspec.ValidationError as exc:
            raise InvalidInput(f"record {number}: {exc}") from None
        size += len(record.get("content", "")) * 4 + 256
        if len(batch) >= IMPORT_BATCH_ITEMS or size >= IMPORT_BATCH_BYTES:
            imported += len(client.remember_many(batch, consolidate=False))
            batch, size = [], 0
    if batch:
        imported += len(client.remember_many(batch, consolidate=False))
    stored = client.count() - before
    return {"memories": imported, "stored": stored, "already_there": imported - stored,
            "skipped_revisions": skipped}


def cmd_doctor(args: argparse.Namespace) -> int:
    """Runs here, not in the daemon: a read-only open needs no lock, and a doctor must work when the
    daemon cannot open the vault. Exit code 0 when no damage was found, 1 otherwise."""
    from hebbs.core.doctor import doctor

    if args.export is not None:
        writable_target(args.export)  # said before the checks run, not as a temporary file's errno after
    report = doctor(resolve_vault(args.vault, args.global_, hebbs_home(args.home)), export=args.export)
    if _json(args):
        output.emit_json(report)
        return 1 if report.damage_found else 0
    state = ("DAMAGED" if not report.healthy else
             "every memory readable, derived files DAMAGED" if report.damage_found else "healthy")
    print(f"vault    {report.vault}: {state} (database opened: {report.opened})")
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
    return 1 if report.damage_found else 0


def cmd_migrate(args: argparse.Namespace) -> int:
    """Runs here, not in the daemon: the vault must be closed in every process while its store changes."""
    from hebbs.store import migrate

    vault = resolve_vault(args.vault, args.global_, hebbs_home(args.home))
    lines: list[str] = []
    say = lines.append if _json(args) else print
    if args.to == "rocksdb":
        if args.name is not None:
            raise InvalidInput("--name names the vault in PostgreSQL; --to rocksdb needs none")
        counts = migrate.to_rocksdb(vault, say)
    else:
        name = args.name or (vault.parent.name if vault.name == VAULT_DIR else vault.name)
        counts = migrate.to_postgres(vault, args.to, name, say)
    if _json(args):
        output.emit_json({"vault": str(vault), "to": args.to, "records": counts})
    return 0


KIND_NAMES = {"EPISODE": "episode", "INSIGHT": "insight", "REVISION": "earlier version"}


def _count(n: int, noun: str) -> str:
    if noun.endswith("y") and noun[-2:-1] not in tuple("aeiou"):
        plural = noun[:-1] + "ies"
    elif noun.endswith(("s", "x", "ch", "sh")):
        plural = noun + "es"  # "2 accesses", not "2 accesss"
    else:
        plural = noun + "s"
    return f"{n} {noun if n == 1 else plural}"


def _versions(n: int) -> str:
    """Earlier versions beside the memories they belong to: `hebbs count` does not count them as memories."""
    return f" (and {_count(n, 'earlier version')})" if n else ""


class ReembedShell:
    """`hebbs reembed`: a progress line on a terminal while the daemon embeds; Ctrl-C (the client gone)
    stops it, keeping what it embedded for the next run."""

    @staticmethod
    def send(args: argparse.Namespace, fields: dict[str, Any]) -> Any:
        from .progress import ProgressBar

        model = fields["model"]
        if model is not None and Path(model).expanduser().is_dir():  # a model folder: the daemon's cwd is not ours
            fields = {**fields, "model": str(Path(model).expanduser().resolve())}
        bar = ProgressBar(sys.stderr, enabled=args.format != "json" and sys.stderr.isatty())
        try:
            with client_for(args) as client:
                return client.reembed(**fields, progress=bar)
        finally:
            bar.close()

    @staticmethod
    def show(args: argparse.Namespace, client: None, fields: dict[str, Any], done: Any) -> None:
        if done.previous == done.model and not done.embedded:
            print(f"the vault is embedded with {done.model} already ({_count(done.memories, 'memory')})")
            return
        resumed = f", {done.resumed} of them by a run stopped earlier" if done.resumed else ""
        caught = f" ({done.caught_up} written meanwhile, embedded at the switch)" if done.caught_up else ""
        print(f"moved {_count(done.memories, 'memory')} from {done.previous} to {done.model} "
              f"({done.dimension} dimensions) in {done.seconds:.1f}s: {done.embedded} embedded now{caught}{resumed}")
